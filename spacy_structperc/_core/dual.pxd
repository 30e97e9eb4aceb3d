from libc.stdint cimport int64_t, uint8_t

from .expansion cimport Expansion
from .kernel cimport Kernel


cdef struct CachedRow:
    int64_t covered      # the row holds K(s_i, q) for every support id i < covered
    int64_t nnz
    int64_t cap
    int64_t* idx
    double* val          # K(s_idx[j], q) - base
    double base          # K(s_i, q) for every i < covered not in idx


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
