"""arc-hybrid transitions and their dynamic oracle (_core/arcstandard.pyx, system="arc-hybrid").

The oracle's cost of an action must equal what the action loses: the least loss over every
completion after it, minus the least loss over every completion before it, found by exhaustive
search on small random trees, at every configuration a random walk visits.
"""
import functools

import numpy
import pytest
from hypothesis import given, settings, strategies as st

from spacy_structperc._core import lookahead
from spacy_structperc._core.arcstandard import ArcStandardSystem, ParseTemplates
from spacy_structperc._core.weights import AveragedWeights
from spacy_structperc.parser.features import parser_atoms, parser_templates

from test_parser_core import random_atoms, random_tree, randomize

SHIFT, BREAK = 0, 1
SPECS = parser_templates(arc_hybrid=True)
ATOMS = parser_atoms(SPECS)


def make_system(n_labels=2, label_candidates=0, system="arc-hybrid"):
    weights = AveragedWeights(2 + 2 * n_labels, 1 << 12)
    return weights, ArcStandardSystem(ParseTemplates(SPECS, ATOMS), weights, n_labels,
                                      label_candidates, system)


def loss(system, state, gold_heads, gold_labels):
    """Known gold heads missed, and known labels wrong on a right head, of a final state."""
    heads, labels = system.tree(state)
    wrong = 0
    for d, g in enumerate(gold_heads):
        if g == -2:
            continue
        if heads[d] != g:
            wrong += 1
        elif g >= 0 and gold_labels[d] >= 0 and labels[d] != gold_labels[d]:
            wrong += 1
    return wrong


def least_loss(system, gold_heads, gold_labels):
    """The least loss over every completion of a state (exhaustive, memoised on the state)."""
    @functools.lru_cache(maxsize=None)
    def best(state):
        if system.final(state):
            return loss(system, state, gold_heads, gold_labels)
        return min(best(system.step(state, a)) for a in range(system.n_actions)
                   if system.is_valid_action(state, a))
    return best


def walk_states(system, rng, n_walks):
    """The configurations random walks from the initial state visit (each once)."""
    seen = {}
    for _ in range(n_walks):
        state = system.initial_state()
        while not system.final(state):
            seen.setdefault(state, None)
            valid = [a for a in range(system.n_actions) if system.is_valid_action(state, a)]
            state = system.step(state, int(rng.choice(valid)))
    return list(seen)


def random_sentences_tree(rng, n):
    """Two or more sentences' trees side by side (several roots), for BREAK."""
    cut = int(rng.integers(1, n))
    first = random_tree(rng, cut)
    second = random_tree(rng, n - cut)
    second = numpy.where(second >= 0, second + cut, second)
    return numpy.concatenate([first, second]).astype(numpy.int32)


def check_costs(system, heads, labels, rng, n_walks=12):
    best = least_loss(system, tuple(heads.tolist()), tuple(labels.tolist()))
    for state in walk_states(system, rng, n_walks):
        costs = system.costs(state)
        here = best(state)
        for a in range(system.n_actions):
            if not system.is_valid_action(state, a):
                assert costs[a] == -1, (a, system.stack_of(state))
                continue
            assert costs[a] == best(system.step(state, a)) - here, (
                a, system.stack_of(state), heads.tolist(), labels.tolist())
        assert min(c for c in costs if c >= 0) == 0   # some action keeps the least loss


@pytest.mark.parametrize("allow_break", [False, True])
def test_cost_is_the_loss_an_action_adds_over_every_completion(allow_break):
    rng = numpy.random.default_rng(7)
    weights, system = make_system(n_labels=2)
    system.eager_break = False   # the arc loss alone (see the test of eager_break below)
    for trial in range(40):
        n = int(rng.integers(2 if allow_break else 1, 7))
        heads = random_sentences_tree(rng, n) if allow_break and n > 1 and trial % 2 else random_tree(rng, n)
        labels = rng.integers(0, 2, size=n).astype(numpy.int32)
        labels[heads < 0] = -1
        system.set_sentence(random_atoms(rng, n), heads, labels, allow_break)
        check_costs(system, heads, labels, rng)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2 ** 32 - 1), st.booleans())
