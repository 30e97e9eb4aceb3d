"""The C extractor of global reranking features (_core/rerank_features.pyx) against a plain
Python statement of the same features, on random trees and chunkings.

The reference below is the feature definition the Python extractor of rerank_features.py had
(its groups arcs ... valency, tuple for tuple), with edges and lexical added and with one
change: a key hashes the feature's own length and members, where the old extractor padded every
feature to the tree's longest one (so one feature had different keys in different trees).
"""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structperc._core.rerank_features import (CHUNK_GROUPS, TREE_GROUPS, chunk_features,
                                                    group_mask, hash_pairs, tree_features)

MASK = (1 << 64) - 1
NONE, LEFT, RIGHT, HEAD_MARK, BOS, EOS, OUTSIDE = 1, 2, 3, 4, 5, 6, 7


def mix(h, x):
    h = ((h ^ x) + 0x9E3779B97F4A7C15) & MASK
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & MASK
    return h ^ (h >> 31)


def key(f):
    h = 0xCBF29CE484222325
    for x in (len(f),) + tuple(f):
        h = mix(h, int(x) & MASK)
    return h or 1


def bucket(d):
    d = abs(d)
    return d if d <= 5 else (6 if d <= 10 else 7)


def ref_tree(w, t, h, lab, groups, conj, cc):
    n = len(h)
    kids = [[] for _ in range(n)]
    roots = [d for d in range(n) if h[d] < 0]
    for d in range(n):
        if h[d] >= 0:
            kids[h[d]].append(d)
    desc = [{d} for d in range(n)]
    for d in range(n):
        a = h[d]
        while a >= 0:
            desc[a].add(d)
            a = h[a]
    side = lambda d, g: LEFT if d < g else RIGHT
    F = []
    add = F.append
    if "arcs" in groups:
        for d in range(n):
            g = h[d]
            if g >= 0:
                add((10, t[g], t[d], lab[d], side(d, g), bucket(d - g)))
                add((11, w[g], t[d], lab[d], side(d, g)))
                add((12, t[g], w[d], lab[d], side(d, g)))
                add((13, w[g], w[d], lab[d]))
    for d in range(n):
        g = h[d]
        if g < 0:
            continue
        gg = h[g]
        if "grandparent" in groups:
            add((20, NONE if gg < 0 else t[gg], t[g], t[d], lab[g], lab[d]))
            if gg >= 0:
                add((21, lab[g], lab[d], side(d, g), side(g, gg)))
        if "lexical" in groups and gg >= 0:
            add((100, t[gg], w[g], w[d]))
            add((101, w[gg], t[g], t[d], lab[d]))
    for g in range(n):
        left = [d for d in kids[g] if d < g]
        right = [d for d in kids[g] if d > g]
        for s, seq in ((LEFT, left[::-1]), (RIGHT, right)):
            chain = [None, None] + seq
            for i, d in enumerate(seq):
                prev, prev2 = chain[i + 1], chain[i]
                if "siblings" in groups:
                    add((30, t[g], NONE if prev is None else t[prev], t[d], s))
                    add((31, t[g], NONE if prev is None else lab[prev], lab[d], s))
                    if prev2 is not None:
                        add((32, t[g], t[prev2], t[prev], t[d], s))
                if "lexical" in groups and prev is not None:
                    add((102, t[g], w[prev], w[d]))
            if "siblings" in groups:
                last = seq[-1] if seq else None
                add((30, t[g], NONE if last is None else t[last], NONE, s))
                add((31, t[g], NONE if last is None else lab[last], NONE, s))
        if "children" in groups:
            add((40, t[g], lab[g]) + tuple(lab[d] for d in left) + (HEAD_MARK,) + tuple(lab[d] for d in right))
            add((41, t[g]) + tuple(t[d] for d in left) + (HEAD_MARK,) + tuple(t[d] for d in right))
            add((42, w[g]) + tuple(lab[d] for d in left) + (HEAD_MARK,) + tuple(lab[d] for d in right))
        if "valency" in groups:
            nl, nr = min(len(left), 4), min(len(right), 4)
            add((70, t[g], nl, nr))
            add((71, w[g], nl, nr))
            add((72, lab[g], nl + nr))
    if "coordination" in groups:
        for d in range(n):
            g = h[d]
            if g < 0 or lab[d] != conj:
                continue
            cc_word = next((w[c] for c in kids[d] if lab[c] == cc), NONE)
            add((50, t[g], t[d], cc_word))
            add((51, w[g], w[d]))
            add((52, lab[g], int(t[g] == t[d]), cc_word))
            add((53, t[g], t[d], bucket(d - g)))
    if "paths" in groups:
        for d in range(n):
            path = [lab[d]]
            a = h[d]
            while a >= 0 and len(path) < 4:
                path.append(lab[a])
                a = h[a]
            add((60,) + tuple(path[:3]))
            add((61, t[d]) + tuple(path[:4]))
        for r in roots:
            add((62, t[r], w[r], min(len(roots), 3)))
    if "spans" in groups:
        for d in range(n):
            add((80, t[d], lab[d], bucket(len(desc[d]) - 1)))
    if "edges" in groups:
        for d in range(n):
            lo, hi = min(desc[d]), max(desc[d])
            add((90, t[d], lab[d], BOS if lo == 0 else t[lo - 1], EOS if hi == n - 1 else t[hi + 1]))
            add((91, lab[d], t[lo], t[hi], bucket(hi - lo)))
            add((92, t[d], lab[d], EOS if hi == n - 1 else w[hi + 1]))
    return sorted(key(f) for f in F)


