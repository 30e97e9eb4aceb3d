"""Exact Viterbi against brute force over every label sequence."""
import math

import numpy
import pytest

from spacy_structperc._core import viterbi

from structperc_problems import (SECOND_ORDER, TEMPLATE_SETS, THIRD_ORDER, bio_transitions,
                                 brute_force, make_system, random_atoms, randomize_reachable,
                                 reference_score)


def _problems(seed, n_trials, max_n=5, max_m=4):
    rng = numpy.random.default_rng(seed)
    for _ in range(n_trials):
        n = int(rng.integers(1, max_n + 1))
        m = int(rng.integers(2, max_m + 1))
        if m ** n > 600:          # keep brute force quick
            n = max(1, int(math.log(600, m)))
        yield rng, n, m


@pytest.mark.parametrize("templates", sorted(TEMPLATE_SETS))
def test_viterbi_equals_brute_force_argmax_and_score_path(templates):
    specs, order = TEMPLATE_SETS[templates]
    for rng, n, m in _problems(sorted(TEMPLATE_SETS).index(templates), 12):
        _, weights, system = make_system(specs, m)
        system.set_sentence(random_atoms(rng, n))
        randomize_reachable(system, weights, n, m, rng)
        best, best_score = brute_force(system, weights, n, m)
        for o in range(order, 3):   # a higher order than needed must also be exact
            labels, score = viterbi.viterbi(system, o)
            assert tuple(labels.tolist()) == best, (templates, o, n, m)
            assert score == pytest.approx(best_score, abs=1e-4)
            assert system.score_path(labels) == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("templates", sorted(TEMPLATE_SETS))
def test_viterbi_respects_allowed_masks_like_constrained_brute_force(templates):
    specs, order = TEMPLATE_SETS[templates]
    for rng, n, m in _problems(100 + sorted(TEMPLATE_SETS).index(templates), 12):
        _, weights, system = make_system(specs, m)
        allowed = rng.random((n, m)) < 0.6
        allowed[numpy.arange(n), rng.integers(0, m, size=n)] = True   # at least one per token
        atoms = random_atoms(rng, n)
        system.set_sentence(atoms)
        randomize_reachable(system, weights, n, m, rng)
        system.set_sentence(atoms, None, allowed)
        best, best_score = brute_force(system, weights, n, m, allowed=allowed)
        labels, score = viterbi.viterbi(system, order)
        assert tuple(labels.tolist()) == best
        assert all(allowed[i, c] for i, c in enumerate(labels.tolist()))
        assert score == pytest.approx(best_score, abs=1e-4)
        assert system.score_path(labels) == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("templates", sorted(TEMPLATE_SETS))
def test_viterbi_respects_bio_transitions_like_constrained_brute_force(templates):
    specs, order = TEMPLATE_SETS[templates]
    for rng, n, m in _problems(200 + sorted(TEMPLATE_SETS).index(templates), 12, max_m=5):
        m = max(m, 3)
        if m ** n > 600:
            n = max(1, int(math.log(600, m)))
        trans = bio_transitions(m)
        _, weights, system = make_system(specs, m, allowed_transitions=trans)
        atoms = random_atoms(rng, n)
        system.set_sentence(atoms)
        randomize_reachable(system, weights, n, m, rng)
        # I- labels score high everywhere, so the unconstrained argmax would break the rules.
        for key in system.state_features(system.initial_state()).tolist():
            weights.add(key, 2, 50.0)
        allowed = None
        if rng.random() < 0.5:
            allowed = rng.random((n, m)) < 0.7
            allowed[:, 0] = True
            system.set_sentence(atoms, None, allowed)
        best, best_score = brute_force(system, weights, n, m, allowed=allowed, allowed_transitions=trans)
        labels, score = viterbi.viterbi(system, order)
        assert tuple(labels.tolist()) == best
        assert score == pytest.approx(best_score, abs=1e-4)
        assert reference_score(system, weights, labels.tolist(), allowed, trans) > -math.inf


