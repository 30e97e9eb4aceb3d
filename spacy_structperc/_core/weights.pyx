# cython: infer_types=True
"""Averaged weights over hashed features: the one parameter store every component shares."""
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.math cimport NAN
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
cimport cython
import numpy

from .typedefs cimport hash_t, weight_t
from .weights cimport Bucket, UEntry, FROZEN_NONE, FROZEN_F32, FROZEN_F16, FROZEN_I8
from .templates cimport mix64, TIED_BIT

DEF_MIN_BUCKETS = 1024

cdef extern from *:
    """
    #define STRUCTPERC_PREFETCH(p) __builtin_prefetch((const void*)(p))
    """
    void prefetch "STRUCTPERC_PREFETCH"(const void* p) noexcept nogil

cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    #include <stdint.h>
    /* A hash table's buckets (16 bytes: key, row) in groups of four, one 64-byte cache line
       each: a key's home is the first bucket of a group, so its lookup reads whole lines. The
       memory is zeroed and line-aligned (calloc's large blocks start 16 bytes into a page, which
       would split every group over two lines); free() releases it. */
    static void* structperc_calloc_lines(size_t n, size_t size) {
        size_t bytes = n * size;
        void* p;
        if (n && bytes / n != size) return NULL;
        bytes = (bytes + 63) & ~(size_t)63;
        if (bytes == 0) bytes = 64;
        if (posix_memalign(&p, 64, bytes) != 0) return NULL;
        memset(p, 0, bytes);
        return p;
    }

    typedef struct { uint64_t key; int64_t row; } structperc_bucket;

    /* The row a bucket holds for key (not 0), or -1: the key's group (one cache line) is
       compared whole, with masks rather than a branch per bucket (where the key sits in its
       group is random, so such branches are mispredicted), then the next group only when all
       four buckets are taken. Insertion probes linearly from the group's first bucket and
       nothing is ever deleted, so every bucket between a key's home and the key is taken: an
       empty bucket in a group that does not hold the key means the key has no row. */
    static inline int64_t structperc_probe_groups(const void* table, size_t mask, size_t home,
                                                  uint64_t key) {
        const structperc_bucket* t = (const structperc_bucket*)table;
        size_t g = home;
        for (;;) {
            const structperc_bucket* b = t + g;
            uint64_t m0 = -(uint64_t)(b[0].key == key), m1 = -(uint64_t)(b[1].key == key);
            uint64_t m2 = -(uint64_t)(b[2].key == key), m3 = -(uint64_t)(b[3].key == key);
            uint64_t hit = m0 | m1 | m2 | m3;
            /* the matching bucket's row, or all ones (-1) when none matches */
            uint64_t r = ((uint64_t)b[0].row & m0) | ((uint64_t)b[1].row & m1)
                       | ((uint64_t)b[2].row & m2) | ((uint64_t)b[3].row & m3) | ~hit;
            if (__builtin_expect((hit != 0) | (b[0].key == 0) | (b[1].key == 0)
                                 | (b[2].key == 0) | (b[3].key == 0), 1))
                return (int64_t)r;
            g = (g + 4) & mask;
        }
    }
    """
    void* calloc_lines "structperc_calloc_lines"(size_t n, size_t size) noexcept nogil
    int64_t probe_groups "structperc_probe_groups"(const void* table, size_t mask, size_t home,
                                                   uint64_t key) noexcept nogil

cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    /* IEEE 754 binary16 -> binary32, exact for every one of the 65,536 values (NaN payloads
       kept as they are, as numpy keeps them), and branchless: the subnormal case renormalizes
       with one exact float subtraction, then a select picks it. */
    static inline float structperc_half_to_float(uint16_t h) {
        uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
        uint32_t exp = o & 0x0f800000u;
        uint32_t bits, sub_bits;
        float sub, out;
        o += 0x38000000u;                                        /* rebias: (127 - 15) << 23 */
        bits = o + (exp == 0x0f800000u ? 0x38000000u : 0u);      /* inf and NaN: exponent 255 */
        sub_bits = o + 0x00800000u;                              /* 2^-14 * (1 + m / 1024) */
        memcpy(&sub, &sub_bits, sizeof(sub));
        sub -= 6.103515625e-05f;                                 /* - 2^-14 = m * 2^-24, exact */
        memcpy(&sub_bits, &sub, sizeof(sub));
        bits = (exp == 0 ? sub_bits : bits) | (((uint32_t)h & 0x8000u) << 16);
        memcpy(&out, &bits, sizeof(out));
        return out;
    }

    /* out[cols[e]] += half_to_float(h[e]) for e in [lo, hi): the float16 row add. */
    static void structperc_add_f16_soft(const uint16_t* h, const void* cols, int wide,
                                        size_t lo, size_t hi, float* out) {
        size_t e;
        if (wide) {
            const uint16_t* c = (const uint16_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += structperc_half_to_float(h[e]);
        } else {
            const uint8_t* c = (const uint8_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += structperc_half_to_float(h[e]);
        }
    }

    #if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    #include <immintrin.h>
    /* The same with the F16C instruction, for CPUs that have it (chosen at import, so a wheel
       still runs on CPUs without it). VCVTPH2PS quiets signalling NaNs, which the software
       conversion (and numpy) keep: those inputs take the software path, so the two agree on
       all 65,536 values. */
    __attribute__((target("f16c")))
    static float structperc_half_to_float_f16c(uint16_t h) {
        if (__builtin_expect((h & 0x7fffu) > 0x7c00u, 0)) return structperc_half_to_float(h);
        return _cvtsh_ss(h);
    }

    /* Sparse entries added with F16C. No NaN check: VCVTPH2PS quiets a signalling NaN, but
       the add quiets it anyway (keeping the payload), so the sums are the software path's. */
    __attribute__((target("f16c")))
    static void structperc_add_f16_f16c(const uint16_t* h, const void* cols, int wide,
                                        size_t lo, size_t hi, float* out) {
        size_t e;
        if (wide) {
            const uint16_t* c = (const uint16_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += _cvtsh_ss(h[e]);
        } else {
            const uint8_t* c = (const uint8_t*)cols;
            for (e = lo; e < hi; e++) out[c[e]] += _cvtsh_ss(h[e]);
        }
    }

    /* Classes c .. c + 8w - 1 of a run: w sums of eight held in registers (w is a constant
       where it is called, so the loops unroll and the array is registers). */
    __attribute__((target("f16c"), always_inline))
    static inline void structperc_add_rows_block(const uint16_t* const* rows, int k, float* out,
                                                 int c, const int w) {
        __m256 a[8];
        int i, j;
        #pragma GCC unroll 8
        for (i = 0; i < w; i++) a[i] = _mm256_loadu_ps(out + c + 8 * i);
        for (j = 0; j < k; j++) {
            const uint16_t* r = rows[j] + c;
            #pragma GCC unroll 8
            for (i = 0; i < w; i++)
                a[i] = _mm256_add_ps(a[i], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(r + 8 * i))));
        }
        #pragma GCC unroll 8
        for (i = 0; i < w; i++) _mm256_storeu_ps(out + c + 8 * i, a[i]);
    }

    /* out[c] += rows[0][c], then rows[1][c], ... (each add rounded as a row-by-row add rounds
       it) for full float16 rows, with the sums of up to 64 classes held in registers for the
       whole run of rows: one load and store of out per class for the run, and one pointer
       load per row and 64 classes. No NaN check: VCVTPH2PS quiets a signalling NaN, but the
       add quiets it anyway (keeping the payload), so the sums are those of every other path. */
    __attribute__((target("f16c")))
    static void structperc_add_full_rows_f16c(const uint16_t* const* rows, int k, float* out, int n) {
        int c = 0, j;
        for (; c + 64 <= n; c += 64)
            structperc_add_rows_block(rows, k, out, c, 8);
        for (; c + 32 <= n; c += 32)
            structperc_add_rows_block(rows, k, out, c, 4);
        for (; c + 8 <= n; c += 8)
            structperc_add_rows_block(rows, k, out, c, 1);
        if (c + 4 <= n) {
            __m128 a0 = _mm_loadu_ps(out + c);
            for (j = 0; j < k; j++)
                a0 = _mm_add_ps(a0, _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)(rows[j] + c))));
            _mm_storeu_ps(out + c, a0);
            c += 4;
        }
        for (; c < n; c++) {
            float a = out[c];
            for (j = 0; j < k; j++) a += _cvtsh_ss(rows[j][c]);
            out[c] = a;
        }
    }

    /* out[c] += half_to_float(h[c]) for a full row (every class stored, in class order): the
       run kernel with one row. */
    __attribute__((target("f16c")))
    static void structperc_add_full_f16_f16c(const uint16_t* h, float* out, int n) {
        structperc_add_full_rows_f16c(&h, 1, out, n);
    }

    static int structperc_cpu_has_f16c(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("f16c") != 0;
    }
    #else
    static float structperc_half_to_float_f16c(uint16_t h) { return structperc_half_to_float(h); }
    static void structperc_add_f16_f16c(const uint16_t* h, const void* cols, int wide,
                                        size_t lo, size_t hi, float* out) {
        structperc_add_f16_soft(h, cols, wide, lo, hi, out);
    }
    static void structperc_add_full_f16_f16c(const uint16_t* h, float* out, int n) {
        int c;
        for (c = 0; c < n; c++) out[c] += structperc_half_to_float(h[c]);
    }
    static int structperc_cpu_has_f16c(void) { return 0; }
    static void structperc_add_full_rows_f16c(const uint16_t* const* rows, int k, float* out, int n) {
        int j;
        for (j = 0; j < k; j++) structperc_add_full_f16_f16c(rows[j], out, n);
    }
    #endif

    static void structperc_add_full_f16_soft(const uint16_t* h, float* out, int n) {
        int c;
        for (c = 0; c < n; c++) out[c] += structperc_half_to_float(h[c]);
    }

    /* out[c] += w[c] for a dense row (vectorized by the compiler). */
    static void structperc_add_dense(const float* w, float* out, int n) {
        int c;
        for (c = 0; c < n; c++) out[c] += w[c];
    }
    """
    float half_to_float_soft "structperc_half_to_float"(uint16_t h) noexcept nogil
    float half_to_float_f16c "structperc_half_to_float_f16c"(uint16_t h) noexcept nogil
    void add_f16_soft "structperc_add_f16_soft"(const uint16_t* h, const void* cols, int wide,
                                                size_t lo, size_t hi, float* out) noexcept nogil
    void add_f16_f16c "structperc_add_f16_f16c"(const uint16_t* h, const void* cols, int wide,
                                                size_t lo, size_t hi, float* out) noexcept nogil
    void add_full_rows_f16c "structperc_add_full_rows_f16c"(const uint16_t* const* rows, int k, float* out,
                                                            int n) noexcept nogil
    int cpu_has_f16c "structperc_cpu_has_f16c"() noexcept nogil
    void add_dense "structperc_add_dense"(const float* w, float* out, int n) noexcept nogil
    void add_full_f16_f16c "structperc_add_full_f16_f16c"(const uint16_t* h, float* out, int n) noexcept nogil
    void add_full_f16_soft "structperc_add_full_f16_soft"(const uint16_t* h, float* out, int n) noexcept nogil
    int ctz64 "__builtin_ctzll"(unsigned long long x) noexcept nogil

# float16 rows are widened with F16C where the CPU has it (set at import; both conversions are
# exact, see half_to_float_array).
cdef bint _f16c = cpu_has_f16c() != 0


