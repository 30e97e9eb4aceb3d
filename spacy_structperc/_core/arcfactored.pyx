# cython: infer_types=True
"""A graph-based dependency model, first order (arc-factored: McDonald, Crammer and Pereira 2005)
or with adjacent siblings (McDonald and Pereira 2006), trained with the averaged perceptron and exact search (Eisner's decoder, eisner.pyx).

A tree's score is the sum of its arcs' scores; an arc (h, d) scores ``w . f(h, d)`` with f the
hashed McDonald-style templates below, every one of them once alone and once conjoined with the
arc's direction and binned length:

- head and dependent unigrams: word+tag, word, tag of h; the same of d;
- bigrams: the 4-tuple (h word, h tag, d word, d tag) and its backoffs (each of the four left
  out, the two words, the two tags);
- surrounding tags: (h, h+1, d-1, d), (h-1, h, d-1, d), (h, h+1, d, d+1), (h-1, h, d, d+1) and
  their three-tag backoffs without the outermost neighbour;
- in between: (h tag, b tag, d tag) for each distinct tag b strictly between h and d (with the
  direction only).

Node 0 is the root (its word and tag are ROOT constants). Words and tags come in as uint64 atoms
(string hashes); tags also as small ids (tag_ids, 1..62, 63 for an unknown tag) for the
in-between set, a 64-bit mask of the ids between h and d. The weights are the shared
AveragedWeights (one class), so averaging is Daume's lazy form and keys hash like every other
template of the core (mix64 chains, bit 0 set).

Second order (``order=2``, McDonald and Pereira 2006): a dependent also scores with its
adjacent sibling s (the child of the same head on the same side, next closer to the head):
(s tag, d tag), (s word, d tag), (s tag, d word), (s word, d word), alone and with the side and
the siblings' binned distance; or, when it is its head's nearest child on that side, with
(h tag, d tag), (h word, d tag), (h tag, d word), (d tag) marked "first". (The head's own
atoms are not in the sibling templates, so the sibling scores are a matrix over (s, d) and the
features cost O(n^2) lookups; eisner.pyx's eisner2_decode adds them in its O(n^3) search.)

Training (``train_epoch``): per sentence in the given order, the score matrix under the current
weights, Eisner's best projective tree, and for each word whose head is wrong +1 on the gold
arc's features and -1 on the predicted arc's (at second order also, for each word whose head or
adjacent sibling is wrong, +1 on its gold sibling-or-first features and -1 on its predicted
ones); the clock ticks once per sentence. Non-projective
gold trees are used as they are (their crossing arcs are never predicted, but still updated
towards).
"""
from libc.stdlib cimport malloc, free
from libc.stdint cimport int32_t, int64_t, uint64_t
import numpy

from .typedefs cimport hash_t, weight_t
from .templates cimport hash_combine, mix64, PAD_BEFORE, PAD_AFTER, TIED_BIT
from .weights cimport AveragedWeights
from .eisner cimport eisner_decode, eisner_work_bytes, eisner2_decode, eisner2_work_bytes

DEF MAX_KEYS = 160

cdef hash_t ROOT_WORD = 0x726f6f74776f7264ULL
cdef hash_t ROOT_TAG = 0x726f6f7474616721ULL
cdef hash_t SEED = 0x6d63646f6e616c64ULL   # the model's salt: its keys differ from other tables'
N_TEMPLATES = 25


cdef inline int _bin(int dist) noexcept nogil:
    if dist <= 5:
        return dist
    if dist <= 7:
        return 6
    if dist <= 10:
        return 7
    if dist <= 15:
        return 8
    return 9


cdef inline hash_t _key(hash_t h) noexcept nogil:
    return (h | 1) & ~(<hash_t>TIED_BIT)


cdef inline int _emit(hash_t* keys, int nk, hash_t h, hash_t dd) noexcept nogil:
    keys[nk] = _key(h)
    keys[nk + 1] = _key(hash_combine(h, dd))
    return nk + 2


cdef inline hash_t _h2(int t, hash_t a, hash_t b) noexcept nogil:
    return hash_combine(hash_combine(mix64(SEED + <hash_t>t), a), b)


