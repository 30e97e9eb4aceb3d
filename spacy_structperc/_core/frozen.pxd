from libc.stdint cimport int64_t, uint32_t
from .hashtable cimport Bucket
from .typedefs cimport hash_t, weight_t


cdef enum:
    FROZEN_NONE = 0
    FROZEN_F32 = 1
    FROZEN_F16 = 2
    FROZEN_I8 = 3


# What a loaded table's bucket holds for its row: a hot row's index | (dense slot + 1) <<
# ROW_BITS (see _widen_hot_rows); a sparse row's entries, SPARSE_REF | first entry | count <<
# ROW_BITS, so scoring reads them without the row bounds in between (see _encode_refs); or the
# row's index (an empty row's, an int8 row's: its scale is read by row).
cdef extern from *:
    """
    #define STRUCTPERC_ROW_BITS 40
    #define STRUCTPERC_ROW_MASK ((int64_t)0xFFFFFFFFFFLL)
    #define STRUCTPERC_SPARSE_REF ((int64_t)1 << 62)
    """
    const int ROW_BITS "STRUCTPERC_ROW_BITS"
    const int64_t ROW_MASK "STRUCTPERC_ROW_MASK"
    const int64_t SPARSE_REF "STRUCTPERC_SPARSE_REF"


cdef inline int64_t _row_from(int64_t v, const int64_t* row_at) noexcept nogil:
    # The row index of what a bucket holds, given _rows_by_entry's table (NULL when no bucket holds
    # a sparse reference): a reference maps through it; a row index, hot or not, is below ROW_BITS.
    return row_at[v & ROW_MASK] if v >= SPARSE_REF else v & ROW_MASK


cdef class FrozenRows:
    """The key table of a weight table (hashed feature -> row, see hashtable.pxd), and a loaded
    model's rows read where the file's bytes put them, in the precision they were saved in.

    A loaded model holds no float32 weights: its sparse rows (row r's nonzero weights are
    entries _indptr[r] to _indptr[r + 1] - 1, with their classes in _cols, 8 or 16 bit) stay in
    the buffers of the file's arrays (kept alive by _frozen_owner), as FROZEN_F32, FROZEN_F16 or
    FROZEN_I8 (int8 with a float32 scale per row); FROZEN_NONE when the subclass's float32
    weights hold the rows (AveragedWeights, weights.pyx).
    """
    cdef readonly int n_classes
    cdef Bucket* _table         # open addressing; key and row share a cache line
    cdef size_t _capacity       # buckets, a power of two
    cdef readonly size_t n_rows
    cdef readonly int64_t version   # bumps on every change, so callers can cache derived scores
    cdef readonly int frozen_type
    cdef const void* _Q
    cdef const float* _scales
    cdef const uint32_t* _indptr
    cdef const void* _cols
    cdef bint _wide_cols
    cdef object _frozen_owner
    # Hot loaded rows, widened at load into dense rows of _dense_stride values: rows
    # with at least a quarter of their classes nonzero (the bias-like features most lookups
    # hit). Their bucket's row carries slot + 1 above ROW_BITS, so one probe finds them.
    cdef char* _dense              # float32 rows, or float16 ones (_dense_half) for a float16 table
    cdef bint _dense_half
    cdef readonly size_t n_dense
    cdef size_t _dense_stride
    cdef bint _full_rows_in_order   # every row with all C classes lists them 0..C-1

    cdef int64_t find(self, hash_t key) noexcept nogil
    cdef int64_t _probe(self, hash_t key) noexcept nogil
    cdef int64_t _row_of(self, int64_t v) noexcept nogil
    cdef int64_t* _rows_by_entry(self) noexcept nogil
    cdef int64_t _ref_of(self, size_t r) noexcept nogil
    cdef void _encode_refs(self) noexcept nogil
    cdef int _widen_hot_rows(self, size_t max_bytes) except -1 nogil
    cdef void _drop_hot_rows(self) noexcept nogil
    cdef void _forget_frozen(self) noexcept
    cdef int _release_rows(self) except -1
    cdef void _frozen_row(self, int64_t r, weight_t* out) noexcept nogil
    cdef void _add_frozen_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil
    cdef void _add_frozen_prefix(self, const hash_t* keys, int n_keys, int m, weight_t* out) noexcept nogil
