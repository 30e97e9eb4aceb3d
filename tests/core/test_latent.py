"""The latent-variable perceptron (sun2009) on the core: latent Viterbi, the gold-constrained
decode, Eq. 8 updates, seeded initial noise and modified parameter averaging."""
import itertools
import math

import numpy
import pytest

from spacy_structperc._core import viterbi
from spacy_structperc._core.weights import AveragedWeights
from spacy_structperc.pipeline.bio import bio_transitions, latent_transitions

from structperc_problems import (FIRST_ORDER, SECOND_ORDER, copy_weights, delta_phi, make_system,
                                 random_atoms, randomize_reachable, reference_score, weight_change)


def _latent_problem(rng, specs, n_types=1, n_latent=2, n=None):
    """A bound random sentence over BIO labels with n_latent sub-states each."""
    trans = latent_transitions(bio_transitions(n_types), n_latent)
    m = trans.shape[1]
    n = n or int(rng.integers(1, 5))
    _, weights, system = make_system(specs, m, allowed_transitions=trans)
    atoms = random_atoms(rng, n)
    system.set_sentence(atoms)
    randomize_reachable(system, weights, n, m, rng)
    return weights, system, trans, n, m


def _brute_force(system, weights, n, m, trans, labels=None, n_latent=1):
    """Best latent sequence (optionally only those projecting to `labels`, -1 = free)."""
    best, best_score = None, -math.inf
    for seq in itertools.product(range(m), repeat=n):
        if labels is not None and any(g >= 0 and s // n_latent != g for s, g in zip(seq, labels)):
            continue
        s = reference_score(system, weights, seq, allowed_transitions=trans)
        if s > best_score:
            best, best_score = seq, s
    return best, best_score


@pytest.mark.parametrize("specs,order", [(FIRST_ORDER, 1), (SECOND_ORDER, 2)])
def test_latent_viterbi_equals_brute_force_over_all_latent_sequences(specs, order):
    rng = numpy.random.default_rng(7 + order)
    for _ in range(10):
        weights, system, trans, n, m = _latent_problem(rng, specs, n_types=1, n_latent=2)
        best, best_score = _brute_force(system, weights, n, m, trans)
        latent, score = viterbi.viterbi(system, order)
        assert tuple(latent.tolist()) == best
        assert score == pytest.approx(best_score, abs=1e-4)
        # The projection is a valid BIO sequence over labels O, B-X, I-X.
        labels = (latent // 2).tolist()
        assert all(not (c == 2 and (i == 0 or labels[i - 1] == 0)) for i, c in enumerate(labels))


def test_latent_transitions_expand_label_constraints_to_every_sub_state():
    trans = latent_transitions(bio_transitions(2), 3)
    labels = bio_transitions(2)
    assert trans.shape == (5 * 3 + 1, 5 * 3)
    for p in range(16):
        for c in range(15):
            assert trans[p, c] == labels[min(p // 3, 5) if p < 15 else 5, c // 3]


@pytest.mark.parametrize("specs,order", [(FIRST_ORDER, 1), (SECOND_ORDER, 2)])
def test_gold_constrained_decode_visits_only_latent_states_of_the_gold_labels(specs, order):
    rng = numpy.random.default_rng(21 + order)
    n_latent = 2
    checked = 0
    for _ in range(30):
        weights, system, trans, n, m = _latent_problem(rng, specs, n_types=1, n_latent=n_latent)
        gold = numpy.array([0] * n, dtype=numpy.int32)
        start = int(rng.integers(0, n))
        gold[start] = 1
        gold[start + 1:start + 1 + int(rng.integers(0, n - start))] = 2
        if rng.random() < 0.3:
            gold[int(rng.integers(0, n))] = -1        # an unknown label constrains nothing
        z_best, z_score = _brute_force(system, weights, n, m, trans)
        h_best, h_score = _brute_force(system, weights, n, m, trans, gold, n_latent)
        before = copy_weights(weights)
        wrong, violation, h, z = viterbi.train_latent(system, gold, n_latent, order)
        assert tuple(z.tolist()) == z_best
        assert wrong == sum(1 for g, s in zip(gold, z_best) if g >= 0 and s // n_latent != g)
        if h is None:
            assert wrong == 0
            assert weight_change(before, weights) == {}
            continue
        checked += 1
        assert tuple(h.tolist()) == h_best
        assert all(g < 0 or s // n_latent == g for s, g in zip(h.tolist(), gold.tolist()))
        assert violation == pytest.approx(h_score - z_score, abs=1e-4)
        # Every update is a latent violation: the gold-constrained path scored no higher.
        assert violation <= 1e-6
        # Eq. 8: theta += f(h*) - f(z), nothing else.
        assert weight_change(before, weights) == delta_phi(system, h, z)
    assert checked >= 10


def test_partial_gold_counts_only_known_tokens():
    rng = numpy.random.default_rng(3)
    weights, system, trans, n, m = _latent_problem(rng, FIRST_ORDER, n_latent=2, n=4)
    gold = numpy.full((n,), -1, dtype=numpy.int32)
    wrong, violation, h, z = viterbi.train_latent(system, gold, 2, 1)
    assert (wrong, violation, h) == (0, 0.0, None)


def test_new_rows_start_at_seeded_noise_independent_of_insertion_order():
    a, b = AveragedWeights(5, 64), AveragedWeights(5, 64)
    a.set_noise(0.01, seed=3)
    b.set_noise(0.01, seed=3)
    keys = [11, 22, 33, 44]
    for k in keys:
        a.add(k, 0, 1.0)
    for k in reversed(keys):
        b.add(k, 0, 1.0)
    for k in keys:
        row_a = [a.get(k, c) for c in range(5)]
        assert row_a == [b.get(k, c) for c in range(5)]
        assert all(abs(v) <= 0.01 for v in row_a[1:])
        assert len(set(row_a[1:])) == 4                  # not constant: the states can split
        assert row_a[0] == pytest.approx(1.0, abs=0.011)
    c = AveragedWeights(5, 64)
    c.set_noise(0.01, seed=4)
    c.add(11, 0, 1.0)
    assert [c.get(11, j) for j in range(1, 5)] != [a.get(11, j) for j in range(1, 5)]
    with pytest.raises(ValueError):
        a.set_noise(-1.0)


def test_reset_to_average_puts_the_average_in_the_current_weights_and_keeps_the_average():
    w = AveragedWeights(3, 64)
    rng = numpy.random.default_rng(0)
    for _ in range(50):
        w.add(int(rng.integers(1, 8)), int(rng.integers(0, 3)), float(rng.normal()))
        w.next_example()
    keys = list(range(1, 8))
    avg_before = [[w.get(k, c, averaged=True) for c in range(3)] for k in keys]
    w.reset_to_average()
    current = [[w.get(k, c) for c in range(3)] for k in keys]
    assert numpy.allclose(current, avg_before, atol=1e-5)
    assert numpy.allclose([[w.get(k, c, averaged=True) for c in range(3)] for k in keys], avg_before, atol=1e-5)
    # Averaging goes on over all examples: one more example at the reset point moves it by 1/51.
    w.add(1, 0, 51.0)
    w.next_example()
    assert w.get(1, 0, averaged=True) == pytest.approx(avg_before[0][0] * 50 / 51 + (avg_before[0][0] + 51.0) / 51, abs=1e-4)


def test_tied_template_keys_are_marked_and_update_every_state_of_the_label():
    from spacy_structperc._core.templates import TemplateSet

    specs = [{"name": "w0", "parts": [[0, "w"]]}, {"name": "label:w0", "parts": [[0, "w"]], "tied": True}]
    plain = TemplateSet(specs[:1], ["w"])
    mixed = TemplateSet(specs, ["w"])
    atoms = numpy.array([[5]], dtype=numpy.uint64)
    (k_plain,) = plain.static_keys(atoms, 0).tolist()
    k_latent, k_tied = mixed.static_keys(atoms, 0).tolist()
    assert k_plain & 1 and k_latent & 1 and k_tied & 1       # never 0
    assert k_tied & 2 and not k_latent & 2                   # the marker bit
    assert k_latent == k_plain & ~2                          # sets without ties hash as before
    with pytest.raises(ValueError):
        TemplateSet([{"name": "h", "parts": [["hist", 1]], "tied": True}], [])
    w = AveragedWeights(6, 64)
    w.set_tie_width(3)
    w.add(k_tied, 4, 1.0)        # class 4 is state 1 of label 1 (classes 3, 4, 5)
    w.add(k_latent, 4, 1.0)
    assert [w.get(k_tied, c) for c in range(6)] == [0, 0, 0, 1, 1, 1]
    assert [w.get(k_latent, c) for c in range(6)] == [0, 0, 0, 0, 1, 0]
    w.next_example()
    assert [w.get(k_tied, c, averaged=True) for c in range(6)] == [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError):
        w.set_tie_width(4)