cdef inline hash_t _h3(int t, hash_t a, hash_t b, hash_t c) noexcept nogil:
    return hash_combine(_h2(t, a, b), c)


cdef inline hash_t _h4(int t, hash_t a, hash_t b, hash_t c, hash_t e) noexcept nogil:
    return hash_combine(_h3(t, a, b, c), e)


cdef inline hash_t _tag(const hash_t* T, int n1, int i) noexcept nogil:
    if i < 0:
        return PAD_BEFORE
    if i >= n1:
        return PAD_AFTER
    return T[i]


cdef int arc_keys(const hash_t* W, const hash_t* T, const int32_t* TI, int n1, int h, int d,
                  hash_t* keys) noexcept nogil:
    """The keys of arc h -> d (nodes of a sentence with the root at 0); returns their number."""
    cdef int nk = 0, lo, hi, b
    cdef bint right = d > h
    cdef int dist = d - h if right else h - d
    cdef hash_t dd = <hash_t>(((1 if right else 2) << 8) | _bin(dist))
    cdef hash_t hw = W[h], ht = T[h], dw = W[d], dt = T[d]
    cdef hash_t hp = _tag(T, n1, h - 1), hn = _tag(T, n1, h + 1)
    cdef hash_t dp = _tag(T, n1, d - 1), dn = _tag(T, n1, d + 1)
    cdef uint64_t mask = 0
    # unigrams
    nk = _emit(keys, nk, _h2(1, hw, ht), dd)
    nk = _emit(keys, nk, _h2(2, hw, 0), dd)
    nk = _emit(keys, nk, _h2(3, ht, 0), dd)
    nk = _emit(keys, nk, _h2(4, dw, dt), dd)
    nk = _emit(keys, nk, _h2(5, dw, 0), dd)
    nk = _emit(keys, nk, _h2(6, dt, 0), dd)
    # bigrams
    nk = _emit(keys, nk, _h4(7, hw, ht, dw, dt), dd)
    nk = _emit(keys, nk, _h3(8, ht, dw, dt), dd)
    nk = _emit(keys, nk, _h3(9, hw, dw, dt), dd)
    nk = _emit(keys, nk, _h3(10, hw, ht, dt), dd)
    nk = _emit(keys, nk, _h3(11, hw, ht, dw), dd)
    nk = _emit(keys, nk, _h2(12, hw, dw), dd)
    nk = _emit(keys, nk, _h2(13, ht, dt), dd)
    # surrounding tags
    nk = _emit(keys, nk, _h4(14, ht, hn, dp, dt), dd)
    nk = _emit(keys, nk, _h4(15, hp, ht, dp, dt), dd)
    nk = _emit(keys, nk, _h4(16, ht, hn, dt, dn), dd)
    nk = _emit(keys, nk, _h4(17, hp, ht, dt, dn), dd)
    nk = _emit(keys, nk, _h3(18, ht, dp, dt), dd)
    nk = _emit(keys, nk, _h3(19, ht, hn, dt), dd)
    nk = _emit(keys, nk, _h3(20, hp, ht, dt), dd)
    nk = _emit(keys, nk, _h3(21, ht, dt, dn), dd)
    # in between: one key per distinct tag id
    lo = h if h < d else d
    hi = d if h < d else h
    for b in range(lo + 1, hi):
        mask |= (<uint64_t>1) << (TI[b] & 63)
    b = 0
    while mask:
        if mask & 1:
            keys[nk] = _key(hash_combine(_h3(22, ht, <hash_t>b, dt), dd >> 8))
            nk += 1
        mask >>= 1
        b += 1
    return nk


cdef int sib_keys(const hash_t* W, const hash_t* T, int n1, int sb, int d, hash_t* keys) noexcept nogil:
    """Keys of dependent d after its adjacent sibling sb."""
    cdef int nk = 0
    cdef bint right = d > sb
    cdef int dist = d - sb if right else sb - d
    cdef hash_t dd = <hash_t>(((1 if right else 2) << 8) | _bin(dist))
    nk = _emit(keys, nk, _h2(30, T[sb], T[d]), dd)
    nk = _emit(keys, nk, _h2(31, W[sb], T[d]), dd)
    nk = _emit(keys, nk, _h2(32, T[sb], W[d]), dd)
    nk = _emit(keys, nk, _h2(33, W[sb], W[d]), dd)
    return nk


