from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from .slots cimport KeySlot


cdef struct Postings:
    int64_t n
    int64_t cap
    int32_t* ids         # support ids, ascending (items are appended in id order)
    float* vals


cdef class Kernel:
    """A kernel over support items. Subclasses override the hooks below (see kernel.pyx)."""
    cdef readonly int64_t n_items
    cdef list _items             # the default store: converted items (subclasses may leave it empty)
    cdef object _query           # the default prepared query

    cdef object convert(self, object item)
    cdef double pair(self, object x, object y) except? -1
    cdef int64_t store_item(self, object item) except -1
    cdef int prepare(self, object item) except -1
    cdef int64_t row(self, int64_t start, int64_t stop, int64_t* idx, double* val,
                     double* base) except -1 nogil
    cdef int compact(self, const int64_t* keep, int64_t n_keep) except -1


cdef class PolynomialKernel(Kernel):
    cdef readonly int degree
    cdef readonly double coef0
    cdef readonly double gamma
    cdef double _base            # coef0 ** degree: K of two items that share no key
    # support items, CSR
    cdef int64_t* _ptr
    cdef int64_t _items_cap
    cdef uint64_t* _keys
    cdef float* _vals
    cdef int64_t _nnz_cap
    # inverted index: key -> postings
    cdef KeySlot* _table
    cdef size_t _capacity
    cdef Postings* _lists
    cdef int64_t _n_lists
    cdef int64_t _lists_cap
    # the prepared query
    cdef uint64_t* _qkeys
    cdef float* _qvals
    cdef int64_t _qn
    cdef int64_t _qcap
    # the dense accumulator of dot products, one slot per support item
    cdef double* _acc
    cdef uint8_t* _mark
    cdef int64_t _acc_cap

    cdef int64_t _find(self, uint64_t key) noexcept nogil
    cdef int64_t _list_of(self, uint64_t key) except -1
    cdef int _grow_table(self) except -1
    cdef int _add_posting(self, uint64_t key, int32_t item, float value) except -1
    cdef int _append_item(self, const uint64_t* keys, const float* vals, int64_t n) except -1
    cdef int _clear_index(self) except -1
    cdef double _value(self, double dot) noexcept nogil
    cdef void _free_lists(self) noexcept
