"""Beam search and the violation-fixing perceptron updates of huang2012."""
import itertools
import math

import numpy
import pytest

from spacy_structperc._core import beam, viterbi
from spacy_structperc._core.tagging import TagSystem
from spacy_structperc._core.templates import TemplateSet
from spacy_structperc._core.weights import AveragedWeights

from structperc_problems import (TEMPLATE_SETS, THIRD_ORDER, brute_force, copy_weights, delta_phi,
                                 make_system, random_atoms, randomize_reachable, weight_change)


@pytest.mark.parametrize("templates", ["first-order-mixed", "second-order-mixed", "third-order"])
def test_beam_as_wide_as_the_search_space_is_exact(templates):
    specs, order = TEMPLATE_SETS.get(templates, (THIRD_ORDER, 3))
    rng = numpy.random.default_rng(11)
    for _ in range(10):
        n, m = int(rng.integers(1, 5)), int(rng.integers(2, 4))
        _, weights, system = make_system(specs, m)
        system.set_sentence(random_atoms(rng, n))
        randomize_reachable(system, weights, n, m, rng)
        best, _ = brute_force(system, weights, n, m)
        assert tuple(beam.decode(system, m ** n).tolist()) == best
        assert tuple(beam.decode(system, m ** n + 3).tolist()) == best
        if order <= 2:
            assert tuple(viterbi.viterbi(system, order)[0].tolist()) == best


def test_beam_decode_respects_allowed_masks():
    specs, _ = TEMPLATE_SETS["second-order"]
    rng = numpy.random.default_rng(12)
    for _ in range(10):
        n, m = int(rng.integers(1, 5)), 3
        _, weights, system = make_system(specs, m)
        atoms = random_atoms(rng, n)
        system.set_sentence(atoms)
        randomize_reachable(system, weights, n, m, rng)
        allowed = rng.random((n, m)) < 0.5
        allowed[:, int(rng.integers(m))] = True
        system.set_sentence(atoms, None, allowed)
        best, _ = brute_force(system, weights, n, m, allowed=allowed)
        for width in (1, 2, m ** n):
            path = beam.decode(system, width).tolist()
            assert all(allowed[i, c] for i, c in enumerate(path))
        assert tuple(beam.decode(system, m ** n).tolist()) == best


def test_beam_width_must_be_positive():
    _, _, system = make_system(TEMPLATE_SETS["first-order"][0], 2)
    with pytest.raises(ValueError):
        beam.decode(system, 0)
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 2), [0, 1])
    with pytest.raises(ValueError, match="update method"):
        beam.train(system, 2, "bogus")


def _find_pred_prefix(system, gold, t, m, change):
    """The length-(t+1) prefix z with Phi(gold[:t+1]) - Phi(z) equal to the weight change."""
    g = tuple(gold[:t + 1])
    matches = [z for z in itertools.product(range(m), repeat=t + 1)
               if z != g and delta_phi(system, g, z) == change]
    assert matches, "the weight change is not Phi(gold prefix) - Phi(some prefix)"
    return matches[0]


def _train_and_check(method, width, seed, n_epochs=4, n_sents=4, specs=None):
    """Train with beam updates; check every update independently of the beam's own bookkeeping.

    Before each step the weights are copied (pickle); afterwards the change W_after - W_before
    identifies the update's prefixes (gold, z), and a second TagSystem over the copy re-scores
    both with score_path: w . dPhi = score(gold prefix) - score(z) must be <= 0.
    """
    specs = specs or TEMPLATE_SETS["second-order-mixed"][0]
    rng = numpy.random.default_rng(seed)
    m = 3
    templates, weights, system = make_system(specs, m)
    data = []
    for _ in range(n_sents):
        n = int(rng.integers(2, 6))
        atoms = random_atoms(rng, n)
        system.set_sentence(atoms)
        randomize_reachable(system, weights, n, m, rng, scale=0.5)
        data.append((atoms, rng.integers(0, m, size=n).astype(numpy.int32)))
    n_updates, values = 0, []
    for _ in range(n_epochs):
        for atoms, gold in data:
            system.set_sentence(atoms, gold)
            before = copy_weights(weights)
            result = beam.train(system, width, method)
            change = weight_change(before, weights)
            if not result["updated"]:
                assert not change
                continue
            n_updates += 1
            t = result["step"]
            z = _find_pred_prefix(system, gold.tolist(), t, m, change)
            replay = TagSystem(templates, before)
            replay.set_sentence(atoms, gold)
            value = replay.score_path(gold[:t + 1]) - replay.score_path(z)
            assert value == pytest.approx(result["violation"], abs=1e-3)
            values.append((value, result["invalid"]))
            weights.next_example()
    return n_updates, values


