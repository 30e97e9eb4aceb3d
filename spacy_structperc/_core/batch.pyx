# cython: infer_types=True
"""Decoding a batch of inputs in one call, with the GIL released.

The components concatenate the atoms of many Docs and describe the pieces to decode by row
offsets; these functions bind each piece to the calling thread's transition system, decode it
with the chosen decoder and write its output, with no Python in between. Each piece is decoded
exactly as binding it alone (`set_sentence`) and calling the decoder's `decode` would.
"""
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport int64_t
import numpy

from .typedefs cimport atom_t, weight_t
from .tagging cimport TagSystem
from .arcstandard cimport ArcStandardSystem, read_tree, SHIFT, BREAK
from .lookahead cimport Lookahead
from .beam cimport BeamSearch
from .viterbi cimport ViterbiScratch, viterbi_into, free_scratch
from . import arcstandard as _arcstandard, beam as _beam, lookahead as _lookahead, viterbi as _viterbi

DECODERS = ("greedy", "viterbi", "beam")
cdef enum:
    GREEDY, VITERBI, BEAM


def tag(TagSystem system, str decoder, int param, atoms, allowed, windows, start_mask=None,
        gap=None):
    """Label the windows of a batch; returns the (n_rows,) int32 classes.

    atoms: (n_rows, n_cols) uint64, every input's rows concatenated; allowed: None or the
    (n_rows, n_classes) uint8 position mask; windows: (n_windows, 4) int64 rows (bind_start,
    bind_end, keep_start, keep_end): rows bind_start:bind_end are bound and decoded as one
    sentence, and the labels of keep_start:keep_end are kept (rows no window keeps stay 0);
    start_mask: None or (n_classes,) uint8 and-ed into the mask of each window's last row (a
    right-to-left labeller's constraint on its last decision). decoder: "greedy" (param: the
    lookahead depth), "viterbi" (param: the order) or "beam" (param: the width). gap: None, or
    the greedy decoder searches ahead only among the actions within gap of the best
    (Lookahead.gap).
    """
    cdef int kind = _decoder_kind(decoder)
    atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
    cdef int n_cols = system.templates.n_cols, m = system.n_actions
    if atoms.ndim != 2 or atoms.shape[1] != n_cols:
        raise ValueError(f"atoms must have shape (n_rows, {n_cols}), got {atoms.shape}")
    cdef Py_ssize_t N = atoms.shape[0]
    cdef const int64_t[:, ::1] win = _windows(windows, N, 4)
    if allowed is not None:
        allowed = numpy.ascontiguousarray(allowed, dtype=numpy.uint8)
        if allowed.shape != (N, m):
            raise ValueError(f"allowed must have shape {(N, m)}, got {allowed.shape}")
    if start_mask is not None:
        start_mask = numpy.ascontiguousarray(start_mask, dtype=numpy.uint8)
        if start_mask.shape != (m,):
            raise ValueError(f"start_mask must have shape ({m},), got {start_mask.shape}")
    if kind == VITERBI:
        _viterbi.check_order(system, param)
    out = numpy.zeros((N,), dtype=numpy.int32)
    if N == 0 or win.shape[0] == 0:
        return out
    cdef const atom_t[:, ::1] A = atoms
    cdef const unsigned char[:, ::1] mask_view
    cdef const unsigned char* mask = NULL
    if allowed is not None:
        mask_view = allowed
        mask = &mask_view[0, 0]
    cdef const unsigned char[::1] start_view
    cdef const unsigned char* start = NULL
    if start_mask is not None:
        start_view = start_mask
        start = &start_view[0]
    cdef int[::1] o = out
    cdef Py_ssize_t w, a, b, i
    cdef int max_len = int((numpy.asarray(win[:, 1]) - numpy.asarray(win[:, 0])).max())
    cdef int* path = <int*>malloc((max_len + 1) * sizeof(int))
    cdef unsigned char* window_mask = <unsigned char*>malloc((max_len * m + 1) if start != NULL else 1)
    cdef const unsigned char* bound_mask
    cdef Lookahead la = Lookahead(system, param) if kind == GREEDY else None
    if la is not None:
        la.gap = _lookahead.search_gap(gap)
    cdef BeamSearch bs = BeamSearch(system, param) if kind == BEAM else None
    cdef ViterbiScratch vs
    cdef double score
    cdef int n, done, failed = -1, failed_at = 0
    memset(&vs, 0, sizeof(ViterbiScratch))
    if path == NULL or window_mask == NULL:
        free(path)
        free(window_mask)
        raise MemoryError()
    system._atoms = atoms
    system._allowed = allowed
    system._gold = None
    try:
        with nogil:
            for w in range(win.shape[0]):
                a, b = win[w, 0], win[w, 1]
                n = <int>(b - a)
                if n == 0:
                    continue
                bound_mask = &mask[a * m] if mask != NULL else NULL
                if start != NULL:
                    if bound_mask != NULL:
                        memcpy(window_mask, bound_mask, n * m)
                    else:
                        memset(window_mask, 1, n * m)
                    for i in range(m):
                        window_mask[(n - 1) * m + i] &= start[i]
                    bound_mask = window_mask
                system.bind(&A[a, 0], n, bound_mask)
                if kind == GREEDY:
                    done = la.greedy(path)
                elif kind == VITERBI:
                    done = 0 if viterbi_into(system, param, &vs, path, &score) else n
                else:
                    bs.reserve()
                    bs.search(False, False)
                    done = bs.best_into(path)
                if done < n:
                    failed, failed_at = w, done
                    break
                memcpy(&o[win[w, 2]], &path[win[w, 2] - a], (win[w, 3] - win[w, 2]) * sizeof(int))
    finally:
        free(path)
        free(window_mask)
        free_scratch(&vs)
        system.set_sentence(numpy.zeros((0, n_cols), dtype=numpy.uint64))
    if failed >= 0:
        raise ValueError(_failure(kind, failed_at))
    return out


