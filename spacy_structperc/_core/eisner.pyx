# cython: infer_types=True
"""Eisner's O(n^3) decoder for projective dependency trees (Eisner 1996; McDonald et al. 2005).

Input: an (n + 1) x (n + 1) matrix of arc scores, ``scores[h, d]`` the score of head h taking
dependent d, node 0 the artificial root (row 0 = arcs from the root; column 0 is never used).
Output: the projective tree (every word 1..n has one head, the arcs do not cross, node 0 is the
root of it all) of highest total arc score, as ``heads[d]`` for d in 1..n (``heads[0] = -1``).
The root may take more than one dependent (the classic formulation; the score matrix decides).

Spans [s, t] of four kinds: complete, headed at s (right) or at t (left), and incomplete, whose
head s (right) or t (left) has just taken the other end as a dependent. Ties go to the smallest
split point, so the result is deterministic.
"""
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY
import numpy

cdef enum:
    CL = 0   # complete, head t
    CR = 1   # complete, head s
    IL = 2   # incomplete, arc t -> s
    IR = 3   # incomplete, arc s -> t


cdef size_t eisner_work_bytes(int n1) noexcept nogil:
    """Bytes of scratch eisner_decode needs for n1 = n + 1 nodes."""
    return <size_t>n1 * n1 * 4 * (sizeof(double) + sizeof(int))


cdef inline void _complete_spans(double* T, int* bp, int n1, int s, int t) noexcept nogil:
    """The complete spans [s, t] from the incomplete ones (both orders): headed at t, a
    complete left span [s, r] and the incomplete [r, t]; headed at s, the incomplete [s, r]
    and a complete right span [r, t]."""
    cdef size_t N = <size_t>n1 * n1
    cdef int r, best_r = s
    cdef double v, best = -INFINITY
    for r in range(s, t):
        v = T[CL * N + s * n1 + r] + T[IL * N + r * n1 + t]
        if v > best:
            best = v
            best_r = r
    T[CL * N + s * n1 + t] = best
    bp[(CL * n1 + s) * n1 + t] = best_r
    best = -INFINITY
    best_r = s + 1
    for r in range(s + 1, t + 1):
        v = T[IR * N + s * n1 + r] + T[CR * N + r * n1 + t]
        if v > best:
            best = v
            best_r = r
    T[CR * N + s * n1 + t] = best
    bp[(CR * n1 + s) * n1 + t] = best_r


cdef inline double _meet(const double* T, int n1, int s, int t, int* best_r) noexcept nogil:
    """The best split of [s, t] into a complete right span [s, r] and a complete left span
    [r + 1, t] (where an arc between s and t, or two siblings, meet): its score, r in best_r."""
    cdef size_t N = <size_t>n1 * n1
    cdef int r
    cdef double v, best = -INFINITY
    best_r[0] = s
    for r in range(s, t):
        v = T[CR * N + s * n1 + r] + T[CL * N + (r + 1) * n1 + t]
        if v > best:
            best = v
            best_r[0] = r
    return best


cdef void _backtrack(const int* bp, int n1, int kind, int s, int t, int* heads) noexcept nogil:
    cdef int r
    if s == t:
        return
    r = bp[(kind * n1 + s) * n1 + t]
    if kind == IL:
        heads[s] = t
        _backtrack(bp, n1, CR, s, r, heads)
        _backtrack(bp, n1, CL, r + 1, t, heads)
    elif kind == IR:
        heads[t] = s
        _backtrack(bp, n1, CR, s, r, heads)
        _backtrack(bp, n1, CL, r + 1, t, heads)
    elif kind == CL:
        _backtrack(bp, n1, CL, s, r, heads)
        _backtrack(bp, n1, IL, r, t, heads)
    else:
        _backtrack(bp, n1, IR, s, r, heads)
        _backtrack(bp, n1, CR, r, t, heads)


cdef double eisner_decode(const double* scores, int n1, int* heads, void* work) noexcept nogil:
    """The best projective tree's heads (heads[0] = -1) and its score. `work` holds at least
    eisner_work_bytes(n1) bytes."""
    cdef double* T = <double*>work                    # 4 tables of n1 x n1
    cdef int* bp = <int*>(T + 4 * n1 * n1)
    cdef int k, s, t, best_r, kind
    cdef double inner
    cdef size_t N = <size_t>n1 * n1
    heads[0] = -1
    if n1 <= 1:
        return 0.0
    for s in range(n1):
        for kind in range(4):
            T[kind * N + s * n1 + s] = 0.0
    for k in range(1, n1):
        for s in range(0, n1 - k):
            t = s + k
            # incomplete spans: the two halves meet between r and r + 1
            inner = _meet(T, n1, s, t, &best_r)
            if s == 0:
                T[IL * N + s * n1 + t] = -INFINITY     # the root is nobody's dependent
            else:
                T[IL * N + s * n1 + t] = inner + scores[t * n1 + s]
            bp[(IL * n1 + s) * n1 + t] = best_r
            T[IR * N + s * n1 + t] = inner + scores[s * n1 + t]
            bp[(IR * n1 + s) * n1 + t] = best_r
            _complete_spans(T, bp, n1, s, t)
    _backtrack(bp, n1, CR, 0, n1 - 1, heads)
    return T[CR * N + n1 - 1]


