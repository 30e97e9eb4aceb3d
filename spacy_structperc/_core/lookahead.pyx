# cython: infer_types=True
"""Greedy history-based decoding with depth-D lookahead and the margin perceptron.

tsuruoka2011 Fig. 2 (SEARCH) and Fig. 3 (UPDATEWEIGHT), written against the TransitionSystem
interface so taggers, chunkers and parsers share it. A decision's value is the score of the best
path of 1 + D actions that starts with it; scores add up along a path, which is the incremental
form of w . Phi(leaf state) minus the shared history.
"""
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.math cimport INFINITY
from cpython.exc cimport PyErr_CheckSignals
import numpy

from .typedefs cimport weight_t
from .transition cimport TransitionSystem, update_paths


cdef class Lookahead:
    def __cinit__(self, TransitionSystem system, int depth):
        if depth < 0:
            raise ValueError(f"lookahead depth must be >= 0, got {depth}")
        self.system = system
        self.depth = depth
        self.gap = -1.0   # search every state
        L = depth + 2
        self.scores = <weight_t*>malloc(L * system.n_actions * sizeof(weight_t))
        self.paths = <int*>malloc(L * (depth + 1) * sizeof(int))
        self.root_paths = <int*>malloc(system.n_actions * (depth + 1) * sizeof(int))
        self.values = <double*>malloc(system.n_actions * sizeof(double))
        self.lengths = <int*>malloc(system.n_actions * sizeof(int))
        if not (self.scores and self.paths and self.root_paths and self.values and self.lengths):
            raise MemoryError()
        self.reserve()

    cdef int reserve(self) except -1 nogil:
        """Grow the state buffers to the system's current state size (a parser's grows with the
        bound span)."""
        cdef size_t size = self.system.state_size
        if self.states != NULL and size <= self.state_capacity:
            return 0
        free(self.states); free(self.state); free(self.scratch)
        self.states = <char*>malloc((self.depth + 2) * size + 1)
        self.state = <char*>malloc(size + 1)
        self.scratch = <char*>malloc(2 * size + 1)
        if not (self.states and self.state and self.scratch):
            with gil:
                raise MemoryError()
        self.state_capacity = size
        return 0

    def __dealloc__(self):
        free(self.states); free(self.scores); free(self.paths)
        free(self.root_paths); free(self.values); free(self.scratch)
        free(self.lengths); free(self.state)

    cdef double search(self, int level, const void* state, int depth, int* path_len) noexcept nogil:
        """SEARCH(d, S): the best score over `depth` further actions from `state`.

        The best continuation is written to paths[level]; its length (shorter than `depth` when
        the state becomes final) to path_len.
        """
        cdef int D1 = self.depth + 1
        path_len[0] = 0
        if depth == 0 or self.system.is_final(state):
            return 0.0
        cdef weight_t* scores = &self.scores[level * self.system.n_actions]
        cdef void* child = &self.states[(level + 1) * self.system.state_size]
        cdef int a, child_len
        cdef double v, best = -INFINITY
        self.system.score(state, scores)
        if depth == 1:
            # The last level needs no successor states: its value is the best action score.
            # (A parser state is a few kB, so the copies this saves are not free.)
            for a in range(self.system.n_actions):
                if scores[a] != -INFINITY and scores[a] > best:
                    best = scores[a]
                    self.paths[level * D1] = a
                    path_len[0] = 1
            return best
        for a in range(self.system.n_actions):
            if scores[a] == -INFINITY:
                continue
            memcpy(child, state, self.system.state_size)
            self.system.transition(child, a)
            v = scores[a] + self.search(level + 1, child, depth - 1, &child_len)
            if v > best:
                best = v
                self.paths[level * D1] = a
                memcpy(&self.paths[level * D1 + 1], &self.paths[(level + 1) * D1],
                       child_len * sizeof(int))
                path_len[0] = 1 + child_len
        return best

    cdef int evaluate(self, const void* state, int* lengths, double floor) noexcept nogil:
        """Value every first action from `state` that scores above `floor` (-inf when invalid or
        not above it); return how many are valid."""
        cdef int D1 = self.depth + 1
        cdef weight_t* scores = &self.scores[0]
        cdef void* child = &self.states[self.system.state_size]
        cdef int a, n_valid = 0, tail
        self.system.score(state, scores)
        for a in range(self.system.n_actions):
            self.values[a] = -INFINITY
            lengths[a] = 0
            if scores[a] == -INFINITY:
                continue
            n_valid += 1
            if scores[a] <= floor:
                continue
            self.root_paths[a * D1] = a
            lengths[a] = 1
            if self.depth == 0:
                # Plain greedy: the value is the action's own score, no successor to search.
                self.values[a] = scores[a]
                continue
            memcpy(child, state, self.system.state_size)
            self.system.transition(child, a)
            # The scores buffer of level 0 is reused by SEARCH at level 1 onwards only from
            # level 1's slot, so scores[a] is still intact here.
            self.values[a] = scores[a] + self.search(1, child, self.depth, &tail)
            memcpy(&self.root_paths[a * D1 + 1], &self.paths[D1], tail * sizeof(int))
            lengths[a] = 1 + tail
        return n_valid

    cdef int greedy(self, int* out) noexcept nogil:
        """Greedy decoding of the bound input (call reserve() after binding it): the actions go
        to out; returns how many were taken, fewer than max_steps() when no action was valid."""
        cdef int n_steps = self.system.max_steps()
        cdef int t = 0, a
        self.system.init_state(self.state)
        while not self.system.is_final(self.state) and t < n_steps:
            # The same actions as evaluating every state: a forced action is the only valid
            # one whatever its value, and without lookahead a value is the action's score.
            a = self.system.forced_action(self.state)
            if a < 0 and (self.depth == 0 or self.gap >= 0.0):
                self.system.score_argmax(self.state, self.scores)
                a = _argmax_scores(self.scores, self.system.n_actions)
                if self.depth > 0 and a >= 0 and _n_above(self.scores, self.system.n_actions,
                                                           self.scores[a] - self.gap) > 1:
                    # A close call: the actions within the gap of the best are valued by the
                    # lookahead search (selective search, as in Choi and McCallum's selectional
                    # branching); the others are not searched.
                    self.evaluate(self.state, self.lengths, self.scores[a] - self.gap)
                    a = _argmax(self.values, self.system.n_actions, -1, 0.0)
            elif a < 0:
                self.evaluate(self.state, self.lengths, -INFINITY)
                a = _argmax(self.values, self.system.n_actions, -1, 0.0)
            if a < 0:
                break
            out[t] = a
            t += 1
            self.system.transition(self.state, a)
        return t


