"""The arc-factored graph model (_core/arcfactored.pyx) and its reranking features
(reranking/graph.py)."""
import itertools

import numpy
import pytest

from spacy_structperc._core.arcfactored import ArcModel
from spacy_structperc.reranking import CandidateLists
from spacy_structperc.reranking.graph import GraphScorer, TagIndex, graph_keys, with_keys


def _projective(heads):
    """heads: per word its head's index (-1 root); True when the tree's arcs never cross."""
    n = len(heads)
    node = [-1] + [h + 1 for h in heads]

    def anc(d):
        seen = {d}
        while d != 0:
            d = node[d]
            if d in seen:
                return None
            seen.add(d)
        return seen

    sets = [None] + [anc(d) for d in range(1, n + 1)]
    if any(s is None for s in sets[1:]):
        return False
    return all(node[d] in sets[m] for d in range(1, n + 1)
               for m in range(min(node[d], d) + 1, max(node[d], d)))


def _all_projective(n):
    for choice in itertools.product(range(-1, n), repeat=n):
        if all(choice[d] != d for d in range(n)) and _projective(choice):
            yield numpy.array(choice, dtype=numpy.int32)


def _toy_corpus(n_sentences=60, seed=0):
    """Sentences of a toy language: DET ADJ* NOUN VERB DET NOUN, heads by a fixed grammar."""
    rng = numpy.random.default_rng(seed)
    words, tags, heads, ptr = [], [], [], [0]
    for _ in range(n_sentences):
        n_adj = int(rng.integers(0, 3))
        seq = ["DET"] + ["ADJ"] * n_adj + ["NOUN", "VERB", "DET", "NOUN"]
        subj = 1 + n_adj
        verb = subj + 1
        h = [subj] + [subj] * n_adj + [verb, -1, verb + 2, verb]
        words += [1000 + 10 * ["DET", "ADJ", "NOUN", "VERB"].index(t) + int(rng.integers(0, 5)) for t in seq]
        tags += [["DET", "ADJ", "NOUN", "VERB"].index(t) + 1 for t in seq]
        heads += h
        ptr.append(len(words))
    c = numpy.array
    return (c(words, dtype=numpy.uint64), c(tags, dtype=numpy.uint64), c(ptr, dtype=numpy.int64),
            c(heads, dtype=numpy.int32))


@pytest.mark.parametrize("order", [1, 2])
def test_graph_model_learns_a_toy_grammar(order):
    words, tags, ptr, heads = _toy_corpus()
    scorer = GraphScorer(epochs=4, order=order).fit(words, tags, ptr, heads)
    assert scorer.curve[0]["train_head_errors"] > 0
    assert scorer.curve[-1]["train_head_errors"] == 0
    w2, t2, p2, h2 = _toy_corpus(20, seed=1)
    got, _ = scorer.decode(w2, t2, p2)
    assert (got == h2).all()


@pytest.mark.parametrize("order", [1, 2])
def test_decoded_tree_beats_every_projective_tree_under_the_models_scores(order):
    words, tags, ptr, heads = _toy_corpus(30)
    scorer = GraphScorer(epochs=1, order=order).fit(words, tags, ptr, heads)
    rng = numpy.random.default_rng(3)
    for _ in range(5):
        n = int(rng.integers(2, 6))
        w = rng.choice(words, size=n)
        t = rng.choice(tags, size=n)
        p = numpy.array([0, n], dtype=numpy.int64)
        best, best_score = scorer.decode(w, t, p)
        trees = list(_all_projective(n))
        scores = scorer.score(w, t, p, numpy.zeros((len(trees),), dtype=numpy.int64), numpy.concatenate(trees))
        assert best_score[0] == pytest.approx(scores.max(), abs=1e-4)
        own = scorer.score(w, t, p, numpy.zeros((1,), dtype=numpy.int64), best)
        assert own[0] == pytest.approx(best_score[0], abs=1e-4)


