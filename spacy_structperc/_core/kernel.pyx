# cython: infer_types=True
"""Kernels over support items: the base class a kernel in another module extends, their
registry, and the polynomial kernel. The perceptron that uses them is in dual.pyx, the primal
expansion of a polynomial kernel in expansion.pyx.

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
from libc.math cimport isfinite
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from .slots cimport KeySlot, _grow, _next_cap, _rehash, _slot

import numpy

from ..errors import Errors

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
        self._table = _rehash(self._table, self._capacity, self._capacity * 2)
        self._capacity *= 2
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


# The perceptron and the expansion were in this module once; their names still import from it.
_MOVED = {"DualPerceptron": "dual", "FORMAT_VERSION": "dual", "KIND": "dual", "PREDICTIONS": "dual",
          "BUDGET_POLICIES": "dual", "_load_dual_perceptron": "dual", "Expansion": "expansion"}


def __getattr__(name):
    # Imported on first use, not at import: dual and expansion cimport this module.
    if name in _MOVED:
        import importlib
        return getattr(importlib.import_module(f"{__package__}.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
