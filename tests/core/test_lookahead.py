"""Greedy decoding with depth-D lookahead and the margin perceptron (tsuruoka2011 Figs. 2-3)."""
import itertools
import math

import numpy
import pytest

from spacy_structperc._core import lookahead
from spacy_structperc._core.tagging import TagSystem

from structperc_problems import (TEMPLATE_SETS, THIRD_ORDER, copy_weights, make_system, random_atoms,
                                 randomize_reachable, reference_score, walk_prefixes, weight_dict)


def _state_after(system, prefix):
    state = system.initial_state()
    for a in prefix:
        state = system.step(state, a)
    return state


def _path_value(system, prefix, continuation):
    """Sum of the action scores of `continuation` after `prefix` (-inf if any is forbidden)."""
    state = _state_after(system, prefix)
    total = 0.0
    for a in continuation:
        s = float(system.action_scores(state)[a])
        if s == -math.inf:
            return -math.inf, None
        total += s
        state = system.step(state, a)
    return total, continuation


def _values(system, prefix, n, m, depth):
    """Exhaustive SEARCH: for each first action, the best path of up to 1 + depth actions."""
    length = min(depth + 1, n - len(prefix))
    out = {}
    for first in range(m):
        best = (-math.inf, None)
        for rest in itertools.product(range(m), repeat=length - 1):
            v = _path_value(system, prefix, (first,) + rest)
            if v[0] > best[0]:
                best = v
        out[first] = best
    return out


def _first_argmax(values, skip=None, penalty=0.0):
    best_a, best = None, -math.inf
    for a in sorted(values):
        v = values[a][0]
        if v == -math.inf:
            continue
        if a == skip:
            v -= penalty
        if best_a is None or v > best:
            best_a, best = a, v
    return best_a


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("templates", ["first-order-mixed", "second-order-mixed", "third-order"])
def test_lookahead_decision_is_exhaustive_search_to_depth(depth, templates):
    specs = TEMPLATE_SETS[templates][0] if templates in TEMPLATE_SETS else THIRD_ORDER
    rng = numpy.random.default_rng(depth * 10 + len(templates))
    for _ in range(8):
        n, m = int(rng.integers(1, 6)), int(rng.integers(2, 4))   # often n < depth + 1
        _, weights, system = make_system(specs, m)
        system.set_sentence(random_atoms(rng, n))
        randomize_reachable(system, weights, n, m, rng)
        decoded = lookahead.decode(system, depth).tolist()
        assert len(decoded) == n
        for t in range(n):
            values = _values(system, decoded[:t], n, m, depth)
            assert decoded[t] == _first_argmax(values), (depth, t, values)


def test_lookahead_with_depth_to_the_end_is_exact():
    rng = numpy.random.default_rng(3)
    for _ in range(10):
        n, m = int(rng.integers(1, 5)), 3
        _, weights, system = make_system(TEMPLATE_SETS["second-order-mixed"][0], m)
        system.set_sentence(random_atoms(rng, n))
        randomize_reachable(system, weights, n, m, rng)
        best = max(itertools.product(range(m), repeat=n), key=lambda s: reference_score(system, weights, s))
        assert tuple(lookahead.decode(system, n - 1).tolist()) == best


@pytest.mark.parametrize("depth", [1, 2])
def test_gated_lookahead_searches_only_the_actions_within_the_gap(depth):
    # With a gap, the actions scoring within the gap of the best (the first of the maxima) are
    # valued by exhaustive search to the depth and the best value is taken; where only the best
    # is that close, it is taken unsearched. Gap 0 is depth 0; a gap above every score
    # difference is plain lookahead. Integer weights make ties and differences of exactly the
    # gap common.
    rng = numpy.random.default_rng(40 + depth)
    searched = taken = 0
    for _ in range(60):
        n, m = int(rng.integers(2, 6)), int(rng.integers(2, 5))
        _, weights, system = make_system(TEMPLATE_SETS["second-order-mixed"][0], m)
        system.set_sentence(random_atoms(rng, n))
        seen = set()
        for _, state in walk_prefixes(system, n, m):
            for key in set(system.state_features(state).tolist()) - seen:
                seen.add(key)
                for c in range(m):
                    weights.add(key, c, float(rng.integers(-2, 3)))
        assert lookahead.decode(system, depth, 0.0).tolist() == lookahead.decode(system, 0).tolist()
        assert lookahead.decode(system, depth, 1e9).tolist() == lookahead.decode(system, depth).tolist()
        for gap in (0.5, 1.0, 2.0, 3.0):
            decoded = lookahead.decode(system, depth, gap).tolist()
            for t in range(n):
                scores = system.argmax_scores(_state_after(system, decoded[:t]))
                best = max(range(m), key=lambda c: (scores[c], -c))
                close = {c for c in range(m) if scores[c] > scores[best] - gap}
                if len(close) > 1:
                    values = _values(system, decoded[:t], n, m, depth)
                    assert decoded[t] == _first_argmax({c: values[c] for c in close}), (gap, t, scores)
                    searched += 1
                else:
                    assert decoded[t] == best, (gap, t, scores)
                    taken += 1
    assert searched > 0 and taken > 0