def test_arc_keys_distinct_and_in_between_tags():
    m = ArcModel(1 << 10)
    words = numpy.array([11, 12, 13, 14, 15], dtype=numpy.uint64)
    tags = numpy.array([1, 2, 2, 3, 1], dtype=numpy.uint64)
    ids = numpy.array([1, 2, 2, 3, 1], dtype=numpy.int32)
    near = m.arc_keys(words, tags, ids, 1, 2)
    far = m.arc_keys(words, tags, ids, 1, 5)      # between: tags 2, 2, 3 -> two distinct ids
    assert len(far) == len(near) + 2
    assert len(set(near.tolist())) == len(near)
    assert (near & 1).all()
    assert len(set(m.arc_keys(words, tags, ids, 2, 1).tolist()) & set(near.tolist())) == 0
    with pytest.raises(ValueError):
        m.arc_keys(words, tags, ids, 2, 2)
    with pytest.raises(ValueError):
        m.arc_keys(words, tags, ids, 1, 0)


def test_bad_input_is_refused():
    words, tags, ptr, heads = _toy_corpus(5)
    scorer = GraphScorer(epochs=1).fit(words, tags, ptr, heads)
    n = int(ptr[1])
    bad = heads[:n].copy()
    bad[0] = n + 3
    with pytest.raises(ValueError):
        scorer.score(words, tags, ptr, numpy.zeros((1,), dtype=numpy.int64), bad)
    with pytest.raises(ValueError):
        scorer.score(words, tags, ptr, numpy.zeros((1,), dtype=numpy.int64), heads[:n - 1])
    with pytest.raises(ValueError):
        scorer.model.train_epoch(words, tags[:-1], numpy.ones(len(tags) - 1, dtype=numpy.int32), ptr,
                                 heads, numpy.arange(5, dtype=numpy.int64))
    got, sc = scorer.decode(numpy.zeros((0,), dtype=numpy.uint64), numpy.zeros((0,), dtype=numpy.uint64),
                            numpy.array([0], dtype=numpy.int64))
    assert len(got) == 0 and len(sc) == 0


def test_tag_index():
    ti = TagIndex.fit(numpy.array([5, 5, 7, 9, 9, 9], dtype=numpy.uint64))
    assert ti.ids(numpy.array([9, 5, 7, 11], dtype=numpy.uint64)).tolist() == [1, 2, 3, 63]
    many = TagIndex.fit(numpy.arange(1, 101, dtype=numpy.uint64))
    assert many.ids(numpy.arange(1, 101, dtype=numpy.uint64)).max() == 63
    assert len(set(many.ids(numpy.arange(1, 101, dtype=numpy.uint64)).tolist())) == 63


def test_graph_keys_and_with_keys():
    lists = CandidateLists.build([[{"base": 1, "keys": [3, 5]}, {"base": 0.5, "keys": [7]}],
                                  [{"base": 2, "keys": []}]])
    ptr, keys = graph_keys(lists.offsets, numpy.array([1.0, 3.0, 0.0]), numpy.array([2, 0, 1]))
    # candidate 0: rank, gap bin, 4 gap repeats (gap 2 = one mean gap), 2 disagree bins, 2 repeats
    assert numpy.diff(ptr).tolist() == [10, 4, 4]
    both = with_keys(lists, ptr, keys)
    assert both.keys_of(0)[:2].tolist() == [3, 5]
    assert both.keys_of(0)[2:].tolist() == keys[:10].tolist()
    assert both.keys_of(1)[0] == 7 and both.keys_of(1)[1:].tolist() == keys[10:14].tolist()
    # the best candidate by graph score and the worse one differ in their rank keys
    assert keys[0] != keys[10]
    with pytest.raises(ValueError):
        with_keys(lists, ptr[:-1], keys)


def test_empty_training_set_ticks_the_clock_only():
    m = ArcModel(1 << 10)
    empty = numpy.zeros((0,), dtype=numpy.uint64)
    got = m.train_epoch(empty, empty, numpy.zeros((0,), dtype=numpy.int32), numpy.zeros((3,), dtype=numpy.int64),
                        numpy.zeros((0,), dtype=numpy.int32), numpy.arange(2, dtype=numpy.int64))
    assert got == (0, 0) and m.weights.n_rows == 0 and m.weights.clock == 2


def test_order_is_checked():
    assert ArcModel(1 << 10, 2).order == 2
    with pytest.raises(ValueError):
        ArcModel(1 << 10, 3)
