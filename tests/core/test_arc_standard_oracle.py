"""arc-standard's dynamic oracle (Goldberg, Sartorio and Satta 2014; _core/arcstandard.pyx,
_standard_costs and _most_kept).

arc-standard is not arc-decomposable: an action's cost is not a count of arcs it rules out one
by one, but the change in the least loss over every completion. That least loss comes from a
table over the live tokens; here it must equal exhaustive search, on small random trees (one
sentence or several, with BREAK; with missing heads and labels), at every configuration random
walks visit, for every action.
"""
import numpy
import pytest
from hypothesis import given, settings, strategies as st

from test_arc_hybrid import check_costs, make_system, random_sentences_tree, walk_states
from test_parser_core import random_atoms, random_tree, randomize

SHIFT, BREAK = 0, 1


def standard(n_labels=2):
    return make_system(n_labels=n_labels, system="arc-standard")


def static_path_states(system, rng, n_trees, sizes, sentences):
    """(n, heads, state, action) along the static oracle's path of random trees (of several
    sentences, with BREAK, when `sentences`) of sizes[0] to sizes[1] - 1 tokens, labels all 0."""
    for _ in range(n_trees):
        n = int(rng.integers(*sizes))
        heads = random_sentences_tree(rng, n) if sentences else random_tree(rng, n)
        labels = numpy.where(heads < 0, -1, 0).astype(numpy.int32)
        system.set_sentence(random_atoms(rng, n), heads, labels, sentences)
        state = system.initial_state()
        for a in system.oracle_path():
            yield n, heads, state, int(a)
            state = system.step(state, int(a))


@pytest.mark.parametrize("allow_break", [False, True])
def test_cost_is_the_loss_an_action_adds_over_every_completion(allow_break):
    rng = numpy.random.default_rng(17)
    weights, system = standard()
    for trial in range(30):
        n = int(rng.integers(2 if allow_break else 1, 8))
        heads = random_sentences_tree(rng, n) if allow_break and trial % 2 else random_tree(rng, n)
        labels = rng.integers(0, 2, size=n).astype(numpy.int32)
        labels[heads < 0] = -1
        system.set_sentence(random_atoms(rng, n), heads, labels, allow_break)
        check_costs(system, heads, labels, rng, n_walks=10)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2 ** 32 - 1), st.booleans())
def test_cost_with_missing_heads_and_labels(n, seed, allow_break):
    """Missing heads (-2) and labels (-1) are no arcs: they never cost anything."""
    rng = numpy.random.default_rng(seed)
    weights, system = standard()
    heads = random_sentences_tree(rng, n) if allow_break and n > 1 else random_tree(rng, n)
    labels = rng.integers(0, 2, size=n).astype(numpy.int32)
    labels[heads < 0] = -1
    heads = numpy.where(rng.random(n) < 0.3, -2, heads).astype(numpy.int32)
    labels = numpy.where(rng.random(n) < 0.3, -1, labels).astype(numpy.int32)
    system.set_sentence(random_atoms(rng, n), heads, labels, allow_break)
    check_costs(system, heads, labels, rng, n_walks=6)


def test_after_a_finished_sentence_only_break_is_free():
    """Once the stack holds one finished sentence, SHIFT would join the next sentence to it by an
    arc that is not gold: arc-standard's own costs make BREAK the only correct action (arc-hybrid
    needs eager_break for that)."""
    weights, system = standard()
    n_checked = 0
    for n, heads, state, _ in static_path_states(system, numpy.random.default_rng(4), 40, (2, 9), True):
        stack, buf = system.stack_of(state)
        if len(stack) == 1 and buf < n and heads[stack[0]] == -1 and not any(
                heads[k] == stack[0] for k in range(buf, n)) and all(
                heads[k] != buf for k in range(buf)):
            costs = system.costs(state)
            assert costs[BREAK] == 0 and costs[SHIFT] >= 1
            n_checked += 1
    assert n_checked > 10


def test_the_static_oracle_path_costs_nothing():
    """The static oracle's derivation of a projective tree loses no arc: every action on it is
    one of the dynamic oracle's correct actions (the dynamic oracle is complete)."""
    rng = numpy.random.default_rng(3)
    weights, system = standard(n_labels=3)
    for _ in range(150):
        n = int(rng.integers(1, 14))
        heads = random_tree(rng, n)
        labels = rng.integers(0, 3, size=n).astype(numpy.int32)
        labels[heads < 0] = -1
        system.set_sentence(random_atoms(rng, n), heads, labels)
        state = system.initial_state()
        for a in system.oracle_path():
            assert system.costs(state)[a] == 0
            state = system.step(state, int(a))