def eisner(scores):
    """(heads, score) of the best projective tree under an (n + 1) x (n + 1) arc-score matrix
    (``scores[h, d]``, node 0 the root): heads has n + 1 entries, heads[0] = -1."""
    cdef double[:, ::1] S = numpy.ascontiguousarray(scores, dtype=numpy.float64)
    cdef int n1 = S.shape[0]
    if S.shape[1] != n1 or n1 < 1:
        raise ValueError(f"eisner: the score matrix must be square with at least one row, got {S.shape[0]}x{S.shape[1]}")
    if not numpy.isfinite(numpy.asarray(S)).all():
        raise ValueError("eisner: the score matrix has a NaN or infinite score")
    heads = numpy.zeros((n1,), dtype=numpy.int32)
    cdef int[::1] H = heads
    cdef void* work = malloc(eisner_work_bytes(n1))
    cdef double best
    if work == NULL:
        raise MemoryError()
    with nogil:
        best = eisner_decode(&S[0, 0], n1, &H[0], work)
    free(work)
    return heads, best


def tree_score(scores, heads) -> float:
    """The sum of the arc scores of a tree (heads[d] for d = 1..n; heads[0] ignored)."""
    S = numpy.asarray(scores, dtype=numpy.float64)
    h = numpy.asarray(heads, dtype=numpy.int64)
    d = numpy.arange(1, len(h))
    return float(S[h[1:], d].sum())


# ---------------------------------------------------------------------------------------------
# Second order: adjacent siblings (McDonald and Pereira 2006)
#
# A tree scores sum over arcs h -> d of A[h, d] plus, for each dependent d, F[h, d] when d is
# the child of h nearest to h on its side, else B[s, d] with s the child of h on the same side
# next closer to h (its adjacent sibling). Items: complete and incomplete spans as above and
# sibling spans S[s, t] (s < t, adjacent siblings of one head outside the span: a complete span
# headed at s and one headed at t meeting between them).

cdef enum:
    SIB = 4


cdef size_t eisner2_work_bytes(int n1) noexcept nogil:
    return <size_t>n1 * n1 * 5 * (sizeof(double) + sizeof(int))


cdef void _backtrack2(const int* bp, int n1, int kind, int s, int t, int* heads) noexcept nogil:
    cdef int r
    if s == t:
        return
    r = bp[(kind * n1 + s) * n1 + t]
    if kind == IR:
        heads[t] = s
        if r < 0:                      # t is s's first right child
            _backtrack2(bp, n1, CL, s + 1, t, heads)
        else:                          # r is t's sibling next closer to s
            _backtrack2(bp, n1, IR, s, r, heads)
            _backtrack2(bp, n1, SIB, r, t, heads)
    elif kind == IL:
        heads[s] = t
        if r < 0:
            _backtrack2(bp, n1, CR, s, t - 1, heads)
        else:
            _backtrack2(bp, n1, SIB, s, r, heads)
            _backtrack2(bp, n1, IL, r, t, heads)
    elif kind == SIB:
        _backtrack2(bp, n1, CR, s, r, heads)
        _backtrack2(bp, n1, CL, r + 1, t, heads)
    elif kind == CL:
        _backtrack2(bp, n1, CL, s, r, heads)
        _backtrack2(bp, n1, IL, r, t, heads)
    else:
        _backtrack2(bp, n1, IR, s, r, heads)
        _backtrack2(bp, n1, CR, r, t, heads)


