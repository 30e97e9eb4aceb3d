# cython: infer_types=True
# distutils: language = c++
"""Global features of whole analyses for k-best reranking (collins2001 §2, §5), in C.

A base model scores an analysis as a sum of local decisions; a reranker sees each candidate
whole. This module turns candidate analyses, given as numpy arrays of atoms (uint64 string ids,
so it needs no spaCy), into hashed feature keys: the sparse vectors the rerankers and kernels
take. Two kinds of analysis:

**Dependency trees** (``tree_features``): words, tags (n,), heads (k, n: the head index, -1 for
a root) and labels (k, n: the arc label, the root label for roots) of k candidate trees of one
sentence. Feature groups (``TREE_GROUPS``), each a bit of ``groups``:

- ``arcs``: head tag / word, dependent tag / word, label, direction and distance of every arc;
- ``grandparent``: grandparent, head and dependent tags with both labels and directions;
- ``siblings``: adjacent dependents on one side of a head (tags, labels), and three in a row;
- ``children``: each head's full sequence of dependent labels, and of dependent tags, with the
  head's position marked (the head's "production");
- ``coordination``: for every ``conj`` dependent, the head and conjunct tags and words, the
  coordinating word (the ``cc`` child of the conjunct) and whether the conjuncts' tags agree;
- ``paths``: the labels from each token up to three ancestors, the roots' tags and words;
- ``spans``: the size (bucketed) of each subtree by its head's tag and label;
- ``valency``: each head's numbers of left and right dependents, by tag and by word;
- ``edges``: each subtree's edges and neighbours (Charniak & Johnson 2005's Edges and
  Neighbours): the tags at and just outside its first and last token, the word after it;
- ``lexical``: bilexical grandparent and sibling features (words where the others use tags).

**Chunkings** (``chunk_features``): words, tags (n,) and BIO classes (k, n: 0 is O, 1 + 2t is
B of type t, 2 + 2t is I of type t) of k candidate chunkings. Groups (``CHUNK_GROUPS``):

- ``ngrams``: bigrams and trigrams of the sentence's units (a chunk is its type, a token
  outside chunks its tag), and the whole unit sequence;
- ``lengths``: each chunk's type with its length (bucketed) and with its tag sequence;
- ``heads``: each chunk's type with its last word / tag (the head of an English base phrase)
  and first word, and adjacent chunks' types with the head of either;
- ``boundaries``: each chunk's type with the words and tags just before and after it.

A feature is a tuple of integers (its template id, then atoms); its key is the tuple's length
followed by its members, mixed with splitmix64 rounds from the FNV offset, so one feature has
one key whatever else the analysis holds (never 0). Atoms are taken as they are: anything that
gives equal strings equal ids will do (spaCy's string hashes are stable across processes).
"""
from libc.stdint cimport int64_t, uint64_t
from libcpp.vector cimport vector
import numpy

TREE_GROUPS = ("arcs", "grandparent", "siblings", "children", "coordination", "paths", "spans",
               "valency", "edges", "lexical")
CHUNK_GROUPS = ("ngrams", "lengths", "heads", "boundaries")

# Constants standing in for absent atoms (any values distinct from each other will do).
cdef enum:
    NONE = 1
    LEFT = 2
    RIGHT = 3
    HEAD_MARK = 4
    BOS = 5
    EOS = 6
    OUTSIDE = 7

cdef enum:
    G_ARCS = 1
    G_GRANDPARENT = 2
    G_SIBLINGS = 4
    G_CHILDREN = 8
    G_COORDINATION = 16
    G_PATHS = 32
    G_SPANS = 64
    G_VALENCY = 128
    G_EDGES = 256
    G_LEXICAL = 512

cdef enum:
    C_NGRAMS = 1
    C_LENGTHS = 2
    C_HEADS = 4
    C_BOUNDARIES = 8


def group_mask(groups, names):
    """The bit mask of the named groups (ValueError for an unknown name)."""
    cdef int mask = 0
    for g in groups:
        if g not in names:
            raise ValueError(f"unknown feature group {g!r}; expected some of {list(names)}")
        mask |= 1 << names.index(g)
    return mask


cdef inline uint64_t mix(uint64_t h, uint64_t x) noexcept nogil:
    h = (h ^ x) + 0x9E3779B97F4A7C15ULL
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL
    return h ^ (h >> 31)


cdef uint64_t FNV = 0xCBF29CE484222325ULL


