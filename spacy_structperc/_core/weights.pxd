from libc.stdint cimport int64_t
from .typedefs cimport hash_t, weight_t


cdef struct Bucket:
    hash_t key       # 0 marks an empty bucket
    int64_t row


cdef class AveragedWeights:
    """Hashed feature -> dense row of `n_classes` float32 weights, with lazy averaging.

    Averaging uses Daume's form: an update of `delta` made while `clock` examples have completed
    also adds `clock * delta` to an accumulator, and the average after `clock` examples is
    `W - U / clock`. The clock ticks once per training example, mistake or not.

    Memory: the accumulators exist only once something is trained (a loaded model holds its
    averaged weights in W and nothing else), and averaged scores are computed from W and U as
    rows are read, unless `average()` has materialized them: a parser's model is ~80M weights,
    and a third copy of them would be the largest allocation of a training run.
    """
    cdef readonly int n_classes
    cdef Bucket* _table         # open addressing; key and row share a cache line
    cdef size_t _capacity       # buckets, a power of two
    cdef readonly size_t n_rows
    cdef size_t _rows_capacity
    cdef weight_t* _W           # current weights, n_rows x n_classes
    cdef double* _U             # Daume accumulator for the average; NULL until the first update
    cdef weight_t* _avg         # averaged view, materialized only by average()
    cdef bint _avg_valid
    cdef readonly bint use_averages
    cdef readonly int64_t clock
    cdef readonly int64_t version   # bumps on every change, so callers can cache derived scores
    # New rows start at seeded noise in [-noise_scale, noise_scale] rather than zero: the latent
    # perceptron (sun2009 Fig. 1) needs ||theta|| ~ 0 but not 0, or its latent states never split.
    cdef readonly double noise_scale
    # Keys with bit TIED_BIT are label-level when tie_width > 1: an update of class c moves the
    # whole group of tie_width columns that c is in (a label's latent states).
    cdef readonly int tie_width
    cdef readonly hash_t noise_seed

    cdef int64_t find(self, hash_t key) noexcept nogil
    cdef int64_t _insert(self, hash_t key) except -1 nogil
    cdef int _grow_table(self) except -1 nogil
    cdef int _grow_rows(self, size_t n) except -1 nogil
    cdef int _ensure_accumulators(self) except -1 nogil
    cdef bint _averages_on_the_fly(self) noexcept nogil
    cdef void _init_noise(self, hash_t key, weight_t* row) noexcept nogil
    cdef void add_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil
    cdef void _add_averaged_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil
    cdef int update(self, hash_t key, int clas, weight_t delta) except -1 nogil
    cdef int update_many(self, const hash_t* keys, int n_keys, int clas, weight_t delta) except -1 nogil
    cdef void tick(self) noexcept nogil
