"""_core/occurrences.pyx (each token's other occurrences of its word in its Doc) and the context
atoms built on it, against brute-force scans of each Doc."""
import numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structperc._core.occurrences import first_occurrences, value_sets
from spacy_structperc.atoms import _DCASE, _EDGE, _SENTENCE_END, context_atoms

# Few distinct words, so that most words recur; 0 and a sentence end among them.
WORDS = [0, 1, 2, 3, 2**64 - 1, int(_SENTENCE_END[0])]


@st.composite
def batches(draw, max_length=40, columns=0):
    lengths = draw(st.lists(st.integers(0, max_length), min_size=1, max_size=5))
    n = sum(lengths)
    words = numpy.array(draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n)), dtype=numpy.uint64)
    offsets = numpy.concatenate([[0], numpy.cumsum(lengths)]).astype(numpy.int64)
    extra = numpy.array(draw(st.lists(st.lists(st.integers(0, 1), min_size=columns, max_size=columns),
                                      min_size=n, max_size=n)), dtype=numpy.uint64).reshape((n, columns))
    return words, offsets, extra


def docs_of(offsets):
    return zip(offsets[:-1].tolist(), offsets[1:].tolist())


@settings(max_examples=300, deadline=None)
@given(batches())
def test_first_occurrences_equal_a_scan_of_each_doc(batch):
    words, offsets, _ = batch
    first, second = first_occurrences(words, offsets)
    for a, b in docs_of(offsets):
        for i in range(a, b):
            same = [j for j in range(a, b) if words[j] == words[i]]
            assert first[i] == same[0]
            if i == same[0]:
                assert second[i] == (same[1] if len(same) > 1 else -1)
            else:
                assert second[i] == -1


@settings(max_examples=300, deadline=None)
@given(batches(), st.data())
def test_value_sets_equal_a_scan_of_each_group(batch, data):
    words, offsets, _ = batch
    n = len(words)
    bits = numpy.array(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), dtype=numpy.uint64)
    first, _ = first_occurrences(words, offsets)
    others, earlier, whole = value_sets(first, bits)
    for a, b in docs_of(offsets):
        for i in range(a, b):
            group = [j for j in range(a, b) if words[j] == words[i]]
            fold = lambda js: int(numpy.bitwise_or.reduce(bits[js], initial=numpy.uint64(0))) if js else 0
            assert int(others[i]) == fold([j for j in group if j != i])
            assert int(earlier[i]) == fold([j for j in group if j < i])
            assert int(whole[i]) == fold(group)


@settings(max_examples=200, deadline=None)
@given(batches(max_length=25, columns=4))
def test_context_atoms_equal_a_scan_of_each_doc(batch):
    """dcase: the cases (title 1, upper 2, lower 4) of the word's other occurrences off a sentence
    start; dprev / dnext: the words around its first other occurrence, for words capitalised
    somewhere off a sentence start."""
    words, offsets, flags = batch
    values = numpy.concatenate([words[:, None], flags], axis=1)   # LOWER, IS_TITLE, IS_UPPER, IS_LOWER, SENT_START
    dcase, dprev, dnext = context_atoms(values, offsets, ["dcase", "dprev", "dnext"])
    ends = set(_SENTENCE_END.tolist())
    for a, b in docs_of(offsets):
        def bit(j):
            if j == a or flags[j, 3] == 1 or int(words[j - 1]) in ends:
                return 0
            return 2 if flags[j, 1] else 1 if flags[j, 0] else 4 if flags[j, 2] else 0
        for i in range(a, b):
            group = [j for j in range(a, b) if words[j] == words[i]]
            others = [j for j in group if j != i]
            mask = 0
            for j in others:
                mask |= bit(j)
            assert int(dcase[i]) == int(_DCASE[mask])
            capitalised = any(bit(j) in (1, 2) for j in group)
            if not others or not capitalised:
                assert int(dprev[i]) == int(dnext[i]) == 0
                continue
            o = others[0]
            assert int(dprev[i]) == (_EDGE["dprev"] if o == a else int(words[o - 1]))
            assert int(dnext[i]) == (_EDGE["dnext"] if o == b - 1 else int(words[o + 1]))


def test_a_long_doc_with_many_distinct_words_groups_each_word():
    rng = numpy.random.RandomState(0)
    words = rng.randint(0, 5000, size=20000).astype(numpy.uint64)
    offsets = numpy.array([0, 3, 20000], dtype=numpy.int64)
    first, second = first_occurrences(words, offsets)
    for lo, hi in ((0, 3), (3, 20000)):
        seen = {}
        for i in range(lo, hi):
            seen.setdefault(int(words[i]), i)
        assert [int(first[i]) for i in range(lo, hi)] == [seen[int(w)] for w in words[lo:hi]]