def ref_chunks(w, t, cls, groups):
    n = len(cls)
    units, i = [], 0
    while i < n:
        if cls[i] == 0:
            units.append((-1, i, i + 1))
            i += 1
            continue
        typ, j = (cls[i] - 1) // 2, i + 1
        while j < n and cls[j] == 2 + 2 * typ:
            j += 1
        units.append((typ, i, j))
        i = j
    sym = lambda u: BOS if u < 0 else EOS if u >= len(units) else (
        t[units[u][1]] if units[u][0] < 0 else 1000 + units[u][0])
    F = []
    add = F.append
    if "ngrams" in groups:
        for u in range(len(units) + 1):
            add((200, sym(u - 1), sym(u)))
            add((201, sym(u - 2), sym(u - 1), sym(u)))
        add((202,) + tuple(OUTSIDE if typ < 0 else 1000 + typ for typ, _, _ in units))
    chunks = [u for u in units if u[0] >= 0]
    for c, (typ, s, e) in enumerate(chunks):
        T = 1000 + typ
        if "lengths" in groups:
            add((210, T, bucket(e - s)))
            add((211, T) + tuple(t[s:min(e, s + 6)]))
        if "heads" in groups:
            add((220, T, w[e - 1]))
            add((221, T, t[e - 1]))
            add((222, T, w[s]))
            if c > 0:
                ptyp, _, pe = chunks[c - 1]
                add((223, 1000 + ptyp, w[pe - 1], T, t[e - 1]))
                add((224, 1000 + ptyp, t[pe - 1], T, w[e - 1]))
        if "boundaries" in groups:
            add((230, T, BOS if s == 0 else w[s - 1], w[s]))
            add((231, T, w[e - 1], EOS if e == n else w[e]))
            add((232, T, BOS if s == 0 else t[s - 1], EOS if e == n else t[e]))
    return sorted(key(f) for f in F)


def random_tree(rng, n):
    """A random forest over n tokens (heads point to earlier-visited tokens, then shuffled)."""
    order = rng.permutation(n)
    heads = numpy.full((n,), -1, dtype=numpy.int64)
    for i in range(1, n):
        if rng.random() > 0.1:
            heads[order[i]] = order[rng.integers(0, i)]
    return heads


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 14),
       st.lists(st.sampled_from(TREE_GROUPS), min_size=1, max_size=len(TREE_GROUPS), unique=True))
def test_tree_features_equal_the_python_statement(seed, n, groups):
    rng = numpy.random.default_rng(seed)
    # Small atom vocabularies so that conj / cc labels and equal tags occur.
    words = rng.integers(100, 110, size=n).astype(numpy.uint64)
    tags = rng.integers(200, 204, size=n).astype(numpy.uint64) * numpy.uint64(1 << 40)
    conj, cc = 301, 302
    k = 3
    heads = numpy.stack([random_tree(rng, n) for _ in range(k)])
    labels = rng.integers(300, 304, size=(k, n)).astype(numpy.uint64)
    ptr, keys = tree_features(words, tags, heads, labels, group_mask(groups, TREE_GROUPS), conj, cc)
    assert len(ptr) == k + 1 and ptr[0] == 0 and ptr[-1] == len(keys)
    for i in range(k):
        expected = ref_tree([int(x) for x in words], [int(x) for x in tags], [int(x) for x in heads[i]],
                            [int(x) for x in labels[i]], set(groups), conj, cc)
        assert sorted(int(x) for x in keys[ptr[i]:ptr[i + 1]]) == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 16),
       st.lists(st.sampled_from(CHUNK_GROUPS), min_size=1, max_size=len(CHUNK_GROUPS), unique=True))