cdef int _argmax_scores(const weight_t* scores, int n) noexcept nogil:
    # _argmax(values, n, -1, 0.0) for values that are these scores.
    cdef int a, best_a = -1
    cdef weight_t best = -INFINITY
    for a in range(n):
        if scores[a] != -INFINITY and (best_a < 0 or scores[a] > best):
            best = scores[a]
            best_a = a
    return best_a


cdef int _n_above(const weight_t* scores, int n, double floor) noexcept nogil:
    # How many actions score above floor (invalid ones score -inf).
    cdef int a, k = 0
    for a in range(n):
        k += scores[a] > floor
    return k


cdef int _argmax(const double* values, int n, int skip, double penalty) noexcept nogil:
    cdef int a, best_a = -1
    cdef double v, best = -INFINITY
    for a in range(n):
        v = values[a]
        if v == -INFINITY:
            continue
        if a == skip:
            v -= penalty
        if best_a < 0 or v > best:
            best = v
            best_a = a
    return best_a


def search_gap(gap):
    """Lookahead.gap for a gap setting: None (every action of every state is searched) as -1,
    or the gap itself, which must be >= 0."""
    if gap is None:
        return -1.0
    if not float(gap) >= 0.0:
        raise ValueError(f"gap must be None or >= 0, got {gap}")
    return float(gap)


def decode(TransitionSystem system, int depth=0, gap=None):
    """Greedy decoding with depth-`depth` lookahead; returns the action sequence. gap: None, or
    search ahead only among the actions that score within gap of the best (a state where only
    the best does takes it unsearched)."""
    cdef Lookahead la = Lookahead(system, depth)
    la.gap = search_gap(gap)
    cdef int n_steps = system.max_steps()
    out = numpy.zeros((n_steps,), dtype=numpy.int32)
    cdef int[::1] o = out
    cdef int t
    with nogil:
        t = la.greedy(&o[0] if n_steps else NULL)
    if t < n_steps:
        raise ValueError(NO_ACTION.format(t=t))
    return out


NO_ACTION = "no valid action after {t} steps: the constraints admit no complete analysis"


