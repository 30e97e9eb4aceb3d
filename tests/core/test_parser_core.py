"""The arc-standard transition system (_core/arcstandard.pyx) under the shared decoders."""
import itertools
import math

from pathlib import Path

import numpy
import pytest
from spacy.util import load_config, registry

from spacy_structperc._core import beam, lookahead
from spacy_structperc._core.arcstandard import ArcStandardSystem, ParseTemplates
from spacy_structperc._core.weights import AveragedWeights, sparse_rows
from spacy_structperc.parser.features import parser_atoms, parser_templates

SHIFT, BREAK = 0, 1
SPECS = parser_templates()
ATOMS = parser_atoms(SPECS)


# With the sentence-boundary templates, which read the token before the buffer's front (q-1).
BOUNDARY_SPECS = parser_templates(boundary=True)
BOUNDARY_ATOMS = parser_atoms(BOUNDARY_SPECS)
# And with the casing templates, which read q0 with s0's tag and q-1's word.
CASING_SPECS = parser_templates(boundary=True, casing=True)
CASING_ATOMS = parser_atoms(CASING_SPECS)
# And the set configs/parser.cfg resolves to (its leave_out included).
_CONFIG = load_config(Path(__file__).resolve().parents[2] / "configs" / "parser.cfg")
CONFIG_SPECS = registry.resolve({"features": _CONFIG["components"]["parser"]["model"]["features"]})["features"]
FEATURE_SETS = {"plain": (SPECS, ATOMS), "boundary": (BOUNDARY_SPECS, BOUNDARY_ATOMS),
                "boundary and casing": (CASING_SPECS, CASING_ATOMS),
                "parser.cfg": (CONFIG_SPECS, parser_atoms(CONFIG_SPECS))}


def make_system(n_labels=2, label_candidates=0, specs=SPECS, atoms=ATOMS):
    weights = AveragedWeights(2 + 2 * n_labels, 1 << 12)
    return weights, ArcStandardSystem(ParseTemplates(specs, atoms), weights, n_labels, label_candidates)


def random_atoms(rng, n, atoms=ATOMS):
    return rng.integers(1, 5, size=(n, len(atoms))).astype(numpy.uint64)


def randomize(system, weights, rng, walks=30):
    """Random weights on every feature of the states random walks visit."""
    for _ in range(walks):
        state = system.initial_state()
        while not system.final(state):
            for key in system.state_features(state).tolist():
                for c in range(weights.n_classes):
                    weights.add(key, c, float(rng.normal()))
            valid = [a for a in range(system.n_actions) if system.is_valid_action(state, a)]
            state = system.step(state, int(rng.choice(valid)))


def random_tree(rng, n):
    """A random projective tree over n tokens (head -1 = root), built by random arc-standard moves."""
    heads = [-2] * n
    stack, buf = [], 0
    while buf < n or len(stack) > 1:
        moves = (["S"] if buf < n else []) + (["L", "R"] if len(stack) >= 2 else [])
        m = moves[rng.integers(len(moves))]
        if m == "S":
            stack.append(buf)
            buf += 1
        elif m == "L":
            heads[stack[-2]] = stack[-1]
            del stack[-2]
        else:
            heads[stack[-1]] = stack[-2]
            stack.pop()
    heads[stack[0]] = -1
    return numpy.array(heads, dtype=numpy.int32)


def check_tree(heads, allow_break):
    n = len(heads)
    roots = [i for i in range(n) if heads[i] == -1]
    assert roots and (allow_break or len(roots) == 1)
    for i in range(n):   # no cycles: every token reaches a root within n steps
        j, steps = i, 0
        while heads[j] != -1:
            j = heads[j]
            steps += 1
            assert steps <= n
    for d in range(n):   # projective
        h = heads[d]
        if h >= 0:
            for k in range(min(h, d) + 1, max(h, d)):
                j = k
                while j != -1 and j != h:
                    j = heads[j]
                assert j == h


def _values(system, state, depth):
    """Exhaustive search: the best score of any path of up to 1 + depth actions per first action."""
    def best(state, d):
        if d == 0 or system.final(state):
            return 0.0
        scores = system.action_scores(state)
        out = -math.inf
        for a in range(system.n_actions):
            if scores[a] != -math.inf:
                out = max(out, float(scores[a]) + best(system.step(state, a), d - 1))
        return out
    scores = system.action_scores(state)
    return {a: (float(scores[a]) + best(system.step(state, a), depth) if scores[a] != -math.inf else -math.inf)
            for a in range(system.n_actions)}


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("label_candidates", [0, 1])
@pytest.mark.parametrize("allow_break", [False, True])
def test_lookahead_decision_is_exhaustive_search_to_depth(depth, label_candidates, allow_break):
    rng = numpy.random.default_rng(100 * depth + 10 * label_candidates + allow_break)
    for _ in range(3):
        n = int(rng.integers(1, 6))
        weights, system = make_system(2, label_candidates)
        system.set_sentence(random_atoms(rng, n), allow_break=allow_break)
        randomize(system, weights, rng)
        decoded = lookahead.decode(system, depth).tolist()
        assert len(decoded) == 2 * n - 1
        state = system.initial_state()
        for a in decoded:
            values = _values(system, state, depth)
            top = max(values.values())
            assert values[a] == pytest.approx(top, rel=1e-5, abs=1e-4), (depth, values, a)
            state = system.step(state, a)
        check_tree(system.run(decoded)[0], allow_break)