def test_bio_constraints_rule_out_i_at_start_and_after_o():
    # Labels O, B-X, I-X; the model loves I-X everywhere, but it may only follow B-X or I-X.
    for specs, order in (TEMPLATE_SETS["first-order"], TEMPLATE_SETS["second-order"]):
        _, weights, system = make_system(specs, 3, allowed_transitions=bio_transitions(3))
        atoms = numpy.ones((4, 2), dtype=numpy.uint64)
        system.set_sentence(atoms)
        for key in system.state_features(system.initial_state()).tolist():
            weights.add(key, 2, 10.0)       # static features: identical at every position
        labels, _ = viterbi.viterbi(system, order)
        assert labels.tolist() == [1, 2, 2, 2]
        system.set_allowed_transitions(None)
        assert viterbi.viterbi(system, order)[0].tolist() == [2, 2, 2, 2]


def test_viterbi_with_no_valid_sequence_raises():
    for specs, order in (TEMPLATE_SETS["first-order"], TEMPLATE_SETS["second-order"]):
        _, weights, system = make_system(specs, 3, allowed_transitions=bio_transitions(3))
        allowed = numpy.zeros((2, 3), dtype=bool)
        allowed[:, 2] = True          # only I-X, which cannot start a sentence
        system.set_sentence(random_atoms(numpy.random.default_rng(0), 2), None, allowed)
        with pytest.raises(ValueError, match="constraints"):
            viterbi.viterbi(system, order)


def test_viterbi_on_empty_sentence():
    for specs, order in (TEMPLATE_SETS["first-order"], TEMPLATE_SETS["second-order"]):
        _, _, system = make_system(specs, 3)
        system.set_sentence(numpy.zeros((0, 2), dtype=numpy.uint64))
        labels, score = viterbi.viterbi(system, order)
        assert len(labels) == 0 and score == 0.0


def test_order_smaller_than_template_history_raises():
    _, _, system = make_system(SECOND_ORDER, 3)
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 3))
    with pytest.raises(ValueError, match="previous labels"):
        viterbi.viterbi(system, 1)
    _, _, system3 = make_system(THIRD_ORDER, 3)
    system3.set_sentence(random_atoms(numpy.random.default_rng(0), 3))
    with pytest.raises(ValueError):
        viterbi.viterbi(system3, 2)
    for bad in (0, 3):
        with pytest.raises(ValueError, match="order"):
            viterbi.viterbi(system, bad)


def test_train_viterbi_update_is_collins_update_and_reports_violation():
    rng = numpy.random.default_rng(5)
    specs, order = TEMPLATE_SETS["second-order-mixed"]
    n, m = 4, 3
    _, weights, system = make_system(specs, m)
    atoms = random_atoms(rng, n)
    system.set_sentence(atoms)
    randomize_reachable(system, weights, n, m, rng)
    pred, _ = viterbi.viterbi(system, order)
    gold = (pred + 1) % m
    system.set_sentence(atoms, gold)
    expected_violation = system.score_path(gold) - system.score_path(pred)
    n_wrong, violation = viterbi.train_viterbi(system, order)
    assert n_wrong == n
    assert violation == pytest.approx(expected_violation, abs=1e-4)
    assert violation <= 0
    # Exact search finds a violation, and the update moves the gold path up relative to it.
    assert system.score_path(gold) - system.score_path(pred) > expected_violation


def test_train_viterbi_partial_gold_counts_only_known_tokens_and_completes_the_rest():
    rng = numpy.random.default_rng(6)
    specs, order = TEMPLATE_SETS["second-order"]
    n, m = 5, 3
    _, weights, system = make_system(specs, m)
    atoms = random_atoms(rng, n)
    system.set_sentence(atoms)
    randomize_reachable(system, weights, n, m, rng)
    pred, _ = viterbi.viterbi(system, order)
    gold = numpy.full(n, -1, dtype=numpy.int32)
    gold[1] = (pred[1] + 1) % m
    system.set_sentence(atoms, gold)
    n_wrong, violation = viterbi.train_viterbi(system, order)
    assert n_wrong == 1
    assert violation <= 0
    assert system.gold_labels.tolist() == gold.tolist()   # the partial gold is restored
    # A sentence without any known label teaches nothing.
    system.set_sentence(atoms, numpy.full(n, -1, dtype=numpy.int32))
    version = weights.version
    assert viterbi.train_viterbi(system, order) == (0, 0.0)
    assert weights.version == version
