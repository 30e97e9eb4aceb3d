from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t


cdef struct KeySlot:
    uint64_t key
    int64_t list1        # index of the key's postings + 1; 0 marks an empty slot


cdef struct Postings:
    int64_t n
    int64_t cap
    int32_t* ids         # support ids, ascending (items are appended in id order)
    float* vals


cdef struct PrimalSlot:
    uint64_t key         # 0 marks an empty slot
    double w             # sum_i a_i phi_f(s_i)
    double u             # sum over updates of clock * delta * phi_f(s_i)


cdef struct CachedRow:
    int64_t covered      # the row holds K(s_i, q) for every support id i < covered
    int64_t nnz
    int64_t cap
    int64_t* idx
    double* val          # K(s_idx[j], q) - base
    double base          # K(s_i, q) for every i < covered not in idx


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


cdef class DualPerceptron:
    cdef readonly Kernel kernel
    cdef readonly Expansion expansion    # None unless the primal expansion is on
    cdef readonly int64_t clock
    cdef readonly int64_t n_support      # live support items
    cdef readonly int64_t n_events
    cdef readonly int64_t budget         # 0: unbounded
    cdef int _mode                       # 0 last, 1 averaged, 2 voted
    cdef int _policy                     # 0 oldest, 1 smallest
    # per support id (kernel ids, dead ones included until compaction)
    cdef double* _a                      # coefficient
    cdef double* _u                      # Daume's accumulator: sum of clock * delta
    cdef int64_t* _ids                   # the caller's item id, -1 if none
    cdef uint8_t* _alive
    cdef int64_t _cap
    cdef int64_t _n_total              # support ids in use, dead ones included
    cdef int64_t _n_dead
    cdef int64_t _oldest                 # no live item has a smaller id
    cdef double _a_sum
    cdef double _u_sum
    cdef dict _by_id                     # caller's item id -> support id
    # the update history, for the voted prediction
    cdef int64_t* _ev_item
    cdef double* _ev_delta
    cdef int64_t* _ev_clock
    cdef int64_t _ev_cap
    # scratch
    cdef int64_t* _idx
    cdef double* _val
    cdef double* _dense
    cdef int64_t _scratch_cap
    # kernel rows cached by query id
    cdef readonly int64_t cache_bytes
    cdef readonly int64_t cache_limit
    cdef CachedRow* _rows
    cdef int64_t _n_rows
    cdef int64_t _rows_cap
    cdef dict _row_of_id
    cdef readonly int64_t cache_hits
    cdef readonly int64_t cache_misses

    cdef void _free_state(self) noexcept
    cdef int _ensure_support(self, int64_t n) except -1
    cdef int _ensure_scratch(self, int64_t n) except -1
    cdef int _add_event(self, int64_t item, double delta) except -1
    cdef int _drop(self, int64_t item) except -1
    cdef int _enforce_budget(self, int64_t keep) except -1
    cdef int _compact(self) except -1
    cdef void _clear_cache(self) noexcept
    cdef int64_t _full_row(self, object item, int64_t item_id, double* base, int64_t** idx,
                           double** val) except -1
    cdef int64_t _uncached_row(self, object item, double* base, int64_t** idx, double** val,
                               bint cache_it, int64_t item_id) except -1
    cdef int _cache_row(self, int64_t item_id, int64_t n, double base) except -1
    cdef int _forget_row(self, int64_t slot, int64_t item_id) except -1
    cdef double _score_row(self, const int64_t* idx, const double* val, int64_t n, double base,
                           int mode) noexcept nogil
    cdef double _voted_binary(self, const double* k_of, double base) noexcept nogil
    cdef double score_one(self, object item, int64_t item_id, int mode) except? -1