def test_lookahead_respects_allowed_masks():
    rng = numpy.random.default_rng(4)
    for depth in (0, 1, 2):
        for _ in range(6):
            n, m = int(rng.integers(1, 5)), 3
            _, weights, system = make_system(TEMPLATE_SETS["second-order"][0], m)
            atoms = random_atoms(rng, n)
            system.set_sentence(atoms)
            randomize_reachable(system, weights, n, m, rng)
            allowed = rng.random((n, m)) < 0.5
            allowed[:, int(rng.integers(m))] = True
            system.set_sentence(atoms, None, allowed)
            decoded = lookahead.decode(system, depth).tolist()
            assert all(allowed[i, c] for i, c in enumerate(decoded))
            for t in range(n):
                assert decoded[t] == _first_argmax(_values(system, decoded[:t], n, m, depth))


def test_lookahead_with_dead_end_raises():
    _, _, system = make_system(TEMPLATE_SETS["first-order"][0], 2)
    allowed = numpy.array([[1, 1], [0, 0]], dtype=bool)
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 2), None, allowed)
    with pytest.raises(ValueError, match="no valid action"):
        lookahead.decode(system, 1)
    with pytest.raises(ValueError):
        lookahead.decode(system, -1)


def _replay_training(templates, before, atoms, gold, m, depth, margin):
    """tsuruoka2011 Fig. 3 in Python over a copy of the weights; returns the expected updates."""
    weights = copy_weights(before)
    system = TagSystem(templates, weights)
    system.set_sentence(atoms, gold)
    n = len(gold)
    prefix, records, n_errors = [], [], 0
    for t in range(n):
        values = _values(system, prefix, n, m, depth)
        g = int(gold[t])
        plain = _first_argmax(values)
        if g >= 0:
            n_errors += plain != g
            star = _first_argmax(values, skip=g, penalty=margin)
            if star != g:
                v_c, path_c = values[g]
                v_p, path_p = values[star]
                # The rule of Fig. 3: update only when v(correct) - C <= v(best other).
                assert v_c - margin <= v_p
                records.append((t, list(path_c), list(path_p), v_c - v_p))
                system.update_with_paths(prefix + list(path_c), prefix + list(path_p))
            else:
                assert all(values[a][0] < values[g][0] - margin or a > g and values[a][0] == values[g][0] - margin
                           for a in values if a != g)
        prefix.append(g if g >= 0 else plain)
    return records, n_errors, weights


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("margin", [0.0, 0.7])
def test_margin_perceptron_updates_exactly_when_the_margin_is_violated(depth, margin):
    rng = numpy.random.default_rng(40 + depth)
    m = 3
    specs = TEMPLATE_SETS["second-order-mixed"][0]
    templates, weights, system = make_system(specs, m)
    data = []
    for _ in range(6):
        n = int(rng.integers(1, 6))
        atoms = random_atoms(rng, n)
        system.set_sentence(atoms)
        randomize_reachable(system, weights, n, m, rng, scale=0.5)
        gold = rng.integers(0, m, size=n).astype(numpy.int32)
        if rng.random() < 0.3 and n > 1:
            gold[int(rng.integers(n))] = -1       # partial annotation: followed, never learned
        data.append((atoms, gold))
    total = 0
    for _ in range(3):
        for atoms, gold in data:
            before = copy_weights(weights)
            system.set_sentence(atoms, gold)
            n_updates, n_errors, records = lookahead.train(system, depth, margin, record=True)
            expected, expected_errors, replayed = _replay_training(templates, before, atoms, gold, m, depth, margin)
            assert n_updates == len(records) == len(expected)
            assert n_errors == expected_errors
            for (t, g, p, v), (et, eg, ep, ev) in zip(records, expected):
                assert (t, list(g), list(p)) == (et, eg, ep)
                assert v == pytest.approx(ev, abs=1e-4)
                assert v <= margin + 1e-6
                assert gold[t] >= 0 and g[0] == gold[t] and p[0] != gold[t]
            got, want = weight_dict(weights), weight_dict(replayed)
            assert set(got) == set(want)
            for k in got:
                assert got[k] == pytest.approx(want[k], abs=1e-4)
            total += n_updates
            weights.next_example()
    assert total > 0


def test_margin_perceptron_without_record_returns_no_records():
    _, weights, system = make_system(TEMPLATE_SETS["first-order"][0], 2)
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 3), [1, 1, 1])
    n_updates, n_errors, records = lookahead.train(system, 1, 1.0)
    assert records is None
    assert n_updates == 3 and n_errors == 3   # all-zero weights: ties go to label 0


def test_margin_keeps_updating_until_the_gold_leads_by_the_margin():
    # With margin C, training on one sentence stops only once every gold decision wins by > C.
    rng = numpy.random.default_rng(7)
    m, n, depth, margin = 3, 4, 1, 2.0
    _, weights, system = make_system(TEMPLATE_SETS["second-order"][0], m)
    atoms = random_atoms(rng, n)
    gold = rng.integers(0, m, size=n).astype(numpy.int32)
    system.set_sentence(atoms, gold)
    for _ in range(100):
        n_updates, _, _ = lookahead.train(system, depth, margin)
        if n_updates == 0:
            break
    assert n_updates == 0
    for t in range(n):
        values = _values(system, gold[:t].tolist(), n, m, depth)
        for a in range(m):
            if a != gold[t]:
                assert values[gold[t]][0] - margin > values[a][0] - 1e-6
