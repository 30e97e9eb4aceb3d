# cython: infer_types=True
"""A loaded model's rows read in place, in the precision they were saved in (float32, float16, or
int8 with a scale per row), and the key table they are found by: FrozenRows, the base class of
AveragedWeights (weights.pyx). Also the other direction: dense rows encoded as sparse rows in a
precision (sparse_rows), and the choice of float16 conversion."""
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from libc.stdint cimport int8_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
import numpy

from .typedefs cimport hash_t, weight_t
from .float16 cimport (add_dense, add_f16_f16c, add_f16_soft, add_full_f16_f16c, add_full_f16_soft,
                       add_full_rows_f16c, cpu_has_f16c, half_to_float_f16c, half_to_float_soft)
from .hashtable cimport (Bucket, _bucket, _round_pow2, calloc_lines, find_block, prefetch, probe)

DEF_MIN_BUCKETS = 1024
MAX_CLASSES = 65535   # accumulators are keyed by (row << 16 | class)

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

# Widened hot rows take at most this many bytes, beyond the file's own (a quarter-dense row of
# a parser's 108 classes is ~30 entries; EWT models widen 1-3 MB of rows).
cdef size_t HOT_ROW_BYTES = 32 << 20

# The precisions a saved model's rows can be stored in (the model's `precision` setting).
PRECISIONS = ("float32", "float16", "int8")
_DTYPE_OF = {"float32": numpy.float32, "float16": numpy.float16, "int8": numpy.int8}


cdef inline void _add_sparse(FrozenRows self, int64_t r, weight_t* out) noexcept nogil:
    # out += sparse row r of a frozen table.
    _add_entries(self, self._indptr[r], self._indptr[r + 1],
                 self._scales[r] if self.frozen_type == FROZEN_I8 else 0, out)


cdef inline void _add_entries(FrozenRows self, size_t lo, size_t hi, weight_t s,
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


cdef inline void _add_entries_prefix(FrozenRows self, size_t lo, size_t hi, weight_t s, int m,
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


cdef inline void _add_found_prefix(FrozenRows self, int64_t v, int m, weight_t* out) noexcept nogil:
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


cdef class FrozenRows:
    def __cinit__(self, int n_classes, size_t n_buckets=1 << 16):
        if n_classes < 1 or n_classes > MAX_CLASSES:
            raise ValueError(f"n_classes must be in 1..{MAX_CLASSES}, got {n_classes}")
        self.n_classes = n_classes
        self._capacity = _round_pow2(max(n_buckets, DEF_MIN_BUCKETS))
        self._table = <Bucket*>calloc_lines(self._capacity, sizeof(Bucket))
        self.n_rows = 0
        self.version = 0
        self.frozen_type = FROZEN_NONE
        self._Q = NULL
        self._scales = NULL
        self._indptr = NULL
        self._cols = NULL
        self._wide_cols = False
        self._frozen_owner = None
        self._dense = NULL
        self._dense_half = False
        self.n_dense = 0
        self._dense_stride = 0
        if self._table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self._table)
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
        return probe(self._table, self._capacity, key)

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

    cdef void _forget_frozen(self) noexcept:
        # The rows are no longer read in place (the subclass's weights hold them, or none do).
        self.frozen_type = FROZEN_NONE
        self._Q = NULL
        self._scales = NULL
        self._indptr = NULL
        self._cols = NULL
        self._frozen_owner = None

    cdef int _release_rows(self) except -1:
        # A hook for load_frozen: the subclass frees the rows it owns before loaded ones replace
        # them.
        return 0

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
            n_found = find_block(self._table, self._capacity, keys, start, min(n_keys, start + 64), found)
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

    cdef void _add_frozen_prefix(self, const hash_t* keys, int n_keys, int m, weight_t* out) noexcept nogil:
        # out[:m] += classes 0..m-1 of the loaded rows of keys (see AveragedWeights.score_prefix).
        cdef int j, n_found, start
        cdef int64_t found[64]
        for start in range(0, n_keys, 64):
            n_found = find_block(self._table, self._capacity, keys, start, min(n_keys, start + 64), found)
            for j in range(n_found):
                _add_found_prefix(self, found[j], m, out)

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
        copies them into float32 weights.
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
        self._release_rows()
        self._drop_hot_rows()
        free(self._table)
        self._table = table
        self._capacity = capacity
        self.n_rows = n
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
