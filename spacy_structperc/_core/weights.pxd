from libc.stdint cimport int64_t, uint32_t, uint64_t
from .typedefs cimport hash_t, weight_t
# The loaded-row precisions: other modules cimport them from here.
from .frozen cimport FrozenRows, FROZEN_NONE, FROZEN_F32, FROZEN_F16, FROZEN_I8


# Classes per chunk of a training row: 64 bytes, one cache line.
cdef enum:
    CHUNK = 16


cdef struct UEntry:
    uint64_t key     # (row << 16 | class) + 1; 0 marks an empty slot
    double value


cdef class AveragedWeights(FrozenRows):
    """Hashed feature -> row of `n_classes` float32 weights, with lazy averaging.

    Averaging uses Daume's form: an update of `delta` made while `clock` examples have completed
    also adds `clock * delta` to an accumulator, and the average after `clock` examples is
    `W - U / clock`. The clock ticks once per training example, mistake or not.

    Memory: W keeps only the chunks of 16 classes that updates have written (below), and the
    accumulators exist only once something is trained, and only for the weights updates touched
    (a hash of (row, class), ~4 of a parser row's 108 classes, instead of a dense float64 copy
    of W that was two thirds of a parser's training memory). Averaged scores are
    computed from W and U as rows are read, unless `average()` has materialized them: a
    parser's model is ~80M weights, and a third copy of them would be the largest allocation of
    a training run. A loaded model holds no W at all: its sparse rows are read where the file's
    bytes put them (load_frozen), in the precision they were saved in (FrozenRows, frozen.pyx);
    anything that changes the rows turns them into W first (_thaw).
    """
    cdef size_t _rows_capacity
    # The current weights, n_rows x n_classes, in chunks of CHUNK classes: row r's chunk k is
    # _pool[(_rowmap[r * _kpr + k] - 1) * CHUNK ...], and a 0 in _rowmap is a chunk of zeros
    # that no update has written. A parser's rows have ~4 of 108 classes nonzero: stored dense,
    # they were half its training memory. Read and write them through the helpers below (a
    # write may move the pool).
    cdef weight_t* _pool
    cdef size_t _pool_used          # chunks
    cdef size_t _pool_cap
    cdef uint32_t* _rowmap
    cdef int _kpr                   # chunks per row
    # Daume accumulators, only for the weights updates have touched (a parser's rows have ~4 of
    # their ~100 classes nonzero): an open-addressing table of (row, class) -> value, with a
    # bit per class and row in _umask saying which exist. NULL until the first update.
    cdef UEntry* _U
    cdef size_t _u_capacity
    cdef size_t _u_count
    cdef uint64_t* _umask
    cdef int _mask_words
    cdef weight_t* _avg         # averaged view, materialized only by average()
    cdef bint _avg_valid
    cdef readonly bint use_averages
    cdef readonly int64_t clock
    # New rows start at seeded noise in [-noise_scale, noise_scale] rather than zero: the latent
    # perceptron (sun2009 Fig. 1) needs ||theta|| ~ 0 but not 0, or its latent states never split.
    cdef readonly double noise_scale
    # Keys with bit TIED_BIT are label-level when tie_width > 1: an update of class c moves the
    # whole group of tie_width columns that c is in (a label's latent states).
    cdef readonly int tie_width
    cdef readonly hash_t noise_seed
    # Change journal (training side; distributed mixing reads what a shard changed from it): a
    # bit per (row, class) that update() wrote since start_journal(), the rows with a bit in the
    # order they were first written, and the row count at the start (rows beyond it are new).
    # NULL (off) until start_journal(): plain training pays one test per update.
    cdef uint64_t* _dirty
    cdef size_t _dirty_rows
    cdef int64_t* _jrows
    cdef size_t _jn
    cdef size_t _jcap
    cdef size_t _jstart_rows
    cdef bint _journal_lost        # a reload or resize dropped a started journal

    cdef int64_t _insert(self, hash_t key) except -1 nogil
    cdef weight_t* _chunk_w(self, size_t r, int k) except NULL nogil
    cdef weight_t* _cell_w(self, size_t r, int c) except NULL nogil
    cdef void _row_into(self, size_t r, weight_t* out) noexcept nogil
    cdef void _row_add(self, size_t r, weight_t* scores) noexcept nogil
    cdef int _row_set(self, size_t r, const weight_t* src) except -1 nogil
    cdef void _row_clear(self, size_t r) noexcept nogil
    cdef void _free_rows(self) noexcept nogil
    cdef int _grow_table(self) except -1 nogil
    cdef int _grow_rows(self, size_t n) except -1 nogil
    cdef int _ensure_accumulators(self) except -1 nogil
    cdef void _free_accumulators(self) noexcept nogil
    cdef double* _u_slot(self, int64_t row, int c) except NULL nogil
    cdef double _u_get(self, int64_t row, int c) noexcept nogil
    cdef int _u_grow(self) except -1 nogil
    cdef void _averaged_row(self, int64_t r, weight_t* out) noexcept nogil
    cdef int _thaw(self) except -1 nogil
    cdef bint _averages_on_the_fly(self) noexcept nogil
    cdef int _init_noise(self, hash_t key, int64_t row) except -1 nogil
    cdef void add_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil
    cdef void score_prefix(self, const hash_t* keys, int n_keys, int m, weight_t* out) noexcept nogil
    cdef void prefetch_keys(self, const hash_t* keys, int n_keys) noexcept nogil
    cdef void _add_averaged_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil
    cdef int update(self, hash_t key, int clas, weight_t delta) except -1 nogil
    cdef int update_many(self, const hash_t* keys, int n_keys, int clas, weight_t delta) except -1 nogil
    cdef void tick(self) noexcept nogil
    cdef int _journal_mark(self, int64_t row, int c) except -1 nogil
    cdef void _journal_free(self) noexcept nogil
    cdef int64_t _insert_zero(self, hash_t key) except -1 nogil
    cdef bint _row_dirty(self, size_t r) noexcept nogil
    cdef bint _cell_out(self, size_t r, int c, bint is_new) noexcept nogil
    cdef double _u_at(self, int64_t row, int c) noexcept nogil


# Reading a training row's chunk and cell (see AveragedWeights._pool): inline, for the loops
# that read every row.
cdef inline const weight_t* chunk_of(AveragedWeights w, size_t r, int k) noexcept nogil:
    cdef uint32_t at = w._rowmap[r * <size_t>w._kpr + <size_t>k]
    return NULL if at == 0 else &w._pool[<size_t>(at - 1) * CHUNK]


cdef inline weight_t cell_of(AveragedWeights w, size_t r, int c) noexcept nogil:
    cdef const weight_t* chunk = chunk_of(w, r, c // CHUNK)
    return 0 if chunk == NULL else chunk[c % CHUNK]
