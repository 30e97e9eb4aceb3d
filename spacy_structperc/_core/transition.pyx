# cython: infer_types=True
"""The transition-system interface, and the perceptron update over two action paths."""
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy
from libc.math cimport INFINITY
import numpy

from .typedefs cimport hash_t, weight_t
from .weights cimport AveragedWeights


cdef class TransitionSystem:
    cdef void init_state(self, void* state) noexcept nogil:
        pass

    cdef bint is_final(self, const void* state) noexcept nogil:
        return True

    cdef void transition(self, void* state, int action) noexcept nogil:
        pass

    cdef void score(self, const void* state, weight_t* scores) noexcept nogil:
        pass

    cdef void score_argmax(self, const void* state, weight_t* scores) noexcept nogil:
        # Scores whose best valid action (the first of equals) is score()'s: what greedy
        # decoding without lookahead needs. A system may skip work that only search needs.
        self.score(state, scores)

    cdef int forced_action(self, const void* state) noexcept nogil:
        # The only valid action of a state, which greedy decoding takes without scoring it;
        # -1 when there may be a choice.
        return -1

    cdef int features(self, const void* state, hash_t* keys) noexcept nogil:
        return 0

    cdef int gold_action(self, const void* state) noexcept nogil:
        return -1

    cdef int max_steps(self) noexcept nogil:
        return 0

    cdef bint action_costs(self, const void* state, int* costs) noexcept nogil:
        # A dynamic oracle: each action's cost, the number of gold arcs (or labels) it makes
        # unreachable from `state` (-1 for an invalid action); False when the system has none.
        return False

    cdef bint ranked_costs(self, const void* state, int* costs, const double* values) noexcept nogil:
        # What training with exploration reads of action_costs, given each action's value (-inf:
        # not a candidate): the costs of the best-valued action and of every action that could be
        # the best-valued of least cost; a system may leave the others -1 (ArcStandardSystem
        # does, to skip its costliest tables). By default, every cost.
        return self.action_costs(state, costs)

    # Python view of the interface: states are bytes. Used by tests and brute-force checks.

    def initial_state(self):
        buf = bytearray(self.state_size)
        cdef char* p = buf
        self.init_state(p)
        return bytes(buf)

    def step(self, bytes state, int action):
        if not 0 <= action < self.n_actions:
            raise IndexError(f"action {action} out of range")
        buf = bytearray(state)
        cdef char* p = buf
        self.transition(p, action)
        return bytes(buf)

    def action_scores(self, bytes state):
        out = numpy.zeros((self.n_actions,), dtype=numpy.float32)
        cdef float[::1] o = out
        cdef const char* p = state
        self.score(p, &o[0])
        return out

    def argmax_scores(self, bytes state):
        """The scores greedy decoding takes its action from (score_argmax): those of
        action_scores, or where they differ (pruned labels, columns not read) the same best
        action."""
        out = numpy.zeros((self.n_actions,), dtype=numpy.float32)
        cdef float[::1] o = out
        cdef const char* p = state
        self.score_argmax(p, &o[0])
        return out

    def costs(self, bytes state):
        """The dynamic oracle's cost of every action from `state` (-1: invalid), or None when
        the system has no dynamic oracle."""
        out = numpy.zeros((self.n_actions,), dtype=numpy.int32)
        cdef int[::1] o = out
        cdef const char* p = state
        if not self.action_costs(p, &o[0]):
            return None
        return out

    def ranked(self, bytes state, values):
        """ranked_costs' view of `state` given the actions' values (float64, -inf: not a
        candidate), or None when the system has no dynamic oracle."""
        out = numpy.zeros((self.n_actions,), dtype=numpy.int32)
        cdef int[::1] o = out
        cdef const double[::1] v = numpy.ascontiguousarray(values, dtype=numpy.float64)
        cdef const char* p = state
        if v.shape[0] != self.n_actions:
            raise ValueError(f"{v.shape[0]} values for {self.n_actions} actions")
        if not self.ranked_costs(p, &o[0], &v[0]):
            return None
        return out

    def final(self, bytes state):
        cdef const char* p = state
        return self.is_final(p)

    def gold(self, bytes state):
        cdef const char* p = state
        return self.gold_action(p)

    def state_features(self, bytes state):
        keys = numpy.zeros((max(1, self.max_features),), dtype=numpy.uint64)
        cdef hash_t[::1] k = keys
        cdef const char* p = state
        cdef int n = self.features(p, &k[0])
        return keys[:n]

    def score_path(self, actions):
        """The model score of the path `actions` from the initial state."""
        cdef int[::1] a = numpy.ascontiguousarray(actions, dtype=numpy.int32)
        scratch = bytearray(self.state_size * 2 + 1)
        cdef char* s = scratch
        return path_score(self, &a[0] if a.shape[0] else NULL, a.shape[0], s)

    def update_with_paths(self, gold, predicted, float step=1.0):
        """w += step * (Phi(gold) - Phi(predicted)), both paths from the initial state."""
        cdef int[::1] g = numpy.ascontiguousarray(gold, dtype=numpy.int32)
        cdef int[::1] p = numpy.ascontiguousarray(predicted, dtype=numpy.int32)
        scratch = bytearray(self.state_size * 2 + 1)
        cdef char* s = scratch
        update_paths(self, NULL, &g[0] if g.shape[0] else NULL, g.shape[0],
                     &p[0] if p.shape[0] else NULL, p.shape[0], step, s)


cdef double path_score(TransitionSystem system, const int* actions, int n_actions,
                       char* scratch) noexcept nogil:
    """Sum of the action scores along a path from the initial state; -inf if it is invalid."""
    cdef void* state = scratch
    cdef weight_t* scores = <weight_t*>malloc(system.n_actions * sizeof(weight_t))
    cdef double total = 0.0
    cdef int t
    system.init_state(state)
    for t in range(n_actions):
        system.score(state, scores)
        total += scores[actions[t]]
        system.transition(state, actions[t])
    free(scores)
    return total


cdef int update_paths(TransitionSystem system, const void* start_state, const int* gold, int n_gold,
                      const int* predicted, int n_predicted, weight_t step,
                      char* scratch) except -1 nogil:
    """The perceptron update w += step * (Phi(gold) - Phi(predicted)).

    Both paths start at `start_state` (the initial state when NULL). Their common prefix produces identical features with
    identical actions, so it cancels and is skipped rather than added and subtracted.
    """
    cdef void* state = scratch
    cdef void* start = scratch + system.state_size
    cdef hash_t* keys = <hash_t*>malloc(max(1, system.max_features) * sizeof(hash_t))
    if keys == NULL:
        with gil:
            raise MemoryError()
    cdef int t, n_keys, shared = 0
    if start_state == NULL:
        system.init_state(start)
    else:
        memcpy(start, start_state, system.state_size)
    while shared < n_gold and shared < n_predicted and gold[shared] == predicted[shared]:
        system.transition(start, gold[shared])
        shared += 1
    try:
        memcpy(state, start, system.state_size)
        for t in range(shared, n_gold):
            n_keys = system.features(state, keys)
            system.weights.update_many(keys, n_keys, gold[t], step)
            system.transition(state, gold[t])
        memcpy(state, start, system.state_size)
        for t in range(shared, n_predicted):
            n_keys = system.features(state, keys)
            system.weights.update_many(keys, n_keys, predicted[t], -step)
            system.transition(state, predicted[t])
    finally:
        free(keys)
    return 0
