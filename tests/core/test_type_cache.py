"""The word-type cache of TagSystem: a loaded model's static templates that read one offset are
scored once per (offset, atom values) and their summed rows reused; the sums must equal the
per-template rows, and decoding must follow them."""
import numpy
import pytest

from spacy_structperc._core import batch, tagging
from spacy_structperc._core.tagging import TagSystem
from spacy_structperc._core.templates import TemplateSet
from spacy_structperc._core.weights import AveragedWeights, sparse_rows

ATOMS = ["w", "s", "f"]
SPECS = [
    {"name": "bias", "parts": [[0, "f"]]},
    {"name": "w0", "parts": [[0, "w"]]},
    {"name": "s0", "parts": [[0, "s"]]},
    {"name": "w0,s0", "parts": [[0, "w"], [0, "s"]]},
    {"name": "w-1", "parts": [[-1, "w"]]},
    {"name": "s-1", "parts": [[-1, "s"]]},
    {"name": "w+2", "parts": [[2, "w"]]},
    {"name": "w-1,w0", "parts": [[-1, "w"], [0, "w"]]},          # mixed offsets: probed
    {"name": "t-1", "parts": [["hist", 1]]},
    {"name": "t-1,w0", "parts": [["hist", 1], [0, "w"]]},
]
C = 7


def _sentence(rng, n, vocab=12):
    # Few word types, so types repeat; some absent (0) suffixes, which fire no feature.
    w = rng.integers(1, vocab, size=n)
    s = numpy.where(w % 4 == 0, 0, 1000 + w % 5)
    return numpy.stack([w, s, numpy.ones(n, dtype=numpy.int64)], axis=1).astype(numpy.uint64)


def _frozen_weights(ts, sentences, rng, precision="float32"):
    w = AveragedWeights(C, 64)
    for atoms in sentences:
        for i in range(len(atoms)):
            keys = ts.static_keys(atoms, i).tolist() + ts.history_keys(atoms, i, [int(rng.integers(-1, C))]).tolist()
            for key in keys:
                if rng.random() < 0.8:      # some features have no row
                    w.add(key, int(rng.integers(C)), float(rng.normal()))
    w.next_example()
    k, dense = w.to_arrays()
    counts, cols, values, scales = sparse_rows(dense, precision)
    f = AveragedWeights(C, 1)
    f.load_frozen(k, numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.uint32), cols, values, scales)
    return f


def _loaded(seed, n_sentences, max_len, precision="float32", specs=SPECS):
    """A TagSystem over frozen (loaded-model) weights trained on random sentences: (rng, the
    template set, the sentences, the weights, the system)."""
    rng = numpy.random.default_rng(seed)
    ts = TemplateSet(specs, ATOMS)
    sentences = [_sentence(rng, int(rng.integers(1, max_len))) for _ in range(n_sentences)]
    f = _frozen_weights(ts, sentences, rng, precision)
    return rng, ts, sentences, f, TagSystem(ts, f)


@pytest.fixture()
def cache_on():
    previous = tagging.set_type_cache(True)
    yield
    tagging.set_type_cache(previous)


@pytest.mark.parametrize("precision", ["float32", "float16", "int8"])
def test_cached_static_scores_equal_the_sum_of_every_templates_row(precision, cache_on):
    rng, ts, sentences, f, system = _loaded(5, 30, 15, precision)
    n_positions = 0
    for atoms in sentences:
        system.set_sentence(atoms)
        assert system.bound_with_type_cache
        for i in range(len(atoms)):
            brute = f.score(ts.static_keys(atoms, i))     # one row per template, in order
            assert numpy.allclose(system.static_class_scores(i), brute, rtol=1e-5, atol=1e-5)
        n_positions += len(atoms)
    # Shared across sentences: far fewer entries than (positions x 4 offset groups).
    assert 0 < system.type_cache_entries < n_positions


def test_without_the_cache_static_scores_are_the_rows_added_in_template_order(cache_on):
    rng = numpy.random.default_rng(6)
    ts = TemplateSet(SPECS, ATOMS)
    sentences = [_sentence(rng, 9) for _ in range(5)]
    f = _frozen_weights(ts, sentences, rng)
    tagging.set_type_cache(False)
    system = TagSystem(ts, f)
    for atoms in sentences:
        system.set_sentence(atoms)
        assert not system.bound_with_type_cache
        for i in range(len(atoms)):
            assert numpy.array_equal(system.static_class_scores(i), f.score(ts.static_keys(atoms, i)))


