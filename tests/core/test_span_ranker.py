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


# ---------------------------------------------------------------------------------------------
# FR-Perceptron feedback (carreras2003 §3.1): each case, and which function moves.

from spacy_structperc._core.span_ranker import ATOM_NAMES, ObjectFunction, PrimalFunction, SpanRecognizer
from spacy_structperc._core.templates import TemplateSet


class TableFunction:
    """A function whose score is looked up by feature vector, and which logs its updates."""

    def __init__(self, default=-1.0):
        self.table, self.default, self.log = {}, default, []

    def score(self, keys):
        return self.table.get(bytes(numpy.asarray(keys, dtype=numpy.uint64).tobytes()), self.default)

    def update(self, keys, delta):
        self.log.append((bytes(numpy.asarray(keys, dtype=numpy.uint64).tobytes()), delta))

    def tick(self):
        pass


def _recognizer(n=6):
    templates = TemplateSet([{"name": "w0", "parts": [[0, "lower"]]}, {"name": "t0", "parts": [[0, "tag"]]}],
                            list(ATOM_NAMES))
    fns = {k: TableFunction() for k in ("start", "end", "score")}
    rec = SpanRecognizer(templates, ObjectFunction(fns["start"]), ObjectFunction(fns["end"]),
                         ObjectFunction(fns["score"]))
    atoms = numpy.zeros((n, 4), dtype=numpy.uint64)
    atoms[:, 0] = 1
    atoms[:, 1] = numpy.arange(100, 100 + n)   # every word distinct
    atoms[:, 2] = 7
    elements = numpy.arange(1000, 1000 + n, dtype=numpy.uint64)   # distinct patterns for distinct tops
    rec.set_sentence(atoms, elements, numpy.zeros((n,), dtype=numpy.uint8))
    return rec, fns


def _set(rec, fns, starts, ends, phrases):
    """Filters fire on `starts` / `ends`; phrases maps (s, e, tops) -> score."""
    for i in starts:
        fns["start"].table[rec.word_keys(i).tobytes()] = 1.0
    for i in ends:
        fns["end"].table[rec.word_keys(i).tobytes()] = 1.0
    for (s, e, tops), value in phrases.items():
        fns["score"].table[rec.phrase_keys(s, e, tops).tobytes()] = value
    rec._score_filters()


def _moves(rec, fns):
    """{function: sorted [(what, delta)]}: a word index or a phrase (s, e, tops)."""
    words = {rec.word_keys(i).tobytes(): i for i in range(rec.n)}
    out = {}
    for name, fn in fns.items():
        moved = []
        for keys, delta in fn.log:
            if name == "score":
                phrase = next(p for p in _all_phrases(rec) if rec.phrase_keys(*p).tobytes() == keys)
                moved.append((phrase, delta))
            else:
                moved.append((words[keys], delta))
        out[name] = sorted(moved)
    return out


def _all_phrases(rec):
    spans = [(s, e) for s in range(rec.n) for e in range(s, rec.n)]
    out = []
    for s, e in spans:
        inside = [c for c in spans if s <= c[0] and c[1] <= e and c != (s, e)]
        out.append((s, e, ()))
        out.extend((s, e, (c,)) for c in inside)
    return out


def test_fr_correct_phrases_move_nothing():
    rec, fns = _recognizer()
    _set(rec, fns, [0, 2], [3, 5], {(0, 5, ((2, 3),)): 1.0, (2, 3, ()): 1.0})
    result = rec.train([(0, 5), (2, 3)], "fr")
    assert result["predicted"] == [(0, 5), (2, 3)]
    assert _moves(rec, fns) == {"start": [], "end": [], "score": []}


def test_fr_missed_phrase_with_a_blocked_start_moves_the_start_filter_only():
    rec, fns = _recognizer()
    _set(rec, fns, [], [5], {})
    result = rec.train([(0, 5)], "fr")
    assert result["predicted"] == []
    # Start word scored <= 0: moved toward; end word > 0: not moved; no candidate: no scorer move.
    assert _moves(rec, fns) == {"start": [(0, 1.0)], "end": [], "score": []}