cdef int first_keys(const hash_t* W, const hash_t* T, int n1, int h, int d, hash_t* keys) noexcept nogil:
    """Keys of dependent d as the nearest child of h on its side."""
    cdef int nk = 0
    cdef bint right = d > h
    cdef hash_t dd = <hash_t>(1 if right else 2)
    nk = _emit(keys, nk, _h2(40, T[h], T[d]), dd)
    nk = _emit(keys, nk, _h2(41, W[h], T[d]), dd)
    nk = _emit(keys, nk, _h2(42, T[h], W[d]), dd)
    nk = _emit(keys, nk, _h2(43, T[d], 0), dd)
    return nk


cdef inline int _prev_sibling(const int* hn, int d) noexcept nogil:
    """The adjacent sibling of node d closer to its head (hn: head node per node), -1 if none."""
    cdef int h = hn[d], c
    if h < d:
        c = d - 1
        while c > h:
            if hn[c] == h:
                return c
            c -= 1
    else:
        c = d + 1
        while c < h:
            if hn[c] == h:
                return c
            c += 1
    return -1


cdef double _second_order_part(ArcModel self, const hash_t* W, const hash_t* T, int n1,
                               const int* hn, int d, hash_t* keys, double delta) noexcept nogil:
    """The sibling-or-first score of node d in the tree hn; with delta != 0, adds delta to its
    features' weights instead (returns 0)."""
    cdef int sb = _prev_sibling(hn, d), nk
    cdef weight_t sc[1]
    if sb < 0:
        nk = first_keys(W, T, n1, hn[d], d, keys)
    else:
        nk = sib_keys(W, T, n1, sb, d, keys)
    if delta != 0.0:
        self.weights.update_many(keys, nk, 0, <weight_t>delta)
        return 0.0
    sc[0] = 0.0
    self.weights.add_rows(keys, nk, sc)
    return sc[0]


cdef struct Scratch:
    # One sentence's atoms with the root at 0, trees (head node per node) and score matrices
    # (arcs S, siblings B, first children F: n1 x n1 each) and the decoder's work space, sized
    # for the longest sentence of a call.
    hash_t* W
    hash_t* T
    int32_t* TI
    int* pred
    int* gold
    double* S
    double* B
    double* F
    void* work


cdef int _scratch_alloc(Scratch* x, int max_n1) except -1:
    cdef size_t nn = <size_t>max_n1 * max_n1
    x.W = <hash_t*>malloc(max_n1 * sizeof(hash_t))
    x.T = <hash_t*>malloc(max_n1 * sizeof(hash_t))
    x.TI = <int32_t*>malloc(max_n1 * sizeof(int32_t))
    x.pred = <int*>malloc(max_n1 * sizeof(int))
    x.gold = <int*>malloc(max_n1 * sizeof(int))
    x.S = <double*>malloc(nn * 3 * sizeof(double))
    x.work = malloc(eisner2_work_bytes(max_n1))
    if x.W == NULL or x.T == NULL or x.TI == NULL or x.pred == NULL or x.gold == NULL or \
            x.S == NULL or x.work == NULL:
        _scratch_free(x)
        raise MemoryError()
    x.B = x.S + nn
    x.F = x.B + nn
    return 0


cdef void _scratch_free(Scratch* x) noexcept nogil:
    free(x.W); free(x.T); free(x.TI); free(x.pred); free(x.gold); free(x.S); free(x.work)
    x.W = x.T = NULL
    x.TI = NULL
    x.pred = x.gold = NULL
    x.S = x.B = x.F = NULL
    x.work = NULL