def train(TransitionSystem system, int depth=0, float margin=0.0, bint record=False,
          bint dynamic=False, double explore=0.0, unsigned long long seed=0):
    """One pass of the lookahead margin perceptron (tsuruoka2011 Fig. 3) over the bound input.

    Decisions follow the gold history (the oracle's action); where the gold action is unknown
    (-1) the model's own choice is followed and no update is made. Returns
    (n_updates, n_errors, records): errors count decisions whose unpenalised argmax was wrong;
    with `record`, records holds (correct_path, predicted_path, w . (Phi(c) - Phi(p))) per update,
    measured before the update, for the guarantees the tests check.

    dynamic: training with exploration (Goldberg and Nivre 2012, 2013) on a system with a dynamic
    oracle (action_costs). The correct actions of a state are those of least cost, and the gold
    action is the best-valued of them; an update is made when the (margin-penalised) best action
    is not one of them. The next state follows the model's own best action with probability
    `explore` (drawn from `seed`, so a pass is repeatable), else the gold action: the parser
    learns what to do after its own mistakes.
    """
    cdef Lookahead la = Lookahead(system, depth)
    cdef int n_steps = system.max_steps()
    cdef int D1 = depth + 1
    cdef int* lengths = <int*>malloc(system.n_actions * sizeof(int))
    cdef char* state = <char*>malloc(system.state_size)
    cdef char* scratch = <char*>malloc(2 * system.state_size + 1)
    cdef int t = 0, a_gold, a_star, a_plain, n_updates = 0, n_errors = 0, k, a, least
    cdef int* costs = <int*>malloc(system.n_actions * sizeof(int))
    cdef unsigned long long rng = seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL
    cdef double v_gold
    records = [] if record else None
    if not (lengths and state and scratch and costs):
        free(lengths); free(state); free(scratch); free(costs)
        raise MemoryError()
    try:
        system.init_state(state)
        while not system.is_final(state) and t < n_steps:
            if t % 256 == 0:
                PyErr_CheckSignals()
            with nogil:
                la.evaluate(state, lengths, -INFINITY)
                least = -1
                if dynamic:
                    # Without a margin, the penalised best action is the best one, whose cost
                    # ranked_costs always gives: the costs of actions that cannot matter may be
                    # left out.
                    if not (system.ranked_costs(state, costs, la.values) if margin == 0.0
                            else system.action_costs(state, costs)):
                        with gil:
                            raise ValueError("this transition system has no dynamic oracle")
                    a_gold = -1
                    for a in range(system.n_actions):
                        if la.values[a] != -INFINITY and costs[a] >= 0 and (least < 0 or costs[a] < least):
                            least = costs[a]
                    for a in range(system.n_actions):
                        if la.values[a] != -INFINITY and costs[a] == least and (
                                a_gold < 0 or la.values[a] > la.values[a_gold]):
                            a_gold = a
                else:
                    a_gold = system.gold_action(state)
                    if a_gold >= 0 and la.values[a_gold] == -INFINITY:
                        a_gold = -1   # the gold action is invalid here: nothing to learn from it
                a_plain = _argmax(la.values, system.n_actions, -1, 0.0)
                a_star = _argmax(la.values, system.n_actions, a_gold, margin) if a_gold >= 0 else a_plain
            if a_plain < 0:
                break
            if a_gold >= 0 and (costs[a_plain] != least if dynamic else a_plain != a_gold):
                n_errors += 1
            if a_gold >= 0 and a_star != a_gold and not (dynamic and costs[a_star] == least):
                if record:
                    g = [la.root_paths[a_gold * D1 + k] for k in range(lengths[a_gold])]
                    p = [la.root_paths[a_star * D1 + k] for k in range(lengths[a_star])]
                    records.append((t, g, p, float(la.values[a_gold] - la.values[a_star])))
                # Both paths leave the current state, whose history they share.
                update_paths(system, state, &la.root_paths[a_gold * D1], lengths[a_gold],
                             &la.root_paths[a_star * D1], lengths[a_star], 1.0, scratch)
                n_updates += 1
            a = a_gold if a_gold >= 0 else a_plain
            if dynamic and explore > 0.0:
                rng ^= rng >> 12
                rng ^= rng << 25
                rng ^= rng >> 27
                if <double>((rng * 0x2545f4914f6cdd1dULL) >> 11) * (1.0 / 9007199254740992.0) < explore:
                    a = a_plain
            t += 1
            system.transition(state, a)
    finally:
        free(lengths); free(state); free(scratch); free(costs)
    return n_updates, n_errors, records