cdef inline void emit(vector[uint64_t]& out, vector[uint64_t]& f) noexcept nogil:
    """Hash the feature in f (template id, atoms...) and append its key."""
    cdef uint64_t h = mix(FNV, f.size())
    cdef size_t i
    for i in range(f.size()):
        h = mix(h, f[i])
    out.push_back(h if h != 0 else 1)


cdef inline void emit3(vector[uint64_t]& out, vector[uint64_t]& f, uint64_t a, uint64_t b,
                       uint64_t c) noexcept nogil:
    f.clear(); f.push_back(a); f.push_back(b); f.push_back(c); emit(out, f)


cdef inline void emit4(vector[uint64_t]& out, vector[uint64_t]& f, uint64_t a, uint64_t b,
                       uint64_t c, uint64_t d) noexcept nogil:
    f.clear(); f.push_back(a); f.push_back(b); f.push_back(c); f.push_back(d); emit(out, f)


cdef inline void emit5(vector[uint64_t]& out, vector[uint64_t]& f, uint64_t a, uint64_t b,
                       uint64_t c, uint64_t d, uint64_t e) noexcept nogil:
    f.clear(); f.push_back(a); f.push_back(b); f.push_back(c); f.push_back(d); f.push_back(e)
    emit(out, f)


cdef inline void emit6(vector[uint64_t]& out, vector[uint64_t]& f, uint64_t a, uint64_t b,
                       uint64_t c, uint64_t d, uint64_t e, uint64_t g) noexcept nogil:
    f.clear(); f.push_back(a); f.push_back(b); f.push_back(c); f.push_back(d); f.push_back(e)
    f.push_back(g); emit(out, f)


cdef inline void emit_production(vector[uint64_t]& out, vector[uint64_t]& f, const uint64_t* atom,
                                 vector[int]& kids, int a, int c, int nl) noexcept nogil:
    """Append a head's dependents kids[a:c] (the first nl on its left) to f as their atoms, with
    HEAD_MARK at the head's place, and emit f."""
    cdef int j
    for j in range(a, c):
        if j == a + nl:
            f.push_back(HEAD_MARK)
        f.push_back(atom[kids[j]])
    if c - a == nl:
        f.push_back(HEAD_MARK)
    emit(out, f)


cdef inline void emit_path(vector[uint64_t]& out, vector[uint64_t]& f, const int64_t* h,
                           const uint64_t* lab, int d, int length) noexcept nogil:
    """Append the labels from token d up its ancestors (at most `length` of them) and emit f."""
    cdef int a = d, j = 0
    while a >= 0 and j < length:
        f.push_back(lab[a])
        a = h[a]
        j += 1
    emit(out, f)


cdef object as_array(vector[uint64_t]& out):
    """The keys of a vector as a uint64 numpy array."""
    keys = numpy.empty((out.size(),), dtype=numpy.uint64)
    cdef uint64_t[::1] K = keys
    cdef size_t j
    for j in range(out.size()):
        K[j] = out[j]
    return keys


cdef inline uint64_t bucket(int64_t d) noexcept nogil:
    if d < 0:
        d = -d
    if d <= 5:
        return d
    return 6 if d <= 10 else 7


cdef inline uint64_t side_of(int64_t d, int64_t g) noexcept nogil:
    return LEFT if d < g else RIGHT


