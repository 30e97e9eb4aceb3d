# cython: infer_types=True
"""Iterative parameter mixing (McDonald, Hall and Mann 2010): AveragedWeights tables trained apart,
mixed into one (WeightsMixer, mix_weights), and the training side of distributed mixing: what a
shard changed (the change journal), cells read and written in place, the mixing formula
replayed in place, and the training state as sparse cells (AveragedWeights' methods of those
names call the functions here)."""
from libc.stdlib cimport calloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from .typedefs cimport hash_t, weight_t
from .weights cimport CHUNK, AveragedWeights, cell_of, chunk_of
from .hashtable cimport _bucket, _round_pow2
import numpy

cdef extern from *:
    int ctz64 "__builtin_ctzll"(unsigned long long x) noexcept nogil


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
                    if W[i * C + c] != 0:   # a zero would add nothing
                        acc._cell_w(<size_t>r, c)[0] += w_scale * W[i * C + c]
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
        cdef int c, w, k, j
        cdef int64_t dst
        cdef uint64_t bits
        cdef const weight_t* chunk
        with nogil:
            for i in range(table._capacity):
                if table._table[i].key == 0:
                    continue
                r = table._table[i].row
                dst = acc._insert(table._table[i].key)
                for k in range(table._kpr):
                    chunk = chunk_of(table, <size_t>r, k)
                    if chunk == NULL:
                        continue
                    for j in range(min(<int>CHUNK, <int>C - k * CHUNK)):
                        acc._cell_w(<size_t>dst, k * CHUNK + j)[0] += w_scale * chunk[j]
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
        cdef size_t i
        with nogil:
            if self._sum_coef != 1.0:   # every chunk is some row's
                for i in range(acc._pool_used * CHUNK):
                    acc._pool[i] *= w_scale
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


# The training side of distributed mixing: the bodies of AveragedWeights' cell and journal
# methods (weights.pyx has their docstrings). Cells are (key, class); a key absent from the table
# reads as zero. No dense copy of the table is ever made.


def _start_journal(AveragedWeights self):
    self._thaw()
    self._journal_free()
    cdef size_t n = max(self._rows_capacity, <size_t>1)
    self._dirty = <uint64_t*>calloc(n * self._mask_words, sizeof(uint64_t))
    if self._dirty == NULL:
        raise MemoryError("could not allocate the change journal")
    self._dirty_rows = n
    self._jstart_rows = self.n_rows
    self._journal_lost = False


def _stop_journal(AveragedWeights self):
    self._journal_free()
    self._journal_lost = False


def _check_journal(AveragedWeights self):
    if self._journal_lost:
        raise ValueError("the change journal was dropped by a reload or resize: start it again")
    if self._dirty == NULL:
        raise ValueError("no change journal: call start_journal() first")


def _journal_rows(AveragedWeights self):
    _check_journal(self)
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


def _journal_cells(AveragedWeights self):
    _check_journal(self)
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
                ow[at] = cell_of(self, <size_t>r, c)
                ou[at] = self._u_at(r, c)
                at += 1
    return out_keys, out_cols, out_W, out_U, numpy.ascontiguousarray(keys[is_new])


def _cell_arrays(AveragedWeights self, keys, cols, n_values=0):
    k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
    c = numpy.ascontiguousarray(cols, dtype=numpy.int32)
    if k.ndim != 1 or c.shape != k.shape:
        raise ValueError(f"{c.shape} classes for {k.shape} keys")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= self.n_classes):
        raise ValueError(f"a class beyond the {self.n_classes} classes")
    return k, c


def _rows_of(AveragedWeights self, keys):
    cdef const uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
    out = numpy.empty((k.shape[0],), dtype=numpy.int64)
    cdef int64_t[::1] o = out
    cdef size_t i
    with nogil:
        for i in range(<size_t>k.shape[0]):
            o[i] = self.find(k[i])
    return out


def _get_cells(AveragedWeights self, keys, cols):
    ka, ca = _cell_arrays(self, keys, cols)
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
                w[i] = cell_of(self, <size_t>r, c[i])
                u[i] = self._u_at(r, c[i])
    return W, U


def _insert_keys(AveragedWeights self, keys):
    cdef const uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
    cdef size_t i
    self._thaw()
    with nogil:
        for i in range(<size_t>k.shape[0]):
            self._insert_zero(k[i])
    self._avg_valid = False
    self.version += 1


def _set_cells(AveragedWeights self, keys, cols, W, U):
    ka, ca = _cell_arrays(self, keys, cols)
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
            if w[i] != 0 or chunk_of(self, <size_t>r, c[i] // CHUNK) != NULL:
                self._cell_w(<size_t>r, c[i])[0] = w[i]
            if u[i] != 0.0:
                self._u_slot(r, c[i])[0] = u[i]
            elif self._umask != NULL and (self._umask[r * self._mask_words + c[i] // 64] >> (c[i] % 64)) & 1:
                self._u_slot(r, c[i])[0] = 0.0
    self._avg_valid = False
    self.version += 1


def _replay_mix(AveragedWeights self, w_factors, double w_scale, u_factors, double u_scale, int64_t clock):
    cdef const float[::1] wf = numpy.ascontiguousarray(w_factors, dtype=numpy.float32)
    cdef const double[::1] uf = numpy.ascontiguousarray(u_factors, dtype=numpy.float64)
    if clock < 0:
        raise ValueError(f"clock must be >= 0, got {clock}")
    self._thaw()
    cdef size_t i, n = self._pool_used * CHUNK   # every chunk is some row's; absent ones stay zero
    cdef int j, nw = wf.shape[0], nu = uf.shape[0]
    cdef float acc, tmp, x, ws = <float>w_scale
    cdef bint scale_w = w_scale != 1.0
    cdef double acc64, tmp64, y
    with nogil:
        if nw:
            for i in range(n):
                x = self._pool[i]
                acc = 0.0
                for j in range(nw):
                    tmp = wf[j] * x
                    acc = acc + tmp
                if scale_w:
                    acc = acc * ws
                self._pool[i] = acc
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


def _state_cells(AveragedWeights self):
    self._thaw()
    keys, rows = self.sorted_rows(averaged=False, prune=False)
    cdef const int64_t[::1] r = rows
    cdef size_t i, n = 0, at = 0, C = self.n_classes
    cdef int c
    cdef double u
    for i in range(<size_t>r.shape[0]):
        for c in range(<int>C):
            if cell_of(self, <size_t>r[i], c) != 0 or self._u_at(r[i], c) != 0.0:
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
            if cell_of(self, <size_t>r[i], c) != 0 or u != 0.0:
                oc[at] = <int64_t>(i * C + c)
                ow[at] = cell_of(self, <size_t>r[i], c)
                ou[at] = u
                at += 1
    return keys, cells, W, U, self.clock


def _load_cells(AveragedWeights self, keys, cells, W, U, int64_t clock=0):
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
            if w[i] != 0:
                self._cell_w(<size_t>r, <int>(cl[i] % <int64_t>C))[0] = w[i]
            if u[i] != 0.0:
                self._u_slot(r, <int>(cl[i] % <int64_t>C))[0] = u[i]
    self.clock = clock
    self._avg_valid = False
    self.version += 1
