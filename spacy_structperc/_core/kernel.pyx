# cython: infer_types=True
"""The dual-form (voted) kernel perceptron: kernels over support items and the perceptron on top.

A perceptron in dual form keeps no weight vector: its score of an item x is
``f(x) = sum_i a_i K(s_i, x)`` over the support items s_i it made mistakes on (collins2001 §5.4,
Fig. 4; Freund & Schapire's voted perceptron; carreras2003 §3 uses three of them with a degree-2
polynomial kernel).

Python surface
--------------
``PolynomialKernel(degree=2, coef0=1.0, gamma=1.0)``
    ``K(x, y) = (gamma <x, y> + coef0) ** degree``; degree 1 with coef0 0 is the linear kernel.
    An item is a sparse vector: an array of integer keys (uint64, e.g. hashed features), in any
    order, values all 1; or a tuple ``(keys, values)`` of two 1-d arrays of one length (values
    float32). A key given twice counts twice: an item is the sum of its entries, so
    ``[7, 7]`` is the vector with value 2 at key 7. ``kernel(x, y)`` / ``kernel.k(x, y)`` is
    K(x, y); ``kernel.store(item)`` adds a support item and returns its id; ``kernel.kernel_row(x)``
    is the dense vector of K(s_i, x) over the support items.

``DualPerceptron(kernel, prediction="averaged", budget=0, budget_policy="oldest", cache_mb=0,
expand="auto")``
    ``update(item, delta, item_id=-1)`` adds ``delta * phi(item)`` to the perceptron: a new
    support item with coefficient delta, or, when ``item_id >= 0`` names an item already in
    support, delta is merged into its coefficient (an item id must always mean one feature
    vector). ``tick()`` advances the clock: call it once per training example, mistake or not.
    ``score(item, item_id=-1, mode=None)``, ``score_batch(items, item_ids=None, mode=None)`` and
    ``rank(items, item_ids=None, mode=None)`` score with ``mode`` (or the ``prediction``
    setting when None):

    - ``"last"``: the current perceptron, ``sum_i a_i K(s_i, x)`` (use it while training);
    - ``"averaged"``: the average of the perceptrons after every example, computed with Daume's
      trick: an update of ``delta`` at clock c also adds ``c * delta`` to ``u_i``, and the
      average after T ticks is ``sum_i (a_i - u_i / T) K(s_i, x)``;
    - ``"voted"``: Freund & Schapire's vote. Every prefix of the update history is a perceptron
      ``v_j``; it survived ``c_{j+1} - c_j`` examples (clock of the next update minus its own,
      T for the last), and votes with that weight. ``score`` returns
      ``sum_j survival_j * sign(v_j . x) / T`` (its sign is the prediction); ``rank`` gives each
      candidate the share of votes of the prefixes whose argmax it is (ties go to the first
      candidate; a prefix that scores every candidate alike abstains). Costs one pass over the
      update history per item (per candidate set for ``rank``): meant for prediction, not for
      decoding during training.

    ``score_batch`` scores items independently (binary decisions); ``rank`` scores a candidate set
    (collins2001 Fig. 4: on a mistake call ``update(gold, +1)``, ``update(predicted, -1)``, then
    ``tick()``). In modes "last" and "averaged" the two return the same scores.

    ``budget`` (0: none) bounds the live support items: when an update adds one beyond the
    budget, the oldest item (``budget_policy="oldest"``) or the one with the smallest |a_i|
    (``"smallest"``, ties to the oldest) is forgotten: the current, averaged and voted
    predictions become those of the update history without that item's updates. Forgotten items
    are swept out of the kernel's store in batches, which renumbers support ids.

    ``expand`` ("auto": on for a PolynomialKernel of degree <= 2; True; False): keep, next to the
    support items, the kernel's explicit feature map as primal weights (``Expansion``: one weight
    per key and per pair of keys, with Daume accumulators), so that "last" and "averaged" scores
    cost the n (n + 1) / 2 pairs of the query's n keys instead of the postings of its keys over
    the whole support (Kudo & Matsumoto's PKE). Same scores up to float rounding (features are
    64-bit hashes: two coincide with probability ~2^-64); more memory (~50 bytes per distinct
    feature). The voted prediction always reads kernel rows.

    ``cache_mb`` (0: off) keeps, per item id, the sparse kernel row K(s_i, x) of the support
    items seen so far; the next query of that id computes only the items added since. Memory is
    bounded: once the cache is full no new ids are cached, and a row that would overflow it is
    dropped. It pays for kernels whose pairs are dear (a tree kernel); for the polynomial kernel
    over features shared by most items the rows are dense and the cache is slower than the
    inverted index (benchmarks/bench_kernel.py measures both).

    ``to_bytes()`` / ``from_bytes(data)``: msgpack (srsly) of little-endian numpy buffers with a
    kind key, a format version and a checksum of the body; the kernel's class name, parameters and
    support items, the coefficients, accumulators and update history. Damaged bytes raise
    ``ValueError`` [S280]. ``pickle`` goes through the same bytes.

Subclassing the kernel from another .pyx
----------------------------------------
``Kernel`` is an extension type whose C-level hooks a subclass in another module overrides::

    # my_kernels.pyx
    from spacy_structperc._core.kernel cimport Kernel
    from spacy_structperc._core.kernel import register_kernel

    cdef class TreeKernel(Kernel):
        cdef readonly double lambda_
        def __init__(self, double lambda_=0.4):
            self.lambda_ = lambda_

        cdef object convert(self, object item):       # the Python item -> what you store/query
            return MyTree.from_arrays(item)
        cdef double pair(self, object x, object y) except? -1:   # K of two converted items
            return tree_kernel(<MyTree>x, <MyTree>y, self.lambda_)

        def params(self):                               # constructor kwargs, msgpack-able
            return {"lambda_": self.lambda_}

    register_kernel(TreeKernel)                         # so from_bytes can rebuild it by name

(A plain Python subclass may override ``py_convert(item)`` and ``py_pair(x, y)`` instead, which the
default hooks call: slow, but handy for a prototype or a test.) That is enough for a working kernel: the base class stores converted items in a list
(``store_item``), keeps the converted query (``prepare``) and fills a row by calling ``pair`` once
per support item (``row``, with the GIL). Its ``support_state()`` saves the list of converted
items, which must then be msgpack-able (bytes, numbers, lists, dicts); otherwise override
``support_state()`` / ``load_support_state(state)`` too. For speed, override the hooks on C data:

- ``cdef int64_t store_item(self, object item) except -1``: keep a support item; return its id,
  which must be ``self.n_items`` before the call (ids are dense, in insertion order); increment
  ``self.n_items``.
- ``cdef int prepare(self, object item) except -1``: make ``item`` the current query (with the
  GIL; convert it to C data here).
- ``cdef int64_t row(self, int64_t start, int64_t stop, int64_t* idx, double* val,
  double* base) except -1 nogil``: for the support ids i in [start, stop), in any order, write
  ``idx[n] = i`` and ``val[n] = K(s_i, query) - base[0]`` for the items whose kernel value is not
  ``base[0]``; return n. The buffers hold ``stop - start`` entries. ``base[0]`` is the value of
  every item not written (e.g. ``coef0 ** degree`` for a polynomial kernel: the items sharing no
  key with the query cost nothing), and must depend on the query only, not on start/stop; a
  dense kernel writes every i with base 0. Runs without the GIL: take it (``with gil``) only if
  you must.
- ``cdef int compact(self, const int64_t* keep, int64_t n_keep) except -1``: keep only the support
  items ``keep[0..n_keep)`` (ascending), renumbered 0..n_keep-1 (the budget calls it).
"""
from libc.math cimport isfinite, fabs
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
cimport cython

