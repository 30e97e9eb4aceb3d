from libc.stdint cimport int64_t, uint64_t

from .kernel cimport PolynomialKernel
from .slots cimport PrimalSlot


cdef class Expansion:
    """The explicit feature map of a polynomial kernel of degree <= 2, as primal weights."""
    cdef readonly int degree
    cdef double _lin_query           # a query's linear feature value per unit of x_k
    cdef double _diag_query          # ... of x_k x_k
    cdef double _pair_query          # ... of x_j x_k, j != k (both orders)
    cdef bint _linear                # the linear features exist (coef0 != 0 or degree 1)
    cdef PrimalSlot* _table
    cdef size_t _capacity
    cdef readonly int64_t n_features
    cdef uint64_t* _fkeys
    cdef double* _fvals
    cdef int64_t _fcap

    cdef int64_t expand(self, const uint64_t* keys, const float* vals, int64_t n, bint query) except -1
    cdef int add(self, int64_t n_features, double delta, double clocked) except -1
    cdef void dot(self, int64_t n_features, double* sw, double* su) noexcept nogil
    cdef int _grow(self) except -1
    cdef int add_item(self, PolynomialKernel kernel, int64_t item, double delta, double clocked) except -1
