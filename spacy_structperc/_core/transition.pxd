from .typedefs cimport hash_t, weight_t
from .weights cimport AveragedWeights


cdef class TransitionSystem:
    """A deterministic transition system scored by averaged weights.

    States are plain memory blobs of `state_size` bytes, so search can copy them with memcpy.
    A decision's score is `sum(W[f, action] for f in features(state))`; invalid actions score
    -inf. Taggers, chunkers and parsers implement this interface; the lookahead search, the beam
    and the path updates are written once against it.
    """
    cdef readonly int n_actions
    cdef readonly size_t state_size
    cdef readonly int max_features
    cdef public AveragedWeights weights

    cdef void init_state(self, void* state) noexcept nogil
    cdef bint is_final(self, const void* state) noexcept nogil
    cdef void transition(self, void* state, int action) noexcept nogil
    cdef void score(self, const void* state, weight_t* scores) noexcept nogil
    cdef void score_argmax(self, const void* state, weight_t* scores) noexcept nogil
    cdef int forced_action(self, const void* state) noexcept nogil
    cdef int features(self, const void* state, hash_t* keys) noexcept nogil
    cdef int gold_action(self, const void* state) noexcept nogil
    cdef bint action_costs(self, const void* state, int* costs) noexcept nogil
    cdef bint ranked_costs(self, const void* state, int* costs, const double* values) noexcept nogil
    cdef int max_steps(self) noexcept nogil


cdef double path_score(TransitionSystem system, const int* actions, int n_actions,
                       char* scratch) noexcept nogil
cdef int update_paths(TransitionSystem system, const void* start, const int* gold, int n_gold,
                      const int* predicted, int n_predicted, weight_t step,
                      char* scratch) except -1 nogil