def parse(ArcStandardSystem system, str decoder, int param, atoms, spans, int window, heads, labels):
    """Parse the spans of a batch, writing every attached token's head (a row index) to
    heads[row] and its label id to labels[row] (both (n_rows,) int64; roots are left as they
    were).

    atoms: (n_rows, n_cols) uint64, every input's rows concatenated; spans: (n_spans, 3) int64
    rows (start, end, allow_break). A span with fixed boundaries (allow_break 0) is parsed as one
    sentence. One the parser splits into sentences itself (allow_break 1) is parsed `window`
    rows at a time: each window's parse is kept up to its last BREAK and the next window starts
    there, so the sentence a window cuts is parsed again whole (a window without BREAK is kept
    whole). decoder: "greedy" (param: the lookahead depth) or "beam" (param: the width).
    """
    cdef int kind = _decoder_kind(decoder)
    if kind == VITERBI:
        raise ValueError("the parser decodes with 'greedy' or 'beam'")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
    cdef int n_cols = len(system.templates.atom_names)
    if atoms.ndim != 2 or atoms.shape[1] != n_cols:
        raise ValueError(f"atoms must have shape (n_rows, {n_cols}), got {atoms.shape}")
    cdef Py_ssize_t N = atoms.shape[0]
    cdef const int64_t[:, ::1] sp = _windows(spans, N, 3)
    cdef int64_t[::1] H = heads
    cdef int64_t[::1] L = labels
    if H.shape[0] != N or L.shape[0] != N:
        raise ValueError(f"heads and labels must have shape ({N},)")
    if N == 0 or sp.shape[0] == 0:
        return
    lengths = numpy.asarray(sp[:, 1]) - numpy.asarray(sp[:, 0])
    lengths = numpy.where(numpy.asarray(sp[:, 2]) != 0, numpy.minimum(lengths, window), lengths)
    cdef int max_len = int(lengths.max())
    cdef const atom_t[:, ::1] A = atoms
    cdef int* path = <int*>malloc((2 * max_len + 1) * sizeof(int))
    cdef int* tree_heads = <int*>malloc((max_len + 1) * sizeof(int))
    cdef int* tree_labels = <int*>malloc((max_len + 1) * sizeof(int))
    cdef char* state = NULL
    cdef Lookahead la = Lookahead(system, param) if kind == GREEDY else None
    cdef BeamSearch bs = BeamSearch(system, param) if kind == BEAM else None
    cdef Py_ssize_t k, s, start, end, e, q
    cdef int n, n_steps = 0, done = 0, keep, shifted, last_break, applied = 0, failed = 0
    cdef int bad_action = -1
    if path == NULL or tree_heads == NULL or tree_labels == NULL:
        free(path); free(tree_heads); free(tree_labels)
        raise MemoryError()
    system._atoms = atoms
    try:
        system.bind(NULL, max_len, False)   # for the state size of the longest bound piece
        state = <char*>malloc(system.state_size)
        if state == NULL:
            raise MemoryError()
        with nogil:
            for k in range(sp.shape[0]):
                start, end = sp[k, 0], sp[k, 1]
                s = start
                while s < end and not failed:
                    e = min(end, s + window) if sp[k, 2] else end
                    n = <int>(e - s)
                    system.bind(&A[s, 0], n, sp[k, 2] != 0)
                    n_steps = system.max_steps()
                    if kind == GREEDY:
                        la.reserve()
                        done = la.greedy(path)
                    else:
                        bs.reserve()
                        bs.search(False, False)
                        done = bs.best_into(path)
                    if done < n_steps:
                        failed = 1
                        break
                    applied = system.apply(path, n_steps, state)
                    if applied:
                        failed = 2
                        if -1 - applied < n_steps:
                            bad_action = path[-1 - applied]
                        break
                    read_tree(system, state, tree_heads, tree_labels)
                    keep = n
                    if e < end:
                        last_break = -1
                        for q in range(n_steps):
                            if path[q] == BREAK:
                                last_break = q
                        if last_break >= 0:
                            # The tokens shifted before the last BREAK form finished sentences.
                            shifted = 0
                            for q in range(last_break):
                                shifted += path[q] == SHIFT
                            if shifted > 0:
                                keep = shifted
                    for q in range(keep):
                        if tree_heads[q] >= 0:
                            H[s + q] = tree_heads[q] + s
                            L[s + q] = tree_labels[q]
                    s += keep
                if failed:
                    break
    finally:
        free(path); free(tree_heads); free(tree_labels); free(state)
        system.set_sentence(numpy.zeros((0, n_cols), dtype=numpy.uint64))
    if failed == 1:
        raise ValueError(_failure(kind, done))
    if failed == 2:
        raise ValueError(_arcstandard.run_error(applied, [bad_action] * n_steps))


def _decoder_kind(str decoder) -> int:
    if decoder not in DECODERS:
        raise ValueError(f"unknown decoder {decoder!r}; expected one of {DECODERS}")
    return DECODERS.index(decoder)


def _windows(rows, Py_ssize_t n_rows, int width):
    """rows as a C-contiguous (n, width) int64 array whose first two columns are ranges of
    rows 0 <= a <= b <= n_rows (and, for width 4, a <= c <= d <= b)."""
    arr = numpy.ascontiguousarray(rows, dtype=numpy.int64).reshape((-1, width))
    if len(arr):
        a, b = arr[:, 0], arr[:, 1]
        ok = (a >= 0) & (a <= b) & (b <= n_rows)
        if width == 4:
            ok &= (a <= arr[:, 2]) & (arr[:, 2] <= arr[:, 3]) & (arr[:, 3] <= b)
        if not ok.all():
            raise ValueError(f"row ranges must lie within the {n_rows} rows, got {arr[~ok][0].tolist()}")
    return arr


def _failure(int kind, int done) -> str:
    if kind == GREEDY:
        return _lookahead.NO_ACTION.format(t=done)
    if kind == VITERBI:
        return _viterbi.NO_SEQUENCE
    return _beam.NO_ANALYSIS