cdef class ArcModel:
    """The arc-factored model: weights, and the loops that train, decode and score with it."""
    cdef readonly AveragedWeights weights
    cdef readonly int order

    def __init__(self, n_buckets=1 << 22, int order=1):
        if order not in (1, 2):
            raise ValueError(f"ArcModel: order must be 1 or 2, got {order}")
        self.weights = AveragedWeights(1, n_buckets)
        self.order = order

    def set_weights(self, AveragedWeights weights):
        """Score (and train) with `weights` from now on, e.g. weights loaded from a saved model:
        one class, as the model's own."""
        if weights.n_classes != 1:
            raise ValueError(f"ArcModel: the weights must have one class, not {weights.n_classes}")
        self.weights = weights

    def arc_keys(self, words, tags, tag_ids, int h, int d):
        """The keys of arc h -> d in one sentence given without its root (for tests)."""
        cdef int n1 = len(words) + 1
        if not (0 <= h < n1 and 1 <= d < n1 and h != d):
            raise ValueError(f"arc_keys: no arc {h} -> {d} in a sentence of {n1 - 1} words")
        W, T, TI = _with_root(words, tags, tag_ids)
        cdef hash_t[::1] Wv = W
        cdef hash_t[::1] Tv = T
        cdef int32_t[::1] TIv = TI
        cdef hash_t keys[MAX_KEYS]
        cdef int nk = arc_keys(&Wv[0], &Tv[0], &TIv[0], n1, h, d, keys)
        return numpy.array([keys[i] for i in range(nk)], dtype=numpy.uint64)

    cdef void _score_matrix(self, const hash_t* W, const hash_t* T, const int32_t* TI, int n1,
                            double* S, hash_t* keys) noexcept nogil:
        cdef int h, d, nk
        cdef weight_t sc[1]
        for h in range(n1):
            S[h * n1] = 0.0
            for d in range(1, n1):
                if h == d:
                    S[h * n1 + d] = 0.0
                    continue
                nk = arc_keys(W, T, TI, n1, h, d, keys)
                sc[0] = 0.0
                self.weights.add_rows(keys, nk, sc)
                S[h * n1 + d] = sc[0]

    cdef void _sibling_matrices(self, const hash_t* W, const hash_t* T, int n1, double* B,
                                double* F, hash_t* keys) noexcept nogil:
        cdef int a, d, nk
        cdef weight_t sc[1]
        for a in range(n1):
            for d in range(n1):
                B[a * n1 + d] = 0.0
                F[a * n1 + d] = 0.0
                if d == 0 or a == d:
                    continue
                if a > 0:
                    nk = sib_keys(W, T, n1, a, d, keys)
                    sc[0] = 0.0
                    self.weights.add_rows(keys, nk, sc)
                    B[a * n1 + d] = sc[0]
                nk = first_keys(W, T, n1, a, d, keys)
                sc[0] = 0.0
                self.weights.add_rows(keys, nk, sc)
                F[a * n1 + d] = sc[0]

    cdef double _decode_one(self, Scratch* x, int n1, hash_t* keys) noexcept nogil:
        """The best tree of the sentence in x (its atoms filled) into x.pred; its score."""
        self._score_matrix(x.W, x.T, x.TI, n1, x.S, keys)
        if self.order == 2:
            self._sibling_matrices(x.W, x.T, n1, x.B, x.F, keys)
            return eisner2_decode(x.S, x.B, x.F, n1, x.pred, x.work)
        return eisner_decode(x.S, n1, x.pred, x.work)

    def train_epoch(self, const uint64_t[::1] words, const uint64_t[::1] tags,
                    const int32_t[::1] tag_ids, const int64_t[::1] sent_ptr,
                    const int32_t[::1] gold_heads, const int64_t[::1] order):
        """One perceptron epoch over the sentences in `order` (gold_heads: per word the index
        of its head in the sentence, -1 for the root). Returns (wrong heads, words)."""
        _check(words, tags, tag_ids, sent_ptr)
        if gold_heads.shape[0] != words.shape[0]:
            raise ValueError("train_epoch: gold_heads must have one entry per word")
        cdef int64_t m = sent_ptr.shape[0] - 1, idx, i, a
        for idx in range(order.shape[0]):
            if not 0 <= order[idx] < m:
                raise ValueError("train_epoch: sentence index out of range")
        if words.shape[0] == 0:
            for idx in range(order.shape[0]):
                self.weights.tick()
            return 0, 0
        cdef int max_n1 = _max_n1(sent_ptr)
        for idx in range(words.shape[0]):
            i = gold_heads[idx]
            if i < -1 or i >= max_n1:
                raise ValueError("train_epoch: a gold head is out of its sentence")
        self.weights.set_use_averages(False)
        cdef Scratch x
        _scratch_alloc(&x, max_n1)
        cdef hash_t* W = x.W
        cdef hash_t* T = x.T
        cdef int32_t* TI = x.TI
        cdef int* pred = x.pred
        cdef int* gold = x.gold
        cdef hash_t keys[MAX_KEYS]
        cdef int n1, d, g, nk
        cdef int64_t wrong = 0, total = 0
        try:
            with nogil:
                for idx in range(order.shape[0]):
                    i = order[idx]
                    a = sent_ptr[i]
                    n1 = <int>(sent_ptr[i + 1] - a) + 1
                    _fill(&words[0], &tags[0], &tag_ids[0], a, n1, W, T, TI)
                    self._decode_one(&x, n1, keys)
                    gold[0] = -1
                    for d in range(1, n1):
                        gold[d] = gold_heads[a + d - 1] + 1
                    for d in range(1, n1):
                        g = gold[d]
                        total += 1
                        if pred[d] != g:
                            wrong += 1
                            nk = arc_keys(W, T, TI, n1, g, d, keys)
                            self.weights.update_many(keys, nk, 0, 1.0)
                            nk = arc_keys(W, T, TI, n1, pred[d], d, keys)
                            self.weights.update_many(keys, nk, 0, -1.0)
                        if self.order == 2 and (pred[d] != g or _prev_sibling(pred, d) != _prev_sibling(gold, d)):
                            _second_order_part(self, W, T, n1, gold, d, keys, 1.0)
                            _second_order_part(self, W, T, n1, pred, d, keys, -1.0)
                    self.weights.tick()
        finally:
            _scratch_free(&x)
        return int(wrong), int(total)

    def finish(self):
        """Switch to the averaged weights (materialized) for decoding and scoring."""
        self.weights.set_use_averages(True)
        self.weights.average()

    def decode(self, const uint64_t[::1] words, const uint64_t[::1] tags,
               const int32_t[::1] tag_ids, const int64_t[::1] sent_ptr):
        """(heads, scores): every sentence's best projective tree (per word its head's index in
        the sentence, -1 for the root) and its score."""
        _check(words, tags, tag_ids, sent_ptr)
        cdef int64_t m = sent_ptr.shape[0] - 1, i, a
        heads = numpy.zeros((words.shape[0],), dtype=numpy.int32)
        scores = numpy.zeros((m,), dtype=numpy.float64)
        cdef int32_t[::1] H = heads
        cdef double[::1] SC = scores
        if m == 0 or words.shape[0] == 0:
            return heads, scores
        cdef Scratch x
        _scratch_alloc(&x, _max_n1(sent_ptr))
        cdef hash_t keys[MAX_KEYS]
        cdef int n1, d
        try:
            with nogil:
                for i in range(m):
                    a = sent_ptr[i]
                    n1 = <int>(sent_ptr[i + 1] - a) + 1
                    if n1 == 1:
                        continue
                    _fill(&words[0], &tags[0], &tag_ids[0], a, n1, x.W, x.T, x.TI)
                    SC[i] = self._decode_one(&x, n1, keys)
                    for d in range(1, n1):
                        H[a + d - 1] = x.pred[d] - 1
        finally:
            _scratch_free(&x)
        return heads, scores

    def score_trees(self, const uint64_t[::1] words, const uint64_t[::1] tags,
                    const int32_t[::1] tag_ids, const int64_t[::1] sent_ptr,
                    const int64_t[::1] cand_sent, const int32_t[::1] cand_heads):
        """The score of each candidate tree: candidate j belongs to sentence cand_sent[j] and
        its heads (one per word of that sentence, in the sentence's indices, -1 for the root)
        follow the previous candidate's in cand_heads."""
        _check(words, tags, tag_ids, sent_ptr)
        cdef int64_t m = sent_ptr.shape[0] - 1, j, i, a, at = 0, n_c = cand_sent.shape[0]
        for j in range(n_c):
            if not 0 <= cand_sent[j] < m:
                raise ValueError("score_trees: candidate of an unknown sentence")
            at += sent_ptr[cand_sent[j] + 1] - sent_ptr[cand_sent[j]]
        if at != cand_heads.shape[0]:
            raise ValueError("score_trees: cand_heads does not match the candidates' lengths")
        out = numpy.zeros((n_c,), dtype=numpy.float64)
        cdef double[::1] O = out
        if n_c == 0:
            return out
        cdef Scratch x
        _scratch_alloc(&x, _max_n1(sent_ptr))
        cdef hash_t* W = x.W
        cdef hash_t* T = x.T
        cdef int32_t* TI = x.TI
        cdef int* hn = x.gold
        cdef hash_t keys[MAX_KEYS]
        cdef int n1, d, g, nk
        cdef weight_t sc[1]
        cdef double total
        cdef bint bad = False
        at = 0
        try:
            with nogil:
                for j in range(n_c):
                    i = cand_sent[j]
                    a = sent_ptr[i]
                    n1 = <int>(sent_ptr[i + 1] - a) + 1
                    _fill(&words[0], &tags[0], &tag_ids[0], a, n1, W, T, TI)
                    total = 0.0
                    for d in range(1, n1):
                        g = cand_heads[at + d - 1] + 1
                        if g < 0 or g >= n1 or g == d:
                            bad = True
                            break
                        nk = arc_keys(W, T, TI, n1, g, d, keys)
                        sc[0] = 0.0
                        self.weights.add_rows(keys, nk, sc)
                        total += sc[0]
                        hn[d] = g
                    if bad:
                        break
                    if self.order == 2:
                        hn[0] = -1
                        for d in range(1, n1):
                            total += _second_order_part(self, W, T, n1, hn, d, keys, 0.0)
                    O[j] = total
                    at += n1 - 1
        finally:
            _scratch_free(&x)
        if bad:
            raise ValueError(f"score_trees: candidate {j} has a head outside its sentence or a self-loop")
        return out


