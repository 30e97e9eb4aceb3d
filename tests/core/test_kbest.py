"""k-best lists from the beam (beam.kbest): the candidates a reranker chooses among."""
import itertools

import numpy
import pytest

from spacy_structperc._core import beam
from spacy_structperc.parser.features import parser_atoms, parser_templates

from structperc_problems import TEMPLATE_SETS, make_system, random_atoms, randomize_reachable, reference_score
from test_parser_core import make_system as _parser
from test_parser_core import randomize as _randomize_parser

PATOMS = parser_atoms(parser_templates())


def _all_derivations(system):
    out = []

    def walk(state, path):
        if system.final(state):
            out.append(list(path))
            return
        for a in range(system.n_actions):
            if system.is_valid_action(state, a):
                walk(system.step(state, a), path + [a])
    walk(system.initial_state(), [])
    return out


def _tree_key(system):
    return lambda path: b"".join(x.tobytes() for x in system.run(path))


def test_tagging_kbest_with_an_exhaustive_beam_is_the_brute_force_top_k():
    specs, _ = TEMPLATE_SETS["second-order-mixed"]
    rng = numpy.random.default_rng(3)
    for _ in range(10):
        n, m = int(rng.integers(1, 5)), int(rng.integers(2, 4))
        _, weights, system = make_system(specs, m)
        system.set_sentence(random_atoms(rng, n))
        randomize_reachable(system, weights, n, m, rng)
        scored = sorted(((reference_score(system, weights, seq), seq)
                         for seq in itertools.product(range(m), repeat=n)), key=lambda x: -x[0])
        for k in (1, 3, m ** n):
            got = beam.kbest(system, m ** n, k)
            assert len(got) == min(k, m ** n)
            assert [s for s, _ in got] == pytest.approx([s for s, _ in scored[:k]], abs=1e-4)
            for s, path in got:
                assert s == pytest.approx(reference_score(system, weights, tuple(path.tolist())), abs=1e-4)


@pytest.mark.parametrize("allow_break", [False, True])
def test_parser_kbest_is_distinct_sorted_and_starts_with_the_1best(allow_break):
    rng = numpy.random.default_rng(5)
    for _ in range(12):
        n = int(rng.integers(1, 7))
        weights, system = _parser()
        system.set_sentence(rng.integers(1, 5, size=(n, len(PATOMS))).astype(numpy.uint64),
                            allow_break=allow_break)
        _randomize_parser(system, weights, rng)
        width = int(rng.integers(1, 12))
        got = beam.kbest(system, width, 8, key=_tree_key(system))
        one_best = beam.decode(system, width)
        assert numpy.array_equal(got[0][1], one_best)
        scores = [s for s, _ in got]
        assert scores == sorted(scores, reverse=True)
        trees = [_tree_key(system)(p) for _, p in got]
        assert len(set(trees)) == len(trees)
        for s, p in got:
            assert s == pytest.approx(system.score_path(p), abs=1e-3)


def test_parser_kbest_with_an_exhaustive_beam_is_the_best_derivation_of_each_tree():
    rng = numpy.random.default_rng(8)
    for _ in range(6):
        n = int(rng.integers(2, 5))
        weights, system = _parser(n_labels=1)
        system.set_sentence(rng.integers(1, 5, size=(n, len(PATOMS))).astype(numpy.uint64))
        _randomize_parser(system, weights, rng)
        key = _tree_key(system)
        best = {}
        derivations = _all_derivations(system)
        for path in derivations:
            s, k = system.score_path(path), key(numpy.array(path, dtype=numpy.int32))
            best[k] = max(best.get(k, -numpy.inf), s)
        expected = sorted(best.values(), reverse=True)
        got = beam.kbest(system, len(derivations), len(best) + 5, key=key)
        assert len(got) == len(best)     # spurious derivations of one tree count once
        assert [s for s, _ in got] == pytest.approx(expected, abs=1e-3)


def test_k_larger_than_the_beam_gives_at_most_the_beam():
    rng = numpy.random.default_rng(1)
    weights, system = _parser()
    system.set_sentence(rng.integers(1, 5, size=(6, len(PATOMS))).astype(numpy.uint64))
    _randomize_parser(system, weights, rng)
    assert 1 <= len(beam.kbest(system, 3, 50, key=_tree_key(system))) <= 3
    assert len(beam.kbest(system, 3, 50)) == 3


def test_one_token_has_one_candidate_and_empty_input_one_empty_candidate():
    weights, system = _parser()
    system.set_sentence(numpy.ones((1, len(PATOMS)), dtype=numpy.uint64))
    got = beam.kbest(system, 8, 8, key=_tree_key(system))
    assert len(got) == 1 and len(got[0][1]) == 1
    system.set_sentence(numpy.ones((0, len(PATOMS)), dtype=numpy.uint64))
    got = beam.kbest(system, 8, 8)
    assert len(got) == 1 and got[0][0] == 0.0 and len(got[0][1]) == 0


def test_k_must_be_positive():
    weights, system = _parser()
    system.set_sentence(numpy.ones((2, len(PATOMS)), dtype=numpy.uint64))
    with pytest.raises(ValueError, match="k must be"):
        beam.kbest(system, 4, 0)
