"""The clause search (carreras2003 eq. 1) against brute force, and its bounds."""
import itertools
import random

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structperc._core.span_ranker import search_spans, tops_inside


def _candidates(n, starts, ends, max_span=0):
    return [(s, e) for s in sorted(set(starts)) for e in sorted(set(ends))
            if s <= e < n and (max_span <= 0 or e - s + 1 <= max_span)]


def _crossing(a, b):
    return a[0] < b[0] <= a[1] < b[1] or b[0] < a[0] <= b[1] < a[1]


def _coherent(subset):
    return not any(_crossing(a, b) for a, b in itertools.combinations(subset, 2))


def brute_force_independent(cands, score):
    """max over every coherent subset of candidates of the sum of their scores."""
    best, best_set = 0.0, ()
    for k in range(1, len(cands) + 1):
        for subset in itertools.combinations(cands, k):
            if _coherent(subset):
                total = sum(score[c] for c in subset)
                if total > best:
                    best, best_set = total, subset
    return best, sorted(best_set, key=lambda c: (c[0], -c[1]))


def brute_force_recursive(n, cands, score_fn):
    """The bottom-up recursion of the search, by enumeration instead of a chart: a candidate's
    inside is the best set of disjoint top candidates strictly inside it (each worth its own
    value), its value score(c | those tops) + their worth; the answer is the best set of
    disjoint top candidates over the sentence. Every antichain of candidates is tried."""
    value, inside = {}, {}

    def best_tops(within, lo, hi):
        pool = [c for c in within if lo <= c[0] and c[1] <= hi]
        best, best_set = 0.0, ()
        for k in range(1, len(pool) + 1):
            for subset in itertools.combinations(pool, k):
                spans = sorted(subset)
                if any(a[1] >= b[0] for a, b in zip(spans, spans[1:])):
                    continue
                total = sum(value[c] for c in spans)
                if total > best:
                    best, best_set = total, tuple(spans)
        return best, best_set

    for c in sorted(cands, key=lambda c: (c[1] - c[0], c)):
        s, e = c
        worth, tops = best_tops([d for d in cands if d != c and d in value], s, e)
        value[c] = score_fn(s, e, tops) + worth
        inside[c] = tops
    total, tops = best_tops(cands, 0, n - 1)
    out, stack = [], list(tops)
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(inside[c])
    return total, sorted(out, key=lambda c: (c[0], -c[1]))


problems = st.integers(1, 7).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True),
    st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True),
    st.integers(0, 2 ** 31)))


@settings(max_examples=150, deadline=None)
@given(problems)
def test_search_equals_brute_force_with_independent_scores(problem):
    n, starts, ends, seed = problem
    rng = random.Random(seed)
    cands = _candidates(n, starts, ends)
    if len(cands) > 11:
        cands = cands[:11]
        starts = sorted({s for s, _ in cands})
        ends = sorted({e for _, e in cands})
        cands = _candidates(n, starts, ends)[:11]
    score = {c: rng.uniform(-1.0, 1.0) for c in _candidates(n, starts, ends)}
    allowed = set(cands)
    fn = lambda s, e, tops: score[(s, e)] if (s, e) in allowed else -100.0
    found, total = search_spans(n, starts, ends, fn)
    expected_total, expected = brute_force_independent(cands, score)
    assert total == pytest.approx(expected_total, abs=1e-9)
    assert found == expected


@settings(max_examples=150, deadline=None)
@given(problems)
def test_search_equals_brute_force_when_scores_depend_on_the_clauses_inside(problem):
    n, starts, ends, seed = problem
    rng = random.Random(seed)
    cands = _candidates(n, starts, ends)
    if len(cands) > 10:
        return
    base = {c: rng.uniform(-1.0, 1.0) for c in cands}
    bonus = rng.uniform(-1.0, 1.0)
    seen = []

    def fn(s, e, tops):
        seen.append(((s, e), tops))
        # Depends on the inner structure, as the pattern features do.
        return base[(s, e)] + bonus * len(tops) + 0.37 * sum(b - a for a, b in tops)

    found, total = search_spans(n, starts, ends, fn)
    searched = list(seen)
    expected_total, expected = brute_force_recursive(n, cands, fn)
    assert total == pytest.approx(expected_total, abs=1e-9)
    assert found == expected
    seen = searched
    # Every candidate is scored exactly once, with disjoint tops strictly inside it.
    assert sorted(c for c, _ in seen) == sorted(cands)
    for (s, e), tops in seen:
        assert all(s <= a <= b <= e and (a, b) != (s, e) for a, b in tops)
        assert all(x[1] < y[0] for x, y in zip(tops, tops[1:]))


def test_output_never_crosses_and_max_span_is_respected():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(1, 30)
        starts = rng.sample(range(n), rng.randint(1, n))
        ends = rng.sample(range(n), rng.randint(1, n))
        found, _ = search_spans(n, starts, ends, lambda s, e, t: rng.uniform(-0.5, 1.0), max_span=6)
        assert _coherent(found)
        assert all(e - s + 1 <= 6 for s, e in found)
        assert len(set(found)) == len(found)


def test_long_sentence_search_is_bounded():
    # 1,000 tokens with 100 starts and 100 ends: 5,000-odd candidates, scored once each.
    n = 1000
    starts = list(range(0, n, 10))
    ends = list(range(9, n, 10))
    calls = []

    def fn(s, e, tops):
        calls.append(1)
        return 1.0 if e - s < 10 else -0.1

    found, total = search_spans(n, starts, ends, fn)
    assert len(calls) == len(_candidates(n, starts, ends))
    assert found == [(s, s + 9) for s in starts]
    assert total == pytest.approx(100.0)


def test_tops_inside_keeps_the_maximal_clauses():
    clauses = [(0, 9), (1, 4), (2, 3), (6, 8)]
    assert tops_inside(clauses, 0, 9) == [(1, 4), (6, 8)]
    assert tops_inside(clauses, 1, 4) == [(2, 3)]
    assert tops_inside(clauses, 5, 9) == [(6, 8)]