def test_fr_missed_phrase_with_both_boundaries_blocked_moves_both_filters():
    rec, fns = _recognizer()
    _set(rec, fns, [], [], {})
    rec.train([(1, 4)], "fr")
    assert _moves(rec, fns) == {"start": [(1, 1.0)], "end": [(4, 1.0)], "score": []}


def test_fr_missed_candidate_moves_the_scorer_toward_it_with_the_gold_clauses_inside():
    rec, fns = _recognizer()
    # (0, 5) is a candidate the scorer rejects; (2, 3) is found.
    _set(rec, fns, [0, 2], [3, 5], {(0, 5, ((2, 3),)): -1.0, (2, 3, ()): 1.0})
    result = rec.train([(0, 5), (2, 3)], "fr")
    assert result["predicted"] == [(2, 3)]
    assert _moves(rec, fns) == {"start": [], "end": [], "score": [((0, 5, ((2, 3),)), 1.0)]}


def test_fr_over_predicted_phrase_moves_the_scorer_and_non_gold_boundaries_away():
    rec, fns = _recognizer()
    _set(rec, fns, [0, 1], [4, 5], {(0, 5, ((1, 4),)): 1.0, (1, 4, ()): 1.0})
    result = rec.train([(0, 5)], "fr")
    assert result["predicted"] == [(0, 5), (1, 4)]
    # (1, 4) is over-predicted: 1 is not a gold start, 4 not a gold end: both filters move away.
    assert _moves(rec, fns) == {"start": [(1, -1.0)], "end": [(4, -1.0)], "score": [((1, 4, ()), -1.0)]}


def test_fr_over_predicted_phrase_on_gold_boundaries_moves_the_scorer_only():
    rec, fns = _recognizer()
    # Gold (0, 5) and (2, 3); predicted (0, 3) too, whose start and end are gold boundaries.
    _set(rec, fns, [0, 2], [3, 5], {(0, 5, ((0, 3),)): 1.0, (0, 3, ((2, 3),)): 1.0, (2, 3, ()): 1.0,
                                    (0, 5, ((2, 3),)): 0.5})
    result = rec.train([(0, 5), (2, 3)], "fr")
    assert result["predicted"] == [(0, 5), (0, 3), (2, 3)]
    assert _moves(rec, fns) == {"start": [], "end": [], "score": [((0, 3, ((2, 3),)), -1.0)]}


def test_co_vp_updates_every_misclassified_word_and_candidate():
    rec, fns = _recognizer()
    # Start fires on 0 (gold) and 1 (not gold); end on 5 (gold) only; gold end 3 is missed.
    _set(rec, fns, [0, 1], [5], {(0, 5, ((2, 3),)): -1.0, (1, 5, ((2, 3),)): 1.0})
    rec.train([(0, 5), (2, 3)], "co")
    moves = _moves(rec, fns)
    assert moves["start"] == [(1, -1.0), (2, 1.0)]
    assert moves["end"] == [(3, 1.0)]
    # Candidates (0, 5) (gold, scored <= 0) and (1, 5) (not gold, scored > 0) are both mistakes.
    assert moves["score"] == [((0, 5, ((2, 3),)), 1.0), ((1, 5, ((2, 3),)), -1.0)]


def test_cb_vp_trains_the_scorer_on_pairs_of_gold_boundaries_whatever_the_filters_say():
    rec, fns = _recognizer()
    _set(rec, fns, [], [], {})
    rec.train([(0, 5), (2, 3)], "cb")
    moves = _moves(rec, fns)
    assert moves["start"] == [(0, 1.0), (2, 1.0)]
    assert moves["end"] == [(3, 1.0), (5, 1.0)]
    # Pairs of gold boundaries: (0, 3) (0, 5) (2, 3) (2, 5); the default score -1 is right for
    # (0, 3) and (2, 5) and wrong for the gold (0, 5) and (2, 3).
    assert moves["score"] == [((0, 5, ((2, 3),)), 1.0), ((2, 3, ()), 1.0)]