from .templates cimport mix64, hash_combine

cdef extern from *:
    """
    #define STRUCTPERC_KERNEL_PREFETCH(p) __builtin_prefetch((const void*)(p))
    """
    void prefetch "STRUCTPERC_KERNEL_PREFETCH"(const void* p) noexcept nogil

import hashlib

import numpy
import srsly

from ..errors import Errors

FORMAT_VERSION = 1
KIND = "spacy-structperc.DualPerceptron"
PREDICTIONS = ("last", "averaged", "voted")
BUDGET_POLICIES = ("oldest", "smallest")
MAX_SUPPORT = 2**31 - 2     # postings keep support ids as int32

_KERNELS = {}


def register_kernel(cls):
    """Register a Kernel subclass by its class name, so from_bytes can rebuild it (no code runs
    on load: the name is only looked up here). Returns the class, so it works as a decorator."""
    if not (isinstance(cls, type) and issubclass(cls, Kernel)):
        raise TypeError(f"register_kernel expects a Kernel subclass, got {cls!r}")
    _KERNELS[cls.__name__] = cls
    return cls


def registered_kernels():
    return dict(_KERNELS)


cdef int _grow(void** ptr, int64_t n, size_t size) except -1:
    cdef void* p = realloc(ptr[0], <size_t>max(n, 1) * size)
    if p == NULL:
        raise MemoryError()
    ptr[0] = p
    return 0


cdef inline int64_t _next_cap(int64_t have, int64_t need, int64_t least) noexcept nogil:
    cdef int64_t cap = max(have, least)
    while cap < need:
        cap *= 2
    return cap


cdef inline size_t _slot(uint64_t key, size_t mask) noexcept nogil:
    # Keys may be small integers in tests: mix them (murmur3's finalizer).
    key ^= key >> 33
    key *= 0xff51afd7ed558ccdULL
    key ^= key >> 33
    return <size_t>(key & mask)


def _mode_of(mode, name="mode"):
    try:
        return PREDICTIONS.index(mode)
    except ValueError:
        raise ValueError(Errors.S283.format(setting=name, requirement=f"one of {PREDICTIONS}",
                                            value=mode)) from None


def _sparse_arrays(item, kernel_name):
    """(keys uint64, values float32 or None), contiguous, from an item; validated."""
    if isinstance(item, tuple):
        if len(item) != 2:
            raise ValueError(Errors.S284.format(kernel=kernel_name, problem=f"got a tuple of {len(item)}"))
        keys, values = item
    else:
        keys, values = item, None
    if not (isinstance(keys, numpy.ndarray) and keys.dtype == numpy.uint64):
        keys = numpy.asarray(keys)
        if keys.size == 0:
            keys = numpy.zeros((0,), dtype=numpy.uint64)
        elif keys.dtype.kind not in "iu":
            raise ValueError(Errors.S284.format(kernel=kernel_name, problem=f"got keys of dtype {keys.dtype}"))
        keys = keys.astype(numpy.uint64, copy=False)
    if keys.ndim != 1:
        raise ValueError(Errors.S284.format(kernel=kernel_name, problem=f"got keys of shape {keys.shape}"))
    keys = numpy.ascontiguousarray(keys)
    if values is not None:
        values = numpy.ascontiguousarray(values, dtype=numpy.float32)
        if values.shape != keys.shape:
            raise ValueError(Errors.S284.format(
                kernel=kernel_name, problem=f"got {values.shape} values for {keys.shape} keys"))
    return keys, values


# ---------------------------------------------------------------------------------------------
# Kernels


cdef class Kernel:
    """Base class of the kernels: a store of support items and K(s_i, query) for all of them.

    The default hooks keep converted items in a Python list and call ``pair`` for every support
    item; a subclass overrides ``convert`` and ``pair`` at least (see the module docstring).
    """

    def __cinit__(self, *args, **kwargs):
        self.n_items = 0
        self._items = []
        self._query = None

    cdef object convert(self, object item):
        return self.py_convert(item)

    cdef double pair(self, object x, object y) except? -1:
        return self.py_pair(x, y)

    # A Python subclass (for prototyping) overrides these two instead of the C hooks.

    def py_convert(self, item):
        """The item as the kernel stores and compares it (default: unchanged)."""
        return item

    def py_pair(self, x, y):
        """K(x, y) of two converted items."""
        raise NotImplementedError(Errors.S285.format(cls=type(self).__name__))

    cdef int64_t store_item(self, object item) except -1:
        self._items.append(self.convert(item))
        self.n_items += 1
        return self.n_items - 1

    cdef int prepare(self, object item) except -1:
        self._query = self.convert(item)
        return 0

    cdef int64_t row(self, int64_t start, int64_t stop, int64_t* idx, double* val,
                     double* base) except -1 nogil:
        cdef int64_t i
        base[0] = 0.0
        with gil:
            for i in range(start, stop):
                idx[i - start] = i
                val[i - start] = self.pair(self._items[i], self._query)
        return stop - start

    cdef int compact(self, const int64_t* keep, int64_t n_keep) except -1:
        cdef int64_t j
        items = []
        for j in range(n_keep):
            items.append(self._items[keep[j]])
        self._items = items
        self.n_items = n_keep
        return 0

    # Python surface

    def k(self, x, y):
        """K(x, y)."""
        return self.pair(self.convert(x), self.convert(y))

    def __call__(self, x, y):
        return self.k(x, y)

    def store(self, item):
        """Add a support item; return its id."""
        return self.store_item(item)

    def __len__(self):
        return self.n_items

    def kernel_row(self, item, start=0, stop=None):
        """Dense K(s_i, item) for the support ids i in [start, stop)."""
        cdef int64_t a = start
        cdef int64_t b = self.n_items if stop is None else stop
        if not 0 <= a <= b <= self.n_items:
            raise IndexError(f"range [{a}, {b}) is not within {self.n_items} support items")
        out = numpy.empty((b - a,), dtype=numpy.float64)
        idx = numpy.empty((max(b - a, 1),), dtype=numpy.int64)
        val = numpy.empty((max(b - a, 1),), dtype=numpy.float64)
        cdef int64_t[::1] I = idx
        cdef double[::1] V = val
        cdef double base = 0.0
        cdef int64_t n
        self.prepare(item)
        with nogil:
            n = self.row(a, b, &I[0], &V[0], &base)
        out[:] = base
        out[idx[:n] - a] += val[:n]
        return out

    def params(self):
        """The constructor's keyword arguments (msgpack-able), saved with the model."""
        return {}

    def support_state(self):
        """The support items, msgpack-able; ``load_support_state`` reads it back."""
        return {"items": list(self._items)}

    def load_support_state(self, state):
        """Replace the support items by those of ``support_state()``."""
        self._items = []
        self.n_items = 0
        for item in state["items"]:
            self.store_item(item)

    def __reduce__(self):
        return (_rebuild_kernel, (type(self).__name__, self.params(), self.support_state()))


