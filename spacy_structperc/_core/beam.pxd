from .typedefs cimport weight_t
from .transition cimport TransitionSystem


cdef struct Candidate:
    double score
    int parent
    int action


cdef class BeamSearch:
    """A beam over one transition system; keeps every step's beam for backtracking."""
    cdef TransitionSystem system
    cdef readonly int width
    cdef int n_steps
    cdef size_t steps_capacity   # steps the per-step buffers hold
    cdef size_t state_capacity   # bytes per state blob the state buffers hold
    cdef char* states        # 2 x width state blobs (current and next beam)
    cdef double* item_score  # n_steps x width
    cdef int* item_parent    # n_steps x width
    cdef int* item_action    # n_steps x width
    cdef char* item_gold     # n_steps x width: is this item the gold prefix?
    cdef int* beam_size      # n_steps
    cdef double* gold_score  # n_steps: score of the gold prefix after step t
    cdef int* gold_actions   # n_steps
    cdef Candidate* cands    # width x n_actions
    cdef weight_t* scores    # n_actions
    cdef char* gold_state
    cdef readonly int steps_done
    cdef readonly int gold_known   # every gold action is known and valid

    cdef int reserve(self) except -1 nogil
    cdef int search(self, bint track_gold, bint check_signals) except -1 nogil
    cdef int run(self, bint track_gold) except -1
    cdef int backtrack(self, int t, int k, int* out) noexcept nogil
    cdef int best_into(self, int* out) noexcept nogil