def half_conversion():
    """Which float16 -> float32 conversion scoring uses: "f16c" or "software"."""
    return "f16c" if _f16c else "software"


def set_half_conversion(str name):
    """Choose the float16 conversion ("f16c" only where the CPU has it, or "software"); for
    tests and benchmarks. Returns the previous choice."""
    global _f16c
    previous = half_conversion()
    if name == "f16c":
        if not cpu_has_f16c():
            raise ValueError("this CPU has no F16C instructions")
        _f16c = True
    elif name == "software":
        _f16c = False
    else:
        raise ValueError(f"unknown conversion {name!r}: expected 'f16c' or 'software'")
    return previous


def half_to_float_array(values):
    """float16 values (any shape) as float32, by the conversion scoring uses now."""
    h = numpy.ascontiguousarray(values, dtype=numpy.float16)
    out = numpy.empty(h.shape, dtype=numpy.float32)
    cdef const uint16_t[::1] src = h.reshape(-1).view(numpy.uint16)
    cdef float[::1] dst = out.reshape(-1)
    cdef size_t i
    if _f16c:
        for i in range(src.shape[0]):
            dst[i] = half_to_float_f16c(src[i])
    else:
        for i in range(src.shape[0]):
            dst[i] = half_to_float_soft(src[i])
    return out


MAX_CLASSES = 65535   # accumulators are keyed by (row << 16 | class)

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
# Widened hot rows take at most this many bytes, beyond the file's own (a quarter-dense row of
# a parser's 108 classes is ~30 entries; EWT models widen 1-3 MB of rows).
cdef size_t HOT_ROW_BYTES = 32 << 20


cdef inline uint64_t _ukey(int64_t row, int c) noexcept nogil:
    return (((<uint64_t>row) << 16) | <uint64_t>c) + 1

# The precisions a saved model's rows can be stored in (the model's `precision` setting).
PRECISIONS = ("float32", "float16", "int8")
_DTYPE_OF = {"float32": numpy.float32, "float16": numpy.float16, "int8": numpy.int8}


cdef inline size_t _bucket(hash_t key, size_t mask) noexcept nogil:
    # A key's home: the first bucket of a group of four (one cache line, see
    # structperc_probe_groups). Keys are already well mixed 64-bit hashes; fold the high bits
    # in anyway.
    return <size_t>((key ^ (key >> 29)) & mask & ~(<size_t>3))


cdef inline int64_t _row_from(int64_t v, const int64_t* row_at) noexcept nogil:
    # The row index of what a bucket holds, given _rows_by_entry's table (NULL when no bucket holds
    # a sparse reference): a reference maps through it; a row index, hot or not, is below ROW_BITS.
    return row_at[v & ROW_MASK] if v >= SPARSE_REF else v & ROW_MASK


cdef inline weight_t _averaged(weight_t w, double u, double clock) noexcept nogil:
    # The one formula for an averaged weight, so scores computed on the fly, a materialized
    # view and saved weights agree to the bit.
    return <weight_t>(<double>w - u / clock)


cdef size_t _round_pow2(size_t n) noexcept nogil:
    cdef size_t p = 1
    while p < n:
        p <<= 1
    return p


cdef inline int _find_block(AveragedWeights self, const hash_t* keys, int start, int stop,
                            int64_t* found) noexcept nogil:
    # The rows of keys[start:stop] (at most 64) that exist, into `found`, as their buckets hold
    # them (see _probe); returns how many.
    # Lookups are cache misses, so every bucket is prefetched before the first is read.
    cdef size_t mask = self._capacity - 1
    cdef int i, n_found = 0
    cdef int64_t r
    cdef hash_t key
    for i in range(start, stop):
        prefetch(&self._table[_bucket(keys[i] if keys[i] else 1, mask)])
    for i in range(start, stop):
        key = keys[i] if keys[i] else 1
        r = probe_groups(self._table, mask, _bucket(key, mask), key)
        found[n_found] = r      # kept only if the key has a row (no branch on it)
        n_found += r >= 0
    return n_found


cdef inline void _add_sparse(AveragedWeights self, int64_t r, weight_t* out) noexcept nogil:
    # out += sparse row r of a frozen table.
    _add_entries(self, self._indptr[r], self._indptr[r + 1],
                 self._scales[r] if self.frozen_type == FROZEN_I8 else 0, out)


cdef inline void _add_entries(AveragedWeights self, size_t lo, size_t hi, weight_t s,
                              weight_t* out) noexcept nogil:
    # out += the entries lo..hi - 1 of a frozen table (one row's; s: an int8 row's scale): the
    # one dequantization formula (scale * q in float32 for int8, exact widening for float16),
    # shared by scoring and export, so scores and exported weights agree to the bit.
    cdef size_t e
    cdef const uint8_t* c8 = <const uint8_t*>self._cols
    cdef const uint16_t* c16 = <const uint16_t*>self._cols
    cdef const int8_t* q = <const int8_t*>self._Q
    cdef const uint16_t* h = <const uint16_t*>self._Q
    cdef const weight_t* f = <const weight_t*>self._Q
    if hi - lo == <size_t>self.n_classes and self._full_rows_in_order and self.frozen_type != FROZEN_I8:
        # A full row's entries are its classes in order (load checked): a dense add, no
        # class reads.
        if self.frozen_type == FROZEN_F32:
            add_dense(&f[lo], out, self.n_classes)
        elif _f16c:
            add_full_f16_f16c(&h[lo], out, self.n_classes)
        else:
            add_full_f16_soft(&h[lo], out, self.n_classes)
        return
    if self.frozen_type == FROZEN_I8:
        if self._wide_cols:
            for e in range(lo, hi):
                out[c16[e]] += s * <weight_t>q[e]
        else:
            for e in range(lo, hi):
                out[c8[e]] += s * <weight_t>q[e]
    elif self.frozen_type == FROZEN_F16:
        if _f16c:
            add_f16_f16c(h, self._cols, self._wide_cols, lo, hi, out)
        else:
            add_f16_soft(h, self._cols, self._wide_cols, lo, hi, out)
    else:
        if self._wide_cols:
            for e in range(lo, hi):
                out[c16[e]] += f[e]
        else:
            for e in range(lo, hi):
                out[c8[e]] += f[e]


cdef inline void _add_entries_prefix(AveragedWeights self, size_t lo, size_t hi, weight_t s, int m,
                                     weight_t* out) noexcept nogil:
    # _add_entries for the classes below m only (score_prefix), each weight dequantized by the
    # same formula (float16: the software widening, equal to F16C's on every value).
    cdef size_t e
    cdef int c
    if hi - lo == <size_t>self.n_classes and self._full_rows_in_order and self.frozen_type != FROZEN_I8:
        hi = lo + <size_t>m   # a full row lists its classes in order (load checked)
    for e in range(lo, hi):
        c = (<const uint16_t*>self._cols)[e] if self._wide_cols else (<const uint8_t*>self._cols)[e]
        if c >= m:
            continue
        if self.frozen_type == FROZEN_I8:
            out[c] += s * <weight_t>(<const int8_t*>self._Q)[e]
        elif self.frozen_type == FROZEN_F16:
            out[c] += half_to_float_soft((<const uint16_t*>self._Q)[e])
        else:
            out[c] += (<const weight_t*>self._Q)[e]


cdef inline void _add_found_prefix(AveragedWeights self, int64_t v, int m, weight_t* out) noexcept nogil:
    # out[:m] += the first m classes of the row a bucket of a loaded table holds (v, as
    # _find_block gives it): a sparse reference, a hot (dense) row, or a row index.
    cdef size_t lo
    cdef int c
    cdef const char* row
    if v >= SPARSE_REF:
        lo = <size_t>(v & ROW_MASK)
        _add_entries_prefix(self, lo, lo + <size_t>((v >> ROW_BITS) & 0xFFFF), 0, m, out)
    elif v > ROW_MASK:
        row = <const char*>self._dense + ((v >> ROW_BITS) - 1) * self._dense_stride * (
            2 if self._dense_half else sizeof(float))
        for c in range(m):
            out[c] += (half_to_float_soft((<const uint16_t*>row)[c]) if self._dense_half
                       else (<const float*>row)[c])
    else:
        _add_entries_prefix(self, self._indptr[v], self._indptr[v + 1],
                            self._scales[v] if self.frozen_type == FROZEN_I8 else 0, m, out)