def _rebuild_kernel(name, params, state):
    cls = _KERNELS.get(name)
    if cls is None:
        raise ValueError(Errors.S282.format(cls=name, known=sorted(_KERNELS)))
    kernel = cls(**params)
    kernel.load_support_state(state)
    return kernel


cdef class PolynomialKernel(Kernel):
    """``K(x, y) = (gamma <x, y> + coef0) ** degree`` over sparse vectors of uint64 keys.

    Support items are kept in an inverted index (key -> postings of (support id, value)), so the
    kernel row of a query costs the postings of its keys: every item sharing no key with it has
    the value ``coef0 ** degree``, which the perceptron accounts for with running sums.
    """

    def __cinit__(self, *args, **kwargs):
        self._capacity = 1024
        self._table = <KeySlot*>calloc(self._capacity, sizeof(KeySlot))
        self._ptr = <int64_t*>calloc(1, sizeof(int64_t))
        if self._table == NULL or self._ptr == NULL:
            raise MemoryError()

    def __init__(self, int degree=2, double coef0=1.0, double gamma=1.0):
        if degree < 1:
            raise ValueError(Errors.S283.format(setting="degree", requirement="an integer >= 1", value=degree))
        if not (isfinite(coef0) and isfinite(gamma)):
            raise ValueError(Errors.S283.format(setting="coef0/gamma", requirement="finite",
                                                value=(coef0, gamma)))
        self.degree = degree
        self.coef0 = coef0
        self.gamma = gamma
        self._base = self._value(0.0)

    def __dealloc__(self):
        self._free_lists()
        free(self._table)
        free(self._lists)
        free(self._ptr)
        free(self._keys)
        free(self._vals)
        free(self._qkeys)
        free(self._qvals)
        free(self._acc)
        free(self._mark)

    cdef double _value(self, double dot) noexcept nogil:
        cdef double x = self.gamma * dot + self.coef0
        cdef double r = x
        cdef int d
        for d in range(1, self.degree):
            r *= x
        return r

    cdef void _free_lists(self) noexcept:
        cdef int64_t i
        for i in range(self._n_lists):
            free(self._lists[i].ids)
            free(self._lists[i].vals)
        self._n_lists = 0

    cdef int64_t _find(self, uint64_t key) noexcept nogil:
        cdef size_t mask = self._capacity - 1
        cdef size_t b = _slot(key, mask)
        while self._table[b].list1 != 0:
            if self._table[b].key == key:
                return self._table[b].list1 - 1
            b = (b + 1) & mask
        return -1

    cdef int _grow_table(self) except -1:
        cdef size_t new_capacity = self._capacity * 2
        cdef KeySlot* table = <KeySlot*>calloc(new_capacity, sizeof(KeySlot))
        if table == NULL:
            raise MemoryError()
        cdef size_t mask = new_capacity - 1
        cdef size_t i, b
        for i in range(self._capacity):
            if self._table[i].list1 != 0:
                b = _slot(self._table[i].key, mask)
                while table[b].list1 != 0:
                    b = (b + 1) & mask
                table[b] = self._table[i]
        free(self._table)
        self._table = table
        self._capacity = new_capacity
        return 0

    cdef int64_t _list_of(self, uint64_t key) except -1:
        cdef int64_t found = self._find(key)
        if found >= 0:
            return found
        if <size_t>(self._n_lists + 1) * 2 > self._capacity:
            self._grow_table()
        if self._n_lists == self._lists_cap:
            self._lists_cap = _next_cap(self._lists_cap, self._n_lists + 1, 1024)
            _grow(<void**>&self._lists, self._lists_cap, sizeof(Postings))
        cdef size_t mask = self._capacity - 1
        cdef size_t b = _slot(key, mask)
        while self._table[b].list1 != 0:
            b = (b + 1) & mask
        cdef int64_t li = self._n_lists
        self._lists[li].n = 0
        self._lists[li].cap = 0
        self._lists[li].ids = NULL
        self._lists[li].vals = NULL
        self._table[b].key = key
        self._table[b].list1 = li + 1
        self._n_lists += 1
        return li

    cdef int _add_posting(self, uint64_t key, int32_t item, float value) except -1:
        cdef Postings* p = &self._lists[self._list_of(key)]
        if p.n == p.cap:
            p.cap = _next_cap(p.cap, p.n + 1, 4)
            _grow(<void**>&p.ids, p.cap, sizeof(int32_t))
            _grow(<void**>&p.vals, p.cap, sizeof(float))
        p.ids[p.n] = item
        p.vals[p.n] = value
        p.n += 1
        return 0

    cdef int _append_item(self, const uint64_t* keys, const float* vals, int64_t n) except -1:
        if self.n_items >= MAX_SUPPORT:
            raise ValueError(Errors.S283.format(setting="number of support items",
                                                requirement=f"at most {MAX_SUPPORT}", value=self.n_items + 1))
        cdef int64_t item = self.n_items
        cdef int64_t nnz = self._ptr[item]
        cdef int64_t j
        if item + 1 >= self._items_cap:
            self._items_cap = _next_cap(self._items_cap, item + 2, 1024)
            _grow(<void**>&self._ptr, self._items_cap + 1, sizeof(int64_t))
        if nnz + n > self._nnz_cap:
            self._nnz_cap = _next_cap(self._nnz_cap, nnz + n, 1 << 14)
            _grow(<void**>&self._keys, self._nnz_cap, sizeof(uint64_t))
            _grow(<void**>&self._vals, self._nnz_cap, sizeof(float))
        if item + 1 > self._acc_cap:
            self._acc_cap = _next_cap(self._acc_cap, item + 1, 1024)
            free(self._acc)
            free(self._mark)
            self._acc = <double*>calloc(self._acc_cap, sizeof(double))
            self._mark = <uint8_t*>calloc(self._acc_cap, sizeof(uint8_t))
            if self._acc == NULL or self._mark == NULL:
                raise MemoryError()
        if n:
            memcpy(&self._keys[nnz], keys, n * sizeof(uint64_t))
            memcpy(&self._vals[nnz], vals, n * sizeof(float))
        self._ptr[item + 1] = nnz + n
        for j in range(n):
            if vals[j] != 0:
                self._add_posting(keys[j], <int32_t>item, vals[j])
        self.n_items += 1
        return 0

    cdef int _clear_index(self) except -1:
        self._free_lists()
        memset(self._table, 0, self._capacity * sizeof(KeySlot))
        self.n_items = 0
        self._ptr[0] = 0
        return 0

    cdef object convert(self, object item):
        # Canonical form: sorted unique keys, the values of repeated keys summed.
        keys, values = _sparse_arrays(item, "PolynomialKernel")
        if values is None:
            values = numpy.ones(keys.shape, dtype=numpy.float32)
        if keys.shape[0] > 1:
            uniq, inverse = numpy.unique(keys, return_inverse=True)
            if uniq.shape[0] != keys.shape[0] or not numpy.array_equal(uniq, keys):
                values = numpy.bincount(inverse.ravel(), weights=values, minlength=uniq.shape[0]).astype(numpy.float32)
                keys = uniq
        return keys, values

    cdef double pair(self, object x, object y) except? -1:
        kx, vx = x
        ky, vy = y
        _, ix, iy = numpy.intersect1d(kx, ky, assume_unique=True, return_indices=True)
        cdef double dot = float(numpy.dot(vx[ix].astype(numpy.float64), vy[iy].astype(numpy.float64)))
        return self._value(dot)

    cdef int64_t store_item(self, object item) except -1:
        keys, values = self.convert(item)
        cdef const uint64_t[::1] k = keys
        cdef const float[::1] v = values
        cdef int64_t n = k.shape[0]
        self._append_item(&k[0] if n else NULL, &v[0] if n else NULL, n)
        return self.n_items - 1

    cdef int prepare(self, object item) except -1:
        # The query is not made canonical: a repeated key adds its postings twice, which is what
        # a value of 2 means.
        keys, values = _sparse_arrays(item, "PolynomialKernel")
        cdef const uint64_t[::1] k = keys
        cdef const float[::1] v
        cdef int64_t j, n = k.shape[0]
        if n > self._qcap:
            self._qcap = _next_cap(self._qcap, n, 64)
            _grow(<void**>&self._qkeys, self._qcap, sizeof(uint64_t))
            _grow(<void**>&self._qvals, self._qcap, sizeof(float))
        if n:
            memcpy(self._qkeys, &k[0], n * sizeof(uint64_t))
            if values is None:
                for j in range(n):
                    self._qvals[j] = 1.0
            else:
                v = values
                memcpy(self._qvals, &v[0], n * sizeof(float))
        self._qn = n
        return 0

    cdef int64_t row(self, int64_t start, int64_t stop, int64_t* idx, double* val,
                     double* base) except -1 nogil:
        cdef int64_t q, j, i, t, li, n = 0
        cdef double qv
        cdef Postings* p
        cdef double* acc = self._acc
        cdef uint8_t* mark = self._mark
        base[0] = self._base
        for q in range(self._qn):
            li = self._find(self._qkeys[q])
            if li < 0:
                continue
            p = &self._lists[li]
            qv = self._qvals[q]
            # Postings are in id order: walk back from the newest to the range.
            j = p.n - 1
            while j >= 0 and p.ids[j] >= stop:
                j -= 1
            while j >= 0 and p.ids[j] >= start:
                i = p.ids[j]
                if not mark[i]:
                    mark[i] = 1
                    idx[n] = i
                    n += 1
                acc[i] += qv * p.vals[j]
                j -= 1
        for t in range(n):
            i = idx[t]
            val[t] = self._value(acc[i]) - self._base
            acc[i] = 0.0
            mark[i] = 0
        return n

    cdef int compact(self, const int64_t* keep, int64_t n_keep) except -1:
        cdef int64_t* ptr = self._ptr
        cdef uint64_t* keys = self._keys
        cdef float* vals = self._vals
        cdef int64_t j, it
        self._ptr = <int64_t*>calloc(1, sizeof(int64_t))
        self._keys = NULL
        self._vals = NULL
        self._items_cap = 0
        self._nnz_cap = 0
        try:
            if self._ptr == NULL:
                raise MemoryError()
            self._clear_index()
            for j in range(n_keep):
                it = keep[j]
                self._append_item(&keys[ptr[it]], &vals[ptr[it]], ptr[it + 1] - ptr[it])
        finally:
            free(ptr)
            free(keys)
            free(vals)
        return 0

    def params(self):
        return {"degree": self.degree, "coef0": self.coef0, "gamma": self.gamma}

    def support_state(self):
        cdef int64_t n = self.n_items
        cdef int64_t nnz = self._ptr[n]
        ptr = numpy.empty((n + 1,), dtype="<i8")
        keys = numpy.empty((nnz,), dtype="<u8")
        vals = numpy.empty((nnz,), dtype="<f4")
        cdef int64_t[::1] P = ptr
        cdef uint64_t[::1] K = keys
        cdef float[::1] V = vals
        memcpy(&P[0], self._ptr, (n + 1) * sizeof(int64_t))
        if nnz:
            memcpy(&K[0], self._keys, nnz * sizeof(uint64_t))
            memcpy(&V[0], self._vals, nnz * sizeof(float))
        return {"ptr": ptr.tobytes(), "keys": keys.tobytes(), "vals": vals.tobytes()}

    def load_support_state(self, state):
        ptr = numpy.frombuffer(state["ptr"], dtype="<i8").astype(numpy.int64)
        keys = numpy.frombuffer(state["keys"], dtype="<u8").astype(numpy.uint64)
        vals = numpy.frombuffer(state["vals"], dtype="<f4").astype(numpy.float32)
        if (ptr.shape[0] < 1 or ptr[0] != 0 or ptr[-1] != keys.shape[0] or vals.shape != keys.shape
                or numpy.any(numpy.diff(ptr) < 0)):
            raise ValueError("the support items' arrays do not fit together")
        if not numpy.all(numpy.isfinite(vals)):
            raise ValueError("support values are not finite")
        self._clear_index()
        cdef const int64_t[::1] P = ptr
        cdef const uint64_t[::1] K = keys
        cdef const float[::1] V = vals
        cdef int64_t j
        for j in range(ptr.shape[0] - 1):
            self._append_item(&K[P[j]] if P[j + 1] > P[j] else NULL,
                              &V[P[j]] if P[j + 1] > P[j] else NULL, P[j + 1] - P[j])

    @property
    def n_keys(self):
        """Distinct keys in the inverted index."""
        return self._n_lists

    @property
    def n_postings(self):
        cdef int64_t i, total = 0
        for i in range(self._n_lists):
            total += self._lists[i].n
        return total


