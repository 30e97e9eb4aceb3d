# cython: infer_types=True
"""Phrase recognition with filters and a ranker (carreras2003): the bottom-up search of eq. 1 and
the FR-Perceptron feedback of §3.1, with the classification baselines CO-VP and CB-VP of Table 1.

Three learned functions, each a `LinearFunction` (w . phi over hashed binary features):
- the start filter h_S and the end filter h_E score words (phi_w: word templates over a window);
  a word with a score > 0 is a start (end) boundary, and every start s with every end e >= s
  makes the candidate phrase (s, e);
- the phrase scorer ranks candidates (phi_p: the context at s and e, and a pattern of the
  elements from s to e in which the clauses already recognized inside reduce to one element).

The search (eq. 1) picks the coherent set (nested or disjoint, never crossing) of candidates with
the largest sum of scores, bottom-up: a candidate is scored once the best structure inside it is
known, and its features see that structure (§4, footnote 2). See `_search` for the chart.

Bounds (a 1,000-token sentence must stay cheap): the filters keep at most `max_boundaries`
starts and ends each (the best-scoring ones), and `max_span` (0 = none) caps the length of a
candidate. The search costs O(|S| * n + |S|^2 * |E|) steps and one phrase scoring per candidate
(at most |S| * |E|), each O(e - s) for the pattern, with |S|, |E| <= max_boundaries.

Nothing here knows spaCy: a sentence comes in as arrays of atoms (one row per token).
"""
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset
from libc.stdint cimport uint64_t, int32_t, int64_t, uint8_t
cimport cython
import numpy

from .typedefs cimport hash_t, atom_t, weight_t
from .templates cimport (TemplateSet, extract_features, hash_combine, mix64, atom_at,
                         PAD_BEFORE, PAD_AFTER)
from .weights cimport AveragedWeights

# Atom columns every clause sentence has (see spacy_structperc.clauses.features).
ATOM_NAMES = ("bias", "lower", "tag", "chunk")
DEF COL_LOWER = 1
DEF COL_TAG = 2
DEF COL_CHUNK = 3
DEF MAX_PHRASE_KEYS = 128
DEF MAX_BAG = 24           # pattern elements (and bigrams) that enter the bag features

METHODS = ("fr", "co", "cb")

cdef hash_t SUB_CLAUSE = 0x53c1a05e5c1a05e5ULL   # the element an inner clause reduces to


cdef inline hash_t _key(hash_t seed, hash_t a, hash_t b) noexcept nogil:
    return mix64(hash_combine(hash_combine(seed, a), b)) | 1


cdef inline hash_t _seed(int kind) noexcept nogil:
    return mix64(<hash_t>0x7c1a75e000000000ULL + <hash_t>kind)


cdef inline int _bucket(int n, int cap) noexcept nogil:
    return n if n < cap else cap


# ---------------------------------------------------------------------------------------------
# The learned functions


cdef class LinearFunction:
    """A real-valued function w . phi(x) of a sparse binary feature vector (its keys).

    Subclasses: `PrimalFunction` (averaged weights over hashed features, the default) and
    `ObjectFunction` (any Python object with score/update/tick, e.g. a dual-form kernel
    perceptron). The search and the learners only see this interface.
    """
    cdef double score(self, const hash_t* keys, int n) except? -1e300:
        raise NotImplementedError

    cdef int update(self, const hash_t* keys, int n, double delta) except -1:
        raise NotImplementedError

    def tick(self):
        """One training example (sentence) has been seen, mistake or not."""
        raise NotImplementedError

    def set_averaged(self, bint value):
        """Score with the averaged (voted) function, for prediction, or the current one."""
        raise NotImplementedError

    def score_keys(self, keys):
        cdef uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        if k.shape[0] == 0:
            return self.score(NULL, 0)
        return self.score(&k[0], k.shape[0])

    def update_keys(self, keys, double delta):
        cdef uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        if k.shape[0]:
            self.update(&k[0], k.shape[0], delta)