def test_chunk_features_equal_the_python_statement(seed, n, groups):
    rng = numpy.random.default_rng(seed)
    words = rng.integers(100, 108, size=n).astype(numpy.uint64)
    tags = rng.integers(200, 204, size=n).astype(numpy.uint64)
    k = 3
    classes = rng.integers(0, 7, size=(k, n))    # stray I- tags open a chunk
    ptr, keys = chunk_features(words, tags, classes, group_mask(groups, CHUNK_GROUPS))
    for i in range(k):
        expected = ref_chunks([int(x) for x in words], [int(x) for x in tags], [int(x) for x in classes[i]], set(groups))
        assert sorted(int(x) for x in keys[ptr[i]:ptr[i + 1]]) == expected


def test_a_feature_has_one_key_whatever_else_the_tree_holds():
    """The same arc in a tree with a long child sequence and in one without gets the same keys
    for its arc features (the padding defect of the Python extractor)."""
    mask = group_mask(["arcs"], TREE_GROUPS)
    w = numpy.arange(10, 16, dtype=numpy.uint64)
    t = numpy.full((6,), 7, dtype=numpy.uint64)
    star = numpy.array([-1, 0, 0, 0, 0, 0])        # token 0 heads everything
    chain = numpy.array([-1, 0, 1, 2, 3, 4])       # a chain: 1 -> 0 is in both
    lab = numpy.full((6,), 5, dtype=numpy.uint64)
    _, k_star = tree_features(w, t, star, lab, mask)
    _, k_chain = tree_features(w, t, chain, lab, mask)
    assert set(k_star[:4]) == set(k_chain[:4])


def test_bad_trees_are_refused():
    w = t = numpy.arange(3, dtype=numpy.uint64)
    lab = numpy.ones((3,), dtype=numpy.uint64)
    with pytest.raises(ValueError, match="cycle"):
        tree_features(w, t, numpy.array([1, 2, 0]), lab, 1)
    with pytest.raises(ValueError, match="heads must be"):
        tree_features(w, t, numpy.array([-1, 5, 0]), lab, 1)
    with pytest.raises(ValueError, match="agree"):
        tree_features(w, t, numpy.array([-1, 0]), lab[:2], 1)
    with pytest.raises(ValueError, match="unknown feature group"):
        group_mask(["arcs", "nope"], TREE_GROUPS)


def test_empty_sentences_have_no_features():
    e = numpy.zeros((0,), dtype=numpy.uint64)
    ptr, keys = tree_features(e, e, numpy.zeros((2, 0), dtype=numpy.int64),
                              numpy.zeros((2, 0), dtype=numpy.uint64), 1023)
    assert list(ptr) == [0, 0, 0] and len(keys) == 0
    ptr, keys = chunk_features(e, e, numpy.zeros((1, 0), dtype=numpy.int64), 15)
    assert list(ptr) == [0, 0] and len(keys) == 0


def test_hash_pairs_mixes_both_members():
    a = numpy.array([1, 1, 2], dtype=numpy.uint64)
    b = numpy.array([1, 2, 1], dtype=numpy.uint64)
    h = hash_pairs(a, b)
    assert len(set(h.tolist())) == 3 and (h != 0).all()
    assert int(h[0]) == mix(mix(0xCBF29CE484222325, 1), 1)


def test_consensus_features_count_the_lists_agreement():
    """The consensus group: a token's arc shared by every candidate gets the same keys in each;
    one the candidates disagree on gets keys by the share that agrees (2 of 3 vs 1 of 3)."""
    from spacy_structperc.reranking import TreeFeatures

    feats = TreeFeatures(["consensus"])
    tags = numpy.array([5, 6, 7], dtype=numpy.uint64)
    heads = numpy.array([[-1, 0, 0], [-1, 0, 0], [-1, 0, 1]])
    labels = numpy.full((3, 3), 9, dtype=numpy.uint64)
    ptr, keys = feats.batch(tags, tags, heads, labels)
    assert list(ptr) == [0, 12, 24, 36]
    per = keys.reshape(3, 3, 4)                     # candidate, token, template
    assert (per[:, :2] == per[0, :2]).all()          # tokens 0 and 1: everyone agrees
    assert (per[0, 2] == per[1, 2]).all()            # token 2: the two who agree (2/3) ...
    assert not (per[0, 2] == per[2, 2]).any()        # ... differ from the one alone (1/3)
    with pytest.raises(ValueError, match="unknown feature groups"):
        TreeFeatures(["consensus", "words"])