def test_cost_with_missing_heads_and_labels(n, seed, allow_break):
    """Missing heads (-2) and labels (-1) are no arcs: they never cost anything."""
    rng = numpy.random.default_rng(seed)
    weights, system = make_system(n_labels=2)
    system.eager_break = False
    heads = random_tree(rng, n)
    labels = rng.integers(0, 2, size=n).astype(numpy.int32)
    labels[heads < 0] = -1
    heads = numpy.where(rng.random(n) < 0.3, -2, heads).astype(numpy.int32)
    labels = numpy.where(rng.random(n) < 0.3, -1, labels).astype(numpy.int32)
    system.set_sentence(random_atoms(rng, n), heads, labels, allow_break)
    check_costs(system, heads, labels, rng, n_walks=6)


def test_eager_break_makes_break_the_only_correct_action_after_a_complete_sentence():
    """With eager_break (the default), once s0 is a finished sentence's root BREAK is the only
    zero-cost action; without it SHIFT costs nothing too (the arc loss cannot tell them apart)."""
    rng = numpy.random.default_rng(2)
    weights, system = make_system(n_labels=2)
    n_checked = 0
    for _ in range(60):
        n = int(rng.integers(2, 8))
        heads = random_sentences_tree(rng, n)
        labels = numpy.where(heads < 0, -1, 0).astype(numpy.int32)
        system.set_sentence(random_atoms(rng, n), heads, labels, True)
        for state in walk_states(system, rng, 6):
            stack, buf = system.stack_of(state)
            done = (len(stack) == 1 and buf < n and heads[stack[0]] == -1
                    and not any(heads[k] == stack[0] for k in range(buf, n)))
            if not done:
                continue
            n_checked += 1
            system.eager_break = True
            costs = system.costs(state)
            system.eager_break = False
            plain = system.costs(state)
            assert costs[BREAK] == 0 and costs[SHIFT] == plain[SHIFT] + 1
            assert min(c for a, c in enumerate(costs) if c >= 0 and a != BREAK) >= 1
    assert n_checked > 10


def test_static_oracle_reproduces_random_projective_trees():
    rng = numpy.random.default_rng(3)
    weights, system = make_system(n_labels=3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        heads = random_tree(rng, n)
        labels = rng.integers(0, 3, size=n).astype(numpy.int32)
        labels[heads < 0] = -1
        system.set_sentence(random_atoms(rng, n), heads, labels)
        path = system.oracle_path()
        assert path is not None and len(path) == 2 * n - 1
        # every action on the path costs nothing
        state = system.initial_state()
        for a in path:
            assert system.costs(state)[a] == 0
            state = system.step(state, int(a))


def test_left_arc_attaches_s0_to_the_buffer_front():
    weights, system = make_system(n_labels=1)
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 3))
    state = system.step(system.initial_state(), SHIFT)
    assert system.is_valid_action(state, 2)        # LEFT-ARC with one item on the stack
    assert not system.is_valid_action(state, 3)    # RIGHT-ARC needs two
    state = system.step(state, 2)
    assert system.stack_of(state) == ([], 1)
    heads, _ = system.tree(state)
    assert heads.tolist()[0] == 1
    # q0's new left child is a feature position
    assert system.state_features(state).shape[0] > 0


@pytest.mark.parametrize("allow_break", [False, True])
def test_decoded_parses_are_trees(allow_break):
    rng = numpy.random.default_rng(5)
    weights, system = make_system(n_labels=2)
    for _ in range(30):
        n = int(rng.integers(1, 15))
        system.set_sentence(random_atoms(rng, n), allow_break=allow_break)
        randomize(system, weights, rng, walks=3)
        heads, labels = system.run(lookahead.decode(system, 0))
        roots = int((heads == -1).sum())
        assert roots >= 1 and (allow_break or roots == 1)
        for d in range(n):   # no cycles
            seen, h = set(), d
            while h != -1:
                assert h not in seen
                seen.add(h)
                h = heads[h]