cdef class PrimalFunction(LinearFunction):
    """w . phi with averaged perceptron weights (one column of an AveragedWeights table)."""
    cdef readonly AveragedWeights weights

    def __init__(self, AveragedWeights weights=None, size_t n_buckets=1 << 16):
        self.weights = weights if weights is not None else AveragedWeights(1, n_buckets)
        if self.weights.n_classes != 1:
            raise ValueError("a PrimalFunction needs weights with one class")

    cdef double score(self, const hash_t* keys, int n) except? -1e300:
        cdef weight_t out = 0
        if n:
            self.weights.add_rows(keys, n, &out)
        return out

    cdef int update(self, const hash_t* keys, int n, double delta) except -1:
        self.weights.update_many(keys, n, 0, <weight_t>delta)
        return 0

    def tick(self):
        self.weights.tick()

    def set_averaged(self, bint value):
        self.weights.set_use_averages(value)

    def __reduce__(self):
        return (PrimalFunction, (self.weights,))


cdef class ObjectFunction(LinearFunction):
    """Adapter for a Python object with `score(keys) -> float`, `update(keys, delta)` and
    `tick()` (keys: a uint64 numpy array), and optionally `set_averaged(bool)`: how a dual-form
    kernel perceptron plugs into the search and the learners."""
    cdef readonly object obj

    def __init__(self, obj):
        for method in ("score", "update", "tick"):
            if not callable(getattr(obj, method, None)):
                raise TypeError(f"{type(obj).__name__} has no {method}() method")
        self.obj = obj

    cdef double score(self, const hash_t* keys, int n) except? -1e300:
        arr = numpy.empty((n,), dtype=numpy.uint64)
        cdef uint64_t[::1] a = arr
        cdef int i
        for i in range(n):
            a[i] = keys[i]
        return float(self.obj.score(arr))

    cdef int update(self, const hash_t* keys, int n, double delta) except -1:
        arr = numpy.empty((n,), dtype=numpy.uint64)
        cdef uint64_t[::1] a = arr
        cdef int i
        for i in range(n):
            a[i] = keys[i]
        self.obj.update(arr, delta)
        return 0

    def tick(self):
        self.obj.tick()

    def set_averaged(self, bint value):
        setter = getattr(self.obj, "set_averaged", None)
        if setter is not None:
            setter(value)

    def __reduce__(self):
        return (ObjectFunction, (self.obj,))


# ---------------------------------------------------------------------------------------------
# The search


cdef class _PhraseScorer:
    """What the chart asks of a problem: the score of candidate (s, e) given the top clauses
    the search has put inside it (tops: pairs s', e', left to right)."""
    cdef double candidate_score(self, int s, int e, const int* tops, int n_tops) except? -1e300:
        raise NotImplementedError


cdef int _collect_tops(int s, int col, bint first, const int* S, const int32_t* inner_bp,
                       const uint8_t* take_self, int row, int width, int* out) noexcept nogil:
    """The top clauses of row `row` (start s) within [s, col - 1], right to left into out.
    first: read the cell's inner choice (the span (s, col - 1) itself excluded)."""
    cdef int j = col, n = 0, bp
    cdef bint use_inner = first
    while j > s:
        if not use_inner and take_self[row * width + j]:
            out[2 * n] = s
            out[2 * n + 1] = j - 1
            n += 1
            break
        bp = inner_bp[row * width + j]
        if bp < 0:
            j -= 1
        else:
            out[2 * n] = S[bp]
            out[2 * n + 1] = j - 1
            n += 1
            j = S[bp]
        use_inner = False
    return n


