# cython: infer_types=True
"""A convolution kernel over dependency trees (Collins & Duffy 2001, as collins2001 §5.4 describes).

The feature space has one dimension per tree fragment: a fragment is a node of the tree and,
optionally, all of its dependents (in order, each marked left or right of its head), each of
which is again either a leaf of the fragment or expanded in the same way. phi(T) counts the
fragments of T (weighted by ``lambda_ ** size``); there are exponentially many, but
``<phi(T1), phi(T2)> = sum_{a in T1, b in T2} Delta(a, b)`` with

    Delta(a, b) = 0                                      if label(a) != label(b)
                = lambda_ * (1 + [prod(a) == prod(b) != ()] * prod_j Delta(a_j, b_j))   otherwise

where label is a node's label (e.g. a hash of its tag and its arc label), prod its ordered
sequence of (dependent label, side) and a_j its j-th dependent: the fragments rooted at a and b
are the node alone, or the node with all its dependents and a common fragment under each. One
table of n1 x n2 values filled in post-order: O(n1 n2) per pair of trees.

An item is a tuple ``(heads, labels, base)``: heads (int, -1 for a root), labels (uint64) per
node, and the base model's score of the tree. The kernel adds ``base_weight * base1 * base2``, so
the base score is a feature of the reranker as in collins2001 §2 (0 leaves it out).
"""
from libc.stdlib cimport malloc, free, realloc
from libc.stdint cimport int64_t, uint64_t
import numpy

from .kernel cimport Kernel
from .kernel import register_kernel


cdef class DepTree:
    """A dependency tree in C arrays: node labels, dependents (CSR, in order) and a post-order."""
    cdef readonly int n
    cdef readonly double base
    cdef uint64_t* labels
    cdef int* kid_ptr     # n + 1
    cdef int* kids        # dependents of node i: kids[kid_ptr[i]:kid_ptr[i + 1]], left to right
    cdef char* side       # per node: 0 left of its head, 1 right, 2 root
    cdef int* order       # post-order (dependents before heads)
    cdef readonly object raw

    def __cinit__(self, heads, labels, double base=0.0):
        h = numpy.ascontiguousarray(heads, dtype=numpy.int64)
        l = numpy.ascontiguousarray(labels, dtype=numpy.uint64)
        if h.ndim != 1 or l.ndim != 1 or h.shape[0] != l.shape[0]:
            raise ValueError("a tree needs 1-d heads and labels of one length")
        cdef int n = h.shape[0], i, j, d
        if n and (h.max() >= n or h.min() < -1):
            raise ValueError("heads must be node indices or -1 for a root")
        self.n = n
        self.base = base
        self.raw = (h.astype(numpy.int32).tobytes(), l.tobytes(), float(base))
        cdef int m = max(n, 1)
        self.labels = <uint64_t*>malloc(m * sizeof(uint64_t))
        self.kid_ptr = <int*>malloc((m + 1) * sizeof(int))
        self.kids = <int*>malloc(m * sizeof(int))
        self.side = <char*>malloc(m)
        self.order = <int*>malloc(m * sizeof(int))
        if not (self.labels and self.kid_ptr and self.kids and self.side and self.order):
            raise MemoryError()
        cdef const int64_t[::1] H = h
        cdef const uint64_t[::1] L = l
        counts = numpy.zeros((n + 1,), dtype=numpy.int64)
        for d in range(n):
            self.labels[d] = L[d]
            if H[d] >= 0:
                counts[H[d] + 1] += 1
                self.side[d] = 0 if d < H[d] else 1
            else:
                self.side[d] = 2
        ptr = numpy.cumsum(counts)
        fill = ptr[:n].copy() if n else ptr
        for i in range(n + 1):
            self.kid_ptr[i] = ptr[i]
        for d in range(n):           # ascending d: dependents come out left to right
            if H[d] >= 0:
                self.kids[fill[H[d]]] = d
                fill[H[d]] += 1
        # Post-order by an explicit stack; a node on a cycle is never reached from a root.
        seen = numpy.zeros((n,), dtype=numpy.int8)
        cdef int k = 0
        stack = [(d, False) for d in range(n - 1, -1, -1) if H[d] < 0]
        while stack:
            d, done = stack.pop()
            if done:
                self.order[k] = d
                k += 1
                continue
            if seen[d]:
                raise ValueError("heads must form a forest (a cycle was found)")
            seen[d] = 1
            stack.append((d, True))
            for j in range(self.kid_ptr[d + 1] - 1, self.kid_ptr[d] - 1, -1):
                stack.append((self.kids[j], False))
        if k != n:
            raise ValueError("heads must form a forest (some nodes are not reachable from a root)")

    def __dealloc__(self):
        free(self.labels); free(self.kid_ptr); free(self.kids); free(self.side); free(self.order)