@pytest.mark.parametrize("label_candidates", [0, 1, 2])
@pytest.mark.parametrize("allow_break", [False, True])
def test_greedy_takes_the_first_best_scored_action_exactly(label_candidates, allow_break):
    # Greedy decoding without lookahead skips scoring forced moves, the label pruning and the
    # score cache; it must still take, at every state, the first best action of the full
    # scores (action_scores, pruned as search sees them). Weights in {-1, 0, 1} make ties
    # common, where only the same order keeps the same choice.
    rng = numpy.random.default_rng(7 + 10 * label_candidates + allow_break)
    forced = 0
    for _ in range(20):
        n = int(rng.integers(1, 9))
        weights, system = make_system(4, label_candidates)
        system.set_sentence(random_atoms(rng, n), allow_break=allow_break)
        for _ in range(20):
            state = system.initial_state()
            while not system.final(state):
                for key in system.state_features(state).tolist():
                    for c in range(weights.n_classes):
                        weights.add(key, c, float(rng.integers(-1, 2)))
                valid = [a for a in range(system.n_actions) if system.is_valid_action(state, a)]
                state = system.step(state, int(rng.choice(valid)))
        state = system.initial_state()
        for a in lookahead.decode(system, 0).tolist():
            scores = system.action_scores(state)
            finite = [b for b in range(system.n_actions) if scores[b] != -math.inf]
            forced += len(finite) == 1
            assert a == max(finite, key=lambda b: (scores[b], -b)), (a, scores)
            state = system.step(state, a)
    assert forced > 0


@pytest.mark.parametrize("features", sorted(FEATURE_SETS))
def test_greedy_scores_reuse_the_queue_and_s0_sums_to_the_bit(features):
    # Greedy scoring keeps the partial sums of the templates that read only the queue (and
    # s0) and reuses them while the buffer (and s0) stay; states taken in any order, from
    # several sentences bound in turn, and weights changed between, must score to the bit as
    # the full sums do (action_scores, unpruned with label_candidates 0). q-1, the token
    # before the buffer's front, is the queue's: it moves with the buffer alone.
    spec_list, atom_names = FEATURE_SETS[features]
    specs = ParseTemplates(spec_list, atom_names)
    assert 0 < specs.n_queue < specs.n_s0_queue < specs.n
    rng = numpy.random.default_rng(11)
    weights, system = make_system(3, 0, spec_list, atom_names)
    reused = reused_moves = 0
    for s in range(20):
        n = int(rng.integers(2, 12))
        system.set_sentence(random_atoms(rng, n, atom_names), allow_break=bool(rng.integers(2)))
        if s % 2 == 0:   # else the same weights: only binding the sentence may reset the sums
            randomize(system, weights, rng, walks=3)
        for _ in range(6):
            state, last = system.initial_state(), None
            while not system.final(state):
                full = system.action_scores(state)
                greedy = system.argmax_scores(state)
                arcs = numpy.isfinite(full[2:]).any()
                if arcs:
                    assert numpy.array_equal(greedy, full), (greedy, full)
                    reused += last is not None and last != SHIFT
                else:
                    assert numpy.array_equal(greedy[:2], full[:2])
                    reused_moves += last is not None and last != SHIFT
                valid = [a for a in range(system.n_actions) if system.is_valid_action(state, a)]
                last = int(rng.choice(valid))
                state = system.step(state, last)
            if rng.integers(3) == 0:   # a changed weight must not be read from a kept sum
                key = int(system.state_features(system.initial_state())[0])
                weights.add(key, int(rng.integers(weights.n_classes)), float(rng.normal()))
    assert reused > 30 and reused_moves > 5