cdef void _fill(const uint64_t* words, const uint64_t* tags, const int32_t* tag_ids, int64_t a,
                int n1, hash_t* W, hash_t* T, int32_t* TI) noexcept nogil:
    cdef int x
    W[0] = ROOT_WORD
    T[0] = ROOT_TAG
    TI[0] = 0
    for x in range(1, n1):
        W[x] = words[a + x - 1]
        T[x] = tags[a + x - 1]
        TI[x] = tag_ids[a + x - 1]


def _check(words, tags, tag_ids, sent_ptr):
    n = words.shape[0]
    if tags.shape[0] != n or tag_ids.shape[0] != n:
        raise ValueError("words, tags and tag_ids must have one entry per word")
    if sent_ptr.shape[0] < 1 or sent_ptr[0] != 0 or sent_ptr[sent_ptr.shape[0] - 1] != n or \
            (numpy.diff(numpy.asarray(sent_ptr)) < 0).any():
        raise ValueError("sent_ptr must rise from 0 to the number of words")


cdef int _max_n1(const int64_t[::1] sent_ptr):
    cdef int64_t i, best = 0
    for i in range(sent_ptr.shape[0] - 1):
        if sent_ptr[i + 1] - sent_ptr[i] > best:
            best = sent_ptr[i + 1] - sent_ptr[i]
    return <int>best + 1


def _with_root(words, tags, tag_ids):
    W = numpy.concatenate([[ROOT_WORD], numpy.asarray(words, dtype=numpy.uint64)]).astype(numpy.uint64)
    T = numpy.concatenate([[ROOT_TAG], numpy.asarray(tags, dtype=numpy.uint64)]).astype(numpy.uint64)
    TI = numpy.concatenate([[0], numpy.asarray(tag_ids, dtype=numpy.int32)]).astype(numpy.int32)
    return W, T, TI