cdef double tree_product(DepTree x, DepTree y, double lam, double* table) noexcept nogil:
    """sum_{a, b} Delta(a, b), with `table` of x.n * y.n doubles as scratch."""
    cdef int i, j, a, b, c, na, nb, n2 = y.n
    cdef double total = 0.0, prod, v
    cdef bint same
    for i in range(x.n):
        a = x.order[i]
        na = x.kid_ptr[a + 1] - x.kid_ptr[a]
        for j in range(y.n):
            b = y.order[j]
            if x.labels[a] != y.labels[b]:
                table[a * n2 + b] = 0.0
                continue
            nb = y.kid_ptr[b + 1] - y.kid_ptr[b]
            same = na == nb and na > 0   # a leaf's only fragment is the node alone
            if same:
                for c in range(na):
                    if (x.labels[x.kids[x.kid_ptr[a] + c]] != y.labels[y.kids[y.kid_ptr[b] + c]]
                            or x.side[x.kids[x.kid_ptr[a] + c]] != y.side[y.kids[y.kid_ptr[b] + c]]):
                        same = False
                        break
            v = 1.0
            if same:
                prod = 1.0
                for c in range(na):
                    # Dependents come before their heads in post-order: already filled.
                    prod *= table[x.kids[x.kid_ptr[a] + c] * n2 + y.kids[y.kid_ptr[b] + c]]
                v += prod
            v *= lam
            table[a * n2 + b] = v
            total += v
    return total


cdef class DependencyTreeKernel(Kernel):
    """K(T1, T2) = sum of Delta over node pairs (see the module docstring) + base_weight * b1 * b2."""
    cdef readonly double lambda_
    cdef readonly double base_weight
    cdef double* _table
    cdef int64_t _table_cap

    def __init__(self, double lambda_=0.5, double base_weight=0.0):
        if not 0.0 < lambda_ <= 1.0:
            raise ValueError(f"lambda_ must be in (0, 1], got {lambda_}")
        self.lambda_ = lambda_
        self.base_weight = base_weight

    def __dealloc__(self):
        free(self._table)

    cdef object convert(self, object item):
        if isinstance(item, DepTree):
            return item
        heads, labels, base = item
        return DepTree(heads, labels, base)

    cdef double pair(self, object x, object y) except? -1:
        cdef DepTree a = <DepTree>x
        cdef DepTree b = <DepTree>y
        cdef int64_t need = max(1, <int64_t>a.n * b.n)
        cdef double* grown
        if need > self._table_cap:
            grown = <double*>realloc(self._table, need * sizeof(double))
            if grown == NULL:
                raise MemoryError()
            self._table = grown
            self._table_cap = need
        return tree_product(a, b, self.lambda_, self._table) + self.base_weight * a.base * b.base

    def params(self):
        return {"lambda_": self.lambda_, "base_weight": self.base_weight}

    def support_state(self):
        return {"items": [(<DepTree>t).raw for t in self._items]}

    def load_support_state(self, state):
        self._items = []
        self.n_items = 0
        for heads, labels, base in state["items"]:
            self.store(DepTree(numpy.frombuffer(heads, dtype=numpy.int32),
                               numpy.frombuffer(labels, dtype=numpy.uint64), base))


register_kernel(DependencyTreeKernel)
