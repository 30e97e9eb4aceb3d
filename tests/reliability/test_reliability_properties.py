"""Property-based tests (hypothesis; budget set by the profile in tests/conftest.py).

Decoders against brute force on small random problems, random text through every reader, and
random damage to model files: each either works as specified or raises a coded error."""
import sys
from pathlib import Path

import numpy
import pytest

from conftest import require_module

hypothesis = require_module("hypothesis")   # in the [test] extra: fails under CI if missing
from hypothesis import assume, given, strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from structperc_problems import (TEMPLATE_SETS, brute_force, make_system, random_atoms,  # noqa: E402
                                 randomize_reachable)

from spacy_structperc._core import beam, lookahead, viterbi  # noqa: E402
from spacy_structperc.readers import read_conll2000, read_conll2003, read_iob2  # noqa: E402

problems = st.tuples(st.sampled_from(sorted(TEMPLATE_SETS)), st.integers(1, 5), st.integers(2, 3),
                     st.integers(0, 2 ** 32 - 1))


def _problem(template_set, n, m, seed):
    specs, order = TEMPLATE_SETS[template_set]
    rng = numpy.random.default_rng(seed)
    _, weights, system = make_system(specs, m)
    system.set_sentence(random_atoms(rng, n))
    randomize_reachable(system, weights, n, m, rng)
    return system, weights, order


@given(problems)
def test_viterbi_finds_the_brute_force_best_sequence(problem):
    template_set, n, m, seed = problem
    system, weights, order = _problem(*problem)
    best, best_score = brute_force(system, weights, n, m)
    labels, score = viterbi.viterbi(system, order)
    assert score == pytest.approx(best_score, abs=1e-4)
    assert system.score_path(labels) == pytest.approx(best_score, abs=1e-4)


@given(problems)
def test_exhaustive_beam_and_lookahead_find_the_brute_force_best(problem):
    template_set, n, m, seed = problem
    system, weights, _ = _problem(*problem)
    _, best_score = brute_force(system, weights, n, m)
    # A beam as wide as the number of sequences keeps them all: it is exhaustive.
    path = beam.decode(system, m ** n)
    assert system.score_path(path) == pytest.approx(best_score, abs=1e-4)
    # Lookahead as deep as the sentence values each first action by its best completion.
    first = lookahead.decode(system, n - 1)
    assert system.score_path(first) == pytest.approx(best_score, abs=1e-4)


# Readers: random text never gives an uncoded error. ------------------------------------------

TOKENS = st.sampled_from(["word", "NN", "B-NP", "I-NP", "O", "B-PER", "I-LOC", "-DOCSTART-",
                          "###MEDLINE:1", "\t", " ", "\n", "\r\n", "\ufeff", "é", "I-", "B", "x y z"])
READERS = [read_conll2000, read_conll2003, read_iob2]


@given(st.one_of(st.lists(TOKENS, max_size=40).map("".join), st.text(max_size=60)),
       st.sampled_from(["utf8", "latin-1", "utf-16"]))
def test_random_text_through_every_reader_reads_or_raises_a_coded_error(tmp_path_factory, text, encoding):
    path = tmp_path_factory.mktemp("r") / "data.txt"
    try:
        path.write_bytes(text.encode(encoding))
    except UnicodeEncodeError:
        return
    for read in READERS:
        try:
            sentences = read(path)
        except (ValueError, FileNotFoundError) as e:
            assert str(e).startswith("[S"), (read.__name__, repr(text), e)
        else:
            assert sentences
            for s in sentences:
                assert all(w and not w.startswith("\ufeff") for w in s[0])


# Model files: random damage is refused, never loaded. ------------------------------------------

class _Model:
    """A trained parser's model bytes, made once (not a fixture: hypothesis would print them)."""
    pipe = None

    def __repr__(self):
        return "<parser model>"

    def get(self):
        if self.pipe is None:
            from threaded_nlp import train_pipeline
            type(self).pipe = train_pipeline(n_train=10, epochs=1).get_pipe("structperc_parser")
            type(self).data = self.pipe.model.to_bytes()
        return self.pipe, self.data


MODEL = _Model()


@given(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=8),
       st.integers(0, 3))
def test_random_damage_to_a_model_file_is_refused(flips, cut):
    pipe, good = MODEL.get()
    damaged = bytearray(good)
    for where, xor in flips:
        damaged[int(where * len(damaged))] ^= xor
    if cut:
        damaged = damaged[:-cut]
    assume(bytes(damaged) != good)   # two flips of one byte can cancel out
    with pytest.raises(ValueError, match=r"^\[S(006|007|120|121|122)\]"):
        pipe.model.parse_bytes(bytes(damaged), pipe.name)
