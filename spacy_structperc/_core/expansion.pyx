# cython: infer_types=True
"""The primal expansion of a polynomial kernel of degree <= 2 (Kudo & Matsumoto's PKE): the
dual perceptron's sum over support items (dual.pyx) kept as primal weights over the kernel's
explicit features, so a query costs its own keys and pairs instead of the whole support."""
from libc.stdlib cimport calloc, free
from libc.stdint cimport int64_t, uint64_t

from .templates cimport mix64, hash_combine
from .kernel cimport Kernel, PolynomialKernel
from .slots cimport PrimalSlot, _grow, _next_cap, _rehash, _slot

cdef extern from *:
    """
    #define STRUCTPERC_KERNEL_PREFETCH(p) __builtin_prefetch((const void*)(p))
    """
    void prefetch "STRUCTPERC_KERNEL_PREFETCH"(const void* p) noexcept nogil

from ..errors import Errors


cdef uint64_t _LINEAR_SALT = 0x5bd1e9955bd1e995ULL
cdef uint64_t _PAIR_SALT = 0x27d4eb2f165667c5ULL


cdef inline uint64_t _linear_key(uint64_t k) noexcept nogil:
    cdef uint64_t h = mix64(k ^ _LINEAR_SALT)
    return h if h != 0 else 1


cdef inline uint64_t _pair_key(uint64_t a, uint64_t b) noexcept nogil:
    cdef uint64_t h
    if a > b:
        a, b = b, a
    h = hash_combine(mix64(a ^ _PAIR_SALT), b)
    return h if h != 0 else 1


