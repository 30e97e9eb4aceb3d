# cython: infer_types=True
"""Iterative parameter mixing (McDonald, Hall and Mann 2010): AveragedWeights tables trained apart,
mixed into one."""
from libc.stdint cimport int64_t, uint64_t

from .typedefs cimport hash_t, weight_t
from .weights cimport AveragedWeights
from .hashtable cimport _bucket
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