def test_q_minus_1_reads_the_token_before_the_buffer_front():
    # A template reading q-1 keys, at a state whose buffer front is b, as the same template
    # (same name and place: the same seed) reading q0 at a state whose front is b - 1; at
    # b = 0 it reads q-1's own NONE value, which no token's key equals.
    rng = numpy.random.default_rng(5)
    before = ParseTemplates([{"name": "x", "parts": [["q-1", "lower"]]}], ["lower"])
    front = ParseTemplates([{"name": "x", "parts": [["q0", "lower"]]}], ["lower"])
    assert before.n_queue == 1
    weights = AveragedWeights(4, 1 << 8)
    checked = 0
    for _ in range(20):
        n = int(rng.integers(1, 9))
        atoms = rng.permutation(numpy.arange(1, n + 1, dtype=numpy.uint64)).reshape((n, 1))
        systems = [ArcStandardSystem(t, weights, 1) for t in (before, front)]
        for system in systems:
            system.set_sentence(atoms, allow_break=True)
        keys_at = {}   # buffer position -> q0's key there
        seen = []
        state = systems[0].initial_state()
        while True:
            buf = int(numpy.frombuffer(state, dtype=numpy.int32, count=2)[1])
            keys_at[buf] = systems[1].state_features(state).tolist()
            seen.append((buf, systems[0].state_features(state).tolist()))
            if systems[0].final(state):
                break
            valid = [a for a in range(systems[0].n_actions) if systems[0].is_valid_action(state, a)]
            state = systems[0].step(state, int(rng.choice(valid)))
        for buf, keys in seen:
            if buf >= 1:
                assert keys == keys_at[buf - 1]
                checked += 1
            else:
                assert keys not in keys_at.values()
    assert checked > 50


@pytest.mark.parametrize("precision", ["float32", "float16", "int8"])
def test_greedy_scores_reuse_kept_sums_to_the_bit_on_loaded_tables(precision):
    # The same on a loaded (frozen) table, as a saved parser has: sparse, dense and widened
    # hot rows, dequantized while added.
    rng = numpy.random.default_rng(12)
    weights, system = make_system(3, 0)
    sentences = [random_atoms(rng, int(rng.integers(2, 12))) for _ in range(6)]
    for atoms in sentences:
        system.set_sentence(atoms)
        randomize(system, weights, rng, walks=3)
    keys, rows = weights.to_arrays(averaged=False)
    counts, cols, values, scales = sparse_rows(rows, precision)
    frozen = AveragedWeights(weights.n_classes, 1)
    frozen.load_frozen(keys, numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.uint32),
                       cols, values, scales)
    for budget in (0, 1 << 20):
        frozen.widen_hot_rows(budget)
        system = ArcStandardSystem(ParseTemplates(SPECS, ATOMS), frozen, 3, 0)
        for atoms in sentences:
            system.set_sentence(atoms)
            for _ in range(4):
                state = system.initial_state()
                while not system.final(state):
                    full = system.action_scores(state)
                    greedy = system.argmax_scores(state)
                    if numpy.isfinite(full[2:]).any():
                        assert numpy.array_equal(greedy, full)
                    else:
                        assert numpy.array_equal(greedy[:2], full[:2])
                    valid = [a for a in range(system.n_actions) if system.is_valid_action(state, a)]
                    state = system.step(state, int(rng.choice(valid)))


@pytest.mark.parametrize("allow_break", [False, True])
def test_every_decoded_parse_is_a_tree(allow_break):
    rng = numpy.random.default_rng(7)
    weights, system = make_system(3, 1)
    for _ in range(40):
        n = int(rng.integers(1, 25))
        system.set_sentence(random_atoms(rng, n), allow_break=allow_break)
        randomize(system, weights, rng, walks=2)
        for actions in (lookahead.decode(system, 1), beam.decode(system, 3)):
            heads, labels = system.run(actions)
            check_tree(heads, allow_break)
            assert ((labels >= 0) == (heads >= 0)).all()


def test_oracle_reproduces_random_projective_trees():
    rng = numpy.random.default_rng(3)
    weights, system = make_system(3)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        heads = random_tree(rng, n)
        labels = numpy.where(heads >= 0, rng.integers(0, 3, size=n), -1).astype(numpy.int32)
        system.set_sentence(random_atoms(rng, n), heads, labels)
        path = system.oracle_path()
        assert path is not None and len(path) == 2 * n - 1
        got_heads, got_labels = system.run(path)
        assert got_heads.tolist() == heads.tolist() and got_labels.tolist() == labels.tolist()


def test_oracle_breaks_between_sentences_and_refuses_nonprojective_trees():
    weights, system = make_system(1)
    atoms = numpy.ones((4, len(ATOMS)), dtype=numpy.uint64)
    two_sentences = numpy.array([-1, 0, 3, -1], dtype=numpy.int32)
    labels = numpy.array([-1, 0, 0, -1], dtype=numpy.int32)
    system.set_sentence(atoms, two_sentences, labels, allow_break=True)
    path = system.oracle_path()
    assert path is not None and BREAK in path.tolist()
    # Fixed boundaries: two roots in one span cannot be reached (one root per sentence).
    system.set_sentence(atoms, two_sentences, labels, allow_break=False)
    assert system.oracle_path() is None
    crossing = numpy.array([2, -1, 1, 0], dtype=numpy.int32)   # the arc 0 -> 3 spans 1, which 0 does not dominate
    system.set_sentence(atoms, crossing, numpy.zeros(4, dtype=numpy.int32))
    assert system.oracle_path() is None


