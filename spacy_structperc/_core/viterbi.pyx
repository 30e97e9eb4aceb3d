# cython: infer_types=True
"""Exact first- and second-order Viterbi over a TagSystem, and the perceptron trained with it."""
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memset
from libc.math cimport INFINITY
import numpy

from .typedefs cimport class_t, weight_t
from .templates cimport MAX_HIST
from .tagging cimport TagSystem


cdef int _reserve(ViterbiScratch* s, size_t n, size_t m) except -1 nogil:
    cdef double* delta
    cdef int* back
    cdef weight_t* hs
    n = max(n, 1)
    if n > s.capacity:
        n = max(n, 2 * s.capacity)
        delta = <double*>realloc(s.delta, n * sizeof(double))
        if delta != NULL:
            s.delta = delta
        back = <int*>realloc(s.back, n * sizeof(int))
        if back != NULL:
            s.back = back
        if delta == NULL or back == NULL:
            with gil:
                raise MemoryError()
        s.capacity = n
    if m > s.hs_capacity:
        hs = <weight_t*>realloc(s.hs, m * sizeof(weight_t))
        if hs == NULL:
            with gil:
                raise MemoryError()
        s.hs = hs
        s.hs_capacity = m
    return 0


cdef void free_scratch(ViterbiScratch* s) noexcept nogil:
    free(s.delta); free(s.back); free(s.hs)
    s.delta = NULL; s.back = NULL; s.hs = NULL
    s.capacity = s.hs_capacity = 0


cdef int viterbi_into(TagSystem system, int order, ViterbiScratch* scratch, int* out,
                      double* score) except -1 nogil:
    """The best label sequence of the bound sentence into out (order 1 or 2, checked by the
    caller) and its score; returns 1 when no sequence satisfies the constraints, else 0."""
    cdef int n = system.n_tokens, m = system.n_actions
    _reserve(scratch, <size_t>n * m * (m + 1 if order == 2 else 1), m)
    if order == 1:
        score[0] = _viterbi1(system, out, scratch.delta, scratch.back, scratch.hs)
    else:
        score[0] = _viterbi2(system, out, scratch.delta, scratch.back, scratch.hs)
    return 1 if score[0] == -INFINITY else 0


cdef double _viterbi1(TagSystem system, int* out, double* delta, int* back, weight_t* hs) noexcept nogil:
    cdef int n = system.n_tokens, m = system.n_actions
    cdef class_t hist[MAX_HIST]
    cdef int i, p, c, k, best_c
    cdef double v, best, prev_score
    cdef double* d
    cdef const unsigned char* trans
    cdef const unsigned char* pos_mask
    cdef const weight_t* static
    cdef const weight_t* h
    for k in range(MAX_HIST):
        hist[k] = -1
    for i in range(n):
        static = system.static_row(i)
        for c in range(m):
            delta[i * m + c] = -INFINITY
            back[i * m + c] = -1
        d = &delta[i * m]
        for p in range(-1 if i == 0 else 0, 0 if i == 0 else m):
            prev_score = delta[(i - 1) * m + p] if i > 0 else 0.0
            if prev_score == -INFINITY:
                continue
            hist[0] = p
            system.history_scores(i, hist, hs)
            h = hs
            # The hot loop: label bigram constraints only; the position mask is applied
            # once per position below, as it does not depend on p.
            trans = &system.allowed_trans[(p if p >= 0 else m) * m] if system.allowed_trans != NULL else NULL
            for c in range(m):
                if trans != NULL and not trans[c]:
                    continue
                v = prev_score + h[c]
                if v > d[c]:
                    d[c] = v
                    back[i * m + c] = p
        pos_mask = &system.allowed[i * m] if system.allowed != NULL else NULL
        for c in range(m):
            if pos_mask != NULL and not pos_mask[c]:
                d[c] = -INFINITY
                back[i * m + c] = -1
            elif d[c] != -INFINITY:
                d[c] += static[c]
    best = -INFINITY
    best_c = -1
    if n > 0:
        for c in range(m):
            if delta[(n - 1) * m + c] > best:
                best = delta[(n - 1) * m + c]
                best_c = c
        c = best_c
        i = n - 1
        while i >= 0 and c >= 0:
            out[i] = c
            c = back[i * m + c]
            i -= 1
    if n > 0 and best_c < 0:
        return -INFINITY
    return best if n > 0 else 0.0