def test_long_documents_cost_the_same_as_their_sentences():
    """With BREAK, the oracle reads only the tokens up to the next sentence no live arc crosses:
    a sentence's costs are the same with more sentences after it (a long Doc stays cheap)."""
    rng = numpy.random.default_rng(8)
    weights, system = standard()
    for _ in range(20):
        first = random_tree(rng, int(rng.integers(2, 7)))
        rest = random_sentences_tree(rng, int(rng.integers(2, 12)))
        n1 = len(first)
        heads = numpy.concatenate([first, numpy.where(rest >= 0, rest + n1, rest)]).astype(numpy.int32)
        labels = numpy.where(heads < 0, -1, 1).astype(numpy.int32)
        atoms = random_atoms(rng, len(heads))
        walks = []
        system.set_sentence(atoms[:n1], first, labels[:n1], True)
        for _ in range(4):   # random walks inside the first sentence, which then ends
            state, actions = system.initial_state(), []
            while not system.final(state):
                valid = [a for a in range(system.n_actions) if system.is_valid_action(state, a)]
                actions.append(int(rng.choice(valid)))
                state = system.step(state, actions[-1])
            walks.append(actions)
        for actions in walks:
            system.set_sentence(atoms[:n1], first, labels[:n1], True)
            alone, state = [], system.initial_state()
            for a in actions:
                alone.append(system.costs(state))
                state = system.step(state, a)
            system.set_sentence(atoms, heads, labels, True)
            state = system.initial_state()
            for a, costs in zip(actions, alone):
                both = system.costs(state)
                # BREAK is valid only with words left, and the first sentence alone has none
                # at its end; every other cost is the first sentence's own.
                keep = [k for k in range(system.n_actions) if k != BREAK and costs[k] >= 0]
                assert (both[keep] == costs[keep]).all()
                state = system.step(state, a)


def test_exploration_keeps_the_gold_labelled_arc_through_label_pruning():
    """With label_candidates = 1, scoring keeps each direction's best label and the static
    oracle's action. Off the gold path, a gold arc between s0 and s1 may cost nothing while the
    static oracle would not take it: training with exploration (keep_gold_arcs) keeps it under its
    gold label, so the labels are learnt off the gold path too. Without the flag it is pruned in
    some of these states."""
    rng = numpy.random.default_rng(21)
    weights, system = make_system(n_labels=4, label_candidates=1, system="arc-standard")
    pruned = kept = 0
    for _ in range(30):
        n = int(rng.integers(3, 9))
        heads = random_tree(rng, n)
        labels = rng.integers(0, 4, size=n).astype(numpy.int32)
        labels[heads < 0] = -1
        system.set_sentence(random_atoms(rng, n), heads, labels)
        randomize(system, weights, rng, walks=2)
        for state in walk_states(system, rng, 4):
            stack, _ = system.stack_of(state)
            if len(stack) < 2:
                continue
            s1, s0 = stack[-2], stack[-1]
            if heads[s1] == s0:
                arc = 2 + 2 * int(labels[s1])
            elif heads[s0] == s1:
                arc = 3 + 2 * int(labels[s0])
            else:
                continue
            if system.costs(state)[arc] != 0:
                continue
            system.keep_gold_arcs = True
            assert system.action_scores(state)[arc] != -numpy.inf
            kept += 1
            system.keep_gold_arcs = False
            pruned += system.action_scores(state)[arc] == -numpy.inf
    assert kept > 20 and pruned > 0


def _least_and_best(costs, values):
    """What training with exploration reads of the costs: the least cost over the candidate
    actions (finite value) and the best-valued action of that cost (the lower one on ties)."""
    ok = [a for a in range(len(values)) if values[a] != -numpy.inf and costs[a] >= 0]
    if not ok:
        return None, None
    least = min(costs[a] for a in ok)
    best = None
    for a in ok:
        if costs[a] == least and (best is None or values[a] > values[best]):
            best = a
    return least, best


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans())
def test_ranked_costs_tell_training_what_every_cost_tells_it(n, seed, allow_break, missing):
    """ranked_costs skips the tables of moves that cannot hold the best-valued correct action:
    what it does give equals action_costs, and the least cost, the best-valued action of that
    cost and the best action's own cost come out the same, whatever the values."""
    rng = numpy.random.default_rng(seed)
    weights, system = standard(n_labels=3)
    heads = random_sentences_tree(rng, n) if allow_break and n > 1 else random_tree(rng, n)
    labels = rng.integers(0, 3, size=n).astype(numpy.int32)
    labels[heads < 0] = -1
    if missing:
        heads = numpy.where(rng.random(n) < 0.3, -2, heads).astype(numpy.int32)
        labels = numpy.where(rng.random(n) < 0.3, -1, labels).astype(numpy.int32)
    system.set_sentence(random_atoms(rng, n), heads, labels, allow_break)
    for state in walk_states(system, rng, 4):
        full = system.costs(state)
        for _ in range(4):
            # Values with ties and non-candidates (-inf), as a model's scores can have.
            values = rng.integers(-3, 4, size=system.n_actions).astype(numpy.float64)
            values[rng.random(system.n_actions) < 0.2] = -numpy.inf
            ranked = system.ranked(state, values)
            given_ = ranked >= 0
            assert (ranked[given_] == full[given_]).all()
            assert _least_and_best(ranked, values) == _least_and_best(full, values)
            finite = numpy.flatnonzero(values != -numpy.inf)
            if len(finite):
                top = int(finite[numpy.argmax(values[finite])])
                assert ranked[top] == full[top]


def test_ranked_costs_skip_tables():
    """The point of ranked_costs: when the best action costs nothing, the other moves' costs are
    not computed."""
    weights, system = standard()
    skipped = 0
    for _, _, state, a in static_path_states(system, numpy.random.default_rng(8), 20, (3, 8), False):
        values = numpy.full(system.n_actions, -1.0)
        values[a] = 1.0   # the model prefers the static oracle's action: it costs nothing
        ranked, full = system.ranked(state, values), system.costs(state)
        assert ranked[a] == 0
        skipped += int(((full >= 0) & (ranked < 0)).sum())
    assert skipped > 0