cdef double eisner2_decode(const double* A, const double* B, const double* F, int n1, int* heads,
                           void* work) noexcept nogil:
    """The best projective tree under the second-order sibling model (A, B, F: n1 x n1, see
    above); heads[0] = -1. `work` holds at least eisner2_work_bytes(n1) bytes."""
    cdef double* T = <double*>work                    # 5 tables of n1 x n1
    cdef int* bp = <int*>(T + 5 * n1 * n1)
    cdef int k, s, t, r, best_r, kind
    cdef double v, best
    cdef size_t N = <size_t>n1 * n1
    heads[0] = -1
    if n1 <= 1:
        return 0.0
    for s in range(n1):
        for kind in range(5):
            T[kind * N + s * n1 + s] = 0.0
    for k in range(1, n1):
        for s in range(0, n1 - k):
            t = s + k
            # sibling span [s, t]: complete right of s to r, complete left of t from r + 1
            T[SIB * N + s * n1 + t] = _meet(T, n1, s, t, &best_r)
            bp[(SIB * n1 + s) * n1 + t] = best_r
            # s -> t: t first (F) with [s + 1, t] complete left, or after sibling r (B)
            best = F[s * n1 + t] + T[CL * N + (s + 1) * n1 + t]
            best_r = -1
            for r in range(s + 1, t):
                v = T[IR * N + s * n1 + r] + T[SIB * N + r * n1 + t] + B[r * n1 + t]
                if v > best:
                    best = v
                    best_r = r
            T[IR * N + s * n1 + t] = best + A[s * n1 + t]
            bp[(IR * n1 + s) * n1 + t] = best_r
            # t -> s: s first with [s, t - 1] complete right, or after sibling r (B)
            if s == 0:
                T[IL * N + s * n1 + t] = -INFINITY     # the root is nobody's dependent
                bp[(IL * n1 + s) * n1 + t] = -1
            else:
                best = F[t * n1 + s] + T[CR * N + s * n1 + t - 1]
                best_r = -1
                for r in range(s + 1, t):
                    v = T[SIB * N + s * n1 + r] + T[IL * N + r * n1 + t] + B[r * n1 + s]
                    if v > best:
                        best = v
                        best_r = r
                T[IL * N + s * n1 + t] = best + A[t * n1 + s]
                bp[(IL * n1 + s) * n1 + t] = best_r
            _complete_spans(T, bp, n1, s, t)   # as in first order
    _backtrack2(bp, n1, CR, 0, n1 - 1, heads)
    return T[CR * N + n1 - 1]


def eisner2(arcs, siblings, first):
    """(heads, score) of the best projective tree under the second-order sibling model: arcs[h, d],
    siblings[s, d] (d after its adjacent sibling s, on the same side of their head), first[h, d]
    (d is h's child nearest to h on its side); all (n + 1) x (n + 1), node 0 the root."""
    mats = [numpy.ascontiguousarray(m, dtype=numpy.float64) for m in (arcs, siblings, first)]
    cdef int n1 = mats[0].shape[0] if mats[0].ndim == 2 else 0
    for m in mats:
        if m.ndim != 2 or m.shape[0] != n1 or m.shape[1] != n1 or n1 < 1:
            raise ValueError("eisner2: the three score matrices must be square, of one size, with at least one row")
        if not numpy.isfinite(m).all():
            raise ValueError("eisner2: a score matrix has a NaN or infinite score")
    cdef double[:, ::1] A = mats[0]
    cdef double[:, ::1] Bm = mats[1]
    cdef double[:, ::1] Fm = mats[2]
    heads = numpy.zeros((n1,), dtype=numpy.int32)
    cdef int[::1] H = heads
    cdef void* work = malloc(eisner2_work_bytes(n1))
    cdef double best
    if work == NULL:
        raise MemoryError()
    with nogil:
        best = eisner2_decode(&A[0, 0], &Bm[0, 0], &Fm[0, 0], n1, &H[0], work)
    free(work)
    return heads, best


def sibling_pairs(heads):
    """(first, pairs) of a tree (heads[d] for d = 1..n): the (h, d) with d the nearest child of h
    on its side, and the (s, d) with s the adjacent sibling of d closer to their head."""
    h = [int(x) for x in heads]
    first, pairs = [], []
    for head in range(len(h)):
        kids = [d for d in range(1, len(h)) if h[d] == head]
        for side in ([d for d in kids if d > head], sorted([d for d in kids if d < head], reverse=True)):
            for i, d in enumerate(side):
                if i == 0:
                    first.append((head, d))
                else:
                    pairs.append((side[i - 1], d))
    return first, pairs


def tree_score2(arcs, siblings, first, heads) -> float:
    """A tree's score under the second-order sibling model (see eisner2)."""
    A, B, F = (numpy.asarray(m, dtype=numpy.float64) for m in (arcs, siblings, first))
    fs, ps = sibling_pairs(heads)
    return float(tree_score(A, heads) + sum(F[a, b] for a, b in fs) + sum(B[a, b] for a, b in ps))