def test_training_a_loaded_model_invalidates_the_cache_and_features_stay_whole(cache_on):
    rng = numpy.random.default_rng(7)
    ts = TemplateSet(SPECS, ATOMS)
    sentences = [_sentence(rng, 10) for _ in range(4)]
    f = _frozen_weights(ts, sentences, rng)
    system = TagSystem(ts, f)
    atoms = sentences[0]
    system.set_sentence(atoms)
    assert system.bound_with_type_cache
    # The update keys of a position are every template's, cached or not.
    state = system.initial_state()
    for i in range(3):
        expected = ts.static_keys(atoms, i).tolist() + ts.history_keys(atoms, i, [-1] if i == 0 else [0]).tolist()
        assert sorted(system.state_features(state).tolist()) == sorted(expected)
        state = system.step(state, 0)
    key = int(ts.static_keys(atoms, 2)[1])       # w0 at position 2: a cached group's feature
    before = system.static_class_scores(2)
    f.add(key, 3, 10.0)                           # thaws the table, bumps its version
    after = system.static_class_scores(2)
    assert after[3] == pytest.approx(before[3] + 10.0, abs=1e-4)
    assert numpy.allclose(after, f.score(ts.static_keys(atoms, 2)), rtol=1e-5, atol=1e-5)
    # Another weights object: nothing read from the old one survives.
    other = _frozen_weights(ts, sentences, numpy.random.default_rng(8))
    system.weights = other
    system.set_sentence(atoms)
    for i in range(len(atoms)):
        assert numpy.allclose(system.static_class_scores(i), other.score(ts.static_keys(atoms, i)),
                              rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("decoder,param", [("greedy", 0), ("greedy", 1), ("viterbi", 1), ("beam", 4)])
def test_decoding_with_the_cache_equals_decoding_without_it(decoder, param, cache_on):
    rng = numpy.random.default_rng(9)
    ts = TemplateSet(SPECS, ATOMS)
    sentences = [_sentence(rng, int(rng.integers(1, 20)), vocab=40) for _ in range(40)]
    f = _frozen_weights(ts, sentences, rng)
    atoms = numpy.concatenate(sentences)
    ends = numpy.cumsum([len(s) for s in sentences])
    starts = ends - [len(s) for s in sentences]
    windows = numpy.stack([starts, ends, starts, ends], axis=1)
    out = {}
    for on in (False, True):
        tagging.set_type_cache(on)
        system = TagSystem(ts, f)
        out[on] = batch.tag(system, decoder, param, atoms, None, windows)
        assert system.type_cache_entries > 0 if on else system.type_cache_entries == 0
    # Random float weights: no exact ties, so the summation order changes nothing here.
    assert numpy.array_equal(out[True], out[False])


def test_setting_use_averages_to_its_value_keeps_the_version():
    # Every predict call sets use_averages; a new version would empty the word-type cache (and
    # every other score cache keyed on the version) at each batch.
    w = AveragedWeights(3, 16)
    w.set_use_averages(True)
    v = w.version
    w.set_use_averages(True)
    assert w.version == v
    w.set_use_averages(False)
    assert w.version == v + 1


@pytest.mark.parametrize("precision", ["float32", "float16", "int8"])
def test_cached_history_word_scores_equal_every_templates_row_after_each_label(precision, cache_on):
    # "t-1,w0" reads the previous label and atoms at offset 0 only: its row is cached per
    # (word values, previous label) beside the word-type entries. Every action score of every
    # state (each previous label, the start included) must equal the rows of all templates.
    rng, ts, sentences, f, system = _loaded(11, 20, 12, precision)
    for atoms in sentences:
        system.set_sentence(atoms)
        for i in range(len(atoms)):
            for prev in ([-1] if i == 0 else range(C)):
                state = system.initial_state()
                for j in range(i):
                    state = system.step(state, prev if j == i - 1 else 0)
                keys = ts.static_keys(atoms, i).tolist() + ts.history_keys(atoms, i, [prev]).tolist()
                brute = f.score(numpy.array(keys, dtype=numpy.uint64))
                assert numpy.allclose(system.action_scores(state), brute, rtol=1e-5, atol=1e-5)
    before = system.type_cache_entries
    system.set_sentence(sentences[0])            # seen words after seen labels: no new entries
    state = system.initial_state()
    for j in range(len(sentences[0])):
        system.action_scores(state)
        state = system.step(state, 0)
    assert system.type_cache_entries == before


def test_history_templates_reading_other_offsets_are_not_cached_per_word(cache_on):
    # t-1 with w-1 (another offset) or t-2 with w0 (an older label): such a template's row is
    # not a function of (the word, label-1), so the position's scores stay exact per template.
    specs = SPECS + [{"name": "t-1,w-1", "parts": [["hist", 1], [-1, "w"]]},
                     {"name": "t-2,w0", "parts": [["hist", 2], [0, "w"]]}]
    rng, ts, sentences, f, system = _loaded(12, 6, 9, specs=specs)
    for atoms in sentences:
        system.set_sentence(atoms)
        state = system.initial_state()
        hist = [-1, -1]
        for i in range(len(atoms)):
            keys = ts.static_keys(atoms, i).tolist() + ts.history_keys(atoms, i, hist).tolist()
            assert numpy.allclose(system.action_scores(state), f.score(numpy.array(keys, dtype=numpy.uint64)),
                                  rtol=1e-5, atol=1e-5)
            a = int(rng.integers(C))
            state = system.step(state, a)
            hist = [a, hist[0]]