@pytest.mark.parametrize("method", ["early", "max-violation", "hybrid", "latest"])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_every_violation_fixing_update_is_a_violation(method, width):
    n_updates, values = _train_and_check(method, width, seed=width * 7 + len(method))
    assert n_updates > 0
    for value, invalid in values:
        assert value <= 1e-4, (method, width, value)
        assert not invalid


def test_standard_update_with_small_beams_makes_invalid_updates_and_reports_them():
    n_invalid = n_valid = 0
    for seed in range(6):
        for width in (1, 2):
            _, values = _train_and_check("standard", width, seed=100 + seed, n_epochs=3, n_sents=5)
            for value, invalid in values:
                # result["invalid"] is exactly "w . dPhi > 0" for the full-sequence update.
                if abs(value) > 1e-4:
                    assert invalid == (value > 0), value
                n_invalid += value > 1e-4
                n_valid += value < -1e-4
    assert n_invalid > 0 and n_valid > 0


def _python_beam(system, n, m, width, gold):
    """Beam search replayed in Python, ties broken like the C beam (parent, then action).

    Returns per step (best prefix, best score, gold score, gold prefix in beam).
    """
    items = [((), 0.0)]
    gold_score, steps = 0.0, []
    for t in range(n):
        cands = []
        for k, (prefix, score) in enumerate(items):
            state = system.initial_state()
            for a in prefix:
                state = system.step(state, a)
            scores = system.action_scores(state)
            cands += [(score + float(scores[a]), k, a, prefix + (a,)) for a in range(m)
                      if scores[a] != -math.inf]
        cands.sort(key=lambda x: (-x[0], x[1], x[2]))
        items = [(prefix, score) for score, _, _, prefix in cands[:width]]
        state = system.initial_state()
        for a in gold[:t]:
            state = system.step(state, a)
        gold_score += float(system.action_scores(state)[gold[t]])
        g = tuple(gold[:t + 1])
        steps.append((items[0][0], items[0][1], gold_score, g in [p for p, _ in items]))
    return steps


def _expected_step(method, steps, gold):
    """The update step each method should choose, from huang2012 Secs. 4-5."""
    n = len(steps)
    final_best, final_score, final_gold, _ = steps[-1]
    wrong = final_best != tuple(gold)
    early = next((t for t, (_, _, _, in_beam) in enumerate(steps) if not in_beam), None)
    if early is None and wrong:
        early = n - 1
    violations = [(b - g, t) for t, (z, b, g, _) in enumerate(steps)
                  if z != tuple(gold[:t + 1]) and b >= g]
    if method == "early":
        return early
    if method == "hybrid":
        return n - 1 if wrong and final_score >= final_gold else early
    if method == "standard":
        return n - 1 if wrong else None
    if not violations:
        return None
    if method == "latest":
        return violations[-1][1]
    best = max(v for v, _ in violations)
    return min(t for v, t in violations if v == best)     # max-violation; earliest among ties


@pytest.mark.parametrize("method", ["early", "max-violation", "hybrid", "latest", "standard"])
@pytest.mark.parametrize("width", [1, 2])
def test_update_step_matches_the_method_definition(method, width):
    rng = numpy.random.default_rng(30 + width)
    specs = TEMPLATE_SETS["second-order-mixed"][0]
    m = 3
    n_updates = 0
    for _ in range(25):
        n = int(rng.integers(2, 6))
        _, weights, system = make_system(specs, m)
        atoms = random_atoms(rng, n)
        system.set_sentence(atoms)
        randomize_reachable(system, weights, n, m, rng)
        gold = rng.integers(0, m, size=n).astype(numpy.int32)
        system.set_sentence(atoms, gold)
        steps = _python_beam(system, n, m, width, gold.tolist())
        expected = _expected_step(method, steps, gold.tolist())
        result = beam.train(system, width, method)
        assert result["step"] == expected, (method, width, steps)
        assert result["updated"] == (expected is not None)
        if expected is not None:
            n_updates += 1
            _, b, g, _ = steps[expected]
            assert result["violation"] == pytest.approx(g - b, abs=1e-4)
            assert result["wrong"] == sum(a != c for a, c in zip(steps[-1][0], gold.tolist()))
    assert n_updates > 0