cdef double _viterbi2(TagSystem system, int* out, double* delta, int* back, weight_t* hs) noexcept nogil:
    # delta[i, p, c]: best score of a prefix ending in labels (p, c) at positions (i-1, i); p == m
    # stands for "before the start".
    cdef int n = system.n_tokens, m = system.n_actions
    cdef int M = m + 1
    cdef class_t hist[MAX_HIST]
    cdef int i, p, pp, c, k, best_p, best_c
    cdef double v, best, prev_score
    cdef double* d
    cdef int* b
    cdef const unsigned char* trans
    cdef const unsigned char* pos_mask
    cdef const weight_t* static
    cdef const weight_t* h
    for k in range(MAX_HIST):
        hist[k] = -1
    for k in range(n * M * m):
        delta[k] = -INFINITY
        back[k] = -1
    for i in range(n):
        static = system.static_row(i)
        pos_mask = &system.allowed[i * m] if system.allowed != NULL else NULL
        for p in range(M):
            if (i == 0) != (p == m):
                continue
            d = &delta[(i * M + p) * m]
            b = &back[(i * M + p) * m]
            # p == m (before the start) uses row m of the constraints, the start row.
            trans = &system.allowed_trans[p * m] if system.allowed_trans != NULL else NULL
            for pp in range(M):
                if i <= 1 and pp != m:
                    continue
                if i >= 2 and pp == m:
                    continue
                if i == 0:
                    prev_score = 0.0
                else:
                    prev_score = delta[((i - 1) * M + pp) * m + p]
                    if prev_score == -INFINITY:
                        continue
                hist[0] = p if p < m else -1
                hist[1] = pp if pp < m else -1
                system.history_scores(i, hist, hs)
                h = hs
                for c in range(m):
                    if trans != NULL and not trans[c]:
                        continue
                    v = prev_score + h[c]
                    if v > d[c]:
                        d[c] = v
                        b[c] = pp
            # The static scores and the position mask do not depend on pp: once per (i, p).
            for c in range(m):
                if pos_mask != NULL and not pos_mask[c]:
                    d[c] = -INFINITY
                    b[c] = -1
                elif d[c] != -INFINITY:
                    d[c] += static[c]
    best = -INFINITY
    best_p = best_c = -1
    if n > 0:
        for p in range(M):
            for c in range(m):
                if delta[((n - 1) * M + p) * m + c] > best:
                    best = delta[((n - 1) * M + p) * m + c]
                    best_p = p
                    best_c = c
        i = n - 1
        p = best_p
        c = best_c
        while i >= 0 and c >= 0:
            out[i] = c
            pp = back[(i * M + p) * m + c]
            c = p
            p = pp
            i -= 1
    if n > 0 and best_c < 0:
        return -INFINITY
    return best if n > 0 else 0.0


def check_order(TagSystem system, int order):
    """Raise ValueError unless an order-`order` Viterbi can decode the system's templates."""
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order}")
    if system.templates.max_history > order:
        raise ValueError(
            f"the feature templates read {system.templates.max_history} previous labels, more than "
            f"an order-{order} Viterbi can account for; use order={system.templates.max_history} "
            "or a greedy/beam decoder"
        )


NO_SEQUENCE = "no label sequence satisfies the constraints"


def viterbi(TagSystem system, int order=1):
    """The highest-scoring label sequence for the bound sentence, and its score."""
    check_order(system, order)
    out = numpy.zeros((system.n_tokens,), dtype=numpy.int32)
    cdef int[::1] o = out
    cdef int* ptr = &o[0] if system.n_tokens else NULL
    cdef ViterbiScratch scratch
    cdef double score = 0.0
    cdef int failed
    memset(&scratch, 0, sizeof(ViterbiScratch))
    try:
        with nogil:
            failed = viterbi_into(system, order, &scratch, ptr, &score)
    finally:
        free_scratch(&scratch)
    if failed:
        raise ValueError(NO_SEQUENCE)
    return out, score


def train_viterbi(TagSystem system, int order=1):
    """One structured-perceptron step (Collins 2002) on the bound sentence.

    Labels that are missing from the gold (-1) are filled with the best completion consistent with
    the known ones, so partially annotated sentences teach what they know and nothing else.
    Returns (n_wrong_tokens, violation) where violation = w . (Phi(y) - Phi(z)) before the update.
    """
    gold = system.gold_labels
    predicted, z_score = viterbi(system, order)
    if (gold < 0).all():
        return 0, 0.0
    if (gold < 0).any():
        gold = _complete(system, gold, order)
    n_wrong = int(((predicted != gold) & (system.gold_labels >= 0)).sum())
    violation = 0.0
    if (predicted != gold).any():
        violation = system.score_path(gold) - system.score_path(predicted)
        system.update_with_paths(gold, predicted)
    return n_wrong, violation


def _complete(TagSystem system, gold, int order):
    """Best label sequence agreeing with every known gold label."""
    allowed_before = system._allowed
    system.set_position_mask(_agreeing(system, gold >= 0, gold, 1))
    try:
        completed, _ = viterbi(system, order)
    finally:
        system.set_position_mask(allowed_before)
    return completed


def _agreeing(TagSystem system, known, labels, int n_latent):
    """The position mask of sequences whose labels (class // n_latent) agree with `labels` where
    `known`, intersected with the mask already bound."""
    m = system.n_actions
    mask = numpy.ones((system.n_tokens, m), dtype=numpy.uint8)
    if system._allowed is not None:
        mask &= system._allowed
    label_of = numpy.arange(m) // n_latent
    mask[known] &= (label_of[None, :] == labels[known, None])
    return mask


def train_latent(TagSystem system, gold_labels, int n_latent, int order=1):
    """One latent-perceptron step (sun2009 Fig. 1, Eq. 8) on the bound sentence.

    The system's classes are latent states, `n_latent` per label (class // n_latent = label).
    z = the best latent path; if its projection disagrees with the gold labels (-1 = unknown,
    never wrong), h* = the best latent path whose projection is the gold, and the weights move
    by f(h*) - f(z). Returns (n_wrong_tokens, violation, h*, z) where violation = F(h*) - F(z)
    <= 0 before the update (every update is a latent violation); h* is None when no update was
    needed.
    """
    gold_labels = numpy.ascontiguousarray(gold_labels, dtype=numpy.int32)
    if gold_labels.shape != (system.n_tokens,):
        raise ValueError(f"gold_labels must have shape ({system.n_tokens},)")
    z, z_score = viterbi(system, order)
    known = gold_labels >= 0
    n_wrong = int(((z // n_latent != gold_labels) & known).sum())
    if n_wrong == 0:
        return 0, 0.0, None, z
    allowed_before = system._allowed
    system.set_position_mask(_agreeing(system, known, gold_labels, n_latent))
    try:
        h, h_score = viterbi(system, order)
    finally:
        system.set_position_mask(allowed_before)
    system.update_with_paths(h, z)
    return n_wrong, h_score - z_score, h, z