def test_primal_function_scores_are_sums_of_weights_and_updates_add():
    fn = PrimalFunction()
    keys = numpy.array([3, 5, 9], dtype=numpy.uint64)
    assert fn.score_keys(keys) == 0.0
    fn.update_keys(keys, 1.0)
    fn.update_keys(keys[:1], -0.5)
    assert fn.score_keys(keys) == pytest.approx(2.5)
    assert fn.score_keys(keys[1:]) == pytest.approx(2.0)


# ---------------------------------------------------------------------------------------------
# A whole document at once (prediction): the same clauses as one sentence at a time.


def _random_primal(rng, keys_pool):
    fn = PrimalFunction(n_buckets=1 << 10)
    for key in keys_pool:
        fn.update_keys(numpy.array([key], dtype=numpy.uint64), float(rng.normal()))
    return fn


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 30), st.integers(1, 6), st.integers(1, 8))
def test_recognize_doc_equals_sentence_by_sentence(seed, n, n_sents, max_boundaries):
    rng = numpy.random.default_rng(seed)
    templates = TemplateSet([{"name": "bias", "parts": [[0, "bias"]]},
                             {"name": "w-1", "parts": [[-1, "lower"]]}, {"name": "w0", "parts": [[0, "lower"]]},
                             {"name": "t+1", "parts": [[1, "tag"]]}, {"name": "t-2,t0", "parts": [[-2, "tag"], [0, "tag"]]}],
                            list(ATOM_NAMES))
    atoms = numpy.zeros((n, 4), dtype=numpy.uint64)
    atoms[:, 0] = 1
    atoms[:, 1] = rng.integers(1, 6, n)
    atoms[:, 2] = rng.integers(1, 4, n)
    elements = rng.integers(0, 4, n).astype(numpy.uint64)
    is_vp = (rng.random(n) < 0.3).astype(numpy.uint8)
    # Word and phrase keys come from a small vocabulary, so random weights on every key a
    # sentence can produce are enough: score each key of a long dry run once.
    probe = SpanRecognizer(templates, PrimalFunction(), PrimalFunction(), PrimalFunction(), max_boundaries=100)
    probe.set_sentence(atoms, elements, is_vp)
    word_keys = {int(k) for i in range(n) for k in probe.word_keys(i)}
    start_fn, end_fn = _random_primal(rng, word_keys), _random_primal(rng, word_keys)
    score_fn = PrimalFunction(n_buckets=1 << 12)   # unseen phrase keys score by their bias
    score_fn.update_keys(probe.phrase_keys(0, 0), 0.5)
    rec = SpanRecognizer(templates, start_fn, end_fn, score_fn, max_boundaries=max_boundaries,
                         max_span=int(rng.integers(0, 6)))
    starts = sorted({0} | set(rng.integers(0, n, n_sents - 1).tolist()))
    expected = []
    bounds = list(zip(starts, starts[1:] + [n]))
    for s0, e0 in bounds:
        rec.set_sentence(atoms[s0:e0], elements[s0:e0], is_vp[s0:e0])
        expected.extend((s0 + s, s0 + e) for s, e in rec.recognize())
    last_scores = rec.start_scores.copy()
    last_starts = rec.starts
    rec.set_sentence(atoms[:1], elements[:1], is_vp[:1])   # bound elsewhere before the call
    flags = numpy.full(n, -1)
    flags[starts] = 1
    flags[0] = int(rng.integers(-1, 2))   # the first token starts a sentence whatever it says
    assert rec.recognize_doc(atoms, elements, is_vp, flags) == expected
    assert rec.n == bounds[-1][1] - bounds[-1][0]
    assert rec.start_scores.tolist() == last_scores.tolist() and rec.starts == last_starts


@pytest.mark.parametrize("flags", [[], [1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
def test_recognize_doc_needs_a_sentence_flag_per_token(flags):
    rec, _ = _recognizer(n=5)
    atoms = numpy.ones((5, 4), dtype=numpy.uint64)
    with pytest.raises(ValueError, match="sent_start"):
        rec.recognize_doc(atoms, numpy.zeros(5, dtype=numpy.uint64), numpy.zeros(5, dtype=numpy.uint8), flags)