cdef void _reverse_pairs(int* pairs, int n) noexcept nogil:
    cdef int i, a, b
    for i in range(n // 2):
        a, b = pairs[2 * i], pairs[2 * i + 1]
        pairs[2 * i], pairs[2 * i + 1] = pairs[2 * (n - 1 - i)], pairs[2 * (n - 1 - i) + 1]
        pairs[2 * (n - 1 - i)], pairs[2 * (n - 1 - i) + 1] = a, b


cdef object _search(int n, const uint8_t* is_start, const uint8_t* is_end, int max_span,
                    _PhraseScorer scorer, double* total):
    """The coherent set of candidates with the largest total score (eq. 1), bottom-up.

    best(s, e) is the best structure within [s, e] for every start s; inner(s, e) the best one
    without the phrase (s, e) itself: either nothing ends at e (best(s, e - 1)) or a top clause
    (s', e) with s < s' does (best(s, s' - 1) + V(s', e)). A candidate's value is
    V(s, e) = score(s, e | the tops of inner(s, e)) + inner(s, e), and best(s, e) takes it when it
    beats inner(s, e). For a fixed end e, starts are visited right to left, so V(s', e) is known
    when row s needs it. The sentence's answer is the best sequence of disjoint top clauses.
    Returns the clauses as (s, e) pairs (inclusive), sorted by start then longest first.
    """
    cdef int i, r, r2, e, s, s2, col, n_tops, width = n + 1
    cdef int nS = 0
    for i in range(n):
        nS += is_start[i] != 0
    total[0] = 0.0
    if nS == 0 or n == 0:
        return []
    cdef int* S = <int*>malloc(nS * sizeof(int))
    cdef double* best = <double*>calloc(<size_t>nS * width, sizeof(double))
    cdef int32_t* inner_bp = <int32_t*>malloc(<size_t>nS * width * sizeof(int32_t))
    cdef uint8_t* take_self = <uint8_t*>calloc(<size_t>nS * width, sizeof(uint8_t))
    cdef double* V = <double*>calloc(nS, sizeof(double))
    cdef uint8_t* valid = <uint8_t*>calloc(nS, sizeof(uint8_t))
    cdef double* G = <double*>calloc(width, sizeof(double))
    cdef int32_t* gbp = <int32_t*>malloc(width * sizeof(int32_t))
    cdef int* tops = <int*>malloc(2 * (n + 1) * sizeof(int))
    cdef int* stack = <int*>malloc(3 * (n + 1) * sizeof(int))
    cdef double value, sc, inner_val
    if (S == NULL or best == NULL or inner_bp == NULL or take_self == NULL or V == NULL or valid == NULL
            or G == NULL or gbp == NULL or tops == NULL or stack == NULL):
        free(S); free(best); free(inner_bp); free(take_self); free(V); free(valid); free(G); free(gbp)
        free(tops); free(stack)
        raise MemoryError()
    out = []
    try:
        r = 0
        for i in range(n):
            if is_start[i]:
                S[r] = i
                r += 1
        for r in range(nS * width):
            inner_bp[r] = -1
        for e in range(n):
            for r in range(nS - 1, -1, -1):
                s = S[r]
                valid[r] = 0
                if s > e:
                    continue
                col = e + 1
                inner_val = best[r * width + col - 1]   # best(s, e - 1); 0 when e == s
                inner_bp[r * width + col] = -1
                if is_end[e]:
                    for r2 in range(r + 1, nS):
                        s2 = S[r2]
                        if s2 > e:
                            break
                        if valid[r2]:
                            value = best[r * width + s2] + V[r2]
                            if value > inner_val:
                                inner_val = value
                                inner_bp[r * width + col] = r2
                best[r * width + col] = inner_val
                if is_end[e] and (max_span <= 0 or e - s + 1 <= max_span):
                    n_tops = _collect_tops(s, col, True, S, inner_bp, take_self, r, width, tops)
                    _reverse_pairs(tops, n_tops)
                    sc = scorer.candidate_score(s, e, tops, n_tops)
                    V[r] = sc + inner_val
                    valid[r] = 1
                    if V[r] > inner_val:
                        best[r * width + col] = V[r]
                        take_self[r * width + col] = 1
            # The whole sentence: disjoint top clauses over [0, e].
            G[e + 1] = G[e]
            gbp[e + 1] = -1
            for r in range(nS):
                if valid[r] and G[S[r]] + V[r] > G[e + 1]:
                    G[e + 1] = G[S[r]] + V[r]
                    gbp[e + 1] = r
        total[0] = G[n]
        # Reconstruct: the sentence's tops, then the inside of every clause taken.
        found = []
        j = n
        while j > 0:
            r = gbp[j]
            if r < 0:
                j -= 1
            else:
                found.append((r, j))   # clause (S[r], j - 1), its inside from its inner choice
                j = S[r]
        while found:
            r, col = found.pop()
            s = S[r]
            out.append((s, col - 1))
            n_tops = _collect_tops(s, col, True, S, inner_bp, take_self, r, width, tops)
            for i in range(n_tops):
                s2, e = tops[2 * i], tops[2 * i + 1]
                # Every inner top starts a row of its own: find it (rows are sorted by start).
                for r2 in range(nS):
                    if S[r2] == s2:
                        break
                found.append((r2, e + 1))
    finally:
        free(S); free(best); free(inner_bp); free(take_self); free(V); free(valid); free(G); free(gbp)
        free(tops); free(stack)
    out.sort(key=lambda c: (c[0], -c[1]))
    return out


cdef class _CallbackScorer(_PhraseScorer):
    cdef object fn

    def __init__(self, fn):
        self.fn = fn

    cdef double candidate_score(self, int s, int e, const int* tops, int n_tops) except? -1e300:
        return float(self.fn(s, e, tuple((tops[2 * i], tops[2 * i + 1]) for i in range(n_tops))))


def search_spans(int n, starts, ends, score_fn, int max_span=0):
    """The search of eq. 1 over candidates from boundary sets, with a Python score function
    score_fn(s, e, tops) -> float (tops: the top clauses inside (s, e) as (s', e') pairs).
    Returns (clauses, total): clauses as inclusive (s, e) pairs. For tests and experiments."""
    cdef uint8_t[::1] is_start = numpy.zeros((max(n, 1),), dtype=numpy.uint8)
    cdef uint8_t[::1] is_end = numpy.zeros((max(n, 1),), dtype=numpy.uint8)
    for i in starts:
        is_start[i] = 1
    for i in ends:
        is_end[i] = 1
    cdef double total = 0.0
    out = _search(n, &is_start[0], &is_end[0], max_span, _CallbackScorer(score_fn), &total)
    return out, total


# ---------------------------------------------------------------------------------------------
# The recognizer: features, filters, search and learning for one sentence at a time


cdef class SpanRecognizer(_PhraseScorer):
    """Start filter, end filter and phrase scorer over one bound sentence.

    set_sentence(atoms, elements, is_vp): atoms is (n, 4) uint64 with the columns ATOM_NAMES;
    elements holds each token's pattern element (0: none; a VP chunk is one element, on its
    first token) and is_vp marks the VP elements.
    """
    cdef readonly TemplateSet templates
    cdef readonly LinearFunction start_fn
    cdef readonly LinearFunction end_fn
    cdef readonly LinearFunction score_fn
    cdef readonly int max_boundaries
    cdef readonly int max_span
    cdef readonly int context
    cdef readonly int n
    cdef object _atoms
    cdef object _elements
    cdef object _is_vp
    cdef object _word_keys
    cdef object _n_word_keys
    cdef object _start_scores
    cdef object _end_scores
    cdef object _is_start
    cdef object _is_end
    cdef hash_t* _pkeys

    def __cinit__(self, *args, **kwargs):
        self._pkeys = <hash_t*>malloc(MAX_PHRASE_KEYS * sizeof(hash_t))
        if self._pkeys == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self._pkeys)

    def __init__(self, TemplateSet templates, LinearFunction start_fn, LinearFunction end_fn,
                 LinearFunction score_fn, int max_boundaries=100, int max_span=0, int context=3):
        if tuple(templates.atom_names) != ATOM_NAMES:
            raise ValueError(f"word templates must be over the atoms {ATOM_NAMES}, not {templates.atom_names}")
        if templates.n_history:
            raise ValueError("word templates of the clause filters cannot read previous decisions")
        if max_boundaries < 1 or max_span < 0 or not 0 <= context <= 6:
            raise ValueError("max_boundaries must be >= 1, max_span >= 0 and context in 0..6")
        self.templates = templates
        self.start_fn = start_fn
        self.end_fn = end_fn
        self.score_fn = score_fn
        self.max_boundaries = max_boundaries
        self.max_span = max_span
        self.context = context
        self.n = 0

    def __reduce__(self):
        return (SpanRecognizer, (self.templates, self.start_fn, self.end_fn, self.score_fn,
                                 self.max_boundaries, self.max_span, self.context))

    @property
    def functions(self):
        return {"start": self.start_fn, "end": self.end_fn, "score": self.score_fn}

    def tick(self):
        for fn in (self.start_fn, self.end_fn, self.score_fn):
            fn.tick()

    def set_averaged(self, bint value):
        for fn in (self.start_fn, self.end_fn, self.score_fn):
            fn.set_averaged(value)

    # Binding a sentence ------------------------------------------------------------------------

    def set_sentence(self, atoms, elements, is_vp):
        atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
        n = atoms.shape[0]
        if atoms.ndim != 2 or atoms.shape[1] != len(ATOM_NAMES):
            raise ValueError(f"atoms must be (n, {len(ATOM_NAMES)}), got {atoms.shape}")
        elements = numpy.ascontiguousarray(elements, dtype=numpy.uint64)
        is_vp = numpy.ascontiguousarray(is_vp, dtype=numpy.uint8)
        if elements.shape != (n,) or is_vp.shape != (n,):
            raise ValueError("elements and is_vp need one value per token")
        self.n = n
        self._atoms = atoms
        self._elements = elements
        self._is_vp = is_vp
        cdef int width = max(1, self.templates.n_static)
        keys = numpy.zeros((max(n, 1), width), dtype=numpy.uint64)
        n_keys = numpy.zeros((max(n, 1),), dtype=numpy.int32)
        cdef uint64_t[:, ::1] k = keys
        cdef int32_t[::1] nk = n_keys
        cdef const uint64_t[:, ::1] a = atoms
        cdef int i
        cdef int32_t hist[4]
        hist[0] = hist[1] = hist[2] = hist[3] = -1
        for i in range(n):
            nk[i] = extract_features(self.templates.c_static, self.templates.n_static, &a[0, 0], n,
                                     len(ATOM_NAMES), i, hist, &k[i, 0])
        self._word_keys = keys
        self._n_word_keys = n_keys
        self._score_filters()

    def _score_filters(self):
        """Score every word with both filters and choose the boundaries (score > 0, the best
        `max_boundaries` of them)."""
        cdef int n = self.n, i
        start = numpy.zeros((n,), dtype=numpy.float64)
        end = numpy.zeros((n,), dtype=numpy.float64)
        cdef double[::1] st = start
        cdef double[::1] en = end
        cdef uint64_t[:, ::1] k = self._word_keys
        cdef int32_t[::1] nk = self._n_word_keys
        for i in range(n):
            st[i] = self.start_fn.score(&k[i, 0], nk[i])
            en[i] = self.end_fn.score(&k[i, 0], nk[i])
        self._start_scores = start
        self._end_scores = end
        self._is_start = self._boundaries(start)
        self._is_end = self._boundaries(end)

    def _boundaries(self, scores):
        chosen = (scores > 0).astype(numpy.uint8)
        if chosen.sum() > self.max_boundaries:
            order = numpy.argsort(-scores, kind="stable")[: self.max_boundaries]
            chosen[:] = 0
            chosen[order] = 1
        return chosen

    @property
    def start_scores(self):
        return self._start_scores

    @property
    def end_scores(self):
        return self._end_scores

    @property
    def starts(self):
        return numpy.flatnonzero(self._is_start).tolist() if self.n else []

    @property
    def ends(self):
        return numpy.flatnonzero(self._is_end).tolist() if self.n else []

    def is_candidate(self, int s, int e):
        return bool(0 <= s <= e < self.n and self._is_start[s] and self._is_end[e]
                    and (self.max_span <= 0 or e - s + 1 <= self.max_span))

    def n_candidates(self):
        """Candidate phrases the filters propose (what the scorer sees)."""
        if self.n == 0:
            return 0
        starts = numpy.flatnonzero(self._is_start)
        ends = numpy.flatnonzero(self._is_end)
        if self.max_span <= 0:
            return int(numpy.searchsorted(starts, ends, side="right").sum())
        return sum(1 for s in starts for e in ends if s <= e and e - s + 1 <= self.max_span)

    # Features ----------------------------------------------------------------------------------

    def word_keys(self, int i):
        return numpy.array(self._word_keys[i, : self._n_word_keys[i]])

    def phrase_keys(self, int s, int e, tops=()):
        """phi_p((s, e), x, y): tops are the top clauses of y inside (s, e)."""
        cdef int* t = <int*>malloc((2 * len(tops) + 1) * sizeof(int))
        cdef int i, m
        try:
            for i, (a, b) in enumerate(sorted(tops)):
                t[2 * i] = a
                t[2 * i + 1] = b
            m = self._phrase_features(s, e, t, len(tops), self._pkeys)
            return numpy.array([self._pkeys[i] for i in range(m)], dtype=numpy.uint64)
        finally:
            free(t)

    cdef int _phrase_features(self, int s, int e, const int* tops, int n_tops, hash_t* out) except -1:
        cdef const uint64_t[:, ::1] a = self._atoms
        cdef const uint64_t[::1] elem = self._elements
        cdef const uint8_t[::1] is_vp = self._is_vp
        cdef int n = self.n, m = 0, off, col, i, t = 0
        cdef int L = self.context
        cdef const atom_t* A = &a[0, 0]
        cdef int C = len(ATOM_NAMES)
        cdef hash_t el, prev = 0, first = 0, last = 0, pattern = _seed(100)
        cdef int n_el = 0, n_vp = 0, n_sub = 0, n_bag = 0
        out[m] = _key(_seed(0), 0, 0)   # bias
        m += 1
        # Context: words, tags and chunk tags in [s - L, s] and [e, e + L].
        for off in range(-L, 1):
            for col in range(COL_LOWER, COL_CHUNK + 1):
                out[m] = _key(_seed(10 + col), <hash_t>(off + 16), atom_at(A, n, C, s + off, col))
                m += 1
        for off in range(0, L + 1):
            for col in range(COL_LOWER, COL_CHUNK + 1):
                out[m] = _key(_seed(20 + col), <hash_t>(off + 16), atom_at(A, n, C, e + off, col))
                m += 1
        out[m] = _key(_seed(30), atom_at(A, n, C, s - 1, COL_TAG), atom_at(A, n, C, s, COL_TAG))
        out[m + 1] = _key(_seed(31), atom_at(A, n, C, e, COL_TAG), atom_at(A, n, C, e + 1, COL_TAG))
        out[m + 2] = _key(_seed(32), atom_at(A, n, C, s, COL_TAG), atom_at(A, n, C, e, COL_TAG))
        out[m + 3] = _key(_seed(33), atom_at(A, n, C, s - 1, COL_LOWER), atom_at(A, n, C, e + 1, COL_LOWER))
        m += 4
        # The pattern: punctuation, coordinators, "that", relative pronouns and VP chunks from s
        # to e, each clause already recognized inside reduced to one element.
        i = s
        while i <= e:
            if t < n_tops and tops[2 * t] == i:
                el = SUB_CLAUSE
                n_sub += 1
                i = tops[2 * t + 1] + 1
                t += 1
            else:
                el = elem[i]
                if is_vp[i]:
                    n_vp += 1
                i += 1
            if el == 0:
                continue
            pattern = hash_combine(pattern, el)
            n_el += 1
            if first == 0:
                first = el
            last = el
            if n_bag < MAX_BAG:
                out[m] = _key(_seed(40), el, 0)
                out[m + 1] = _key(_seed(41), prev, el)
                m += 2
                n_bag += 1
            prev = el
        out[m] = _key(_seed(42), prev, 1)          # the last element before the end
        out[m + 1] = _key(_seed(50), pattern, <hash_t>n_el)
        out[m + 2] = _key(_seed(51), first, last)
        out[m + 3] = _key(_seed(52), first, 0)
        out[m + 4] = _key(_seed(53), last, 0)
        out[m + 5] = _key(_seed(54), <hash_t>_bucket(n_vp, 4), <hash_t>_bucket(n_sub, 3))
        out[m + 6] = _key(_seed(55), <hash_t>_bucket(n_el, 12), 0)
        out[m + 7] = _key(_seed(56), <hash_t>_bucket(e - s + 1, 20), <hash_t>_bucket(n_vp, 4))
        out[m + 8] = _key(_seed(57), <hash_t>((s == 0) * 2 + (e == n - 1)), <hash_t>_bucket(n_vp, 4))
        out[m + 9] = _key(_seed(58), atom_at(A, n, C, s, COL_TAG), <hash_t>_bucket(n_vp, 4))
        out[m + 10] = _key(_seed(59), atom_at(A, n, C, e, COL_TAG), <hash_t>_bucket(n_vp, 4))
        out[m + 11] = _key(_seed(60), atom_at(A, n, C, s, COL_LOWER), <hash_t>_bucket(n_vp, 4))
        m += 12
        return m

    cdef double candidate_score(self, int s, int e, const int* tops, int n_tops) except? -1e300:
        cdef int m = self._phrase_features(s, e, tops, n_tops, self._pkeys)
        return self.score_fn.score(self._pkeys, m)

    # Recognition -------------------------------------------------------------------------------

    def recognize(self):
        """The clauses of the bound sentence (eq. 1): inclusive (s, e) pairs."""
        if self.n == 0:
            return []
        cdef uint8_t[::1] st = self._is_start
        cdef uint8_t[::1] en = self._is_end
        cdef double total = 0.0
        return _search(self.n, &st[0], &en[0], self.max_span, self, &total)

    def recognize_doc(self, atoms, elements, is_vp, sent_start):
        """The clauses of every sentence of a document, as binding and recognizing each sentence
        in turn would find them, without the per-sentence arrays: atoms, elements and is_vp
        cover the whole document, sent_start has one flag per token (1: the token starts a
        sentence, as spaCy's SENT_START; the first token always does). Returns inclusive (s, e)
        pairs in document positions; the last sentence stays bound."""
        atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
        elements = numpy.ascontiguousarray(elements, dtype=numpy.uint64)
        is_vp = numpy.ascontiguousarray(is_vp, dtype=numpy.uint8)
        cdef int N = atoms.shape[0] if atoms.ndim == 2 else -1
        if N < 0 or atoms.shape[1] != len(ATOM_NAMES):
            raise ValueError(f"atoms must be (n, {len(ATOM_NAMES)}), got {atoms.shape}")
        cdef const int64_t[::1] flags = numpy.ascontiguousarray(sent_start, dtype=numpy.int64)
        if elements.shape != (N,) or is_vp.shape != (N,) or flags.shape[0] != N:
            raise ValueError("elements, is_vp and sent_start need one value per token")
        if N == 0:
            self.n = 0
            return []
        cdef int j, n_sents = 1
        for j in range(1, N):
            n_sents += flags[j] == 1
        starts_arr = numpy.zeros((n_sents,), dtype=numpy.int32)
        cdef int32_t[::1] starts = starts_arr
        n_sents = 1
        for j in range(1, N):
            if flags[j] == 1:
                starts[n_sents] = j
                n_sents += 1
        cdef int width = max(1, self.templates.n_static)
        keys = numpy.zeros((N, width), dtype=numpy.uint64)
        n_keys = numpy.zeros((N,), dtype=numpy.int32)
        start_scores = numpy.zeros((N,), dtype=numpy.float64)
        end_scores = numpy.zeros((N,), dtype=numpy.float64)
        is_start = numpy.zeros((N,), dtype=numpy.uint8)
        is_end = numpy.zeros((N,), dtype=numpy.uint8)
        cdef uint64_t[:, ::1] k = keys
        cdef int32_t[::1] nk = n_keys
        cdef double[::1] st = start_scores
        cdef double[::1] en = end_scores
        cdef uint8_t[::1] ist = is_start
        cdef uint8_t[::1] ien = is_end
        cdef const uint64_t[:, ::1] a = atoms
        cdef int i, s0, e0, n, n_st, n_en
        cdef int32_t hist[4]
        cdef double total = 0.0
        hist[0] = hist[1] = hist[2] = hist[3] = -1
        out = []
        for j in range(n_sents):
            s0 = starts[j]
            e0 = starts[j + 1] if j + 1 < n_sents else N
            n = e0 - s0
            n_st = n_en = 0
            for i in range(s0, e0):
                nk[i] = extract_features(self.templates.c_static, self.templates.n_static, &a[s0, 0], n,
                                         len(ATOM_NAMES), i - s0, hist, &k[i, 0])
                st[i] = self.start_fn.score(&k[i, 0], nk[i])
                en[i] = self.end_fn.score(&k[i, 0], nk[i])
                ist[i] = st[i] > 0
                ien[i] = en[i] > 0
                n_st += ist[i]
                n_en += ien[i]
            # The sentence, bound as set_sentence binds it (views into the document's arrays).
            self.n = n
            self._atoms = atoms[s0:e0]
            self._elements = elements[s0:e0]
            self._is_vp = is_vp[s0:e0]
            self._word_keys = keys[s0:e0]
            self._n_word_keys = n_keys[s0:e0]
            self._start_scores = start_scores[s0:e0]
            self._end_scores = end_scores[s0:e0]
            self._is_start = is_start[s0:e0]
            self._is_end = is_end[s0:e0]
            if n_st > self.max_boundaries:
                self._is_start[:] = self._boundaries(self._start_scores)
            if n_en > self.max_boundaries:
                self._is_end[:] = self._boundaries(self._end_scores)
            for s, e in _search(n, &ist[s0], &ien[s0], self.max_span, self, &total):
                out.append((s0 + s, s0 + e))
        return out

    def filter_counts(self, gold):
        """Counts for carreras2003 Fig. 1 on the bound sentence: start-filter true/false
        positives and gold starts, candidates, and gold phrases among the candidates."""
        gold = set(map(tuple, gold))
        gold_starts = {s for s, _ in gold}
        pred_starts = set(self.starts)
        return {"start_tp": len(gold_starts & pred_starts), "start_pred": len(pred_starts),
                "start_gold": len(gold_starts), "candidates": self.n_candidates(),
                "gold_in_candidates": sum(1 for s, e in gold if self.is_candidate(s, e)),
                "gold": len(gold)}

    # Learning ----------------------------------------------------------------------------------

    def train(self, gold, str method="fr"):
        """Recognize the bound sentence with the current functions and update them.

        method "fr": the FR-Perceptron feedback (§3.1). Missed phrases (gold, not predicted):
        the start (end) filter moves toward phi_w of a boundary word it scored <= 0, and the
        scorer toward phi_p of the phrase if the filters had made it a candidate. Over-predicted
        phrases: the scorer moves away from phi_p, and each filter away from a boundary word
        that is not a gold boundary. Filter decisions are those the recognizer used; a word is
        updated at most once per filter and sentence. phi_p of a missed phrase sees the gold
        clauses inside it, of an over-predicted one the predicted clauses.
        method "co" (CO-VP): classification feedback online: every word for both filters, every
        candidate the filters propose for the scorer (label: is it gold), mistakes only.
        method "cb" (CB-VP): the same for the filters; the scorer trains on the candidates made
        of gold boundaries (every gold start with every gold end), independently of the filters.
        CO and CB give phi_p the gold clauses inside a candidate.

        Returns {"predicted": [...], "updates": {function: count}}; the caller ticks the clock.
        """
        if method not in METHODS:
            raise ValueError(f"unknown training method {method!r}; expected one of {METHODS}")
        gold = sorted({(int(s), int(e)) for s, e in gold}, key=lambda c: (c[0], -c[1]))
        for s, e in gold:
            if not 0 <= s <= e < self.n:
                raise ValueError(f"gold phrase ({s}, {e}) is outside a sentence of {self.n} tokens")
        predicted = self.recognize()
        updates = {"start": 0, "end": 0, "score": 0}
        gold_set = set(gold)
        gold_starts = {s for s, _ in gold}
        gold_ends = {e for _, e in gold}
        if method == "fr":
            pred_set = set(predicted)
            missed = [c for c in gold if c not in pred_set]
            over = [c for c in predicted if c not in gold_set]
            start_moves, end_moves, phrase_moves = {}, {}, []
            for s, e in missed:
                if self._start_scores[s] <= 0:
                    start_moves.setdefault(s, 1.0)
                if self._end_scores[e] <= 0:
                    end_moves.setdefault(e, 1.0)
                if self.is_candidate(s, e):
                    phrase_moves.append((s, e, _tops_inside(gold, s, e), 1.0))
            for s, e in over:
                phrase_moves.append((s, e, _tops_inside(predicted, s, e), -1.0))
                if s not in gold_starts:
                    start_moves.setdefault(s, -1.0)
                if e not in gold_ends:
                    end_moves.setdefault(e, -1.0)
        else:
            start_moves, end_moves, phrase_moves = {}, {}, []
            for i in range(self.n):
                if (self._start_scores[i] > 0) != (i in gold_starts):
                    start_moves[i] = 1.0 if i in gold_starts else -1.0
                if (self._end_scores[i] > 0) != (i in gold_ends):
                    end_moves[i] = 1.0 if i in gold_ends else -1.0
            if method == "co":
                pairs = [(s, e) for s in self.starts for e in self.ends if self.is_candidate(s, e)]
            else:
                pairs = [(s, e) for s in sorted(gold_starts) for e in sorted(gold_ends) if s <= e]
            for s, e in pairs:
                tops = _tops_inside(gold, s, e)
                label = (s, e) in gold_set
                if (self.score_fn.score_keys(self.phrase_keys(s, e, tops)) > 0) != label:
                    phrase_moves.append((s, e, tops, 1.0 if label else -1.0))
        for i, delta in start_moves.items():
            self.start_fn.update_keys(self.word_keys(i), delta)
            updates["start"] += 1
        for i, delta in end_moves.items():
            self.end_fn.update_keys(self.word_keys(i), delta)
            updates["end"] += 1
        for s, e, tops, delta in phrase_moves:
            self.score_fn.update_keys(self.phrase_keys(s, e, tops), delta)
            updates["score"] += 1
        return {"predicted": predicted, "updates": updates}


def _tops_inside(clauses, int s, int e):
    """The maximal clauses of `clauses` strictly inside (s, e) (not (s, e) itself)."""
    inside = sorted(((a, b) for a, b in clauses if s <= a and b <= e and (a, b) != (s, e)),
                    key=lambda c: (c[0], -c[1]))
    tops, end = [], -1
    for a, b in inside:
        if a > end:
            tops.append((a, b))
            end = b
    return tops


def tops_inside(clauses, s, e):
    return _tops_inside(clauses, s, e)
