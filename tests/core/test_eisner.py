"""Eisner's projective decoder against brute-force enumeration of every projective tree."""
import itertools

import numpy
import pytest

from spacy_structperc._core.eisner import eisner, tree_score


def _is_projective_tree(heads):
    """heads[d] for d = 1..n (heads[0] unused): a tree rooted at node 0 whose arcs never cross
    (every node between a head and its dependent descends from the head)."""
    n1 = len(heads)

    def ancestors(d):
        seen = set()
        while d != 0:
            if d in seen:
                return None
            seen.add(d)
            d = heads[d]
        return seen | {0}

    anc = {}
    for d in range(1, n1):
        a = ancestors(d)
        if a is None:
            return False
        anc[d] = a
    for d in range(1, n1):
        h = heads[d]
        for m in range(min(h, d) + 1, max(h, d)):
            if h not in anc[m]:
                return False
    return True


def _projective_trees(n):
    for choice in itertools.product(range(n + 1), repeat=n):
        heads = (-1,) + choice
        if any(heads[d] == d for d in range(1, n + 1)):
            continue
        if _is_projective_tree(heads):
            yield heads


def test_projective_tree_count():
    # The number of projective trees rooted at an extra node over n words (more than one root
    # dependent allowed) is the ternary-tree count C(3n, n) / (2n + 1): 1, 3, 12, 55, 273.
    assert [sum(1 for _ in _projective_trees(n)) for n in range(1, 6)] == [1, 3, 12, 55, 273]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_eisner_equals_brute_force(n):
    rng = numpy.random.default_rng(n)
    trees = list(_projective_trees(n))
    for _ in range(40):
        S = rng.normal(size=(n + 1, n + 1))
        best = max(trees, key=lambda h: tree_score(S, h))
        heads, score = eisner(S)
        assert tuple(int(x) for x in heads) == tuple(best)
        assert score == pytest.approx(tree_score(S, best))


def test_eisner_score_is_the_returned_trees_score_and_projective():
    rng = numpy.random.default_rng(7)
    for n in (1, 6, 12, 30):
        for _ in range(10):
            S = rng.normal(size=(n + 1, n + 1)) * rng.uniform(0.1, 10)
            heads, score = eisner(S)
            assert heads[0] == -1
            assert score == pytest.approx(tree_score(S, heads))
            assert _is_projective_tree(list(heads))


def test_eisner_prefers_a_crossing_free_tree_over_a_better_crossing_one():
    # Arcs 1 -> 3 and 2 -> 4 cross: the best non-projective tree is out of reach.
    S = numpy.zeros((5, 5))
    S[0, 1] = S[1, 3] = S[2, 4] = S[0, 2] = 10
    heads, score = eisner(S)
    assert _is_projective_tree(list(heads))
    assert score < 40


def test_eisner_bad_input():
    with pytest.raises(ValueError):
        eisner(numpy.zeros((3, 4)))
    with pytest.raises(ValueError):
        eisner(numpy.full((3, 3), numpy.nan))
    heads, score = eisner(numpy.zeros((1, 1)))
    assert list(heads) == [-1] and score == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_second_order_equals_brute_force(n):
    from spacy_structperc._core.eisner import eisner2, tree_score2

    rng = numpy.random.default_rng(100 + n)
    trees = list(_projective_trees(n))
    for _ in range(40):
        A, B, F = (rng.normal(size=(n + 1, n + 1)) for _ in range(3))
        best = max(trees, key=lambda h: tree_score2(A, B, F, h))
        heads, score = eisner2(A, B, F)
        assert score == pytest.approx(tree_score2(A, B, F, best))
        assert tuple(int(x) for x in heads) == tuple(best)


def test_second_order_with_zero_sibling_scores_is_first_order():
    from spacy_structperc._core.eisner import eisner2

    rng = numpy.random.default_rng(5)
    for n in (3, 8, 20):
        A = rng.normal(size=(n + 1, n + 1))
        Z = numpy.zeros_like(A)
        h1, s1 = eisner(A)
        h2, s2 = eisner2(A, Z, Z)
        assert s1 == pytest.approx(s2)
        assert list(h1) == list(h2)


def test_sibling_pairs():
    from spacy_structperc._core.eisner import sibling_pairs

    # root -> 2; 2 -> 1, 3, 4; 4 -> 5
    first, pairs = sibling_pairs([-1, 2, 0, 2, 2, 4])
    assert sorted(first) == [(0, 2), (2, 1), (2, 3), (4, 5)]
    assert pairs == [(3, 4)]