cdef int one_tree(const uint64_t* w, const uint64_t* t, const int64_t* h, const uint64_t* lab,
                  int n, int groups, uint64_t conj, uint64_t cc, vector[uint64_t]& out,
                  vector[uint64_t]& f, vector[int]& kid_ptr, vector[int]& kids,
                  vector[int]& size, vector[int]& lo, vector[int]& hi, vector[int]& order,
                  vector[int]& depth) except -1 nogil:
    cdef int d, g, gg, a, i, j, c, nl, nr, n_roots = 0, prev, prev2, steps, base_depth, side
    cdef uint64_t pt, pl, pw, pt2, cc_word
    # Dependents in order (CSR), roots, and a check that the heads form a forest.
    kid_ptr.assign(n + 1, 0)
    for d in range(n):
        if h[d] < -1 or h[d] >= n or h[d] == d:
            with gil:
                raise ValueError(f"heads must be token indices other than the token itself, or -1 for a root; got {h[d]} at {d}")
        if h[d] < 0:
            n_roots += 1
        else:
            kid_ptr[h[d] + 1] += 1
    for d in range(n):
        kid_ptr[d + 1] += kid_ptr[d]
    kids.assign(n, 0)
    order.assign(n + 1, 0)     # fill positions per head
    for d in range(n):
        if h[d] >= 0:
            kids[kid_ptr[h[d]] + order[h[d]]] = d
            order[h[d]] += 1
    # Depth of every token (bounded walk: a cycle is an error), then tokens deepest first.
    depth.assign(n, -1)
    for d in range(n):
        a, steps = d, 0
        while a >= 0 and depth[a] < 0:
            a = h[a]
            steps += 1
            if steps > n:
                with gil:
                    raise ValueError("heads contain a cycle")
        base_depth = -1 if a < 0 else depth[a]
        # Second walk assigns depths from the known ancestor down.
        a = d
        j = steps
        while a >= 0 and depth[a] < 0:
            depth[a] = base_depth + j
            j -= 1
            a = h[a]
    order.assign(n, 0)
    for d in range(n):
        order[d] = d
    # Counting sort by depth, deepest first.
    cdef int max_depth = 0
    for d in range(n):
        if depth[d] > max_depth:
            max_depth = depth[d]
    cdef vector[int] cnt
    cnt.assign(max_depth + 2, 0)
    for d in range(n):
        cnt[max_depth - depth[d] + 1] += 1
    for i in range(max_depth + 1):
        cnt[i + 1] += cnt[i]
    for d in range(n):
        i = max_depth - depth[d]
        order[cnt[i]] = d
        cnt[i] += 1
    size.assign(n, 1)
    lo.assign(n, 0)
    hi.assign(n, 0)
    for d in range(n):
        lo[d] = d
        hi[d] = d
    for i in range(n):
        d = order[i]
        g = h[d]
        if g >= 0:
            size[g] += size[d]
            if lo[d] < lo[g]:
                lo[g] = lo[d]
            if hi[d] > hi[g]:
                hi[g] = hi[d]

    if groups & G_ARCS:
        for d in range(n):
            g = h[d]
            if g < 0:
                continue
            emit6(out, f, 10, t[g], t[d], lab[d], side_of(d, g), bucket(d - g))
            emit5(out, f, 11, w[g], t[d], lab[d], side_of(d, g))
            emit5(out, f, 12, t[g], w[d], lab[d], side_of(d, g))
            emit4(out, f, 13, w[g], w[d], lab[d])
    if groups & (G_GRANDPARENT | G_LEXICAL):
        for d in range(n):
            g = h[d]
            if g < 0:
                continue
            gg = h[g]
            if groups & G_GRANDPARENT:
                emit6(out, f, 20, NONE if gg < 0 else t[gg], t[g], t[d], lab[g], lab[d])
                if gg >= 0:
                    emit5(out, f, 21, lab[g], lab[d], side_of(d, g), side_of(g, gg))
            if groups & G_LEXICAL and gg >= 0:
                emit4(out, f, 100, t[gg], w[g], w[d])
                emit5(out, f, 101, w[gg], t[g], t[d], lab[d])
    for g in range(n):
        a, c = kid_ptr[g], kid_ptr[g + 1]
        nl = 0
        while a + nl < c and kids[a + nl] < g:
            nl += 1
        nr = c - a - nl
        if groups & (G_SIBLINGS | G_LEXICAL):
            # Left dependents from the head outwards, then right ones; NONE ends each side.
            for side in range(2):
                prev = -1
                prev2 = -1
                for j in range(nl if side == 0 else nr):
                    d = kids[a + nl - 1 - j] if side == 0 else kids[a + nl + j]
                    if groups & G_SIBLINGS:
                        emit5(out, f, 30, t[g], NONE if prev < 0 else t[prev], t[d], LEFT + side)
                        emit5(out, f, 31, t[g], NONE if prev < 0 else lab[prev], lab[d], LEFT + side)
                        if prev2 >= 0:
                            emit6(out, f, 32, t[g], t[prev2], t[prev], t[d], LEFT + side)
                    if groups & G_LEXICAL and prev >= 0:
                        emit4(out, f, 102, t[g], w[prev], w[d])
                    prev2 = prev
                    prev = d
                if groups & G_SIBLINGS:
                    emit5(out, f, 30, t[g], NONE if prev < 0 else t[prev], NONE, LEFT + side)
                    emit5(out, f, 31, t[g], NONE if prev < 0 else lab[prev], NONE, LEFT + side)
        if groups & G_CHILDREN:
            f.clear(); f.push_back(40); f.push_back(t[g]); f.push_back(lab[g])
            emit_production(out, f, lab, kids, a, c, nl)
            f.clear(); f.push_back(41); f.push_back(t[g])
            emit_production(out, f, t, kids, a, c, nl)
            f.clear(); f.push_back(42); f.push_back(w[g])
            emit_production(out, f, lab, kids, a, c, nl)
        if groups & G_VALENCY:
            emit4(out, f, 70, t[g], min(nl, 4), min(nr, 4))
            emit4(out, f, 71, w[g], min(nl, 4), min(nr, 4))
            emit3(out, f, 72, lab[g], min(nl, 4) + min(nr, 4))
    if groups & G_COORDINATION:
        for d in range(n):
            g = h[d]
            if g < 0 or lab[d] != conj:
                continue
            cc_word = NONE
            for j in range(kid_ptr[d], kid_ptr[d + 1]):
                if lab[kids[j]] == cc:
                    cc_word = w[kids[j]]
                    break
            emit4(out, f, 50, t[g], t[d], cc_word)
            emit3(out, f, 51, w[g], w[d])
            emit4(out, f, 52, lab[g], 1 if t[g] == t[d] else 0, cc_word)
            emit4(out, f, 53, t[g], t[d], bucket(d - g))
    if groups & G_PATHS:
        for d in range(n):
            f.clear(); f.push_back(60)
            emit_path(out, f, h, lab, d, 3)
            f.clear(); f.push_back(61); f.push_back(t[d])
            emit_path(out, f, h, lab, d, 4)
        for d in range(n):
            if h[d] < 0:
                emit4(out, f, 62, t[d], w[d], min(n_roots, 3))
    if groups & G_SPANS:
        for d in range(n):
            emit4(out, f, 80, t[d], lab[d], bucket(size[d] - 1))
    if groups & G_EDGES:
        for d in range(n):
            emit5(out, f, 90, t[d], lab[d], BOS if lo[d] == 0 else t[lo[d] - 1],
                  EOS if hi[d] == n - 1 else t[hi[d] + 1])
            emit5(out, f, 91, lab[d], t[lo[d]], t[hi[d]], bucket(hi[d] - lo[d]))
            emit4(out, f, 92, t[d], lab[d], EOS if hi[d] == n - 1 else w[hi[d] + 1])
    return 0