cdef class Expansion:
    """Kudo & Matsumoto's PKE, exact for degree <= 2: the dual's sum over support items as primal
    weights over the kernel's explicit features.

    ``(gamma <x, y> + c) ** 2 = c^2 + 2 c gamma sum_k x_k y_k + gamma^2 sum_{j,k} x_j x_k y_j y_k``:
    a weight per key (``sum_i a_i s_ik``) and per unordered pair of keys (``sum_i a_i s_ij s_ik``),
    each with its Daume accumulator. A query then costs its n keys and n (n + 1) / 2 pairs, however
    many support items there are. Features are hashed to 64 bits (pairs by a mixing hash of the two
    keys), so two features coincide only with probability ~2^-64 per pair.
    """

    def __cinit__(self, int degree, double coef0, double gamma):
        if not 1 <= degree <= 2:
            raise ValueError(Errors.S283.format(setting="degree of an expanded kernel", requirement="1 or 2",
                                                value=degree))
        self.degree = degree
        if degree == 1:
            self._lin_query = gamma
            self._linear = gamma != 0.0
        else:
            self._lin_query = 2.0 * coef0 * gamma
            self._linear = self._lin_query != 0.0
            self._diag_query = gamma * gamma
            self._pair_query = 2.0 * gamma * gamma
        self._capacity = 1 << 12
        self._table = <PrimalSlot*>calloc(self._capacity, sizeof(PrimalSlot))
        if self._table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self._table)
        free(self._fkeys)
        free(self._fvals)

    @property
    def n_bytes(self):
        return self._capacity * sizeof(PrimalSlot)

    cdef int64_t expand(self, const uint64_t* keys, const float* vals, int64_t n, bint query) except -1:
        """The features of an item into the scratch buffers: scaled for a query (the kernel's
        constants folded in), raw for a support item (its keys unique)."""
        cdef int64_t need = (n if self._linear else 0) + (n * (n + 1) // 2 if self.degree == 2 else 0)
        if need > self._fcap:
            self._fcap = _next_cap(self._fcap, need, 1024)
            _grow(<void**>&self._fkeys, self._fcap, sizeof(uint64_t))
            _grow(<void**>&self._fvals, self._fcap, sizeof(double))
        cdef int64_t j, k, m = 0
        cdef double vj
        cdef double lin = self._lin_query if query else 1.0
        cdef double diag = self._diag_query if query else 1.0
        cdef double pair = self._pair_query if query else 1.0
        with nogil:
            if self._linear:
                for j in range(n):
                    self._fkeys[m] = _linear_key(keys[j])
                    self._fvals[m] = lin * vals[j]
                    m += 1
            if self.degree == 2:
                for j in range(n):
                    vj = vals[j]
                    self._fkeys[m] = _pair_key(keys[j], keys[j])
                    self._fvals[m] = diag * vj * vj
                    m += 1
                    for k in range(j + 1, n):
                        self._fkeys[m] = _pair_key(keys[j], keys[k])
                        self._fvals[m] = pair * vj * vals[k]
                        m += 1
        return m

    cdef int _grow(self) except -1:
        self._table = _rehash(self._table, self._capacity, self._capacity * 2)
        self._capacity *= 2
        return 0

    cdef int add(self, int64_t n_features, double delta, double clocked) except -1:
        """W_f += delta * phi_f and U_f += clocked * phi_f for the expanded features."""
        cdef int64_t t
        cdef size_t mask, b
        cdef uint64_t key
        for t in range(n_features):
            if <size_t>(self.n_features + 1) * 2 > self._capacity:
                self._grow()
            mask = self._capacity - 1
            key = self._fkeys[t]
            b = _slot(key, mask)
            while self._table[b].key != 0 and self._table[b].key != key:
                b = (b + 1) & mask
            if self._table[b].key == 0:
                self._table[b].key = key
                self.n_features += 1
            self._table[b].w += delta * self._fvals[t]
            self._table[b].u += clocked * self._fvals[t]
        return 0

    cdef int add_item(self, PolynomialKernel kernel, int64_t item, double delta, double clocked) except -1:
        cdef int64_t start = kernel._ptr[item]
        cdef int64_t n = kernel._ptr[item + 1] - start
        cdef int64_t m = self.expand(&kernel._keys[start] if n else NULL, &kernel._vals[start] if n else NULL,
                                     n, False)
        return self.add(m, delta, clocked)

    cdef void dot(self, int64_t n_features, double* sw, double* su) noexcept nogil:
        """sum_f q_f W_f and sum_f q_f U_f over the expanded query's features."""
        cdef int64_t t, start, stop
        cdef size_t mask = self._capacity - 1
        cdef size_t b
        cdef uint64_t key
        cdef double w = 0.0, u = 0.0
        # Lookups are cache misses: issue a block of them before reading any.
        for start in range(0, n_features, 32):
            stop = min(n_features, start + 32)
            for t in range(start, stop):
                prefetch(&self._table[_slot(self._fkeys[t], mask)])
            for t in range(start, stop):
                key = self._fkeys[t]
                b = _slot(key, mask)
                while self._table[b].key != 0:
                    if self._table[b].key == key:
                        w += self._fvals[t] * self._table[b].w
                        u += self._fvals[t] * self._table[b].u
                        break
                    b = (b + 1) & mask
        sw[0] = w
        su[0] = u


def _expansion_for(Kernel kernel, expand):
    """The Expansion that the ``expand`` setting asks for: "auto" (a polynomial kernel of degree
    <= 2), True (the same, or an error) or False."""
    cdef bint able = isinstance(kernel, PolynomialKernel) and (<PolynomialKernel>kernel).degree <= 2
    if expand == "auto":
        expand = able
    elif not isinstance(expand, bool):
        raise ValueError(Errors.S283.format(setting="expand", requirement='"auto", True or False', value=expand))
    if not expand:
        return None
    if not able:
        raise ValueError(Errors.S283.format(setting="expand", requirement="False or \"auto\" for a kernel other "
                                            "than PolynomialKernel of degree <= 2", value=expand))
    return Expansion((<PolynomialKernel>kernel).degree, (<PolynomialKernel>kernel).coef0,
                     (<PolynomialKernel>kernel).gamma)