register_kernel(Kernel)
register_kernel(PolynomialKernel)


# ---------------------------------------------------------------------------------------------
# The primal expansion of a polynomial kernel of degree <= 2


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
        cdef size_t new_capacity = self._capacity * 2
        cdef PrimalSlot* table = <PrimalSlot*>calloc(new_capacity, sizeof(PrimalSlot))
        if table == NULL:
            raise MemoryError()
        cdef size_t mask = new_capacity - 1
        cdef size_t i, b
        for i in range(self._capacity):
            if self._table[i].key != 0:
                b = _slot(self._table[i].key, mask)
                while table[b].key != 0:
                    b = (b + 1) & mask
                table[b] = self._table[i]
        free(self._table)
        self._table = table
        self._capacity = new_capacity
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


# ---------------------------------------------------------------------------------------------
# The perceptron


cdef class DualPerceptron:
    """A perceptron in dual form over any Kernel: last, averaged and voted predictions."""

    def __cinit__(self, *args, **kwargs):
        self._by_id = {}
        self._row_of_id = {}

    def __init__(self, Kernel kernel not None, prediction="averaged", int64_t budget=0,
                 budget_policy="oldest", double cache_mb=0.0, expand="auto"):
        if kernel.n_items != 0:
            raise ValueError(Errors.S286.format(n=kernel.n_items))
        if budget < 0:
            raise ValueError(Errors.S283.format(setting="budget", requirement="an integer >= 0 (0: none)",
                                                value=budget))
        if budget_policy not in BUDGET_POLICIES:
            raise ValueError(Errors.S283.format(setting="budget_policy", requirement=f"one of {BUDGET_POLICIES}",
                                                value=budget_policy))
        if not (cache_mb >= 0.0 and isfinite(cache_mb)):
            raise ValueError(Errors.S283.format(setting="cache_mb", requirement="a number >= 0 (0: off)",
                                                value=cache_mb))
        self.kernel = kernel
        self._mode = _mode_of(prediction, "prediction")
        self.budget = budget
        self._policy = BUDGET_POLICIES.index(budget_policy)
        self.cache_limit = <int64_t>(cache_mb * 1048576.0)
        self.expansion = _expansion_for(kernel, expand)

    def __dealloc__(self):
        self._free_state()

    cdef void _free_state(self) noexcept:
        self._clear_cache()
        free(self._rows)
        self._rows = NULL
        self._rows_cap = 0
        free(self._a)
        free(self._u)
        free(self._ids)
        free(self._alive)
        free(self._ev_item)
        free(self._ev_delta)
        free(self._ev_clock)
        free(self._idx)
        free(self._val)
        free(self._dense)
        self._a = self._u = NULL
        self._ids = NULL
        self._alive = NULL
        self._ev_item = NULL
        self._ev_delta = NULL
        self._ev_clock = NULL
        self._idx = NULL
        self._val = NULL
        self._dense = NULL
        self._cap = self._ev_cap = self._scratch_cap = 0
        self._n_total = self._n_dead = self._oldest = 0
        self.n_support = self.n_events = self.clock = 0
        self._a_sum = self._u_sum = 0.0
        self._by_id = {}

    # Settings

    @property
    def prediction(self):
        """"last", "averaged" or "voted": what score/score_batch/rank use when no mode is given."""
        return PREDICTIONS[self._mode]

    @prediction.setter
    def prediction(self, value):
        self._mode = _mode_of(value, "prediction")

    @property
    def expanded(self):
        """Whether "last" and "averaged" scores come from the primal expansion (see Expansion)."""
        return self.expansion is not None

    @property
    def budget_policy(self):
        return BUDGET_POLICIES[self._policy]

    @property
    def cache_mb(self):
        return self.cache_limit / 1048576.0

    def __len__(self):
        return self.n_support

    # Storage

    cdef int _ensure_support(self, int64_t n) except -1:
        if n <= self._cap:
            return 0
        cdef int64_t cap = _next_cap(self._cap, n, 1024)
        _grow(<void**>&self._a, cap, sizeof(double))
        _grow(<void**>&self._u, cap, sizeof(double))
        _grow(<void**>&self._ids, cap, sizeof(int64_t))
        _grow(<void**>&self._alive, cap, sizeof(uint8_t))
        self._cap = cap
        return 0

    cdef int _ensure_scratch(self, int64_t n) except -1:
        if n <= self._scratch_cap:
            return 0
        cdef int64_t cap = _next_cap(self._scratch_cap, n, 1024)
        _grow(<void**>&self._idx, cap, sizeof(int64_t))
        _grow(<void**>&self._val, cap, sizeof(double))
        free(self._dense)
        self._dense = <double*>calloc(cap, sizeof(double))   # all zero between uses
        if self._dense == NULL:
            raise MemoryError()
        self._scratch_cap = cap
        return 0

    cdef int _add_event(self, int64_t item, double delta) except -1:
        if self.n_events == self._ev_cap:
            self._ev_cap = _next_cap(self._ev_cap, self.n_events + 1, 1024)
            _grow(<void**>&self._ev_item, self._ev_cap, sizeof(int64_t))
            _grow(<void**>&self._ev_delta, self._ev_cap, sizeof(double))
            _grow(<void**>&self._ev_clock, self._ev_cap, sizeof(int64_t))
        self._ev_item[self.n_events] = item
        self._ev_delta[self.n_events] = delta
        self._ev_clock[self.n_events] = self.clock
        self.n_events += 1
        return 0

    def update(self, item, double delta, int64_t item_id=-1):
        """Add ``delta * phi(item)``: a new support item, or merged into item ``item_id``'s.

        Returns the support id (ids change when the budget sweeps forgotten items out).
        """
        if delta == 0.0:
            return -1
        if not isfinite(delta):
            raise ValueError(Errors.S283.format(setting="delta", requirement="finite", value=delta))
        cdef int64_t i
        cdef bint new = True
        if item_id >= 0:
            found = self._by_id.get(item_id)
            if found is not None:
                i = found
                new = False
        if new:
            if self.kernel.n_items != self._n_total:
                raise ValueError(Errors.S286.format(n=self.kernel.n_items))
            i = self.kernel.store_item(item)
            self._ensure_support(i + 1)
            self._a[i] = 0.0
            self._u[i] = 0.0
            self._ids[i] = item_id
            self._alive[i] = 1
            self._n_total = i + 1
            self.n_support += 1
            if item_id >= 0:
                self._by_id[item_id] = i
        self._a[i] += delta
        self._u[i] += <double>self.clock * delta
        self._a_sum += delta
        self._u_sum += <double>self.clock * delta
        self._add_event(i, delta)
        if self.expansion is not None:
            self.expansion.add_item(<PolynomialKernel>self.kernel, i, delta, <double>self.clock * delta)
        if new and self.budget > 0 and self.n_support > self.budget:
            self._enforce_budget(i)
            if self._n_dead >= max(self.n_support, 256):
                self._compact()
                i = self.n_support - 1   # the newest item keeps its place at the end
        return i

    def tick(self):
        """Advance the clock: once per training example, mistake or not."""
        self.clock += 1

    def next_example(self):
        """Alias of tick(), as AveragedWeights names it."""
        self.clock += 1

    cdef int _drop(self, int64_t item) except -1:
        if self.expansion is not None:
            self.expansion.add_item(<PolynomialKernel>self.kernel, item, -self._a[item], -self._u[item])
        self._alive[item] = 0
        self._a_sum -= self._a[item]
        self._u_sum -= self._u[item]
        self._a[item] = 0.0
        self._u[item] = 0.0
        self.n_support -= 1
        self._n_dead += 1
        if self._ids[item] >= 0:
            self._by_id.pop(self._ids[item], None)
        return 0

    cdef int _enforce_budget(self, int64_t keep) except -1:
        cdef int64_t i, victim
        cdef double best, mag
        while self.n_support > self.budget:
            if self._policy == 0:
                while not self._alive[self._oldest]:
                    self._oldest += 1
                victim = self._oldest
            else:
                victim = -1
                best = 0.0
                for i in range(self._n_total):
                    if self._alive[i] and i != keep:
                        mag = fabs(self._a[i])
                        if victim < 0 or mag < best:
                            victim = i
                            best = mag
            if victim < 0 or victim == keep:
                break
            self._drop(victim)
        return 0

    cdef int _compact(self) except -1:
        """Sweep forgotten items out of the kernel and the history; support ids are renumbered."""
        if self._n_dead == 0:
            return 0
        cdef int64_t n_old = self._n_total
        keep = numpy.empty((max(self.n_support, 1),), dtype=numpy.int64)
        remap = numpy.full((max(n_old, 1),), -1, dtype=numpy.int64)
        cdef int64_t[::1] K = keep
        cdef int64_t[::1] R = remap
        cdef int64_t i, j = 0, e, m = 0
        for i in range(n_old):
            if self._alive[i]:
                K[j] = i
                R[i] = j
                j += 1
        self.kernel.compact(&K[0], j)
        for e in range(j):
            i = K[e]
            self._a[e] = self._a[i]
            self._u[e] = self._u[i]
            self._ids[e] = self._ids[i]
            self._alive[e] = 1
        for e in range(self.n_events):
            i = R[self._ev_item[e]]
            if i >= 0:
                self._ev_item[m] = i
                self._ev_delta[m] = self._ev_delta[e]
                self._ev_clock[m] = self._ev_clock[e]
                m += 1
        self.n_events = m
        self._n_total = j
        self._n_dead = 0
        self._oldest = 0
        self._by_id = {self._ids[e]: e for e in range(j) if self._ids[e] >= 0}
        self._clear_cache()
        return 0

    def compact(self):
        """Sweep forgotten (over-budget) items out now; predictions do not change."""
        self._compact()

    # The kernel-row cache

    cdef void _clear_cache(self) noexcept:
        cdef int64_t r
        for r in range(self._n_rows):
            free(self._rows[r].idx)
            free(self._rows[r].val)
        self._n_rows = 0
        self.cache_bytes = 0
        self._row_of_id = {}

    def clear_cache(self):
        self._clear_cache()

    cdef int64_t _full_row(self, object item, int64_t item_id, double* base, int64_t** idx,
                           double** val) except -1:
        """The kernel row of item over every support id; from the cache when it can be."""
        cdef int64_t N = self._n_total
        cdef int64_t n, m, cap
        cdef double b = 0.0
        cdef CachedRow* e
        cdef int64_t* new_idx
        cdef double* new_val
        self._ensure_scratch(N)
        cdef bint caching = self.cache_limit > 0 and item_id >= 0
        if caching:
            slot = self._row_of_id.get(item_id)
            if slot is not None:
                e = &self._rows[<int64_t>slot]
                if e.covered < N:
                    self.kernel.prepare(item)
                    with nogil:
                        m = self.kernel.row(e.covered, N, self._idx, self._val, &b)
                    if e.nnz + m > e.cap:
                        cap = _next_cap(e.cap, e.nnz + m, 16)
                        if self.cache_bytes + (cap - e.cap) * 16 > self.cache_limit:
                            # Full: give this row up and serve the query uncached.
                            self._forget_row(<int64_t>slot, item_id)
                            return self._uncached_row(item, base, idx, val, False, item_id)
                        new_idx = <int64_t*>realloc(e.idx, cap * sizeof(int64_t))
                        if new_idx == NULL:
                            raise MemoryError()
                        e.idx = new_idx
                        new_val = <double*>realloc(e.val, cap * sizeof(double))
                        if new_val == NULL:
                            raise MemoryError()
                        e.val = new_val
                        self.cache_bytes += (cap - e.cap) * 16
                        e.cap = cap
                    if m:
                        memcpy(&e.idx[e.nnz], self._idx, m * sizeof(int64_t))
                        memcpy(&e.val[e.nnz], self._val, m * sizeof(double))
                    e.nnz += m
                    e.covered = N
                self.cache_hits += 1
                base[0] = e.base
                idx[0] = e.idx
                val[0] = e.val
                return e.nnz
        return self._uncached_row(item, base, idx, val, caching, item_id)

    cdef int64_t _uncached_row(self, object item, double* base, int64_t** idx, double** val,
                               bint cache_it, int64_t item_id) except -1:
        cdef int64_t N = self._n_total
        cdef int64_t n
        self.kernel.prepare(item)
        with nogil:
            n = self.kernel.row(0, N, self._idx, self._val, base)
        idx[0] = self._idx
        val[0] = self._val
        if cache_it:
            self.cache_misses += 1
            if self.cache_bytes + (n + 1) * 16 + <int64_t>sizeof(CachedRow) <= self.cache_limit:
                self._cache_row(item_id, n, base[0])
        return n

    cdef int _cache_row(self, int64_t item_id, int64_t n, double base) except -1:
        if self._n_rows == self._rows_cap:
            self._rows_cap = _next_cap(self._rows_cap, self._n_rows + 1, 1024)
            _grow(<void**>&self._rows, self._rows_cap, sizeof(CachedRow))
        cdef CachedRow* e = &self._rows[self._n_rows]
        e.cap = max(n, 1)
        e.idx = <int64_t*>malloc(e.cap * sizeof(int64_t))
        e.val = <double*>malloc(e.cap * sizeof(double))
        if e.idx == NULL or e.val == NULL:
            free(e.idx)
            free(e.val)
            raise MemoryError()
        if n:
            memcpy(e.idx, self._idx, n * sizeof(int64_t))
            memcpy(e.val, self._val, n * sizeof(double))
        e.nnz = n
        e.covered = self._n_total
        e.base = base
        self.cache_bytes += e.cap * 16 + <int64_t>sizeof(CachedRow)
        self._row_of_id[item_id] = self._n_rows
        self._n_rows += 1
        return 0

    cdef int _forget_row(self, int64_t slot, int64_t item_id) except -1:
        # Move the last row into the slot.
        cdef CachedRow* e = &self._rows[slot]
        self.cache_bytes -= e.cap * 16 + <int64_t>sizeof(CachedRow)
        free(e.idx)
        free(e.val)
        del self._row_of_id[item_id]
        cdef int64_t last = self._n_rows - 1
        if slot != last:
            self._rows[slot] = self._rows[last]
            for key, value in self._row_of_id.items():
                if value == last:
                    self._row_of_id[key] = slot
                    break
        self._n_rows = last
        return 0

    @property
    def n_cached_rows(self):
        return self._n_rows

    # Scoring

    cdef double _score_row(self, const int64_t* idx, const double* val, int64_t n, double base,
                           int mode) noexcept nogil:
        cdef int64_t t, i
        cdef double sa = 0.0, su = 0.0
        cdef double T = <double>self.clock
        if mode == 0 or self.clock == 0:
            for t in range(n):
                sa += self._a[idx[t]] * val[t]
            return sa + base * self._a_sum
        for t in range(n):
            i = idx[t]
            sa += self._a[i] * val[t]
            su += self._u[i] * val[t]
        return (sa - su / T) + base * (self._a_sum - self._u_sum / T)

    cdef double _voted_binary(self, const double* k_of, double base) noexcept nogil:
        # k_of[i] + base is K(s_i, x); the prefix perceptron after each update votes
        # sign(prefix score) weighted by the examples it survived.
        cdef int64_t e, i, c, prev = 0
        cdef double P = 0.0, votes = 0.0
        if self.clock == 0:
            return 0.0
        for e in range(self.n_events):
            i = self._ev_item[e]
            if not self._alive[i]:
                continue
            c = self._ev_clock[e]
            if c > prev:
                if P > 0:
                    votes += <double>(c - prev)
                elif P < 0:
                    votes -= <double>(c - prev)
                prev = c
            P += self._ev_delta[e] * (base + k_of[i])
        if self.clock > prev:
            if P > 0:
                votes += <double>(self.clock - prev)
            elif P < 0:
                votes -= <double>(self.clock - prev)
        return votes / <double>self.clock

    cdef double score_one(self, object item, int64_t item_id, int mode) except? -1:
        cdef double base = 0.0, result, sw = 0.0, su = 0.0
        cdef PolynomialKernel poly
        cdef Expansion expansion = self.expansion
        cdef int64_t n_features
        if mode != 2 and expansion is not None:
            poly = <PolynomialKernel>self.kernel
            poly.prepare(item)
            with nogil:
                _drop_unseen_keys(poly)
            n_features = expansion.expand(poly._qkeys, poly._qvals, poly._qn, True)
            with nogil:
                expansion.dot(n_features, &sw, &su)
                if mode == 0 or self.clock == 0:
                    result = sw + poly._base * self._a_sum
                else:
                    result = (sw - su / <double>self.clock) + poly._base * (
                        self._a_sum - self._u_sum / <double>self.clock)
            return result
        cdef int64_t* idx
        cdef double* val
        cdef int64_t n = self._full_row(item, item_id, &base, &idx, &val)
        cdef int64_t t
        cdef double* dense = self._dense
        with nogil:
            if mode == 2:
                for t in range(n):
                    dense[idx[t]] = val[t]
                result = self._voted_binary(dense, base)
                for t in range(n):
                    dense[idx[t]] = 0.0
            else:
                result = self._score_row(idx, val, n, base, mode)
        return result

    def score(self, item, int64_t item_id=-1, mode=None):
        """The score of one item (its sign is the binary decision); see the module docstring."""
        cdef int m = self._mode if mode is None else _mode_of(mode)
        return self.score_one(item, item_id, m)

    def score_batch(self, items, item_ids=None, mode=None):
        """Scores of many items, each on its own (binary decisions), as a float64 array."""
        cdef int m = self._mode if mode is None else _mode_of(mode)
        items = list(items)
        cdef int64_t j, n = len(items)
        if item_ids is not None and len(item_ids) != n:
            raise ValueError(f"{len(item_ids)} item ids for {n} items")
        out = numpy.empty((n,), dtype=numpy.float64)
        cdef double[::1] o = out
        for j in range(n):
            o[j] = self.score_one(items[j], -1 if item_ids is None else int(item_ids[j]), m)
        return out

    def rank(self, items, item_ids=None, mode=None):
        """Scores of a candidate set, its argmax the prediction (collins2001 Fig. 4).

        "last"/"averaged": the scores; "voted": each candidate's share of the votes of the prefix
        perceptrons whose argmax it is.
        """
        cdef int m = self._mode if mode is None else _mode_of(mode)
        if m != 2:
            return self.score_batch(items, item_ids, mode=PREDICTIONS[m])
        items = list(items)
        cdef int64_t n_cand = len(items)
        if item_ids is not None and len(item_ids) != n_cand:
            raise ValueError(f"{len(item_ids)} item ids for {n_cand} items")
        cdef int64_t N = self._n_total
        K = numpy.empty((n_cand, max(N, 1)), dtype=numpy.float64)
        votes = numpy.zeros((n_cand,), dtype=numpy.float64)
        prefix = numpy.zeros((n_cand,), dtype=numpy.float64)
        if n_cand == 0 or self.clock == 0:
            return votes
        cdef double[:, ::1] Kv = K
        cdef double[::1] V = votes
        cdef double[::1] P = prefix
        cdef int64_t c, t, e, i, clk, best, prev = 0
        cdef double base = 0.0, delta, w
        cdef int64_t* idx
        cdef double* val
        cdef int64_t n
        for c in range(n_cand):
            n = self._full_row(items[c], -1 if item_ids is None else int(item_ids[c]), &base, &idx, &val)
            with nogil:
                for t in range(N):
                    Kv[c, t] = base
                for t in range(n):
                    Kv[c, idx[t]] += val[t]
        with nogil:
            for e in range(self.n_events):
                i = self._ev_item[e]
                if not self._alive[i]:
                    continue
                clk = self._ev_clock[e]
                if clk > prev:
                    best = _vote(&P[0], n_cand)
                    if best >= 0:
                        V[best] += <double>(clk - prev)
                    prev = clk
                delta = self._ev_delta[e]
                for c in range(n_cand):
                    P[c] += delta * Kv[c, i]
            if self.clock > prev:
                best = _vote(&P[0], n_cand)
                if best >= 0:
                    V[best] += <double>(self.clock - prev)
        return votes / float(self.clock)

    # Inspection

    def coefficients(self):
        """(a, u) over support ids: coefficients and Daume accumulators (0 for forgotten items)."""
        a = numpy.zeros((self._n_total,), dtype=numpy.float64)
        u = numpy.zeros((self._n_total,), dtype=numpy.float64)
        cdef int64_t i
        for i in range(self._n_total):
            a[i] = self._a[i]
            u[i] = self._u[i]
        return a, u

    def alive(self):
        """Boolean mask over support ids: False for items the budget forgot (until a sweep)."""
        return numpy.array([bool(self._alive[i]) for i in range(self._n_total)], dtype=bool)

    def history(self):
        """The update history (support id, delta, clock) as three arrays, oldest first."""
        cdef int64_t e
        items = numpy.array([self._ev_item[e] for e in range(self.n_events)], dtype=numpy.int64)
        deltas = numpy.array([self._ev_delta[e] for e in range(self.n_events)], dtype=numpy.float64)
        clocks = numpy.array([self._ev_clock[e] for e in range(self.n_events)], dtype=numpy.int64)
        return items, deltas, clocks

    # Serialization

    def to_bytes(self):
        """msgpack of the kernel and the perceptron's state, with a checksum of the body."""
        self._compact()
        cdef int64_t n = self._n_total
        a, u = self.coefficients()
        ids = numpy.array([self._ids[i] for i in range(n)], dtype="<i8")
        ev_item, ev_delta, ev_clock = self.history()
        kernel = self.kernel
        body = {
            "kernel": {"class": type(kernel).__name__, "params": kernel.params(),
                       "state": kernel.support_state()},
            "prediction": self.prediction,
            "budget": int(self.budget),
            "budget_policy": self.budget_policy,
            "cache_mb": self.cache_mb,
            "expand": self.expansion is not None,
            "clock": int(self.clock),
            "n_support": int(n),
            "coef": a.astype("<f8").tobytes(),
            "accum": u.astype("<f8").tobytes(),
            "item_ids": ids.tobytes(),
            "event_item": ev_item.astype("<i8").tobytes(),
            "event_delta": ev_delta.astype("<f8").tobytes(),
            "event_clock": ev_clock.astype("<i8").tobytes(),
        }
        body_bytes = srsly.msgpack_dumps(body)
        return srsly.msgpack_dumps({
            "kind": KIND,
            "format_version": FORMAT_VERSION,
            "checksum": hashlib.blake2b(body_bytes, digest_size=16).hexdigest(),
            "body": body_bytes,
        })

    def from_bytes(self, data):
        """Load what to_bytes wrote (kernel included); damaged bytes raise ValueError [S280]."""
        try:
            outer = srsly.msgpack_loads(data)
        except Exception as e:   # msgpack raises several unrelated types on garbage
            raise ValueError(Errors.S280.format(reason=f"not msgpack ({type(e).__name__})")) from None
        if not isinstance(outer, dict) or outer.get("kind") != KIND:
            raise ValueError(Errors.S280.format(reason="no kernel perceptron header"))
        version = outer.get("format_version")
        if not isinstance(version, int):
            raise ValueError(Errors.S280.format(reason="missing format version"))
        if version > FORMAT_VERSION:
            raise ValueError(Errors.S281.format(found=version, supported=FORMAT_VERSION))
        body_bytes = outer.get("body")
        if not isinstance(body_bytes, bytes) or not isinstance(outer.get("checksum"), str):
            raise ValueError(Errors.S280.format(reason="missing body or checksum"))
        if hashlib.blake2b(body_bytes, digest_size=16).hexdigest() != outer["checksum"]:
            raise ValueError(Errors.S280.format(reason="checksum mismatch"))
        try:
            body = srsly.msgpack_loads(body_bytes)
            spec = body["kernel"]
            cls_name = spec["class"]
        except Exception as e:
            raise ValueError(Errors.S280.format(reason=f"unreadable body ({type(e).__name__})")) from None
        cls = _KERNELS.get(cls_name)
        if cls is None:
            raise ValueError(Errors.S282.format(cls=cls_name, known=sorted(_KERNELS)))
        try:
            kernel = cls(**spec["params"])
            kernel.load_support_state(spec["state"])
            n = int(body["n_support"])
            clock = int(body["clock"])
            a = numpy.frombuffer(body["coef"], dtype="<f8").astype(numpy.float64)
            u = numpy.frombuffer(body["accum"], dtype="<f8").astype(numpy.float64)
            ids = numpy.frombuffer(body["item_ids"], dtype="<i8").astype(numpy.int64)
            ev_item = numpy.frombuffer(body["event_item"], dtype="<i8").astype(numpy.int64)
            ev_delta = numpy.frombuffer(body["event_delta"], dtype="<f8").astype(numpy.float64)
            ev_clock = numpy.frombuffer(body["event_clock"], dtype="<i8").astype(numpy.int64)
            if kernel.n_items != n or a.shape[0] != n or u.shape[0] != n or ids.shape[0] != n:
                raise ValueError("support arrays do not match the kernel's support items")
            if ev_delta.shape != ev_item.shape or ev_clock.shape != ev_item.shape:
                raise ValueError("update history arrays differ in length")
            if clock < 0 or (ev_item.shape[0] and (ev_item.min() < 0 or ev_item.max() >= n)):
                raise ValueError("update history refers to unknown support items")
            if ev_clock.shape[0] and (ev_clock[0] < 0 or numpy.any(numpy.diff(ev_clock) < 0) or ev_clock[-1] > clock):
                raise ValueError("update history is out of clock order")
            if not (numpy.all(numpy.isfinite(a)) and numpy.all(numpy.isfinite(u)) and numpy.all(numpy.isfinite(ev_delta))):
                raise ValueError("coefficients are not finite")
            # The coefficients are the sums of their updates, in history order (bit for bit).
            a_check = numpy.zeros((n,), dtype=numpy.float64)
            u_check = numpy.zeros((n,), dtype=numpy.float64)
            for e in range(ev_item.shape[0]):
                a_check[ev_item[e]] += ev_delta[e]
                u_check[ev_item[e]] += float(ev_clock[e]) * ev_delta[e]
            if not (numpy.array_equal(a_check, a) and numpy.array_equal(u_check, u)):
                raise ValueError("coefficients do not match the update history")
            live_ids = ids[ids >= 0]
            if numpy.unique(live_ids).shape[0] != live_ids.shape[0]:
                raise ValueError("an item id names two support items")
            prediction = _mode_of(body["prediction"], "prediction")
            budget = int(body["budget"])
            policy = BUDGET_POLICIES.index(body["budget_policy"])
            cache_mb = float(body.get("cache_mb", 0.0))
            expansion = _expansion_for(kernel, bool(body.get("expand", False)))
            if budget < 0 or not (cache_mb >= 0):
                raise ValueError("bad settings")
        except (KeyError, TypeError, ValueError, IndexError, OverflowError, AttributeError) as e:
            raise ValueError(Errors.S280.format(reason=str(e))) from None
        cdef Expansion typed_expansion = expansion
        self._free_state()
        self.kernel = kernel
        self._mode = prediction
        self.budget = budget
        self._policy = policy
        self.cache_limit = <int64_t>(cache_mb * 1048576.0)
        self.expansion = expansion
        self._ensure_support(n)
        cdef int64_t i
        for i in range(n):
            self._a[i] = a[i]
            self._u[i] = u[i]
            self._ids[i] = ids[i]
            self._alive[i] = 1
            if ids[i] >= 0:
                self._by_id[int(ids[i])] = i
        self._n_total = n
        self.n_support = n
        for e in range(ev_item.shape[0]):
            self.clock = ev_clock[e]
            self._add_event(ev_item[e], ev_delta[e])
            # The running sums too, in the order the original made them.
            self._a_sum += ev_delta[e]
            self._u_sum += float(ev_clock[e]) * ev_delta[e]
            if typed_expansion is not None:
                # Replayed in history order: the same sums as the original's, bit for bit
                # unless the budget subtracted forgotten items from them.
                typed_expansion.add_item(<PolynomialKernel>kernel, ev_item[e], ev_delta[e],
                                         float(ev_clock[e]) * ev_delta[e])
        self.clock = clock
        return self

    def __reduce__(self):
        return (_load_dual_perceptron, (self.to_bytes(),))


cdef void _drop_unseen_keys(PolynomialKernel poly) noexcept nogil:
    """Keep only the query keys some support item has had: every expanded feature with another
    key has weight 0 (a word seen in no mistake, for one). The kernel's key table is small and
    warm, the expansion's large and cold, and a query's pairs shrink with the square of its keys."""
    cdef int64_t j, m = 0
    for j in range(poly._qn):
        if poly._find(poly._qkeys[j]) >= 0:
            poly._qkeys[m] = poly._qkeys[j]
            poly._qvals[m] = poly._qvals[j]
            m += 1
    poly._qn = m


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


def _load_dual_perceptron(data):
    return DualPerceptron(Kernel()).from_bytes(data)


cdef inline int64_t _vote(const double* P, int64_t n) noexcept nogil:
    """The argmax of P (the first on ties), or -1 when every entry is equal (abstain)."""
    cdef int64_t c, best = 0
    cdef double lo = P[0]
    for c in range(1, n):
        if P[c] > P[best]:
            best = c
        if P[c] < lo:
            lo = P[c]
    if P[best] == lo:
        return -1
    return best