def tree_features(words, tags, heads, labels, int groups, uint64_t conj=0, uint64_t cc=0):
    """The feature keys of k candidate trees of one sentence: (ptr (k + 1), keys (uint64)),
    candidate i's keys being keys[ptr[i]:ptr[i + 1]] (repeats are counts).

    words, tags: (n,) atoms; heads: (k, n) or (n,) head index per token, -1 for a root;
    labels: like heads, the label atom per token; groups: a mask of TREE_GROUPS (group_mask);
    conj, cc: the label atoms of conjuncts and coordinating words.
    """
    cdef const uint64_t[::1] W = numpy.ascontiguousarray(words, dtype=numpy.uint64)
    cdef const uint64_t[::1] T = numpy.ascontiguousarray(tags, dtype=numpy.uint64)
    H2 = numpy.ascontiguousarray(heads, dtype=numpy.int64)
    L2 = numpy.ascontiguousarray(labels, dtype=numpy.uint64)
    if H2.ndim == 1:
        H2, L2 = H2.reshape(1, -1), L2.reshape(1, -1)
    cdef int n = W.shape[0], k = H2.shape[0], i
    if T.shape[0] != n or H2.ndim != 2 or H2.shape[1] != n or L2.shape != H2.shape:
        raise ValueError(f"words, tags ({n},), heads and labels (k, {n}) must agree in length")
    cdef const int64_t[:, ::1] H = H2
    cdef const uint64_t[:, ::1] L = L2
    cdef vector[uint64_t] out, f
    cdef vector[int] kid_ptr, kids, size, lo, hi, order, depth
    ptr = numpy.zeros((k + 1,), dtype=numpy.int64)
    cdef int64_t[::1] P = ptr
    if n:
        out.reserve(<size_t>k * n * 40)
        with nogil:
            for i in range(k):
                one_tree(&W[0], &T[0], &H[i, 0], &L[i, 0], n, groups, conj, cc, out, f, kid_ptr,
                         kids, size, lo, hi, order, depth)
                P[i + 1] = out.size()
    return ptr, as_array(out)


cdef inline uint64_t unit_of(const uint64_t* t, const int* ctype, const int* cstart, int u,
                             int n_units) noexcept nogil:
    if u < 0:
        return BOS
    if u >= n_units:
        return EOS
    return t[cstart[u]] if ctype[u] < 0 else <uint64_t>(1000 + ctype[u])