def test_beam_train_rejects_unknown_gold():
    _, _, system = make_system(TEMPLATE_SETS["first-order"][0], 2)
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 3), [0, -1, 1])
    with pytest.raises(ValueError, match="gold"):
        beam.train(system, 2, "early")


# huang2012 Fig. 1 ------------------------------------------------------------------------------

N, V, DOT = 0, 1, 2
FRUIT_ALLOWED = numpy.array([[1, 0, 0], [1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)
FRUIT_GOLD = numpy.array([N, N, V, DOT], dtype=numpy.int32)


def _fruit_flies():
    """x = "fruit flies fly .", Y(x) = {N} x {N,V} x {N,V} x {.}, features: label bigrams only."""
    templates = TemplateSet([{"name": "t-1", "parts": [["hist", 1]]}], ["w"])
    weights = AveragedWeights(3, 64)
    system = TagSystem(templates, weights)
    words = numpy.array([[11], [12], [13], [14]], dtype=numpy.uint64)   # fruit flies fly .
    system.set_sentence(words, FRUIT_GOLD, FRUIT_ALLOWED)
    return templates, weights, system, words


def _fruit_epochs(method, width, n_epochs=50):
    templates, weights, system, words = _fruit_flies()
    history = []
    for _ in range(n_epochs):
        before = copy_weights(weights)
        pred = beam.decode(system, width).tolist()
        result = beam.train(system, width, method)
        replay = TagSystem(templates, before)
        replay.set_sentence(words, FRUIT_GOLD, FRUIT_ALLOWED)
        history.append((pred, result, replay))
        weights.next_example()
    return history, system


def test_fruit_flies_greedy_standard_update_never_converges():
    # huang2012 Fig. 1: the data is separable (w(N->N) < w(N->V), w(V->.) large), but greedy
    # search can never output N N V .: it needs N->N > N->V at "flies" and N->V > N->N at "fly".
    history, system = _fruit_epochs("standard", 1)
    assert all(pred != FRUIT_GOLD.tolist() for pred, _, _ in history)
    assert all(result["updated"] for _, result, _ in history)
    n_invalid = sum(result["invalid"] for _, result, _ in history)
    assert n_invalid >= 10
    # The invalid updates are real: the model already scored the gold sequence higher.
    for pred, result, replay in history:
        value = replay.score_path(FRUIT_GOLD) - replay.score_path(pred)
        assert (value > 0) == result["invalid"]
    # Still updating at the end: the perceptron did not converge.
    assert all(result["updated"] for _, result, _ in history[-10:])


def test_fruit_flies_early_update_with_beam_two_converges():
    history, system = _fruit_epochs("early", 2)
    first_correct = next(i for i, (pred, _, _) in enumerate(history) if pred == FRUIT_GOLD.tolist())
    assert first_correct < 10
    for pred, result, _ in history[first_correct:]:
        assert pred == FRUIT_GOLD.tolist() and not result["updated"]
    for _, result, _ in history:
        assert not result["invalid"] and result["violation"] <= 0
    assert viterbi.viterbi(system, 1)[0].tolist() == FRUIT_GOLD.tolist()


def test_fruit_flies_greedy_early_update_is_always_a_violation_but_cannot_converge():
    # With beam width 1, early update stops at the first wrong action (huang2012 Alg. 5/6). Each
    # such triple is a greedy violation (Lemma 2, Definition 5), but the example is not greedily
    # separable -- no w prefers N->N after "fruit" and N->V after "flies" at once, as the greedy
    # confusion set would require -- so Theorem 2 promises nothing and the updates go on forever.
    history, _ = _fruit_epochs("early", 1)
    assert all(pred != FRUIT_GOLD.tolist() for pred, _, _ in history)
    for pred, result, replay in history:
        assert result["updated"] and not result["invalid"]
        t = result["step"]
        # The greedy prefix agrees with gold before t and differs at t.
        assert pred[:t] == FRUIT_GOLD[:t].tolist() and pred[t] != FRUIT_GOLD[t]
        value = replay.score_path(FRUIT_GOLD[:t + 1]) - replay.score_path(pred[:t + 1])
        assert value <= 1e-6
        assert result["violation"] == pytest.approx(value, abs=1e-6)
