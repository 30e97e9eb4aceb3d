"""Small random tagging problems and brute-force references for the core tests.

Everything here is plain Python over the public helpers of the Cython core (initial_state, step,
state_features, score_path, AveragedWeights.get), so the references do not share code with the
decoders they check.
"""
import itertools
import math
import pickle
from collections import Counter
from typing import Dict, Iterable, Optional, Sequence, Tuple

import numpy

from spacy_structperc._core.tagging import TagSystem
from spacy_structperc._core.templates import TemplateSet
from spacy_structperc._core.weights import AveragedWeights

ATOMS = ["w", "s"]

STATIC = [
    {"name": "w0", "parts": [[0, "w"]]},
    {"name": "w-1", "parts": [[-1, "w"]]},
    {"name": "w+1", "parts": [[1, "w"]]},
    {"name": "s0", "parts": [[0, "s"]]},
]
FIRST_ORDER = STATIC + [{"name": "t-1", "parts": [["hist", 1]]}]
FIRST_ORDER_MIXED = FIRST_ORDER + [{"name": "t-1,w0", "parts": [["hist", 1], [0, "w"]]}]
SECOND_ORDER = FIRST_ORDER + [{"name": "t-2,t-1", "parts": [["hist", 2], ["hist", 1]]}]
SECOND_ORDER_MIXED = SECOND_ORDER + [
    {"name": "t-2,t-1,w0", "parts": [["hist", 2], ["hist", 1], [0, "w"]]},
    {"name": "t-1,s0", "parts": [["hist", 1], [0, "s"]]},
]
THIRD_ORDER = SECOND_ORDER + [{"name": "t-3,t-2,t-1", "parts": [["hist", 3], ["hist", 2], ["hist", 1]]}]

TEMPLATE_SETS = {
    "first-order": (FIRST_ORDER, 1),
    "first-order-mixed": (FIRST_ORDER_MIXED, 1),
    "second-order": (SECOND_ORDER, 2),
    "second-order-mixed": (SECOND_ORDER_MIXED, 2),
}


def make_system(specs, m: int, n_buckets: int = 64, allowed_transitions=None,
                atom_names: Sequence[str] = ATOMS) -> Tuple[TemplateSet, AveragedWeights, TagSystem]:
    templates = TemplateSet(specs, list(atom_names))
    weights = AveragedWeights(m, n_buckets)
    return templates, weights, TagSystem(templates, weights, allowed_transitions)


def random_atoms(rng, n: int, n_cols: int = len(ATOMS), vocab: int = 6) -> numpy.ndarray:
    # Small vocabularies make features repeat inside and across sentences.
    return rng.integers(1, vocab + 1, size=(n, n_cols)).astype(numpy.uint64)


def walk_prefixes(system: TagSystem, n: int, m: int):
    """Yield (prefix, state) for every prefix of length < n, in depth-first order."""
    stack = [((), system.initial_state())]
    while stack:
        prefix, state = stack.pop()
        if len(prefix) >= n:
            continue
        yield prefix, state
        for a in range(m - 1, -1, -1):
            stack.append((prefix + (a,), system.step(state, a)))


def randomize_reachable(system: TagSystem, weights: AveragedWeights, n: int, m: int, rng,
                        scale: float = 1.0) -> None:
    """Give every (feature, class) pair reachable on the bound sentence a random weight."""
    seen = set()
    for _, state in walk_prefixes(system, n, m):
        for key in system.state_features(state).tolist():
            if key in seen:
                continue
            seen.add(key)
            for c in range(m):
                if weights.get(key, c) == 0.0:
                    weights.add(key, c, float(rng.normal(scale=scale)))


def phi(system: TagSystem, actions: Iterable[int], start: Sequence[int] = ()) -> Counter:
    """Phi of a path as a sparse {(key, class): count}; `start` is walked without counting."""
    state = system.initial_state()
    for a in start:
        state = system.step(state, a)
    out: Counter = Counter()
    for a in actions:
        for key in system.state_features(state).tolist():
            out[(key, int(a))] += 1
        state = system.step(state, int(a))
    return out


def delta_phi(system: TagSystem, gold, pred, start: Sequence[int] = ()) -> Dict[Tuple[int, int], int]:
    d = Counter(phi(system, gold, start))
    d.subtract(phi(system, pred, start))
    return {k: v for k, v in d.items() if v}


def dot(weights: AveragedWeights, vector: Dict[Tuple[int, int], float], averaged: bool = False) -> float:
    return float(sum(weights.get(key, c, averaged) * v for (key, c), v in vector.items()))


def path_allowed(seq, allowed=None, allowed_transitions=None) -> bool:
    m = None
    prev = None
    for i, a in enumerate(seq):
        if allowed is not None and not allowed[i][a]:
            return False
        if allowed_transitions is not None:
            m = len(allowed_transitions) - 1
            row = m if prev is None else prev
            if not allowed_transitions[row][a]:
                return False
        prev = a
    return True


def reference_score(system: TagSystem, weights: AveragedWeights, seq, allowed=None,
                    allowed_transitions=None) -> float:
    """w . Phi(seq) computed from the weight table, -inf for sequences the constraints forbid."""
    if not path_allowed(seq, allowed, allowed_transitions):
        return -math.inf
    return dot(weights, phi(system, seq))


def brute_force(system: TagSystem, weights: AveragedWeights, n: int, m: int, allowed=None,
                allowed_transitions=None) -> Tuple[Optional[Tuple[int, ...]], float]:
    best, best_score = None, -math.inf
    for seq in itertools.product(range(m), repeat=n):
        s = reference_score(system, weights, seq, allowed, allowed_transitions)
        if s > best_score:
            best, best_score = seq, s
    return best, best_score


def copy_weights(weights: AveragedWeights) -> AveragedWeights:
    return pickle.loads(pickle.dumps(weights))


def weight_dict(weights: AveragedWeights) -> Dict[Tuple[int, int], float]:
    keys, W, _, _ = weights.state_arrays()
    out = {}
    for key, row in zip(keys.tolist(), W.tolist()):
        for c, v in enumerate(row):
            if v:
                out[(key, c)] = v
    return out


def weight_change(before: AveragedWeights, after: AveragedWeights) -> Dict[Tuple[int, int], int]:
    """after - before, rounded to the integer counts a perceptron update adds."""
    b, a = weight_dict(before), weight_dict(after)
    out = {}
    for k in set(a) | set(b):
        d = round(a.get(k, 0.0) - b.get(k, 0.0))
        if d:
            out[k] = d
    return out


def bio_transitions(m: int) -> numpy.ndarray:
    """BIO-like constraints over labels [O, B-X, I-X, B-Y, I-Y, ...][:m]: I-T follows B-T or I-T."""
    allowed = numpy.ones((m + 1, m), dtype=bool)
    for c in range(m):
        if c > 0 and c % 2 == 0:   # an I- label
            allowed[:, c] = False
            allowed[c - 1, c] = True
            allowed[c, c] = True
    return allowed