cdef int one_chunking(const uint64_t* w, const uint64_t* t, const int64_t* cls, int n, int groups,
                      vector[uint64_t]& out, vector[uint64_t]& f, vector[int]& ctype,
                      vector[int]& cstart, vector[int]& cend) except -1 nogil:
    """Units: maximal chunks (B-X I-X*, a stray I-X opens a chunk) and single O tokens."""
    cdef int i = 0, j, u, n_units, typ, length, first, last, prev_chunk
    ctype.clear(); cstart.clear(); cend.clear()
    while i < n:
        if cls[i] < 0:
            with gil:
                raise ValueError(f"chunk classes must be >= 0; got {cls[i]} at {i}")
        if cls[i] == 0:
            ctype.push_back(-1); cstart.push_back(i); cend.push_back(i + 1)
            i += 1
            continue
        typ = (cls[i] - 1) // 2
        j = i + 1
        while j < n and cls[j] == 2 + 2 * typ:
            j += 1
        ctype.push_back(typ); cstart.push_back(i); cend.push_back(j)
        i = j
    n_units = ctype.size()
    cdef const int* ct = ctype.data() if n_units else NULL
    cdef const int* cs = cstart.data() if n_units else NULL
    if groups & C_NGRAMS:
        for u in range(n_units + 1):
            emit3(out, f, 200, unit_of(t, ct, cs, u - 1, n_units), unit_of(t, ct, cs, u, n_units))
            emit4(out, f, 201, unit_of(t, ct, cs, u - 2, n_units), unit_of(t, ct, cs, u - 1, n_units),
                  unit_of(t, ct, cs, u, n_units))
        f.clear(); f.push_back(202)
        for u in range(n_units):
            if ctype[u] >= 0:
                f.push_back(1000 + ctype[u])
            else:
                f.push_back(OUTSIDE)
        emit(out, f)
    prev_chunk = -1
    for u in range(n_units):
        typ = ctype[u]
        if typ < 0:
            continue
        first, last = cstart[u], cend[u] - 1
        length = cend[u] - cstart[u]
        if groups & C_LENGTHS:
            emit3(out, f, 210, 1000 + typ, bucket(length))
            f.clear(); f.push_back(211); f.push_back(1000 + typ)
            for j in range(first, min(last + 1, first + 6)):
                f.push_back(t[j])
            emit(out, f)
        if groups & C_HEADS:
            emit3(out, f, 220, 1000 + typ, w[last])
            emit3(out, f, 221, 1000 + typ, t[last])
            emit3(out, f, 222, 1000 + typ, w[first])
            if prev_chunk >= 0:
                emit5(out, f, 223, 1000 + ctype[prev_chunk], w[cend[prev_chunk] - 1], 1000 + typ, t[last])
                emit5(out, f, 224, 1000 + ctype[prev_chunk], t[cend[prev_chunk] - 1], 1000 + typ, w[last])
        if groups & C_BOUNDARIES:
            emit4(out, f, 230, 1000 + typ, BOS if first == 0 else w[first - 1], w[first])
            emit4(out, f, 231, 1000 + typ, w[last], EOS if last == n - 1 else w[last + 1])
            emit4(out, f, 232, 1000 + typ, BOS if first == 0 else t[first - 1],
                  EOS if last == n - 1 else t[last + 1])
        prev_chunk = u
    return 0


def chunk_features(words, tags, classes, int groups):
    """The feature keys of k candidate chunkings of one sentence: (ptr (k + 1), keys), as
    tree_features. classes: (k, n) or (n,) BIO classes (0 O, 1 + 2t B-t, 2 + 2t I-t)."""
    cdef const uint64_t[::1] W = numpy.ascontiguousarray(words, dtype=numpy.uint64)
    cdef const uint64_t[::1] T = numpy.ascontiguousarray(tags, dtype=numpy.uint64)
    C2 = numpy.ascontiguousarray(classes, dtype=numpy.int64)
    if C2.ndim == 1:
        C2 = C2.reshape(1, -1)
    cdef int n = W.shape[0], k = C2.shape[0], i
    if T.shape[0] != n or C2.ndim != 2 or C2.shape[1] != n:
        raise ValueError(f"words, tags ({n},) and classes (k, {n}) must agree in length")
    cdef const int64_t[:, ::1] C = C2
    cdef vector[uint64_t] out, f
    cdef vector[int] ctype, cstart, cend
    ptr = numpy.zeros((k + 1,), dtype=numpy.int64)
    cdef int64_t[::1] P = ptr
    if n:
        with nogil:
            for i in range(k):
                one_chunking(&W[0], &T[0], &C[i, 0], n, groups, out, f, ctype, cstart, cend)
                P[i + 1] = out.size()
    return ptr, as_array(out)