@pytest.mark.parametrize("system_name", ["arc-hybrid", "arc-standard"])
def test_training_with_exploration_learns_trees_and_is_repeatable(system_name):
    rng = numpy.random.default_rng(11)
    data = []
    for _ in range(12):
        n = int(rng.integers(3, 9))
        heads = random_tree(rng, n)
        labels = rng.integers(0, 2, size=n).astype(numpy.int32)
        labels[heads < 0] = -1
        # distinct atoms: each sentence's words are its own, so its tree can be learnt
        data.append((rng.integers(1, 10 ** 6, size=(n, len(ATOMS))).astype(numpy.uint64), heads, labels))

    def train(explore):
        weights, system = make_system(n_labels=2, system=system_name)
        for epoch in range(15):
            for i, (atoms, heads, labels) in enumerate(data):
                system.set_sentence(atoms, heads, labels)
                lookahead.train(system, 0, 0.0, dynamic=True, explore=explore, seed=epoch * 100 + i)
                weights.next_example()
        weights.set_use_averages(True)   # the averaged weights, as the parser predicts with
        out = []
        for atoms, heads, labels in data:
            system.set_sentence(atoms)
            out.append(system.run(lookahead.decode(system, 0)))
        return out

    first = train(0.9)
    assert all((h == g[1]).all() and (l == g[2]).all() for (h, l), g in zip(first, data))
    again = train(0.9)
    assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(first, again))


def test_a_system_without_costs_cannot_train_with_exploration():
    """The tagger's transitions have no costs: exploration needs a dynamic oracle."""
    from structperc_problems import TEMPLATE_SETS, make_system as make_tag_system, random_atoms as tag_atoms
    _, _, tags = make_tag_system(TEMPLATE_SETS["first-order"][0], 3)
    tags.set_sentence(tag_atoms(numpy.random.default_rng(0), 3))
    assert tags.costs(tags.initial_state()) is None
    with pytest.raises(ValueError, match="dynamic oracle"):
        lookahead.train(tags, 0, 0.0, dynamic=True)
    with pytest.raises(ValueError, match="system must be"):
        make_system(system="arc-eager")


@pytest.mark.parametrize("system", ["arc-standard", "arc-hybrid"])
def test_label_sets_hold_the_labels_of_the_children_built(system):
    """ls / rs (Zhang and Nivre 2011): a template over s0's label sets changes exactly when s0
    gains a child with a label not yet in the set, on the side the set says."""
    specs = [{"name": "s0ls", "parts": [["s0", "ls"]]}, {"name": "s0rs", "parts": [["s0", "rs"]]}]
    weights = AveragedWeights(2 + 2 * 3, 1 << 10)
    parse = ArcStandardSystem(ParseTemplates(specs, ["lower"]), weights, 3, 0, system)
    parse.set_sentence(numpy.ones((4, 1), dtype=numpy.uint64))
    left, right = (lambda label: 2 + 2 * label), (lambda label: 3 + 2 * label)
    state = parse.step(parse.step(parse.initial_state(), SHIFT), SHIFT)   # stack [0, 1]
    empty = parse.state_features(state)
    if system == "arc-standard":
        state = parse.step(state, left(2))        # 0 <- 1: s0 = 1 has left child label 2
    else:
        state = parse.step(parse.step(state, left(2)), SHIFT)   # 1 <- 2, then s0 = 2
    with_left = parse.state_features(state)
    assert with_left[0] != empty[0] and with_left[1] == empty[1]
    state = parse.step(parse.step(state, SHIFT), right(1))   # s0 gets a right child, label 1
    both = parse.state_features(state)
    assert both[0] == with_left[0] and both[1] != with_left[1]
