from .typedefs cimport weight_t
from .transition cimport TransitionSystem


cdef class Lookahead:
    """Scratch space for searches of a fixed depth over one transition system."""
    cdef TransitionSystem system
    cdef readonly int depth
    cdef public double gap   # >= 0: search ahead only among the actions within gap of the best
    cdef size_t state_capacity   # bytes per state blob the buffers below hold
    cdef char* states      # (depth + 2) state blobs, one per level
    cdef weight_t* scores  # (depth + 2) x n_actions
    cdef int* paths        # (depth + 2) x (depth + 1): best continuation found under each level
    cdef int* root_paths   # n_actions x (depth + 1): best path starting with each first action
    cdef double* values    # n_actions: value of each first action
    cdef int* lengths      # n_actions: length of each first action's path
    cdef char* state       # the state greedy decoding moves along
    cdef char* scratch

    cdef int reserve(self) except -1 nogil
    cdef double search(self, int level, const void* state, int depth, int* path_len) noexcept nogil
    cdef int evaluate(self, const void* state, int* lengths, double floor) noexcept nogil
    cdef int greedy(self, int* out) noexcept nogil