def hash_pairs(a, b):
    """One nonzero uint64 per position mixing a[i] and b[i] (the tree kernel's node labels:
    a token's tag and its arc label)."""
    cdef const uint64_t[::1] A = numpy.ascontiguousarray(a, dtype=numpy.uint64)
    cdef const uint64_t[::1] B = numpy.ascontiguousarray(b, dtype=numpy.uint64)
    if A.shape[0] != B.shape[0]:
        raise ValueError("hash_pairs needs two arrays of one length")
    out = numpy.empty((A.shape[0],), dtype=numpy.uint64)
    cdef uint64_t[::1] O = out
    cdef Py_ssize_t i
    cdef uint64_t h
    for i in range(A.shape[0]):
        h = mix(mix(FNV, A[i]), B[i])
        O[i] = h if h != 0 else 1
    return out


cdef extern from "<algorithm>" namespace "std" nogil:
    void sort[Iter](Iter first, Iter last)


cdef class KeyWeights:
    """A linear reranker's weights by feature key (an open-addressing hash table), to score
    candidates straight from their keys: ``scores(ptr, keys, distinct)`` is, per candidate i,
    the sum of the weights of keys[ptr[i]:ptr[i + 1]] (each distinct key once if `distinct`:
    indicator features); unknown keys weigh 0. Read-only after construction, so safe to share
    between threads."""
    cdef vector[uint64_t] table_keys
    cdef vector[double] table_values
    cdef uint64_t mask
    cdef bint has_zero
    cdef double zero_value

    def __init__(self, keys, weights):
        cdef const uint64_t[::1] K = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        cdef const double[::1] V = numpy.ascontiguousarray(weights, dtype=numpy.float64)
        if K.shape[0] != V.shape[0]:
            raise ValueError("KeyWeights needs one weight per key")
        cdef uint64_t size = 16, slot
        while size < 2 * <uint64_t>K.shape[0] + 2:
            size *= 2
        self.mask = size - 1
        self.table_keys.assign(size, 0)
        self.table_values.assign(size, 0.0)
        self.has_zero = False
        self.zero_value = 0.0
        cdef Py_ssize_t i
        for i in range(K.shape[0]):
            if K[i] == 0:
                self.has_zero = True
                self.zero_value = V[i]
                continue
            slot = mix(FNV, K[i]) & self.mask
            while self.table_keys[slot] != 0 and self.table_keys[slot] != K[i]:
                slot = (slot + 1) & self.mask
            self.table_keys[slot] = K[i]
            self.table_values[slot] = V[i]

    cdef inline double get(self, uint64_t key) noexcept nogil:
        if key == 0:
            return self.zero_value if self.has_zero else 0.0
        cdef uint64_t slot = mix(FNV, key) & self.mask
        while True:
            if self.table_keys[slot] == key:
                return self.table_values[slot]
            if self.table_keys[slot] == 0:
                return 0.0
            slot = (slot + 1) & self.mask

    def scores(self, ptr, keys, bint distinct=False):
        cdef const int64_t[::1] P = numpy.ascontiguousarray(ptr, dtype=numpy.int64)
        cdef const uint64_t[::1] K = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        cdef Py_ssize_t m = P.shape[0] - 1, i
        cdef int64_t j
        out = numpy.zeros((max(m, 0),), dtype=numpy.float64)
        cdef double[::1] O = out
        cdef double total
        cdef vector[uint64_t] buf
        if m > 0 and (P[0] < 0 or P[m] > K.shape[0]):
            raise ValueError("ptr points outside keys")
        with nogil:
            for i in range(m):
                total = 0.0
                if distinct:
                    buf.clear()
                    for j in range(P[i], P[i + 1]):
                        buf.push_back(K[j])
                    sort(buf.begin(), buf.end())
                    for j in range(<int64_t>buf.size()):
                        if j == 0 or buf[j] != buf[j - 1]:
                            total += self.get(buf[j])
                else:
                    for j in range(P[i], P[i + 1]):
                        total += self.get(K[j])
                O[i] = total
        return out
