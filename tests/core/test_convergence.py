"""Collins (2002) / Novikoff: on separable data the structured perceptron with exact Viterbi makes
at most R^2 / delta^2 updates (collins2001 / huang2012 Theorem 1)."""
import itertools
import math

import numpy
import pytest

from spacy_structperc._core import viterbi

from structperc_problems import (TEMPLATE_SETS, delta_phi, make_system, random_atoms,
                                 randomize_reachable, reference_score, weight_dict)


def _norm(vector):
    return math.sqrt(sum(v * v for v in vector.values()))


def _dot(u, vector):
    return sum(u.get(k, 0.0) * v for k, v in vector.items())


def _separable_data(specs, order, m, n_sents, seed, min_margin):
    """Sentences labelled by a random teacher (argmax = Viterbi), and the teacher's weights."""
    rng = numpy.random.default_rng(seed)
    _, teacher, system = make_system(specs, m)
    data = []
    while len(data) < n_sents:
        n = int(rng.integers(2, 6))
        atoms = random_atoms(rng, n, vocab=4)
        system.set_sentence(atoms)
        randomize_reachable(system, teacher, n, m, rng)
        seqs = list(itertools.product(range(m), repeat=n))
        scores = [reference_score(system, teacher, s) for s in seqs]
        order_idx = numpy.argsort(scores)[::-1]
        gold = seqs[order_idx[0]]
        if scores[order_idx[0]] - scores[order_idx[1]] < min_margin:
            continue      # keep the unnormalised margin away from float noise
        assert tuple(viterbi.viterbi(system, order)[0].tolist()) == gold
        data.append((atoms, numpy.array(gold, dtype=numpy.int32)))
    # Later sentences may have added weights to features of earlier ones: relabel with the final
    # teacher so every example is labelled by the same u.
    relabelled = []
    for atoms, _ in data:
        system.set_sentence(atoms)
        relabelled.append((atoms, viterbi.viterbi(system, order)[0].astype(numpy.int32)))
    return teacher, system, relabelled


@pytest.mark.parametrize("templates", ["first-order-mixed", "second-order"])
def test_perceptron_with_exact_viterbi_makes_at_most_r2_over_delta2_updates(templates):
    specs, order = TEMPLATE_SETS[templates]
    m = 3
    teacher, tsys, data = _separable_data(specs, order, m, n_sents=10, seed=order, min_margin=0.3)
    u = weight_dict(teacher)
    u_norm = _norm(u)
    # delta and R by brute force over the standard confusion set (every z != y of every x).
    delta, R = math.inf, 0.0
    for atoms, gold in data:
        tsys.set_sentence(atoms)
        for z in itertools.product(range(m), repeat=len(gold)):
            if z == tuple(gold.tolist()):
                continue
            d = delta_phi(tsys, gold.tolist(), z)
            delta = min(delta, _dot(u, d) / u_norm)
            R = max(R, _norm(d))
    assert delta > 0     # the teacher separates the data
    bound = R * R / (delta * delta)

    _, weights, system = make_system(specs, m)
    n_updates, converged = 0, False
    for epoch in range(500):
        mistakes = 0
        for atoms, gold in data:
            system.set_sentence(atoms, gold)
            n_wrong, violation = viterbi.train_viterbi(system, order)
            if n_wrong:
                mistakes += 1
                n_updates += 1
                assert violation <= 1e-6       # exact search: every update is a violation
                # The two halves of the proof, after k updates:
                w = weight_dict(weights)
                assert _dot(u, w) / u_norm >= n_updates * delta - 1e-6          # u.w >= k delta
                assert _norm(w) ** 2 <= n_updates * R * R + 1e-6               # |w|^2 <= k R^2
            weights.next_example()
        if mistakes == 0:
            converged = True
            break
    assert converged
    assert 0 < n_updates <= bound, (n_updates, bound)
