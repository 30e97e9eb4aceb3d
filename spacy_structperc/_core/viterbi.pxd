from .typedefs cimport weight_t
from .tagging cimport TagSystem


cdef struct ViterbiScratch:
    # Lattice buffers, grown as needed and reused across inputs; zero-initialize, then free
    # with free_scratch.
    double* delta
    int* back
    size_t capacity      # entries of delta and back
    weight_t* hs
    size_t hs_capacity   # entries of hs


cdef int viterbi_into(TagSystem system, int order, ViterbiScratch* scratch, int* out,
                      double* score) except -1 nogil
cdef void free_scratch(ViterbiScratch* scratch) noexcept nogil