def test_gold_action_survives_label_pruning():
    rng = numpy.random.default_rng(5)
    weights, system = make_system(6, 1)
    for _ in range(20):
        n = int(rng.integers(2, 12))
        heads = random_tree(rng, n)
        labels = numpy.where(heads >= 0, rng.integers(0, 6, size=n), -1).astype(numpy.int32)
        system.set_sentence(random_atoms(rng, n), heads, labels)
        randomize(system, weights, rng, walks=2)
        state = system.initial_state()
        while not system.final(state):
            g = system.gold(state)
            scores = system.action_scores(state)
            assert scores[g] != -math.inf
            # one label per direction plus the gold action at most
            assert (scores[2::2] != -math.inf).sum() <= 2 and (scores[3::2] != -math.inf).sum() <= 2
            state = system.step(state, g)


@pytest.mark.parametrize("method", ["early", "max-violation", "latest"])
def test_beam_updates_are_violations(method):
    rng = numpy.random.default_rng(11)
    weights, system = make_system(2, 0)
    n_updates = 0
    for _ in range(30):
        n = int(rng.integers(2, 10))
        heads = random_tree(rng, n)
        labels = numpy.where(heads >= 0, rng.integers(0, 2, size=n), -1).astype(numpy.int32)
        system.set_sentence(random_atoms(rng, n), heads, labels)
        randomize(system, weights, rng, walks=3)
        result = beam.train(system, 3, method)
        if result["updated"]:
            n_updates += 1
            assert result["violation"] <= 1e-5 and not result["invalid"]
    assert n_updates > 0


def test_lookahead_training_learns_a_tree():
    rng = numpy.random.default_rng(2)
    weights, system = make_system(2, 1)
    n = 8
    atoms = random_atoms(rng, n)
    heads = random_tree(rng, n)
    labels = numpy.where(heads >= 0, rng.integers(0, 2, size=n), -1).astype(numpy.int32)
    for _ in range(30):
        system.set_sentence(atoms, heads, labels)
        lookahead.train(system, 1, 1.0)
        weights.next_example()
    system.set_sentence(atoms)
    got_heads, got_labels = system.run(lookahead.decode(system, 1))
    assert got_heads.tolist() == heads.tolist() and got_labels.tolist() == labels.tolist()


def test_bad_bindings_are_refused():
    weights, system = make_system(2)
    atoms = numpy.ones((3, len(ATOMS)), dtype=numpy.uint64)
    with pytest.raises(ValueError):
        system.set_sentence(atoms, numpy.array([1, 1, -1], dtype=numpy.int32), numpy.zeros(3, dtype=numpy.int32))
    with pytest.raises(ValueError):
        system.set_sentence(atoms, numpy.array([5, -1, 1], dtype=numpy.int32), numpy.zeros(3, dtype=numpy.int32))
    with pytest.raises(ValueError):
        system.set_sentence(atoms, numpy.array([1, -1, 1], dtype=numpy.int32), numpy.array([0, -1, 9], dtype=numpy.int32))
    with pytest.raises(ValueError):
        ArcStandardSystem(ParseTemplates(SPECS, ATOMS), AveragedWeights(5), 2)
    with pytest.raises(ValueError):
        ParseTemplates([{"name": "x", "parts": [["s9", "tag"]]}], ATOMS)


def test_allowed_keys_in_any_order_allow_the_same_features():
    # Saved keys come sorted and are taken as they are; any other order (or repeats) is sorted.
    rng = numpy.random.default_rng(8)
    _, system = make_system()
    system.set_sentence(random_atoms(rng, 6))
    state = system.initial_state()
    state = system.step(state, SHIFT)
    state = system.step(state, SHIFT)
    every = system.state_features(state)
    assert len(every) > 4
    kept = numpy.unique(every)[::2]
    seen = []
    for keys in (kept, numpy.concatenate([kept[::-1], kept[:2]]), kept.tolist()):
        system.set_allowed_keys(keys)
        seen.append(sorted(system.state_features(state).tolist()))
    assert seen[0] == seen[1] == seen[2] == sorted(k for k in every.tolist() if k in set(kept.tolist()))
    system.set_allowed_keys(None)
    assert sorted(system.state_features(state).tolist()) == sorted(every.tolist())