cdef class AveragedWeights:
    def __cinit__(self, int n_classes, size_t n_buckets=1 << 16):
        if n_classes < 1 or n_classes > MAX_CLASSES:
            raise ValueError(f"n_classes must be in 1..{MAX_CLASSES}, got {n_classes}")
        self.n_classes = n_classes
        self._capacity = _round_pow2(max(n_buckets, DEF_MIN_BUCKETS))
        self._table = <Bucket*>calloc_lines(self._capacity, sizeof(Bucket))
        self._rows_capacity = 0
        self.n_rows = 0
        self._W = NULL
        self._U = NULL
        self._u_capacity = 0
        self._u_count = 0
        self._umask = NULL
        self._mask_words = (n_classes + 63) // 64
        self._avg = NULL
        self._avg_valid = False
        self.use_averages = False
        self.clock = 0
        self.version = 0
        self.tie_width = 1
        self.frozen_type = FROZEN_NONE
        self._Q = NULL
        self._scales = NULL
        self._indptr = NULL
        self._cols = NULL
        self._wide_cols = False
        self._frozen_owner = None
        self._dirty = NULL
        self._dirty_rows = 0
        self._jrows = NULL
        self._jn = 0
        self._jcap = 0
        self._jstart_rows = 0
        self._journal_lost = False
        self._dense = NULL
        self._dense_half = False
        self.n_dense = 0
        self._dense_stride = 0
        if self._table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self._table)
        free(self._W)
        self._free_accumulators()
        free(self._avg)
        self._journal_free()
        free(self._dense)

    @property
    def n_buckets(self):
        return self._capacity

    @property
    def precision(self):
        """The precision of loaded rows read in place ("float32", "float16", "int8"), or None
        when the rows are float32 weights this table owns (trained, or changed after loading)."""
        if self.frozen_type == FROZEN_NONE:
            return None
        return PRECISIONS[self.frozen_type - 1]

    @property
    def has_accumulators(self):
        """Whether the averaging accumulators exist (only once something has been trained)."""
        return self._U != NULL

    @property
    def n_accumulators(self):
        """How many (row, class) averaging accumulators exist: one per weight updates touched."""
        return self._u_count

    @property
    def averages_materialized(self):
        """Whether average() has made a copy of the averaged weights that is still valid."""
        return self._avg_valid

    cdef int64_t find(self, hash_t key) noexcept nogil:
        cdef int64_t r = self._probe(key)
        return self._row_of(r) if r >= 0 else -1

    cdef int64_t _row_of(self, int64_t v) noexcept nogil:
        # The row index of what a bucket holds (see SPARSE_REF). A sparse reference names its
        # first entry: its row is the last one starting there (rows before it that start there
        # too are empty, and an empty row's bucket holds its index).
        if v < SPARSE_REF:
            return v & ROW_MASK
        cdef size_t at = <size_t>(v & ROW_MASK)
        cdef size_t lo = 0, hi = self.n_rows, mid
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._indptr[mid] <= at:
                lo = mid
            else:
                hi = mid
        return <int64_t>lo

    cdef int64_t* _rows_by_entry(self) noexcept nogil:
        # For listing many buckets' rows at once: a table (the caller frees it; NULL when out of
        # memory) from each nonempty row's first entry to the row, the entry a sparse reference
        # names (see _row_of). One int64 per stored weight.
        cdef size_t r
        cdef int64_t* row_at = <int64_t*>malloc(max(<size_t>self._indptr[self.n_rows], <size_t>1) * sizeof(int64_t))
        if row_at != NULL:
            for r in range(self.n_rows):
                if self._indptr[r + 1] > self._indptr[r]:
                    row_at[self._indptr[r]] = <int64_t>r
        return row_at

    cdef int64_t _ref_of(self, size_t r) noexcept nogil:
        # What row r's bucket holds when it is not a hot row (see SPARSE_REF).
        cdef size_t lo = self._indptr[r]
        cdef size_t count = self._indptr[r + 1] - lo
        if self.frozen_type == FROZEN_I8 or count == 0 or count > 0xFFFF or lo > <size_t>ROW_MASK:
            return <int64_t>r
        return SPARSE_REF | <int64_t>lo | (<int64_t>count << ROW_BITS)

    cdef void _encode_refs(self) noexcept nogil:
        # Every loaded row that is not hot gets its entries' reference in its bucket.
        cdef size_t b
        cdef int64_t v
        for b in range(self._capacity):
            v = self._table[b].row
            if self._table[b].key != 0 and (v <= ROW_MASK or v >= SPARSE_REF):
                self._table[b].row = self._ref_of(<size_t>self._row_of(v))

    cdef int64_t _probe(self, hash_t key) noexcept nogil:
        # The bucket's row as stored: a loaded table's hot rows carry their dense slot + 1
        # above ROW_BITS; -1 when the key has no row.
        if key == 0:
            key = 1
        cdef size_t mask = self._capacity - 1
        return probe_groups(self._table, mask, _bucket(key, mask), key)

    cdef int64_t _insert(self, hash_t key) except -1 nogil:
        """Return the row of key, creating a zero row if it is new (a row to write to: loaded
        rows read in place are copied into float32 weights first)."""
        if self.frozen_type != FROZEN_NONE:
            self._thaw()
        if key == 0:
            key = 1
        cdef size_t mask = self._capacity - 1
        cdef size_t b = _bucket(key, mask)
        while self._table[b].key != 0:
            if self._table[b].key == key:
                return self._table[b].row
            b = (b + 1) & mask
        if (self.n_rows + 1) * 2 > self._capacity:
            self._grow_table()
            return self._insert(key)
        if self.n_rows == self._rows_capacity:
            self._grow_rows(max(self._rows_capacity * 2, 1024))
        cdef int64_t row = self.n_rows
        self._table[b].key = key
        self._table[b].row = row
        self.n_rows += 1
        memset(&self._W[row * self.n_classes], 0, self.n_classes * sizeof(weight_t))
        if self._umask != NULL:
            memset(&self._umask[row * self._mask_words], 0, self._mask_words * sizeof(uint64_t))
        if self.noise_scale != 0.0:
            self._init_noise(key, &self._W[row * self.n_classes])
        return row

    cdef void _init_noise(self, hash_t key, weight_t* row) noexcept nogil:
        # A pure function of (seed, key, class): runs that see features in any order agree.
        cdef int c
        cdef hash_t h
        for c in range(self.n_classes):
            h = mix64(key ^ mix64(self.noise_seed + <hash_t>c * 0x9e3779b97f4a7c15ULL))
            row[c] = <weight_t>(self.noise_scale * ((<double>(h >> 11) / 9007199254740992.0) * 2.0 - 1.0))

    cdef int _grow_table(self) except -1 nogil:
        cdef size_t old_capacity = self._capacity
        cdef Bucket* old = self._table
        cdef size_t new_capacity = old_capacity * 2
        cdef Bucket* table = <Bucket*>calloc_lines(new_capacity, sizeof(Bucket))
        if table == NULL:
            with gil:
                raise MemoryError("could not grow the feature table")
        cdef size_t mask = new_capacity - 1
        cdef size_t i, b
        for i in range(old_capacity):
            if old[i].key != 0:
                b = _bucket(old[i].key, mask)
                while table[b].key != 0:
                    b = (b + 1) & mask
                table[b] = old[i]
        self._table = table
        self._capacity = new_capacity
        free(old)
        return 0

    cdef int _grow_rows(self, size_t n) except -1 nogil:
        cdef size_t C = self.n_classes
        cdef weight_t* W = <weight_t*>realloc(self._W, n * C * sizeof(weight_t))
        if W == NULL:
            with gil:
                raise MemoryError("could not grow the weight rows")
        self._W = W
        cdef uint64_t* umask
        if self._umask != NULL:
            umask = <uint64_t*>realloc(self._umask, n * self._mask_words * sizeof(uint64_t))
            if umask == NULL:
                with gil:
                    raise MemoryError("could not grow the weight rows")
            self._umask = umask
        free(self._avg)
        self._avg = NULL
        self._avg_valid = False
        self._rows_capacity = n
        return 0

    cdef int _thaw(self) except -1 nogil:
        """Copy loaded rows (read in place, in their saved precision) into float32 weights this
        table owns, so they can be trained; nothing to do for rows W already holds."""
        if self.frozen_type == FROZEN_NONE:
            return 0
        cdef size_t C = self.n_classes
        cdef size_t cap = max(self.n_rows, <size_t>1024)
        cdef weight_t* W = <weight_t*>calloc(cap * C, sizeof(weight_t))
        if W == NULL:
            with gil:
                raise MemoryError("could not allocate the weight rows")
        # Buckets get their row index back (one pass through _rows_by_entry, not a search per
        # bucket).
        cdef size_t r, b
        cdef int64_t v
        cdef int64_t* row_at = self._rows_by_entry()
        if row_at == NULL:
            free(W)
            with gil:
                raise MemoryError("could not allocate the weight rows")
        for r in range(self.n_rows):
            self._frozen_row(r, &W[r * C])
        self._drop_hot_rows()
        for b in range(self._capacity):
            v = self._table[b].row
            if self._table[b].key != 0:
                self._table[b].row = _row_from(v, row_at)
        free(row_at)
        free(self._W)
        self._W = W
        self._rows_capacity = cap
        self.frozen_type = FROZEN_NONE
        self._Q = NULL
        self._scales = NULL
        self._indptr = NULL
        self._cols = NULL
        with gil:
            self._frozen_owner = None
        return 0

    cdef void _frozen_row(self, int64_t r, weight_t* out) noexcept nogil:
        # Row r as dense float32 weights (what scoring adds: _add_sparse's arithmetic).
        memset(out, 0, self.n_classes * sizeof(weight_t))
        _add_sparse(self, r, out)

    cdef int _widen_hot_rows(self, size_t max_bytes) except -1 nogil:
        # Loaded rows with at least a quarter of their classes nonzero (full ones only when
        # all fit), widened into dense rows (float16 for a float16 table, else float32 by
        # _frozen_row; either way a dense row adds what its sparse add would add), as many as
        # fit in max_bytes: a tagger's lookups hit rows of ~29 nonzero weights on
        # average, a parser's ~46, all in a few thousand rows, and a dense row is added with
        # SIMD after one read instead of a scatter after three.
        self._drop_hot_rows()
        cdef size_t C = self.n_classes
        cdef size_t e
        cdef const uint8_t* c8 = <const uint8_t*>self._cols
        cdef const uint16_t* c16 = <const uint16_t*>self._cols
        # A float16 table's rows stay float16 (four cache lines a parser row instead of seven,
        # and the same sums: widening a saved half is exact either way, here or while adding);
        # float32 and int8 rows become float32.
        cdef bint half = self.frozen_type == FROZEN_F16
        cdef size_t item = 2 if half else sizeof(float)
        cdef size_t stride = (C + 15) & ~(<size_t>15)      # whole 64-byte lines
        if half:
            stride = (C + 31) & ~(<size_t>31)
        cdef size_t b, r, count, n = 0, n_full = 0, slot = 0
        cdef size_t limit = max_bytes // (stride * item)
        cdef const uint16_t* h = <const uint16_t*>self._Q
        cdef uint16_t* row16
        cdef int64_t v
        cdef bint with_full = True
        self._full_rows_in_order = True
        for r in range(self.n_rows):
            if self._indptr[r + 1] - self._indptr[r] == C:
                for e in range(C):
                    if (c16[self._indptr[r] + e] if self._wide_cols else c8[self._indptr[r] + e]) != e:
                        self._full_rows_in_order = False
                        break
                if not self._full_rows_in_order:
                    break
        for r in range(self.n_rows):
            count = self._indptr[r + 1] - self._indptr[r]
            if count * 4 >= C:
                n += 1
                n_full += count == C
        if n > limit and self.frozen_type != FROZEN_I8 and self._full_rows_in_order:
            # Too many to widen (a latent NER's rows are all full): full rows are added in
            # place, densely, so only the others are widened.
            with_full = False
            n -= n_full
        n = min(n, limit, <size_t>((1 << 21) - 2))   # slot + 1 below bit 62 (SPARSE_REF)
        if n == 0:
            return 0
        cdef char* dense = <char*>calloc_lines(n * stride, item)
        if dense == NULL:
            return 0     # an optimization only: the sparse rows serve every lookup
        for b in range(self._capacity):
            if slot == n:
                break
            if self._table[b].key == 0:
                continue
            v = self._table[b].row
            if v >= SPARSE_REF:   # the count is in the reference: no search for a row not hot
                count = <size_t>((v >> ROW_BITS) & 0xFFFF)
                if count * 4 < C or (count == C and not with_full):
                    continue
            r = <size_t>self._row_of(v)
            count = self._indptr[r + 1] - self._indptr[r]
            if count * 4 >= C and (with_full or count < C):
                if half:
                    row16 = <uint16_t*>(dense + slot * stride * item)
                    for e in range(self._indptr[r], self._indptr[r + 1]):
                        row16[c16[e] if self._wide_cols else c8[e]] = h[e]
                else:
                    self._frozen_row(r, <float*>(dense + slot * stride * item))
                slot += 1
                self._table[b].row = <int64_t>(r | (slot << ROW_BITS))
        self._dense = dense
        self._dense_half = half
        self._dense_stride = stride
        self.n_dense = n
        return 0

    cdef void _drop_hot_rows(self) noexcept nogil:
        cdef size_t b
        if self._dense == NULL:
            return
        for b in range(self._capacity):
            if self._table[b].key != 0 and ROW_MASK < self._table[b].row < SPARSE_REF:
                self._table[b].row = self._ref_of(<size_t>(self._table[b].row & ROW_MASK))
        free(self._dense)
        self._dense = NULL
        self.n_dense = 0
        self._dense_stride = 0

    cdef int _ensure_accumulators(self) except -1 nogil:
        # No accumulator is zero: until now W was its own average (clock 0, or a loaded model),
        # and W - 0 / clock keeps it so.
        if self._U == NULL:
            self._U = <UEntry*>calloc(1024, sizeof(UEntry))
            self._umask = <uint64_t*>calloc(max(self._rows_capacity, 1) * self._mask_words, sizeof(uint64_t))
            if self._U == NULL or self._umask == NULL:
                self._free_accumulators()
                with gil:
                    raise MemoryError("could not allocate the averaging accumulators")
            self._u_capacity = 1024
            self._u_count = 0
        return 0

    cdef void _free_accumulators(self) noexcept nogil:
        free(self._U)
        free(self._umask)
        self._U = NULL
        self._umask = NULL
        self._u_capacity = 0
        self._u_count = 0

    cdef double* _u_slot(self, int64_t row, int c) except NULL nogil:
        # The accumulator of (row, c), created at zero (and marked in _umask) if new. The table
        # is filled up to 3/4: it is read only by updates and averaging, not by scoring W.
        if (self._u_count + 1) * 4 > self._u_capacity * 3:
            self._u_grow()
        cdef uint64_t key = _ukey(row, c)
        cdef size_t mask = self._u_capacity - 1
        cdef size_t b = <size_t>(mix64(key) & mask)
        while self._U[b].key != 0:
            if self._U[b].key == key:
                return &self._U[b].value
            b = (b + 1) & mask
        self._U[b].key = key
        self._U[b].value = 0.0
        self._u_count += 1
        self._umask[row * self._mask_words + c // 64] |= (<uint64_t>1) << (c % 64)
        return &self._U[b].value

    cdef double _u_get(self, int64_t row, int c) noexcept nogil:
        if self._U == NULL:
            return 0.0
        cdef uint64_t key = _ukey(row, c)
        cdef size_t mask = self._u_capacity - 1
        cdef size_t b = <size_t>(mix64(key) & mask)
        while self._U[b].key != 0:
            if self._U[b].key == key:
                return self._U[b].value
            b = (b + 1) & mask
        return 0.0

    cdef int _u_grow(self) except -1 nogil:
        cdef size_t old_capacity = self._u_capacity
        cdef size_t capacity = max(old_capacity * 2, <size_t>1024)
        cdef UEntry* old = self._U
        cdef UEntry* table = <UEntry*>calloc(capacity, sizeof(UEntry))
        if table == NULL:
            with gil:
                raise MemoryError("could not grow the averaging accumulators")
        cdef size_t i, b, mask = capacity - 1
        for i in range(old_capacity):
            if old[i].key != 0:
                b = <size_t>(mix64(old[i].key) & mask)
                while table[b].key != 0:
                    b = (b + 1) & mask
                table[b] = old[i]
        self._U = table
        self._u_capacity = capacity
        free(old)
        return 0

    cdef void _averaged_row(self, int64_t r, weight_t* out) noexcept nogil:
        # Row r's averaged weights W - U / clock (W itself where no accumulator exists, which
        # is what the formula gives there).
        cdef size_t C = self.n_classes
        memcpy(out, &self._W[r * C], C * sizeof(weight_t))
        if self._U == NULL or self.clock == 0:
            return
        cdef double t = <double>self.clock
        cdef int w, c
        cdef uint64_t bits
        for w in range(self._mask_words):
            bits = self._umask[r * self._mask_words + w]
            while bits:
                c = w * 64 + ctz64(bits)
                out[c] = _averaged(self._W[r * C + c], self._u_get(r, c), t)
                bits &= bits - 1

    cdef bint _averages_on_the_fly(self) noexcept nogil:
        return self.use_averages and not self._avg_valid and self._U != NULL and self.clock > 0

    cdef void prefetch_keys(self, const hash_t* keys, int n_keys) noexcept nogil:
        # Start loading the buckets of keys that add_rows will look up soon.
        cdef size_t mask = self._capacity - 1
        cdef int i
        for i in range(n_keys):
            prefetch(&self._table[_bucket(keys[i] if keys[i] else 1, mask)])

    cdef void add_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil:
        # Lookups are cache misses, so they are issued in three passes (buckets, then rows,
        # then sums) to let the memory system serve them in parallel.
        cdef int j, c, n_found = 0
        cdef int C = self.n_classes
        cdef const weight_t* base = self._avg if (self.use_averages and self._avg_valid) else self._W
        cdef int64_t found[64]
        cdef const weight_t* w
        cdef int start
        if self.frozen_type != FROZEN_NONE:
            self._add_frozen_rows(keys, n_keys, scores)
            return
        if self._averages_on_the_fly():
            self._add_averaged_rows(keys, n_keys, scores)
            return
        for start in range(0, n_keys, 64):
            n_found = _find_block(self, keys, start, min(n_keys, start + 64), found)
            for j in range(n_found):
                # Every cache line of the row: a parser's rows (~100 classes) span seven.
                w = &base[found[j] * C]
                for c in range(0, C, 16):
                    prefetch(&w[c])
            for j in range(n_found):
                w = &base[found[j] * C]
                for c in range(C):
                    scores[c] += w[c]

    cdef void score_prefix(self, const hash_t* keys, int n_keys, int m, weight_t* out) noexcept nogil:
        # out[:m] += classes 0..m-1 of the rows, the floats add_rows makes from out to the bit
        # (each class is summed over the rows in key order either way), reading only those
        # classes of a loaded table: a parser state where only SHIFT and BREAK are valid needs
        # two of 108. The caller sets out[:m] (zeros, or the sums of rows before these keys).
        cdef int j, c, n_found, start, C = self.n_classes
        cdef int64_t found[64]
        cdef weight_t tmp[256]
        cdef weight_t* full
        if m > C:
            m = C
        if self.frozen_type == FROZEN_NONE or m == C:
            full = &tmp[0]
            if C > 256:
                full = <weight_t*>malloc(C * sizeof(weight_t))
            if full == NULL:   # out of memory: nothing to read the sums into
                for c in range(m):
                    out[c] = NAN
                return
            memset(full, 0, C * sizeof(weight_t))
            memcpy(full, out, m * sizeof(weight_t))
            self.add_rows(keys, n_keys, full)
            memcpy(out, full, m * sizeof(weight_t))
            if C > 256:
                free(full)
            return
        for start in range(0, n_keys, 64):
            n_found = _find_block(self, keys, start, min(n_keys, start + 64), found)
            for j in range(n_found):
                _add_found_prefix(self, found[j], m, out)

    cdef void _add_frozen_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil:
        # add_rows for loaded rows, dequantized while adding. A hot row is one dependent read
        # after its bucket (a dense row, added with SIMD); so is a sparse row whose bucket holds
        # its entries' reference (float32 and float16 tables); an int8 row is two (row bounds
        # and scale, then entries). So a block of keys is taken one stage at a time, every read
        # of a stage prefetched first; rows are still added in key order, so sums are the same
        # to the bit as row-by-row sparse adds (a dense row's zeros add nothing).
        cdef int j, n_found, C = self.n_classes
        cdef int kind = self.frozen_type
        cdef size_t lo, hi, line
        cdef size_t item = 4 if kind == FROZEN_F32 else 2 if kind == FROZEN_F16 else 1
        cdef size_t col_item = 2 if self._wide_cols else 1
        cdef bint half = self._dense_half
        cdef size_t row_bytes = self._dense_stride * (2 if half else sizeof(float))
        cdef const char* vals = <const char*>self._Q
        cdef const char* cols = <const char*>self._cols
        cdef const char* dense = <const char*>self._dense
        cdef const uint16_t* run[64]
        cdef int n_run = 0
        cdef bint runs_ok = half and _f16c
        cdef bint sparse_f16c = kind == FROZEN_F16 and _f16c
        cdef int64_t found[64]
        cdef int64_t v
        cdef int start
        for start in range(0, n_keys, 64):
            n_found = _find_block(self, keys, start, min(n_keys, start + 64), found)
            for j in range(n_found):
                v = found[j]
                if v >= SPARSE_REF:
                    lo = <size_t>(v & ROW_MASK)
                    prefetch(vals + lo * item)
                    if <int>((v >> ROW_BITS) & 0xFFFF) < C or not self._full_rows_in_order:
                        prefetch(cols + lo * col_item)
                elif v > ROW_MASK:
                    for line in range(0, row_bytes, 64):
                        prefetch(dense + ((v >> ROW_BITS) - 1) * row_bytes + line)
                else:
                    prefetch(&self._indptr[v])
                    if kind == FROZEN_I8:
                        prefetch(&self._scales[v])
            for j in range(n_found):
                v = found[j]
                if v <= ROW_MASK:
                    lo = self._indptr[v]
                    hi = self._indptr[v + 1]
                    prefetch(vals + lo * item)
                    if hi - lo < <size_t>C or not self._full_rows_in_order:   # full: no classes read
                        prefetch(cols + lo * col_item)
            for j in range(n_found):
                v = found[j]
                if n_run and not (ROW_MASK < v < SPARSE_REF):
                    add_full_rows_f16c(run, n_run, scores, C)
                    n_run = 0
                if v >= SPARSE_REF:
                    lo = <size_t>(v & ROW_MASK)
                    hi = lo + <size_t>((v >> ROW_BITS) & 0xFFFF)
                    if sparse_f16c and hi - lo < <size_t>C:   # the common case, without _add_entries' tests
                        add_f16_f16c(<const uint16_t*>vals, self._cols, self._wide_cols, lo, hi, scores)
                    else:
                        _add_entries(self, lo, hi, 0, scores)
                elif v > ROW_MASK:
                    if runs_ok:
                        # Consecutive hot rows are added as one run (see add_full_rows_f16c).
                        run[n_run] = <const uint16_t*>(dense + ((v >> ROW_BITS) - 1) * row_bytes)
                        n_run += 1
                        continue
                    if not half:
                        add_dense(<const float*>(dense + ((v >> ROW_BITS) - 1) * row_bytes), scores, C)
                    else:   # float16 without F16C (with it, rows went into the run above)
                        add_full_f16_soft(<const uint16_t*>(dense + ((v >> ROW_BITS) - 1) * row_bytes), scores, C)
                else:
                    _add_sparse(self, v, scores)
            if n_run:
                add_full_rows_f16c(run, n_run, scores, C)
                n_run = 0

    cdef void _add_averaged_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil:
        # Scores with the average W - U / clock of each row, without a copy of the model.
        cdef int i, c, w
        cdef int C = self.n_classes
        cdef int words = self._mask_words
        cdef double clock = <double>self.clock
        cdef int64_t r
        cdef const weight_t* row
        cdef const uint64_t* bits
        for i in range(n_keys):
            r = self.find(keys[i])
            if r >= 0:
                row = &self._W[r * C]
                bits = &self._umask[r * words]
                for c in range(C):
                    if bits[c >> 6] & ((<uint64_t>1) << (c & 63)):
                        scores[c] += _averaged(row[c], self._u_get(r, c), clock)
                    else:
                        scores[c] += row[c]

    cdef int update(self, hash_t key, int clas, weight_t delta) except -1 nogil:
        if delta == 0:
            return 0
        cdef int64_t r = self._insert(key)
        if self._U == NULL:
            self._ensure_accumulators()
        cdef int c = clas
        cdef int end
        if self.tie_width > 1 and (key & TIED_BIT):
            c -= clas % self.tie_width
            end = c + self.tie_width
        else:
            end = c + 1
        cdef double* u
        while c < end:
            self._W[r * self.n_classes + c] += delta
            u = self._u_slot(r, c)
            u[0] += <double>self.clock * <double>delta
            if self._dirty != NULL:
                self._journal_mark(r, c)
            c += 1
        self._avg_valid = False
        self.version += 1
        return 0

    cdef int update_many(self, const hash_t* keys, int n_keys, int clas, weight_t delta) except -1 nogil:
        cdef int i
        for i in range(n_keys):
            self.update(keys[i], clas, delta)
        return 0

    cdef void tick(self) noexcept nogil:
        self.clock += 1
        self._avg_valid = False   # the average W - U / clock moves with the clock alone

    def next_example(self):
        """Tick the averaging clock: call once per training example, mistake or not."""
        self.tick()

    def average(self):
        """Materialize the averaged view (W - U / clock), if updates have invalidated it.

        Averaged scores do not need it (they are computed as rows are read); it makes them
        cheaper to read, for as long as no update or clock tick invalidates it, at the cost of
        one more copy of the weights.
        """
        if self._avg_valid:
            return
        cdef size_t n = self.n_rows * self.n_classes
        if self._U == NULL:
            return   # W is the average
        if self._avg == NULL and self._rows_capacity > 0:
            self._avg = <weight_t*>calloc(self._rows_capacity * self.n_classes, sizeof(weight_t))
            if self._avg == NULL:
                raise MemoryError()
        cdef size_t r, C = self.n_classes
        with nogil:
            for r in range(self.n_rows):
                self._averaged_row(r, &self._avg[r * C])
        self._avg_valid = True

    def set_use_averages(self, bint value):
        """Score with the averaged weights (prediction) or the current weights (training).
        Setting the value it already has changes nothing, the version included: every predict
        call sets it, and a new version would empty the score caches keyed on it (a loaded
        model's word-type cache) at every batch."""
        if value == self.use_averages:
            return
        self.use_averages = value
        self.version += 1

    def set_tie_width(self, int width):
        """Update keys marked tied (TIED_BIT) across groups of `width` classes (1 = never)."""
        if width < 1 or self.n_classes % width:
            raise ValueError(f"tie width {width} does not divide {self.n_classes} classes")
        self.tie_width = width

    def set_noise(self, double scale, hash_t seed=0):
        """Start rows created from now on at seeded uniform noise in [-scale, scale]."""
        if not scale >= 0.0:
            raise ValueError(f"noise scale must be >= 0, got {scale}")
        self.noise_scale = scale
        self.noise_seed = seed

    def reset_to_average(self):
        """Replace the current weights by the averaged ones, keeping the running average exact.

        The jump is recorded as an ordinary update at the current clock, so the average over all
        examples stays correct (sun2009's modified parameter averaging).
        """
        if self._U == NULL or self.clock == 0:
            return   # W is the average already
        cdef size_t i, idx
        cdef double delta, t = <double>self.clock
        cdef weight_t avg
        cdef uint64_t key
        for i in range(self._u_capacity):
            key = self._U[i].key
            if key == 0:
                continue
            key -= 1
            idx = <size_t>(key >> 16) * self.n_classes + <size_t>(key & 0xffff)
            avg = _averaged(self._W[idx], self._U[i].value, t)
            delta = <double>avg - <double>self._W[idx]
            self._W[idx] = avg
            self._U[i].value += t * delta
            if self._dirty != NULL:
                self._journal_mark(<int64_t>(key >> 16), <int>(key & 0xffff))
        self._avg_valid = False
        self.version += 1

    def resize(self, int n_classes):
        """Grow the number of classes, keeping existing weights; new columns start at zero."""
        if n_classes < self.n_classes:
            raise ValueError("AveragedWeights can only grow")
        if n_classes == self.n_classes:
            return
        if n_classes > MAX_CLASSES:
            raise ValueError(f"n_classes must be at most {MAX_CLASSES}, got {n_classes}")
        self._thaw()
        self._drop_journal()
        cdef size_t r, C_old = self.n_classes, C = n_classes
        cdef size_t cap = max(self._rows_capacity, 1)
        cdef int words_old = self._mask_words, words = (n_classes + 63) // 64
        cdef weight_t* W = <weight_t*>calloc(cap * C, sizeof(weight_t))
        cdef uint64_t* umask = NULL
        if self._umask != NULL:
            umask = <uint64_t*>calloc(cap * words, sizeof(uint64_t))
        if W == NULL or (self._umask != NULL and umask == NULL):
            free(W)
            free(umask)
            raise MemoryError()
        for r in range(self.n_rows):
            memcpy(&W[r * C], &self._W[r * C_old], C_old * sizeof(weight_t))
            if umask != NULL:   # accumulators are keyed by (row, class): only the marks move
                memcpy(&umask[r * words], &self._umask[r * words_old], words_old * sizeof(uint64_t))
        free(self._W)
        free(self._avg)
        self._W = W
        if umask != NULL:
            free(self._umask)
            self._umask = umask
        self._mask_words = words
        self._avg = NULL
        self._avg_valid = False
        self._rows_capacity = cap
        self.n_classes = n_classes
        self.version += 1

    # Python-level access, for tests and for the component layer.

    def get(self, uint64_t key, int clas, bint averaged=False):
        cdef int64_t r = self.find(key)
        if r < 0:
            return 0.0
        if not 0 <= clas < self.n_classes:
            raise IndexError(f"class {clas} out of range for {self.n_classes} classes")
        cdef weight_t[::1] row
        if self.frozen_type != FROZEN_NONE:
            row = numpy.empty((self.n_classes,), dtype=numpy.float32)
            self._frozen_row(r, &row[0])
            return float(row[clas])
        cdef int64_t i = r * self.n_classes + clas
        if averaged and self._U != NULL and self.clock > 0:
            return float(_averaged(self._W[i], self._u_get(r, clas), <double>self.clock))
        return float(self._W[i])

    def add(self, uint64_t key, int clas, float delta):
        if not 0 <= clas < self.n_classes:
            raise IndexError(f"class {clas} out of range for {self.n_classes} classes")
        self.update(key, clas, delta)

    def score(self, keys):
        """Sum the rows of `keys` (a sequence of uint64) into a vector of class scores."""
        cdef uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        out = numpy.zeros((self.n_classes,), dtype=numpy.float32)
        cdef float[::1] o = out
        if k.shape[0]:
            self.add_rows(&k[0], k.shape[0], &o[0])
        return out

    def score_prefix_of(self, keys, int m):
        """score(keys)[:m], the same floats, reading only the first m classes of a loaded table."""
        if not 0 <= m <= self.n_classes:
            raise ValueError(f"m must be in 0..{self.n_classes}, got {m}")
        cdef uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        out = numpy.zeros((max(m, 1),), dtype=numpy.float32)
        cdef float[::1] o = out
        if k.shape[0] and m:
            self.score_prefix(&k[0], k.shape[0], m, &o[0])
        return out[:m]

    def to_arrays(self, bint averaged=True, bint prune=True):
        """Return (keys, weights): keys sorted ascending so identical models give identical bytes.

        With `prune`, rows whose weights are all zero are dropped. The weights are gathered once,
        in key order, straight into the output (a model can be hundreds of MB); `sorted_rows`
        and `gather` do the same a slice at a time.
        """
        keys, rows = self.sorted_rows(averaged, prune)
        return keys, self.gather(rows, averaged)

    def sorted_rows(self, bint averaged=True, bint prune=True, double min_abs=0.0):
        """(keys, rows): every key in ascending order with its row index, for `gather`.

        With `prune`, keys whose (averaged) weights are all at most `min_abs` in absolute value
        are left out (all zero, with the default 0).
        """
        cdef size_t C = self.n_classes
        keys, rows = self._keys_and_rows()
        cdef int64_t[::1] r
        cdef size_t i, c
        order = numpy.argsort(keys, kind="stable")
        keys = keys[order]
        rows = rows[order]
        cdef unsigned char[::1] kp
        cdef bint on_the_fly = averaged and self._U != NULL and self.clock > 0
        cdef double t = <double>self.clock
        cdef size_t at
        cdef weight_t[::1] buf = numpy.empty((C,), dtype=numpy.float32)
        cdef weight_t v
        if prune and len(keys):
            keep = numpy.zeros((len(keys),), dtype=numpy.uint8)
            kp = keep
            r = rows
            for i in range(len(keys)):
                if self.frozen_type != FROZEN_NONE:
                    self._frozen_row(r[i], &buf[0])
                elif on_the_fly:
                    self._averaged_row(r[i], &buf[0])
                else:
                    memcpy(&buf[0], &self._W[r[i] * C], C * sizeof(weight_t))
                for c in range(C):
                    v = buf[c]
                    if v > min_abs or v < -min_abs:
                        kp[i] = 1
                        break
            keep = keep.view(numpy.bool_)
            keys = keys[keep]
            rows = rows[keep]
        return keys, rows

    def gather(self, rows, bint averaged=True):
        """The weights (averaged: W - U / clock, computed here) of `rows`, as float32 n x C."""
        cdef int64_t[::1] r = numpy.ascontiguousarray(rows, dtype=numpy.int64)
        cdef size_t C = self.n_classes
        out = numpy.empty((r.shape[0], C), dtype=numpy.float32)
        cdef float[:, ::1] o = out
        cdef size_t i, c
        cdef double t = <double>self.clock
        cdef const weight_t* w
        cdef const double* u
        for i in range(<size_t>r.shape[0]):
            if r[i] < 0 or <size_t>r[i] >= self.n_rows:
                raise IndexError(f"row {r[i]} out of range for {self.n_rows} rows")
            if self.frozen_type != FROZEN_NONE:
                self._frozen_row(r[i], &o[i, 0])
                continue
            if averaged:
                self._averaged_row(r[i], &o[i, 0])
            else:
                memcpy(&o[i, 0], &self._W[r[i] * C], C * sizeof(weight_t))
        return out

    def state_arrays(self):
        """The full training state (keys, W, U, clock), for pickling mid-training; U dense."""
        keys, rows = self.sorted_rows(averaged=False, prune=False)
        W = self.gather(rows, averaged=False)
        cdef size_t C = self.n_classes
        U = numpy.zeros((len(keys), C), dtype=numpy.float64)
        if self._U == NULL:
            return keys, W, U, self.clock
        position = numpy.empty((self.n_rows,), dtype=numpy.int64)
        position[rows] = numpy.arange(len(rows), dtype=numpy.int64)
        cdef int64_t[::1] pos = position
        cdef double[:, ::1] u = U
        cdef size_t i
        cdef uint64_t key
        for i in range(self._u_capacity):
            key = self._U[i].key
            if key != 0:
                key -= 1
                u[pos[key >> 16], key & 0xffff] = self._U[i].value
        return keys, W, U, self.clock

    # Training side of distributed mixing: cells read and written in place, a change journal,
    # the mixing formula replayed in place, and the training state as sparse cells (never a dense
    # copy of the table). Cells are (key, class); a key absent from the table reads as zero.

    cdef int _journal_mark(self, int64_t row, int c) except -1 nogil:
        # Record that update() wrote (row, c); a row's first mark appends it to _jrows.
        cdef size_t words = self._mask_words
        cdef size_t n, at, w
        cdef uint64_t* dirty
        cdef int64_t* jrows
        cdef bint first = True
        if <size_t>row >= self._dirty_rows:
            n = max(self._rows_capacity, <size_t>row + 1)
            dirty = <uint64_t*>realloc(self._dirty, n * words * sizeof(uint64_t))
            if dirty == NULL:
                with gil:
                    raise MemoryError("could not grow the change journal")
            memset(&dirty[self._dirty_rows * words], 0, (n - self._dirty_rows) * words * sizeof(uint64_t))
            self._dirty = dirty
            self._dirty_rows = n
        at = <size_t>row * words
        for w in range(words):
            if self._dirty[at + w]:
                first = False
                break
        if first:
            if self._jn == self._jcap:
                jrows = <int64_t*>realloc(self._jrows, max(self._jcap * 2, <size_t>1024) * sizeof(int64_t))
                if jrows == NULL:
                    with gil:
                        raise MemoryError("could not grow the change journal")
                self._jrows = jrows
                self._jcap = max(self._jcap * 2, <size_t>1024)
            self._jrows[self._jn] = row
            self._jn += 1
        self._dirty[at + <size_t>(c // 64)] |= (<uint64_t>1) << (c % 64)
        return 0

    cdef void _journal_free(self) noexcept nogil:
        free(self._dirty)
        free(self._jrows)
        self._dirty = NULL
        self._jrows = NULL
        self._dirty_rows = 0
        self._jn = 0
        self._jcap = 0

    def _drop_journal(self):
        # A reload or resize renumbers rows or classes: a started journal no longer says anything.
        if self._dirty != NULL:
            self._journal_free()
            self._journal_lost = True

    cdef int64_t _insert_zero(self, hash_t key) except -1 nogil:
        # The row of key, created at zero if new (no noise: a mix's new rows are what the shards
        # sent, and zero elsewhere, as in WeightsMixer).
        cdef size_t before = self.n_rows
        cdef int64_t r = self._insert(key)
        if self.n_rows > before:
            memset(&self._W[r * self.n_classes], 0, self.n_classes * sizeof(weight_t))
        return r

    @property
    def journal_on(self):
        """Whether the change journal records updates (see start_journal)."""
        return self._dirty != NULL

    def start_journal(self):
        """Start the change journal afresh: from now on every (key, class) that an update (or
        reset_to_average) writes is recorded, and rows created are new, until the next call.
        Costs a bit per (row, class) written and one test per update."""
        self._thaw()
        self._journal_free()
        cdef size_t n = max(self._rows_capacity, <size_t>1)
        self._dirty = <uint64_t*>calloc(n * self._mask_words, sizeof(uint64_t))
        if self._dirty == NULL:
            raise MemoryError("could not allocate the change journal")
        self._dirty_rows = n
        self._jstart_rows = self.n_rows
        self._journal_lost = False

    def stop_journal(self):
        """Stop recording changes and free the journal."""
        self._journal_free()
        self._journal_lost = False

    def _check_journal(self):
        if self._journal_lost:
            raise ValueError("the change journal was dropped by a reload or resize: start it again")
        if self._dirty == NULL:
            raise ValueError("no change journal: call start_journal() first")

    cdef bint _row_dirty(self, size_t r) noexcept nogil:
        cdef size_t w
        if r >= self._dirty_rows:
            return False
        for w in range(<size_t>self._mask_words):
            if self._dirty[r * self._mask_words + w]:
                return True
        return False

    def journal_rows(self):
        """(keys, new): the keys of the rows updated or created since start_journal(), ascending,
        and whether each row is new (created since then)."""
        self._check_journal()
        cdef size_t i, j = 0, r, n = 0
        for i in range(self._jn):
            if <size_t>self._jrows[i] < self._jstart_rows:
                n += 1
        n += self.n_rows - self._jstart_rows
        keys = numpy.empty((n,), dtype=numpy.uint64)
        new = numpy.empty((n,), dtype=numpy.bool_)
        cdef uint64_t[::1] k = keys
        cdef uint8_t[::1] nw = new.view(numpy.uint8)
        for i in range(self._capacity):
            if self._table[i].key == 0:
                continue
            r = <size_t>self._row_of(self._table[i].row)
            if r >= self._jstart_rows or self._row_dirty(r):
                k[j] = self._table[i].key
                nw[j] = r >= self._jstart_rows
                j += 1
        order = numpy.argsort(keys, kind="stable")
        return keys[order], new[order]

    cdef double _u_at(self, int64_t row, int c) noexcept nogil:
        # The accumulator of (row, c), looked up only where _umask says one exists.
        if self._umask == NULL or not (self._umask[row * self._mask_words + c // 64] >> (c % 64)) & 1:
            return 0.0
        return self._u_get(row, c)

    cdef bint _cell_out(self, size_t r, int c, bint is_new) noexcept nogil:
        # Whether journal_cells reports (r, c): written since the start, or non-zero in a new row.
        cdef size_t C = self.n_classes
        if r < self._dirty_rows and (self._dirty[r * self._mask_words + c // 64] >> (c % 64)) & 1:
            return True
        if not is_new:
            return False
        if self._W[r * C + c] != 0:
            return True
        return self._u_at(r, c) != 0.0

    def journal_cells(self):
        """What changed since start_journal(), sparse: (keys, cols, W, U, new_keys) with the
        current W and U of every cell an update wrote and every non-zero cell of a new row, cells
        in key order, and the new rows' keys ascending. Reads only the table's buckets and the
        written cells: no dense copy of the state."""
        self._check_journal()
        keys, is_new = self.journal_rows()
        cdef const uint64_t[::1] k = keys
        cdef const uint8_t[::1] nw = is_new.view(numpy.uint8)
        cdef size_t i, n = 0, at = 0
        cdef int c, C = self.n_classes
        cdef int64_t r
        for i in range(<size_t>k.shape[0]):
            r = self.find(k[i])
            for c in range(C):
                if self._cell_out(<size_t>r, c, nw[i]):
                    n += 1
        out_keys = numpy.empty((n,), dtype=numpy.uint64)
        out_cols = numpy.empty((n,), dtype=numpy.int32)
        out_W = numpy.empty((n,), dtype=numpy.float32)
        out_U = numpy.empty((n,), dtype=numpy.float64)
        cdef uint64_t[::1] ok = out_keys
        cdef int32_t[::1] oc = out_cols
        cdef float[::1] ow = out_W
        cdef double[::1] ou = out_U
        for i in range(<size_t>k.shape[0]):
            r = self.find(k[i])
            for c in range(C):
                if self._cell_out(<size_t>r, c, nw[i]):
                    ok[at] = k[i]
                    oc[at] = c
                    ow[at] = self._W[r * C + c]
                    ou[at] = self._u_at(r, c)
                    at += 1
        return out_keys, out_cols, out_W, out_U, numpy.ascontiguousarray(keys[is_new])

    def _cell_arrays(self, keys, cols, n_values=0):
        k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        c = numpy.ascontiguousarray(cols, dtype=numpy.int32)
        if k.ndim != 1 or c.shape != k.shape:
            raise ValueError(f"{c.shape} classes for {k.shape} keys")
        if c.size and (int(c.min()) < 0 or int(c.max()) >= self.n_classes):
            raise ValueError(f"a class beyond the {self.n_classes} classes")
        return k, c

    def rows_of(self, keys):
        """The row of each key (int64), -1 where absent."""
        cdef const uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        out = numpy.empty((k.shape[0],), dtype=numpy.int64)
        cdef int64_t[::1] o = out
        cdef size_t i
        with nogil:
            for i in range(<size_t>k.shape[0]):
                o[i] = self.find(k[i])
        return out

    def get_cells(self, keys, cols):
        """(W, U) at the cells (keys[i], cols[i]): float32 current weights and float64
        accumulators, zero where the key is absent."""
        ka, ca = self._cell_arrays(keys, cols)
        self._thaw()
        cdef const uint64_t[::1] k = ka
        cdef const int32_t[::1] c = ca
        W = numpy.zeros((k.shape[0],), dtype=numpy.float32)
        U = numpy.zeros((k.shape[0],), dtype=numpy.float64)
        cdef float[::1] w = W
        cdef double[::1] u = U
        cdef size_t i, C = self.n_classes
        cdef int64_t r
        with nogil:
            for i in range(<size_t>k.shape[0]):
                r = self.find(k[i])
                if r >= 0:
                    w[i] = self._W[r * C + c[i]]
                    u[i] = self._u_at(r, c[i])
        return W, U

    def insert_keys(self, keys):
        """Create a zero row for each key not in the table yet."""
        cdef const uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        cdef size_t i
        self._thaw()
        with nogil:
            for i in range(<size_t>k.shape[0]):
                self._insert_zero(k[i])
        self._avg_valid = False
        self.version += 1

    def set_cells(self, keys, cols, W, U):
        """Write W (float32) and U (float64, the averaging accumulators) at the cells
        (keys[i], cols[i]) in place; keys not in the table get zero rows first. Other cells, the
        clock and the journal are left as they are."""
        ka, ca = self._cell_arrays(keys, cols)
        wa = numpy.ascontiguousarray(W, dtype=numpy.float32)
        ua = numpy.ascontiguousarray(U, dtype=numpy.float64)
        if wa.shape != ka.shape or ua.shape != ka.shape:
            raise ValueError(f"{wa.shape} weights and {ua.shape} accumulators for {ka.shape} cells")
        self._thaw()
        cdef const uint64_t[::1] k = ka
        cdef const int32_t[::1] c = ca
        cdef const float[::1] w = wa
        cdef const double[::1] u = ua
        cdef size_t i, C = self.n_classes
        cdef int64_t r
        if k.shape[0] and (ua != 0).any():
            self._ensure_accumulators()
        with nogil:
            for i in range(<size_t>k.shape[0]):
                r = self._insert_zero(k[i])
                self._W[r * C + c[i]] = w[i]
                if u[i] != 0.0:
                    self._u_slot(r, c[i])[0] = u[i]
                elif self._umask != NULL and (self._umask[r * self._mask_words + c[i] // 64] >> (c[i] % 64)) & 1:
                    self._u_slot(r, c[i])[0] = 0.0
        self._avg_valid = False
        self.version += 1

    def replay_mix(self, w_factors, double w_scale, u_factors, double u_scale, int64_t clock):
        """Every cell in place through the mixing formula of shards that all hold its value:
        W <- (sum_k float32(w_factors[k]) * W) * float32(w_scale), in float32 and in that order
        (W unchanged when w_factors is empty; no scaling when w_scale is 1), U <-
        (sum_k U * u_factors[k]) * u_scale in float64; then the clock is `clock`. With the
        factors WeightsMixer uses, a cell no shard changed gets the value the mixer gives it."""
        cdef const float[::1] wf = numpy.ascontiguousarray(w_factors, dtype=numpy.float32)
        cdef const double[::1] uf = numpy.ascontiguousarray(u_factors, dtype=numpy.float64)
        if clock < 0:
            raise ValueError(f"clock must be >= 0, got {clock}")
        self._thaw()
        cdef size_t i, n = self.n_rows * self.n_classes
        cdef int j, nw = wf.shape[0], nu = uf.shape[0]
        cdef float acc, tmp, x, ws = <float>w_scale
        cdef bint scale_w = w_scale != 1.0
        cdef double acc64, tmp64, y
        with nogil:
            if nw:
                for i in range(n):
                    x = self._W[i]
                    acc = 0.0
                    for j in range(nw):
                        tmp = wf[j] * x
                        acc = acc + tmp
                    if scale_w:
                        acc = acc * ws
                    self._W[i] = acc
            if self._U != NULL:
                for i in range(self._u_capacity):
                    if self._U[i].key != 0:
                        y = self._U[i].value
                        acc64 = 0.0
                        for j in range(nu):
                            tmp64 = y * uf[j]
                            acc64 = acc64 + tmp64
                        self._U[i].value = acc64 * u_scale
        self.clock = clock
        self._avg_valid = False
        self.version += 1

    def state_cells(self):
        """The training state sparsely: (keys, cells, W, U, clock) with every key ascending and
        the cells where W or U is not zero, as flat indices position * n_classes + class (in
        ascending order), with their W (float32) and U (float64). `load_cells` reads it back."""
        self._thaw()
        keys, rows = self.sorted_rows(averaged=False, prune=False)
        cdef const int64_t[::1] r = rows
        cdef size_t i, n = 0, at = 0, C = self.n_classes
        cdef int c
        cdef double u
        for i in range(<size_t>r.shape[0]):
            for c in range(<int>C):
                if self._W[r[i] * C + c] != 0 or self._u_at(r[i], c) != 0.0:
                    n += 1
        cells = numpy.empty((n,), dtype=numpy.int64)
        W = numpy.empty((n,), dtype=numpy.float32)
        U = numpy.empty((n,), dtype=numpy.float64)
        cdef int64_t[::1] oc = cells
        cdef float[::1] ow = W
        cdef double[::1] ou = U
        for i in range(<size_t>r.shape[0]):
            for c in range(<int>C):
                u = self._u_at(r[i], c)
                if self._W[r[i] * C + c] != 0 or u != 0.0:
                    oc[at] = <int64_t>(i * C + c)
                    ow[at] = self._W[r[i] * C + c]
                    ou[at] = u
                    at += 1
        return keys, cells, W, U, self.clock

    def load_cells(self, keys, cells, W, U, int64_t clock=0):
        """Replace the contents by a sparse state (as `state_cells` gives it): the keys
        (ascending, each once) with zero rows, then W and U at the flat cells."""
        ka = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        ca = numpy.ascontiguousarray(cells, dtype=numpy.int64)
        wa = numpy.ascontiguousarray(W, dtype=numpy.float32)
        ua = numpy.ascontiguousarray(U, dtype=numpy.float64)
        if ka.ndim != 1 or (ka.size > 1 and not bool(numpy.all(ka[1:] > ka[:-1]))):
            raise ValueError("load_cells needs the keys in ascending order, each once")
        if wa.shape != ca.shape or ua.shape != ca.shape:
            raise ValueError(f"{wa.shape} weights and {ua.shape} accumulators for {ca.shape} cells")
        if ca.size and (int(ca.min()) < 0 or int(ca.max()) >= ka.size * self.n_classes):
            raise ValueError(f"a cell beyond {ka.size} keys x {self.n_classes} classes")
        self.load_arrays(numpy.zeros(0, numpy.uint64), numpy.zeros((0, self.n_classes), numpy.float32), None, 0)
        self._clear(max(self._capacity, _round_pow2(2 * len(ka) + 2)))
        self._grow_rows(max(len(ka), 1024))
        if ca.size and (ua != 0).any():
            self._ensure_accumulators()
        cdef const uint64_t[::1] k = ka
        cdef const int64_t[::1] cl = ca
        cdef const float[::1] w = wa
        cdef const double[::1] u = ua
        cdef size_t i, C = self.n_classes
        cdef int64_t r
        with nogil:
            for i in range(<size_t>k.shape[0]):
                self._insert_zero(k[i])
            for i in range(<size_t>cl.shape[0]):
                r = cl[i] // <int64_t>C       # rows were created in key order
                self._W[cl[i]] = w[i]
                if u[i] != 0.0:
                    self._u_slot(r, <int>(cl[i] % <int64_t>C))[0] = u[i]
        self.clock = clock
        self._avg_valid = False
        self.version += 1

    def frozen_arrays(self):
        """(indptr, cols, values, scales) of sparse rows read in place (see load_frozen), row i
        being the i-th key loaded; None when W holds the rows."""
        if self.frozen_type == FROZEN_NONE:
            return None
        return self._frozen_owner

    def _frozen_keys(self):
        # The keys of a frozen table in row order (the order they were loaded in).
        keys, rows = self._keys_and_rows()
        out = numpy.zeros((self.n_rows,), dtype=numpy.uint64)
        out[rows] = keys
        return out

    def _keys_and_rows(self):
        # Every key and its row index, in bucket order (sparse references through
        # _rows_by_entry, not a search per key).
        keys = numpy.zeros((self.n_rows,), dtype=numpy.uint64)
        rows = numpy.zeros((self.n_rows,), dtype=numpy.int64)
        cdef uint64_t[::1] k = keys
        cdef int64_t[::1] r = rows
        cdef size_t i, j = 0
        cdef int64_t v
        cdef int64_t* row_at = NULL
        if self.frozen_type != FROZEN_NONE and self.frozen_type != FROZEN_I8:
            row_at = self._rows_by_entry()
            if row_at == NULL:
                raise MemoryError()
        for i in range(self._capacity):
            if self._table[i].key != 0:
                v = self._table[i].row
                k[j] = self._table[i].key
                r[j] = _row_from(v, row_at)
                j += 1
        free(row_at)
        return keys, rows

    def load_frozen(self, keys, indptr, cols, values, scales=None):
        """Take a saved model's sparse rows where they lie, without copying them: row i (of key
        keys[i]) has the weights values[indptr[i]:indptr[i + 1]] in the classes
        cols[indptr[i]:indptr[i + 1]] (uint8, or uint16 beyond 256 classes); values are
        float32, float16, or int8 with float32 `scales` (one per row: a weight is scale * q).
        The arrays are kept alive by this table; the keys (distinct) are hashed in one C pass
        into a table sized for them. The rows are averaged weights; training them again first
        copies them into dense float32 weights.
        """
        keys = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        cdef size_t n = keys.shape[0]
        indptr = numpy.ascontiguousarray(indptr, dtype=numpy.uint32)
        cols = numpy.ascontiguousarray(cols)
        values = numpy.ascontiguousarray(values)
        if indptr.shape != (n + 1,) or indptr[0] != 0 or (n and (numpy.diff(indptr.astype(numpy.int64)) < 0).any()):
            raise ValueError(f"the row bounds do not fit {n} rows")
        cdef size_t nnz = int(indptr[n])
        if cols.ndim != 1 or values.ndim != 1 or cols.shape[0] != nnz or values.shape[0] != nnz:
            raise ValueError(f"{cols.shape[0]} classes and {values.shape[0]} values for {nnz} entries")
        wide = self.n_classes > 256
        if cols.dtype != (numpy.uint16 if wide else numpy.uint8):
            raise ValueError(f"classes of dtype {cols.dtype} for {self.n_classes} classes")
        if nnz and int(cols.max()) >= self.n_classes:
            raise ValueError(f"a class beyond the {self.n_classes} classes")
        cdef int kind
        if values.dtype == numpy.float32:
            kind = FROZEN_F32
        elif values.dtype == numpy.float16:
            kind = FROZEN_F16
        elif values.dtype == numpy.int8:
            kind = FROZEN_I8
        else:
            raise ValueError(f"values of dtype {values.dtype}: expected float32, float16 or int8")
        if kind == FROZEN_I8:
            if scales is None:
                raise ValueError("int8 rows need their scales")
            scales = numpy.ascontiguousarray(scales, dtype=numpy.float32)
            if scales.shape != (n,):
                raise ValueError(f"{scales.shape[0]} scales for {n} rows")
        elif scales is not None:
            raise ValueError("only int8 rows have scales")
        cdef size_t capacity = _round_pow2(max(n + n // 3 + 1, <size_t>DEF_MIN_BUCKETS))
        cdef Bucket* table = <Bucket*>calloc_lines(capacity, sizeof(Bucket))
        if table == NULL:
            raise MemoryError()
        cdef const uint64_t[::1] k = keys
        cdef size_t i, b, mask = capacity - 1
        cdef hash_t key = 0
        cdef bint duplicate = False
        with nogil:
            for i in range(n):
                key = k[i] if k[i] else 1
                b = _bucket(key, mask)
                while table[b].key != 0:
                    if table[b].key == key:
                        duplicate = True
                        break
                    b = (b + 1) & mask
                if duplicate:
                    break
                table[b].key = key
                table[b].row = <int64_t>i
        if duplicate:
            free(table)
            raise ValueError(f"the key {key} is there twice")
        self._drop_journal()
        self._drop_hot_rows()
        free(self._table)
        free(self._W)
        self._free_accumulators()
        free(self._avg)
        self._table = table
        self._capacity = capacity
        self._W = NULL
        self._avg = NULL
        self._avg_valid = False
        self._rows_capacity = 0
        self.n_rows = n
        self.clock = 0
        self._frozen_owner = (indptr, cols, values, scales)
        self._indptr = <const uint32_t*><size_t>indptr.ctypes.data
        self._cols = <const void*><size_t>cols.ctypes.data
        self._wide_cols = wide
        self._Q = <const void*><size_t>values.ctypes.data
        self._scales = <const float*><size_t>scales.ctypes.data if kind == FROZEN_I8 else NULL
        self.frozen_type = kind
        with nogil:
            self._encode_refs()
            self._widen_hot_rows(HOT_ROW_BYTES)
        self.version += 1

    def widen_hot_rows(self, size_t max_bytes=HOT_ROW_BYTES):
        """Widen a loaded table's hot rows (at least a quarter of their classes nonzero) into
        dense rows (float16 for a float16 table, else float32), at most `max_bytes` of them (0:
        none, every row read sparse).
        load_frozen does this with the default; scores are the same to the bit either way.
        Returns how many rows are dense."""
        if self.frozen_type == FROZEN_NONE:
            return 0
        with nogil:
            self._widen_hot_rows(max_bytes)
        return self.n_dense

    def load_arrays(self, keys, weights, accumulators=None, clock=0):
        """Replace the contents by `weights` for `keys`; the average restarts from them."""
        keys = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        weights = numpy.ascontiguousarray(weights, dtype=numpy.float32)
        if weights.ndim != 2 or weights.shape[0] != keys.shape[0] or weights.shape[1] != self.n_classes:
            raise ValueError(
                f"weights of shape {weights.shape} do not fit {keys.shape[0]} keys x {self.n_classes} classes"
            )
        if accumulators is not None:
            accumulators = numpy.ascontiguousarray(accumulators, dtype=numpy.float64)
            if accumulators.shape != weights.shape:
                raise ValueError("accumulators must have the shape of weights")
        self._drop_journal()
        self._clear(max(self._capacity, _round_pow2(2 * len(keys) + 2)))
        self._free_accumulators()
        if self.frozen_type != FROZEN_NONE:
            self.frozen_type = FROZEN_NONE
            self._Q = NULL
            self._scales = NULL
            self._indptr = NULL
            self._cols = NULL
            self._frozen_owner = None
            self._rows_capacity = 0
        self._grow_rows(max(len(keys), 1024))
        if accumulators is not None:
            self._ensure_accumulators()
        cdef const uint64_t[::1] k = keys
        cdef const float[:, ::1] w = weights
        cdef const double[:, ::1] u
        if accumulators is not None:
            u = accumulators
        cdef size_t i, C = self.n_classes
        cdef int c
        cdef int64_t r
        for i in range(len(keys)):
            r = self._insert(k[i])
            memcpy(&self._W[r * C], &w[i, 0], C * sizeof(weight_t))
            if accumulators is not None:
                for c in range(<int>C):
                    if u[i, c] != 0.0:
                        self._u_slot(r, c)[0] = u[i, c]
        self.clock = clock
        self._avg_valid = False
        self.version += 1

    def _clear(self, size_t capacity):
        free(self._table)
        free(self._dense)
        self._dense = NULL
        self.n_dense = 0
        self._dense_stride = 0
        self._capacity = _round_pow2(max(capacity, DEF_MIN_BUCKETS))
        self._table = <Bucket*>calloc_lines(self._capacity, sizeof(Bucket))
        if self._table == NULL:
            raise MemoryError()
        self.n_rows = 0

    def __reduce__(self):
        if self.frozen_type != FROZEN_NONE:
            return (_rebuild_frozen, (self.n_classes, self._frozen_keys(), self._frozen_owner, self.use_averages,
                                      self.noise_scale, self.noise_seed, self.tie_width))
        keys, W, U, clock = self.state_arrays()
        return (_rebuild_weights, (self.n_classes, self._capacity, keys, W, U, clock, self.use_averages,
                                   self.noise_scale, self.noise_seed, self.tie_width))


def sparse_rows(weights, str precision, double min_abs=0.0):
    """Dense float32 rows (n x C) as sparse rows in `precision`, for load_frozen: (counts, cols,
    values, scales). Weights at most `min_abs` in absolute value are left out, as are those the
    precision turns into zero; counts[i] entries belong to row i, their classes ascending.
    scales is None except for int8, where each row's scale is its largest kept absolute weight
    / 127 and a weight is stored as round(w / scale).
    """
    if precision not in _DTYPE_OF:
        raise ValueError(f"unknown precision {precision!r}: expected one of {PRECISIONS}")
    weights = numpy.ascontiguousarray(weights, dtype=numpy.float32)
    if weights.ndim != 2:
        raise ValueError("weights must be n x C")
    n, C = weights.shape
    keep = numpy.abs(weights) > min_abs
    scales = None
    if precision == "float16":
        with numpy.errstate(over="ignore"):
            stored = weights.astype(numpy.float16)
        if not numpy.isfinite(stored[keep]).all():
            raise ValueError("weights beyond float16's range (65504): save them as float32 or int8")
    elif precision == "int8":
        peak = numpy.where(keep, numpy.abs(weights), numpy.float32(0)).max(axis=1) if C else numpy.zeros((n,), numpy.float32)
        scales = (peak / numpy.float32(127.0)).astype(numpy.float32)
        safe = numpy.where(scales > 0, scales, numpy.float32(1.0))
        stored = numpy.clip(numpy.rint(weights / safe[:, None]), -127, 127).astype(numpy.int8)
    else:
        stored = weights
    keep &= stored != 0
    counts = keep.sum(axis=1)
    rows, cols = numpy.nonzero(keep)
    return (counts, cols.astype(numpy.uint16 if C > 256 else numpy.uint8), stored[rows, cols], scales)


def _rebuild_frozen(n_classes, keys, arrays, use_averages, noise_scale, noise_seed, tie_width):
    weights = AveragedWeights(n_classes, 1)
    weights.set_tie_width(tie_width)
    weights.load_frozen(keys, *arrays)
    weights.set_use_averages(use_averages)
    weights.set_noise(noise_scale, noise_seed)
    return weights


def _rebuild_weights(n_classes, n_buckets, keys, W, U, clock, use_averages, noise_scale=0.0, noise_seed=0,
                     tie_width=1):
    weights = AveragedWeights(n_classes, n_buckets)
    weights.set_tie_width(tie_width)
    weights.load_arrays(keys, W, U, clock)
    weights.set_use_averages(use_averages)
    weights.set_noise(noise_scale, noise_seed)
    return weights


# Iterative parameter mixing (McDonald, Hall and Mann 2010) ---------------------------------------

cdef class WeightsMixer:
    """A weighted mix of several AveragedWeights tables, folded in one table at a time.

    Shard s (coefficient c_s, mix weight mu_s = c_s / sum(c)) contributes its training state
    (W_s, U_s, clock T_s). The mix is

        W   = sum_s mu_s W_s                      (the mixed current weights, as in IPM)
        T   = round(sum_s mu_s T_s)               (the mean shard clock, at least 1 once trained)
        U   = T * sum_s mu_s U_s / T_s            (a shard with T_s = 0 contributes no U)

    so that its averaged view, W - U / T, is exactly sum_s mu_s (W_s - U_s / T_s): the mix of the
    shards' averaged weights. Training continues from it with Daume's identity intact: after k
    more examples the average weighs the mixed average as T examples and each new weight vector
    as one. With the mean shard clock, every epoch of shards weighs as much as the epoch before
    it, as every epoch does in serial training (the total clock, sum_s T_s, would weigh history
    S times more than the next epoch of each shard).

    Memory: the accumulator holds one table (float32 W, float64 U) plus whatever table or arrays
    are being folded in; keys missing from a shard count as zero there (as an absent row scores).
    """
    cdef AveragedWeights _acc
    cdef double _sum_coef
    cdef double _sum_coef_clock
    cdef int64_t _n_tables
    cdef bint _any_clock
    cdef readonly int n_classes

    def __cinit__(self, int n_classes, size_t n_buckets=1 << 16):
        self._acc = AveragedWeights(n_classes, n_buckets)
        self._acc._ensure_accumulators()
        self.n_classes = n_classes
        self._sum_coef = 0.0
        self._sum_coef_clock = 0.0
        self._n_tables = 0
        self._any_clock = False

    @property
    def n_tables(self):
        return self._n_tables

    cdef int _fold(self, const hash_t* keys, size_t n, const weight_t* W, const double* U,
                   int64_t clock, double coef) except -1:
        cdef AveragedWeights acc = self._acc
        cdef size_t i, C = self.n_classes
        cdef int c
        cdef int64_t r
        cdef double u_scale = coef / <double>clock if clock > 0 else 0.0
        cdef weight_t w_scale = <weight_t>coef
        with nogil:
            for i in range(n):
                r = acc._insert(keys[i])
                for c in range(<int>C):
                    acc._W[r * C + c] += w_scale * W[i * C + c]
                if U != NULL and u_scale != 0.0:
                    for c in range(<int>C):
                        if U[i * C + c] != 0.0:
                            acc._u_slot(r, c)[0] += u_scale * U[i * C + c]
        return 0

    def _count(self, int64_t clock, double coef):
        if not coef >= 0.0:
            raise ValueError(f"mixing coefficients must be >= 0, got {coef}")
        if clock < 0:
            raise ValueError(f"clock must be >= 0, got {clock}")
        self._sum_coef += coef
        self._sum_coef_clock += coef * <double>clock
        self._any_clock = self._any_clock or clock > 0
        self._n_tables += 1

    def add(self, AveragedWeights table, double coef=1.0):
        """Fold one table's training state in with (unnormalized) coefficient `coef`."""
        if table.n_classes != self.n_classes:
            raise ValueError(f"cannot mix a table of {table.n_classes} classes into {self.n_classes}")
        self._count(table.clock, coef)
        if coef == 0.0:
            return
        table._thaw()
        cdef size_t i, C = self.n_classes
        cdef int64_t r
        cdef double u_scale = coef / <double>table.clock if table.clock > 0 else 0.0
        cdef weight_t w_scale = <weight_t>coef
        cdef AveragedWeights acc = self._acc
        cdef int c, w
        cdef int64_t dst
        cdef uint64_t bits
        with nogil:
            for i in range(table._capacity):
                if table._table[i].key == 0:
                    continue
                r = table._table[i].row
                dst = acc._insert(table._table[i].key)
                for c in range(<int>C):
                    acc._W[dst * C + c] += w_scale * table._W[r * C + c]
                if table._U != NULL and u_scale != 0.0:
                    for w in range(table._mask_words):
                        bits = table._umask[r * table._mask_words + w]
                        while bits:
                            c = w * 64 + ctz64(bits)
                            acc._u_slot(dst, c)[0] += u_scale * table._u_get(r, c)
                            bits &= bits - 1

    def add_arrays(self, keys, weights, accumulators=None, int64_t clock=0, double coef=1.0):
        """Fold in a training state given as arrays (as `state_arrays()` returns them)."""
        cdef const uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        w_arr = numpy.ascontiguousarray(weights, dtype=numpy.float32)
        if w_arr.ndim != 2 or w_arr.shape[0] != k.shape[0] or w_arr.shape[1] != self.n_classes:
            raise ValueError(f"weights of shape {w_arr.shape} do not fit {k.shape[0]} keys x {self.n_classes} classes")
        cdef const float[:, ::1] w = w_arr
        cdef const double[:, ::1] u
        cdef const double* u_ptr = NULL
        if accumulators is not None:
            u_arr = numpy.ascontiguousarray(accumulators, dtype=numpy.float64)
            if u_arr.shape != w_arr.shape:
                raise ValueError("accumulators must have the shape of weights")
            u = u_arr
            if u.shape[0]:
                u_ptr = &u[0, 0]
        self._count(clock, coef)
        if coef == 0.0 or k.shape[0] == 0:
            return
        self._fold(<const hash_t*>&k[0], k.shape[0], &w[0, 0], u_ptr, clock, coef)

    def result(self):
        """The mix as a new AveragedWeights (the mixer is spent afterwards)."""
        if self._acc is None:
            raise ValueError("this mixer's result was taken already")
        if self._n_tables == 0 or self._sum_coef <= 0.0:
            raise ValueError("nothing to mix: add at least one table with a positive coefficient")
        cdef AveragedWeights acc = self._acc
        cdef double mean_clock = self._sum_coef_clock / self._sum_coef
        cdef int64_t clock = <int64_t>(mean_clock + 0.5)
        if self._any_clock and clock < 1:
            clock = 1
        cdef weight_t w_scale = <weight_t>(1.0 / self._sum_coef)
        cdef double u_scale = <double>clock / self._sum_coef
        cdef size_t i, n = acc.n_rows * acc.n_classes
        with nogil:
            if self._sum_coef != 1.0:
                for i in range(n):
                    acc._W[i] *= w_scale
            for i in range(acc._u_capacity):
                if acc._U[i].key != 0:
                    acc._U[i].value *= u_scale
        acc.clock = clock
        acc._avg_valid = False
        acc.version += 1
        self._acc = None
        return acc


def mix_weights(tables, coefficients=None):
    """Mix AveragedWeights tables (uniformly, or by `coefficients`, e.g. mistake counts).

    See WeightsMixer for what the mixed W, U and clock are. Settings (tie width, noise) are those
    of the first table.
    """
    tables = list(tables)
    if not tables:
        raise ValueError("nothing to mix")
    if coefficients is None:
        coefficients = [1.0] * len(tables)
    coefficients = [float(c) for c in coefficients]
    if len(coefficients) != len(tables):
        raise ValueError(f"{len(coefficients)} coefficients for {len(tables)} tables")
    first = tables[0]
    mixer = WeightsMixer(first.n_classes, first.n_buckets)
    for table, coef in zip(tables, coefficients):
        mixer.add(table, coef)
    mixed = mixer.result()
    mixed.set_tie_width(first.tie_width)
    mixed.set_noise(first.noise_scale, first.noise_seed)
    return mixed


def mixing_coefficients(mistakes, str how="uniform"):
    """Coefficients for `how` = "uniform" (1 each) or "mistakes" (proportional to each shard's
    mistake count, McDonald et al. 2010; uniform when no shard made a mistake)."""
    mistakes = [float(m) for m in mistakes]
    if how == "uniform":
        return [1.0] * len(mistakes)
    if how == "mistakes":
        if any(m < 0 for m in mistakes):
            raise ValueError("mistake counts must be >= 0")
        total = sum(mistakes)
        return [m / total for m in mistakes] if total > 0 else [1.0] * len(mistakes)
    raise ValueError(f"unknown mixing '{how}': expected 'uniform' or 'mistakes'")
