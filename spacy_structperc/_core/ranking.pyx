# cython: infer_types=True
"""One epoch of the averaged perceptron for ranking (collins2001 Fig. 2) over candidate lists in
CSR arrays, in C: the loop of reranking.learners.PerceptronReranker.

Per sentence i (in the given order): score its candidates ``w . phi(z) + w0 * base(z)``, take
the best (the first on ties); if its loss exceeds that of the sentence's oracle, add
``phi(oracle) - phi(best)`` to w (and the base-score difference to w0 unless w0 is fixed). The
clock c ticks once per sentence; u accumulates ``c * update`` so the average is ``w - u / c``
(Daume's trick).
"""
from libc.stdint cimport int64_t
import numpy


def perceptron_epoch(const int64_t[::1] order, const int64_t[::1] offsets,
                     const int64_t[::1] ptr, const int64_t[::1] cols, const double[::1] base,
                     const double[::1] loss, const int64_t[::1] oracle, double[::1] w,
                     double[::1] u, double[::1] w0u0, int64_t c, bint fixed):
    """Run one epoch in place (w, u, w0u0 = [w0, u0]); returns (mistakes, the clock after)."""
    cdef Py_ssize_t idx, j, z, best, a, b, g, V = w.shape[0]
    cdef int64_t i, mistakes = 0
    cdef double s, best_s, d0
    if u.shape[0] != V or w0u0.shape[0] != 2 or ptr.shape[0] != base.shape[0] + 1 or \
            loss.shape[0] != base.shape[0] or oracle.shape[0] != offsets.shape[0] - 1:
        raise ValueError("perceptron_epoch: inconsistent array lengths")
    for idx in range(order.shape[0]):
        i = order[idx]
        if i < 0 or i >= oracle.shape[0]:
            raise ValueError("perceptron_epoch: sentence index out of range")
    for idx in range(cols.shape[0]):
        if cols[idx] < 0 or cols[idx] >= V:
            raise ValueError("perceptron_epoch: feature column out of range")
    with nogil:
        for idx in range(order.shape[0]):
            i = order[idx]
            a, b = offsets[i], offsets[i + 1]
            best, best_s = -1, 0.0
            for z in range(a, b):
                s = w0u0[0] * base[z]
                for j in range(ptr[z], ptr[z + 1]):
                    s += w[cols[j]]
                if best < 0 or s > best_s:
                    best, best_s = z, s
            g = oracle[i]
            if best >= 0 and loss[best] > loss[g]:
                mistakes += 1
                for j in range(ptr[g], ptr[g + 1]):
                    w[cols[j]] += 1.0
                    u[cols[j]] += c
                for j in range(ptr[best], ptr[best + 1]):
                    w[cols[j]] -= 1.0
                    u[cols[j]] -= c
                if not fixed:
                    d0 = base[g] - base[best]
                    w0u0[0] += d0
                    w0u0[1] += c * d0
            c += 1
    return mistakes, c
