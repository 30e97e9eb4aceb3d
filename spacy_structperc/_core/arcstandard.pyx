# cython: infer_types=True
"""Labelled arc-standard dependency parsing as a TransitionSystem.

Actions: SHIFT (0), BREAK (1), LEFT-ARC(l) (2 + 2l) and RIGHT-ARC(l) (3 + 2l) for L labels;
interleaved, so adding a label appends two weight columns and leaves the others in place.
LEFT-ARC attaches s1 to s0 and pops s1; RIGHT-ARC attaches s0 to s1 and pops s0 (Nivre 2004).
BREAK pops s0 as the root of a finished sentence; it is valid only when s0 is alone on the stack,
words remain, and sentence boundaries are not fixed (`allow_break`), so a parser that must find
the sentences itself ends each one with a tree. A bound span always takes 2n - 1 actions, whatever
its sentences, so beam hypotheses stay step-aligned. When the buffer is empty, one item remains
and it is the root; when boundaries are fixed (no BREAK), every span gets exactly one root.

States are one memcpy-able blob: a `ParseStateC` header followed by nine int arrays of the
bound span's length (stack, head, label, leftmost / second-leftmost / rightmost /
second-rightmost child, left / right valency). Copying costs 36 bytes per token, which for
sentences is a few hundred nanoseconds: lookahead and the beam copy states freely.

Labels and search. With L labels there are 2 + 2L actions (about 100 for UD English), so an
exhaustive depth-2 lookahead would score ~10^6 leaves per decision. `label_candidates = k`
prunes each state's actions to SHIFT, BREAK and the k best-scoring labels of each arc direction
(the others score -inf), after the state's full scores are computed. The search therefore
branches over "unlabelled" moves, each carrying its best label(s): depth 2 with k = 1 costs
1 + 3 + 9 = 13 state scorings per decision, as in tsuruoka2011's unlabelled parser. The labels
are still chosen by the full model, at the node where the arc is built. While training, the gold
action of a state is never pruned, so the margin update can always compare it with the best
competitor (and the beam can always follow it). k = 0 searches every label.

Features (Zhang & Nivre 2011; Huang & Sagae 2010) are conjunctions of (position, attribute)
parts: positions s0-s2, q0-q2, the leftmost / rightmost (and second) children of s0 and s1, and
the s0-s1 distance; attributes are atom-table columns (word, tag, ...) or structural (arc label,
left / right valency). A position that does not exist reads a per-position NONE value, so
"s2 is empty" is a feature; an absent atom (0) fires no feature, as in templates.pyx.
"""
from libc.stdlib cimport calloc, malloc, free
from libc.string cimport memcpy, memmove, memset
from libc.math cimport INFINITY
import numpy

from .typedefs cimport hash_t, atom_t, weight_t
from .templates cimport MAX_PARTS, hash_combine, mix64
from .templates import _seed
from .transition cimport TransitionSystem
from .weights cimport AveragedWeights

ADDRESSES = {"s0": ADDR_S0, "s1": ADDR_S1, "s2": ADDR_S2, "q0": ADDR_Q0, "q1": ADDR_Q1,
             "q2": ADDR_Q2, "s0l": ADDR_S0L, "s0r": ADDR_S0R, "s0l2": ADDR_S0L2,
             "s0r2": ADDR_S0R2, "s1l": ADDR_S1L, "s1r": ADDR_S1R, "s1l2": ADDR_S1L2,
             "s1r2": ADDR_S1R2, "dist": ADDR_DIST, "q0l": ADDR_Q0L, "q0l2": ADDR_Q0L2,
             "dist0": ADDR_DIST0, "q-1": ADDR_QM1}
DISTANCES = ("dist", "dist0")
SYSTEMS = ("arc-standard", "arc-hybrid")
STRUCTURAL = {"dep": ATTR_DEP, "vl": ATTR_VL, "vr": ATTR_VR, "ls": ATTR_LSET, "rs": ATTR_RSET}

cdef enum:
    A_STACK, A_HEAD, A_LABEL, A_LC1, A_LC2, A_RC1, A_RC2, A_NL, A_NR
    A_LSET, A_RSET   # the labels of a token's left / right children, as bits (label id mod 32)
    N_ARRAYS

cdef enum:
    M_SHIFT, M_BREAK, M_LEFT, M_RIGHT   # arc-hybrid's moves, for _move_costs

cdef hash_t NONE_VALUE = 0x6a09e667f3bcc909ULL
DEF CACHE_SIZE = 256


cdef class ParseTemplates:
    def __cinit__(self, specs, atom_names):
        """specs: [{"name": str, "parts": [[position, attribute], ...]}, ...]; a template with
        no parts is the bias. Positions: s0 s1 s2 q0 q1 q2 s0l s0r s0l2 s0r2 s1l s1r s1l2 s1r2,
        q0l q0l2, q-1 (the token before q0), ["dist", "s0s1"] and ["dist0", "s0q0"]. Attributes: an atom name, or dep / vl / vr."""
        self.atom_names = list(atom_names)
        self.specs = [dict(name=str(s["name"]), parts=[list(p) for p in s["parts"]]) for s in specs]
        col_of = {name: j for j, name in enumerate(self.atom_names)}
        self.n = len(self.specs)
        self.c = <ParseTemplateC*>calloc(max(1, self.n), sizeof(ParseTemplateC))
        if self.c == NULL:
            raise MemoryError()
        for t, spec in enumerate(self.specs):
            parts = spec["parts"]
            if len(parts) > MAX_PARTS:
                raise ValueError(f"template {spec['name']!r} has {len(parts)} parts; at most {MAX_PARTS}")
            self.c[t].seed = _seed(t, spec["name"])
            self.c[t].n_parts = len(parts)
            for p, part in enumerate(parts):
                if len(part) != 2:
                    raise ValueError(f"template {spec['name']!r}: part {part!r} is not a pair")
                where, what = part
                if where not in ADDRESSES:
                    raise ValueError(f"template {spec['name']!r}: unknown position {where!r}; "
                                     f"expected one of {sorted(ADDRESSES)}")
                self.c[t].addr[p] = ADDRESSES[where]
                if where in DISTANCES:
                    self.c[t].attr[p] = ATTR_DIST
                elif what in STRUCTURAL:
                    self.c[t].attr[p] = STRUCTURAL[what]
                elif what in col_of:
                    self.c[t].attr[p] = col_of[what]
                else:
                    raise ValueError(f"template {spec['name']!r}: unknown attribute {what!r}")
        # The extraction order (see arcstandard.pxd): templates grouped by what they read,
        # in their own order within a group; each keeps its seed, so keys do not change.
        groups = [_template_group(spec["parts"]) for spec in self.specs]
        ordered = sorted(range(self.n), key=lambda t: (groups[t], t))
        self.order = <int*>calloc(max(1, self.n), sizeof(int))
        if self.order == NULL:
            raise MemoryError()
        for k, t in enumerate(ordered):
            self.order[k] = t
        self.n_queue = groups.count(0)
        self.n_s0_queue = self.n_queue + groups.count(1)

    def __dealloc__(self):
        free(self.c)
        free(self.order)


_QUEUE = {"q-1", "q0", "q1", "q2"}   # what the buffer position alone decides


def _template_group(parts) -> int:
    """0: reads only the queue's atoms (or nothing: the bias); 1: only s0's atoms and the
    queue's; 2: anything else (s1, s2, children, labels, valency, distance)."""
    if any(where in DISTANCES or what in STRUCTURAL for where, what in parts):
        return 2
    positions = {where for where, _ in parts}
    if positions <= _QUEUE:
        return 0
    if positions <= _QUEUE | {"s0"}:
        return 1
    return 2


cdef inline hash_t _combine(hash_t h, hash_t v) noexcept nogil:
    # One multiply per part: atoms are hashes already, and each key gets a full mix64 at the
    # end, so this only has to keep (part order, value) apart. Half the cost of hash_combine,
    # and extraction is a third of a scoring.
    return (h ^ v) * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL


cdef inline int _dist_bucket(int d) noexcept nogil:
    if d < 5:
        return d
    if d < 10:
        return 5
    return 6


cdef inline bint _contains(const hash_t* keys, Py_ssize_t n, hash_t key) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo < n and keys[lo] == key


cdef enum:
    NEG = -(1 << 28)   # an impossible table entry


cdef inline int _max(int a, int b) noexcept nogil:
    return a if a > b else b


cdef int _most_kept(const int* units, int N, int P, const int* gold, bint forest, int* work) noexcept nogil:
    """The most known gold heads that the live tokens `units` (the stack's P, bottom first, then
    the buffer's, in order) can still get, over every completion of arc-standard from there.

    The trees reachable from such a configuration are the projective trees over the units (each
    stack item stands for the subtree it has built) in which every arc between two stack units
    has its right end dominating the stack's top: an item below the top can take an arc from
    the stack only once everything above it has become its descendant. (Necessary, as every
    arc-standard arc joins the two topmost items; sufficient, as the tests find by search.) So
    this is Eisner's algorithm with two bits: on a head's left half, whether it has such an
    arc, so its right half must reach the top; on an arc's dependent, whether its right half
    does. A root scores when its gold head is -1. `forest` (BREAK): a tree holding the whole
    stack, then any sequence of trees over the rest. `work`: 9 N^2 + N + 1 ints."""
    cdef int NN = N * N, top = P - 1, s, t, w, r, m, u, c, c2, v, a, x, ft, f, rch, e
    cdef int a_st, a_ts, best, tree
    if N == 0:
        return 0
    # CR[s, t]: head s over s..t, right half. CL[f][s, t]: head t over s..t, left half, f: t has
    # an arc to a stack unit on its left (t must reach the top). IR[f][s, t]: arc s -> t with
    # t's left half, f: t must reach the top. IL[f][rch][s, t]: arc t -> s with s's right half,
    # f: t must reach the top, rch: s's right half reaches the top.
    cdef int* CR = work
    cdef int* CL = work + NN
    cdef int* IR = work + 3 * NN
    cdef int* IL = work + 5 * NN
    cdef int* F = work + 9 * NN
    for s in range(N):
        CR[s * N + s] = 0
        CL[s * N + s] = 0
        CL[NN + s * N + s] = NEG
    for w in range(1, N):
        for s in range(N - w):
            t = s + w
            a_st = gold[units[t]] == units[s]
            a_ts = gold[units[s]] == units[t]
            IR[s * N + t] = IR[NN + s * N + t] = NEG
            for f in range(4):
                IL[f * NN + s * N + t] = NEG
            for r in range(s, t):
                a = CR[s * N + r]
                if a == NEG:
                    continue
                rch = r >= top
                for ft in range(2):
                    x = CL[ft * NN + (r + 1) * N + t]
                    if x == NEG:
                        continue
                    f = ft or t < top
                    v = a + x + a_st
                    if v > IR[f * NN + s * N + t]:
                        IR[f * NN + s * N + t] = v
                    v = a + x + a_ts
                    if v > IL[(2 * f + rch) * NN + s * N + t]:
                        IL[(2 * f + rch) * NN + s * N + t] = v
            best = NEG
            for m in range(s + 1, t + 1):
                c = CR[m * N + t]
                if c == NEG:
                    continue
                x = IR[s * N + m]
                if x != NEG and x + c > best:
                    best = x + c
                if t >= top:
                    x = IR[NN + s * N + m]
                    if x != NEG and x + c > best:
                        best = x + c
            CR[s * N + t] = best
            for f in range(2):
                best = NEG
                for m in range(s, t):
                    for rch in range(2):
                        x = IL[(2 * f + rch) * NN + m * N + t]
                        if x == NEG:
                            continue
                        a = CL[s * N + m]
                        if rch:
                            a = _max(a, CL[NN + s * N + m])
                        if a != NEG and a + x > best:
                            best = a + x
                CL[f * NN + s * N + t] = best
    if not forest:
        return _tree(CR, CL, units, N, top, gold, 0, N)
    F[N] = 0
    for c in range(N - 1, P - 1, -1):
        F[c] = NEG
        for c2 in range(c + 1, N + 1):
            tree = _tree(CR, CL, units, N, top, gold, c, c2)
            if tree != NEG and F[c2] != NEG and tree + F[c2] > F[c]:
                F[c] = tree + F[c2]
    if P == 0:
        return F[0]
    best = NEG
    for c in range(P, N + 1):
        tree = _tree(CR, CL, units, N, top, gold, 0, c)
        if tree != NEG and F[c] != NEG and tree + F[c] > best:
            best = tree + F[c]
    return best


cdef int _tree(const int* CR, const int* CL, const int* units, int N, int top, const int* gold,
               int s, int e) noexcept nogil:
    """The best single tree over units s..e-1 (from _most_kept's tables), its root included."""
    cdef int u, a, best = NEG, NN = N * N
    for u in range(s, e):
        if CR[u * N + e - 1] == NEG:
            continue
        a = CL[s * N + u]
        if e - 1 >= top:
            a = _max(a, CL[NN + s * N + u])
        if a != NEG and a + CR[u * N + e - 1] + (gold[units[u]] == -1) > best:
            best = a + CR[u * N + e - 1] + (gold[units[u]] == -1)
    return best


cdef class ArcStandardSystem(TransitionSystem):
    """Labelled arc-standard transitions over one bound span (a sentence, or a whole Doc); with
    system="arc-hybrid", arc-hybrid transitions (Kuhlmann et al. 2011) and their dynamic oracle
    (Goldberg and Nivre 2013): see action_costs."""

    def __init__(self, ParseTemplates templates, AveragedWeights weights, int n_labels,
                 int label_candidates=1, str system="arc-standard"):
        if system not in SYSTEMS:
            raise ValueError(f"system must be one of {SYSTEMS}, got {system!r}")
        self.hybrid = system == "arc-hybrid"
        self.eager_break = True
        if n_labels < 1:
            raise ValueError(f"n_labels must be >= 1, got {n_labels}")
        if weights.n_classes != N_FIXED_ACTIONS + 2 * n_labels:
            raise ValueError(f"weights have {weights.n_classes} classes; {n_labels} labels need "
                             f"{N_FIXED_ACTIONS + 2 * n_labels}")
        if label_candidates < 0:
            raise ValueError(f"label_candidates must be >= 0, got {label_candidates}")
        self.templates = templates
        self.weights = weights
        self.n_labels = n_labels
        self.n_actions = N_FIXED_ACTIONS + 2 * n_labels
        self.label_candidates = label_candidates
        self.max_features = templates.n + 1
        self.n_cols = len(templates.atom_names)
        self._keys = <hash_t*>calloc(self.max_features, sizeof(hash_t))
        self.cache_sig = <hash_t*>calloc(CACHE_SIZE, sizeof(hash_t))
        self.cache_version = <int64_t*>calloc(CACHE_SIZE, sizeof(int64_t))
        self.cache_scores = <weight_t*>calloc(CACHE_SIZE * self.n_actions, sizeof(weight_t))
        self.prefix_q = <weight_t*>calloc(self.n_actions, sizeof(weight_t))
        self.prefix_qs0 = <weight_t*>calloc(self.n_actions, sizeof(weight_t))
        if not (self._keys and self.cache_sig and self.cache_version and self.cache_scores
                and self.prefix_q and self.prefix_qs0):
            raise MemoryError()
        for i in range(CACHE_SIZE):
            self.cache_version[i] = -1
        self.set_sentence(numpy.zeros((0, self.n_cols), dtype=numpy.uint64))

    def __dealloc__(self):
        free(self._keys)
        free(self.cache_sig)
        free(self.cache_version)
        free(self.cache_scores)
        free(self.prefix_q)
        free(self.prefix_qs0)

    def set_sentence(self, atoms, heads=None, labels=None, bint allow_break=False):
        """Bind a span: atoms (n, n_cols) uint64; gold heads (index in the span, -1 for a root,
        -2 unknown) and gold label ids (-1 unknown), both optional; allow_break lets the parser
        split the span into sentences (BREAK)."""
        atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
        if atoms.ndim != 2 or atoms.shape[1] != self.n_cols:
            raise ValueError(f"atoms must have shape (n_tokens, {self.n_cols}), got {atoms.shape}")
        cdef int n = atoms.shape[0]
        if heads is not None:
            self._bind_gold(heads, labels, n)   # checked before anything changes
        cdef const atom_t[:, ::1] a = atoms
        self.bind(&a[0, 0] if n else NULL, n, allow_break)
        self._atoms = atoms
        if heads is None:
            # Prediction: no gold to check, and the oracle's arrays are never read.
            self._gold_heads = self._gold_labels = self._gold_kids = None
        else:
            self.has_gold = True
            self._point_at_gold()

    cdef void bind(self, const atom_t* atoms, int n, bint allow_break) noexcept nogil:
        """Bind n tokens' atoms (n x n_cols, owned by the caller and kept alive while bound)
        for prediction, without gold. The Python-side references are the caller's to set."""
        self.atoms = atoms if n else NULL
        self.has_gold = False
        self.gold_heads = self.gold_labels = self.gold_kids = NULL
        self.partial_gold = False
        self.n_tokens = n
        self.allow_break = allow_break
        self.complete_gold = False
        self.prefix_buf = -1
        self.state_size = sizeof(ParseStateC) + N_ARRAYS * max(n, 1) * sizeof(int)

    cdef int apply(self, const int* actions, int n_actions, char* state) noexcept nogil:
        """Apply `actions` from the initial state in `state` (state_size bytes); return 0 when
        they are valid and complete the parse, else -1 - the step of the first invalid action,
        or -1 - n_actions when the parse is incomplete."""
        cdef int t
        self.init_state(state)
        for t in range(n_actions):
            if not self.is_valid(state, actions[t]):
                return -1 - t
            self.transition(state, actions[t])
        if not self.is_final(state):
            return -1 - n_actions
        return 0

    def _bind_gold(self, heads, labels, int n):
        heads = numpy.ascontiguousarray(heads, dtype=numpy.int32)
        labels = numpy.ascontiguousarray(
            labels if labels is not None else numpy.full((n,), -1), dtype=numpy.int32)
        if heads.shape != (n,) or labels.shape != (n,):
            raise ValueError(f"gold heads and labels must have shape ({n},)")
        if n and (heads.min() < -2 or heads.max() >= n or (heads == numpy.arange(n)).any()):
            raise ValueError("gold heads must be token indices in the span (not the token "
                             "itself), -1 for a root or -2 for unknown")
        if n and (labels.min() < -1 or labels.max() >= self.n_labels):
            raise ValueError("gold labels must be -1 (unknown) or a label id")
        kids = numpy.bincount(heads[heads >= 0], minlength=n).astype(numpy.int32) if n else \
            numpy.zeros((0,), dtype=numpy.int32)
        self._gold_heads, self._gold_labels, self._gold_kids = heads, labels, kids

    def _point_at_gold(self):
        cdef const int[::1] h = self._gold_heads
        cdef const int[::1] l = self._gold_labels
        cdef const int[::1] k = self._gold_kids
        cdef int n = self.n_tokens
        self.gold_heads = &h[0] if n else NULL
        self.gold_labels = &l[0] if n else NULL
        self.gold_kids = &k[0] if n else NULL
        self.partial_gold = n > 0 and bool((numpy.asarray(h) == -2).any())

    cdef int* arr(self, const void* state, int k) noexcept nogil:
        return (<int*>(<char*>state + sizeof(ParseStateC))) + k * self.n_tokens

    # The TransitionSystem interface ------------------------------------------------------------

    cdef void init_state(self, void* state) noexcept nogil:
        cdef ParseStateC* st = <ParseStateC*>state
        cdef int n = self.n_tokens
        st.n_stack = 0
        st.buf = 0
        if n == 0:
            return
        memset(self.arr(state, A_STACK), 0, n * sizeof(int))
        memset(self.arr(state, A_HEAD), 0xff, 6 * n * sizeof(int))   # head, label, lc1..rc2: -1
        memset(self.arr(state, A_NL), 0, 4 * n * sizeof(int))   # valencies and label sets: 0

    cdef bint is_final(self, const void* state) noexcept nogil:
        cdef const ParseStateC* st = <const ParseStateC*>state
        return st.buf >= self.n_tokens and st.n_stack <= 1

    cdef bint is_valid(self, const void* state, int action) noexcept nogil:
        cdef const ParseStateC* st = <const ParseStateC*>state
        if action == SHIFT:
            return st.buf < self.n_tokens
        if action == BREAK:
            return self.allow_break and st.n_stack == 1 and st.buf < self.n_tokens
        if self.hybrid and (action - N_FIXED_ACTIONS) % 2 == 0:
            return st.n_stack >= 1 and st.buf < self.n_tokens   # LEFT-ARC: s0 <- q0
        return st.n_stack >= 2

    @property
    def system(self):
        return "arc-hybrid" if self.hybrid else "arc-standard"

    cdef void transition(self, void* state, int action) noexcept nogil:
        cdef ParseStateC* st = <ParseStateC*>state
        cdef int* stack = self.arr(state, A_STACK)
        cdef int s0, s1, label, L = self.n_labels
        if action == SHIFT:
            stack[st.n_stack] = st.buf
            st.n_stack += 1
            st.buf += 1
        elif action == BREAK:
            st.n_stack -= 1
        elif self.hybrid and (action - N_FIXED_ACTIONS) % 2 == 0:
            # arc-hybrid LEFT-ARC: s0 <- q0; s0 lies left of every earlier left child of q0
            # (those were above it on the stack).
            label = (action - N_FIXED_ACTIONS) // 2
            s0 = stack[st.n_stack - 1]
            self.arr(state, A_HEAD)[s0] = st.buf
            self.arr(state, A_LABEL)[s0] = label
            self.arr(state, A_LC2)[st.buf] = self.arr(state, A_LC1)[st.buf]
            self.arr(state, A_LC1)[st.buf] = s0
            self.arr(state, A_NL)[st.buf] += 1
            self.arr(state, A_LSET)[st.buf] |= 1 << (label & 31)
            st.n_stack -= 1
        elif (action - N_FIXED_ACTIONS) % 2 == 0:
            # LEFT-ARC: s1 <- s0; s1 lies left of every earlier left child of s0.
            label = (action - N_FIXED_ACTIONS) // 2
            s0 = stack[st.n_stack - 1]
            s1 = stack[st.n_stack - 2]
            self.arr(state, A_HEAD)[s1] = s0
            self.arr(state, A_LABEL)[s1] = label
            self.arr(state, A_LC2)[s0] = self.arr(state, A_LC1)[s0]
            self.arr(state, A_LC1)[s0] = s1
            self.arr(state, A_NL)[s0] += 1
            self.arr(state, A_LSET)[s0] |= 1 << (label & 31)
            stack[st.n_stack - 2] = s0
            st.n_stack -= 1
        else:
            # RIGHT-ARC: s1 -> s0; s0 lies right of every earlier right child of s1.
            label = (action - N_FIXED_ACTIONS) // 2
            s0 = stack[st.n_stack - 1]
            s1 = stack[st.n_stack - 2]
            self.arr(state, A_HEAD)[s0] = s1
            self.arr(state, A_LABEL)[s0] = label
            self.arr(state, A_RC2)[s1] = self.arr(state, A_RC1)[s1]
            self.arr(state, A_RC1)[s1] = s0
            self.arr(state, A_NR)[s1] += 1
            self.arr(state, A_RSET)[s1] |= 1 << (label & 31)
            st.n_stack -= 1

    cdef void resolve(self, const void* state, int* tok) noexcept nogil:
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int n = self.n_tokens, k = st.n_stack
        tok[ADDR_S0] = stack[k - 1] if k >= 1 else -1
        tok[ADDR_S1] = stack[k - 2] if k >= 2 else -1
        tok[ADDR_S2] = stack[k - 3] if k >= 3 else -1
        tok[ADDR_Q0] = st.buf if st.buf < n else -1
        tok[ADDR_Q1] = st.buf + 1 if st.buf + 1 < n else -1
        tok[ADDR_Q2] = st.buf + 2 if st.buf + 2 < n else -1
        tok[ADDR_QM1] = st.buf - 1 if st.buf >= 1 else -1
        cdef int s0 = tok[ADDR_S0], s1 = tok[ADDR_S1]
        if s0 >= 0:
            tok[ADDR_S0L] = self.arr(state, A_LC1)[s0]
            tok[ADDR_S0L2] = self.arr(state, A_LC2)[s0]
            tok[ADDR_S0R] = self.arr(state, A_RC1)[s0]
            tok[ADDR_S0R2] = self.arr(state, A_RC2)[s0]
        else:
            tok[ADDR_S0L] = tok[ADDR_S0L2] = tok[ADDR_S0R] = tok[ADDR_S0R2] = -1
        if s1 >= 0:
            tok[ADDR_S1L] = self.arr(state, A_LC1)[s1]
            tok[ADDR_S1L2] = self.arr(state, A_LC2)[s1]
            tok[ADDR_S1R] = self.arr(state, A_RC1)[s1]
            tok[ADDR_S1R2] = self.arr(state, A_RC2)[s1]
            tok[ADDR_DIST] = _dist_bucket(s0 - s1)
        else:
            tok[ADDR_S1L] = tok[ADDR_S1L2] = tok[ADDR_S1R] = tok[ADDR_S1R2] = -1
            tok[ADDR_DIST] = -1
        if tok[ADDR_Q0] >= 0:
            tok[ADDR_Q0L] = self.arr(state, A_LC1)[tok[ADDR_Q0]]
            tok[ADDR_Q0L2] = self.arr(state, A_LC2)[tok[ADDR_Q0]]
        else:
            tok[ADDR_Q0L] = tok[ADDR_Q0L2] = -1
        tok[ADDR_DIST0] = _dist_bucket(tok[ADDR_Q0] - s0) if s0 >= 0 and tok[ADDR_Q0] >= 0 else -1

    cdef int features(self, const void* state, hash_t* keys) noexcept nogil:
        # The keys updates are made on: with an allowed set (see set_allowed_keys), only those.
        cdef int n = self.extract(state, keys)
        cdef int i, m = 0
        if self.allowed == NULL:
            return n
        for i in range(n):
            if _contains(self.allowed, self.n_allowed, keys[i]):
                keys[m] = keys[i]
                m += 1
        return m

    cdef int extract(self, const void* state, hash_t* keys) noexcept nogil:
        cdef int tok[N_ADDR]
        if self.n_tokens == 0:
            return 0
        self.resolve(state, tok)
        return self._extract_range(state, tok, 0, self.templates.n, keys)

    cdef int _extract_range(self, const void* state, const int* tok, int lo, int hi, hash_t* keys) noexcept nogil:
        # The keys of templates order[lo:hi] (see ParseTemplates), tok resolved for `state`.
        cdef int k, p, i, attr, n = 0
        cdef hash_t h, value
        cdef const ParseTemplateC* tpl
        cdef const int* labels = self.arr(state, A_LABEL)
        cdef const int* nl = self.arr(state, A_NL)
        cdef const int* nr = self.arr(state, A_NR)
        for k in range(lo, hi):
            tpl = &self.templates.c[self.templates.order[k]]
            h = tpl.seed
            for p in range(tpl.n_parts):
                i = tok[tpl.addr[p]]
                attr = tpl.attr[p]
                if i < 0:
                    value = NONE_VALUE + <hash_t>tpl.addr[p]
                elif attr >= 0:
                    value = self.atoms[i * self.n_cols + attr]
                    if value == 0:
                        break
                elif attr == ATTR_DEP:
                    value = <hash_t>(labels[i] + 2)
                elif attr == ATTR_VL:
                    value = <hash_t>(nl[i] + 1)
                elif attr == ATTR_VR:
                    value = <hash_t>(nr[i] + 1)
                elif attr == ATTR_LSET:
                    value = <hash_t>(<unsigned int>self.arr(state, A_LSET)[i]) + 1
                elif attr == ATTR_RSET:
                    value = <hash_t>(<unsigned int>self.arr(state, A_RSET)[i]) + 1
                else:   # ATTR_DIST: tok holds the bucket
                    value = <hash_t>(i + 1)
                h = _combine(h, value)
            else:
                keys[n] = mix64(h) | 1
                n += 1
        return n

    cdef int forced_action(self, const void* state) noexcept nogil:
        # SHIFT onto an empty stack, or onto one item where the sentence cannot end (BREAK).
        cdef const ParseStateC* st = <const ParseStateC*>state
        if st.buf < self.n_tokens and (st.n_stack == 0 or (st.n_stack == 1 and not self.allow_break
                                                            and not self.hybrid)):
            return SHIFT
        return -1

    cdef void score(self, const void* state, weight_t* scores) noexcept nogil:
        self._score(state, scores, True)

    cdef void score_argmax(self, const void* state, weight_t* scores) noexcept nogil:
        # Without gold, pruning labels (label_candidates) changes no best action: it keeps the
        # best of each direction and all that tie with it. So greedy decoding skips it, and the
        # cache, which serves lookahead's states scored again (a greedy parse scores each once).
        self._score(state, scores, self.has_gold)

    cdef void _score(self, const void* state, weight_t* scores, bint search) noexcept nogil:
        # search: prune labels and keep scores in the cache, as lookahead and the beam need.
        cdef int a, n, g, L = self.n_labels
        cdef weight_t keep_gold = 0, keep_arc = 0
        cdef int g2
        cdef hash_t sig = 0x84222325cbf29ce4ULL
        cdef int slot
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef bint right_ok = st.n_stack >= 2
        cdef bint left_ok = (st.n_stack >= 1 and st.buf < self.n_tokens) if self.hybrid else right_ok
        if not search and not left_ok and not right_ok:
            # Only SHIFT and BREAK can be valid: their two columns are all that is read (the
            # arcs' scores are -inf below).
            self._score_moves_greedy(state, scores)
        elif not search:
            self._score_greedy(state, scores)
        else:
            n = self.extract(state, self._keys)
            for a in range(n):
                sig = _combine(sig, self._keys[a])
            slot = <int>(mix64(sig) & (CACHE_SIZE - 1))
            if self.cache_sig[slot] == sig and self.cache_version[slot] == self.weights.version:
                memcpy(scores, &self.cache_scores[slot * self.n_actions], self.n_actions * sizeof(weight_t))
            else:
                memset(scores, 0, self.n_actions * sizeof(weight_t))
                self.weights.add_rows(self._keys, n, scores)
                memcpy(&self.cache_scores[slot * self.n_actions], scores, self.n_actions * sizeof(weight_t))
                self.cache_sig[slot] = sig
                self.cache_version[slot] = self.weights.version
        if not self.is_valid(state, SHIFT):
            scores[SHIFT] = -INFINITY
        if not self.is_valid(state, BREAK):
            scores[BREAK] = -INFINITY
        elif not self.has_gold:
            scores[BREAK] += self.break_bias
        if not left_ok:
            for a in range(N_FIXED_ACTIONS, self.n_actions, 2):
                scores[a] = -INFINITY
        if not right_ok:
            for a in range(N_FIXED_ACTIONS + 1, self.n_actions, 2):
                scores[a] = -INFINITY
        if self.has_gold:
            self.mask_inconsistent(state, scores)
        if not left_ok and not right_ok:
            return
        if search and self.label_candidates > 0 and self.label_candidates < L:
            g = self.gold_action(state) if self.has_gold else -1
            g2 = self._gold_arc(state) if self.has_gold and self.keep_gold_arcs else -1
            # The gold action survives pruning: set it aside and put it back afterwards.
            if g >= N_FIXED_ACTIONS:
                keep_gold = scores[g]
            if g2 >= N_FIXED_ACTIONS:
                keep_arc = scores[g2]
            self.prune(scores, N_FIXED_ACTIONS, self.label_candidates)
            self.prune(scores, N_FIXED_ACTIONS + 1, self.label_candidates)
            if g >= N_FIXED_ACTIONS:
                scores[g] = keep_gold
            if g2 >= N_FIXED_ACTIONS:
                scores[g2] = keep_arc

    cdef int _gold_arc(self, const void* state) noexcept nogil:
        """The arc between s0 and s1 that is a gold arc, with its gold label (arc-standard), or -1:
        off the gold derivation it may cost nothing although the static oracle would not take it
        yet (a dependent whose missing children are lost already), so training with exploration
        keeps it through label pruning, as the static oracle's action is kept."""
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int s0, s1
        if self.hybrid or st.n_stack < 2:
            return -1
        s0 = stack[st.n_stack - 1]
        s1 = stack[st.n_stack - 2]
        if self.gold_heads[s1] == s0 and self.gold_labels[s1] >= 0:
            return N_FIXED_ACTIONS + 2 * self.gold_labels[s1]
        if self.gold_heads[s0] == s1 and self.gold_labels[s0] >= 0:
            return N_FIXED_ACTIONS + 2 * self.gold_labels[s0] + 1
        return -1

    cdef int _from_kept(self, int buf, int s0, int m, weight_t* scores) noexcept nogil:
        # scores[:m] = the longest kept partial sum that holds for this buffer position and s0
        # (zeros when none does); returns where extraction continues (in template order).
        cdef size_t size = m * sizeof(weight_t)
        if self.prefix_buf == buf and self.prefix_version == self.weights.version:
            if self.prefix_s0 == s0:
                memcpy(scores, self.prefix_qs0, size)
                return self.templates.n_s0_queue
            memcpy(scores, self.prefix_q, size)
            return self.templates.n_queue
        memset(scores, 0, size)
        return 0

    cdef void _score_greedy(self, const void* state, weight_t* scores) noexcept nogil:
        # All actions' scores, the rows added in extraction order as add_rows does: the queue
        # templates' rows first, then s0's, then the rest. The first two partial sums are kept
        # and reused while what they read stays (the buffer position; and s0: after a LEFT-ARC),
        # so an arc's next state looks up only the rest. Sums are the same to the bit either way.
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef int tok[N_ADDR]
        cdef int n, lo
        cdef size_t size = self.n_actions * sizeof(weight_t)
        self.resolve(state, tok)
        lo = self._from_kept(st.buf, tok[ADDR_S0], self.n_actions, scores)
        if lo < self.templates.n_queue:
            n = self._extract_range(state, tok, 0, self.templates.n_queue, self._keys)
            self.weights.add_rows(self._keys, n, scores)
            memcpy(self.prefix_q, scores, size)
        if lo < self.templates.n_s0_queue:
            n = self._extract_range(state, tok, self.templates.n_queue, self.templates.n_s0_queue, self._keys)
            self.weights.add_rows(self._keys, n, scores)
            memcpy(self.prefix_qs0, scores, size)
            self.prefix_buf = st.buf
            self.prefix_s0 = tok[ADDR_S0]
            self.prefix_version = self.weights.version
        n = self._extract_range(state, tok, self.templates.n_s0_queue, self.templates.n, self._keys)
        self.weights.add_rows(self._keys, n, scores)

    cdef void _score_moves_greedy(self, const void* state, weight_t* scores) noexcept nogil:
        # SHIFT's and BREAK's scores (fewer than two items on the stack), started from the kept
        # partial sums where they hold (an arc that left one item: the buffer, and after a
        # LEFT-ARC s0, are where they were), as _score_greedy does for every action.
        cdef int tok[N_ADDR]
        cdef int n, lo
        if self.n_tokens == 0:
            memset(scores, 0, N_FIXED_ACTIONS * sizeof(weight_t))
            return
        self.resolve(state, tok)
        lo = self._from_kept((<const ParseStateC*>state).buf, tok[ADDR_S0], N_FIXED_ACTIONS, scores)
        n = self._extract_range(state, tok, lo, self.templates.n, self._keys)
        self.weights.score_prefix(self._keys, n, N_FIXED_ACTIONS, scores)

    cdef void prune(self, weight_t* scores, int start, int keep) noexcept nogil:
        """Keep the `keep` best of the arc actions start, start + 2, ... (one direction);
        ties with the last kept stay."""
        cdef int a, j
        cdef int stop = N_FIXED_ACTIONS + 2 * self.n_labels
        cdef weight_t threshold = INFINITY, best
        for j in range(keep):
            best = -INFINITY
            for a in range(start, stop, 2):
                if scores[a] < threshold and scores[a] > best:
                    best = scores[a]
            if best == -INFINITY:
                return   # fewer than `keep` distinct values: nothing to prune
            threshold = best
        for a in range(start, stop, 2):
            if scores[a] < threshold:
                scores[a] = -INFINITY

    cdef int gold_action(self, const void* state) noexcept nogil:
        """The static oracle: reduce as soon as a dependent has all its own dependents.

        With missing heads (-2) it answers only what the known heads decide, and -1 (unknown:
        no update) otherwise: an arc between s0 and s1 when either head is missing; a reduction
        that could strand a dependent whose head is missing (s2 for LEFT-ARC, the next buffer
        token for RIGHT-ARC and BREAK); SHIFT when an arc could still be right."""
        if not self.has_gold:
            return -1
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef const int* nl = self.arr(state, A_NL)
        cdef const int* nr = self.arr(state, A_NR)
        cdef int s0, s1, label, h
        cdef int moves[4]
        if self.hybrid:
            # The first move that loses no known arc, in the order LEFT-ARC, RIGHT-ARC, BREAK,
            # SHIFT: on the gold tree's path, its canonical derivation. Unknown (-1) where that
            # move's dependent has a missing head or label.
            self._move_costs(state, moves)
            s0 = stack[st.n_stack - 1] if st.n_stack >= 1 else -1
            h = self.gold_heads[s0] if s0 >= 0 else -3
            if moves[M_LEFT] == 0 and h == st.buf:
                label = self.gold_labels[s0]
                return N_FIXED_ACTIONS + 2 * label if label >= 0 else -1
            if moves[M_RIGHT] == 0 and h == stack[st.n_stack - 2]:
                label = self.gold_labels[s0]
                return N_FIXED_ACTIONS + 2 * label + 1 if label >= 0 else -1
            if moves[M_BREAK] == 0 and h == -1:
                return BREAK
            if h == -2 and (moves[M_LEFT] == 0 or moves[M_RIGHT] == 0 or moves[M_BREAK] == 0):
                return -1   # s0's missing head may be q0, s1 or none
            if moves[M_SHIFT] == 0:
                return SHIFT
            return -1
        if st.n_stack >= 2:
            s0 = stack[st.n_stack - 1]
            s1 = stack[st.n_stack - 2]
            if self.gold_heads[s1] == s0 and nl[s1] + nr[s1] == self.gold_kids[s1]:
                if st.n_stack >= 3 and self.gold_heads[stack[st.n_stack - 3]] == -2:
                    return -1   # s2 may be a left dependent of s1
                label = self.gold_labels[s1]
                return N_FIXED_ACTIONS + 2 * label if label >= 0 else -1
            if self.gold_heads[s0] == s1 and nl[s0] + nr[s0] == self.gold_kids[s0]:
                if self._may_descend(st.buf, s0):
                    return -1   # the next buffer token may be a right dependent of s0
                label = self.gold_labels[s0]
                return N_FIXED_ACTIONS + 2 * label + 1 if label >= 0 else -1
            if self.gold_heads[s0] == -2 or self.gold_heads[s1] == -2:
                return -1       # an arc between s0 and s1 may be the right move
        if st.buf < self.n_tokens:
            if self.allow_break and st.n_stack == 1:
                s0 = stack[0]
                if self.gold_heads[s0] == -1 and nl[s0] + nr[s0] == self.gold_kids[s0]:
                    return -1 if self._may_descend(st.buf, s0) else BREAK
                if self.gold_heads[s0] == -2:
                    return -1   # s0 may be a finished root
            return SHIFT
        return -1

    cdef void mask_inconsistent(self, const void* state, weight_t* scores) noexcept nogil:
        """Training on a partial tree, where the oracle does not know the action: rule out the
        actions that would make a known arc impossible, so the path the trainer follows (the
        model's best remaining action) stays consistent with every known head and the oracle's
        later answers about them stay right. If that rules out everything, nothing is masked."""
        cdef int a, n_left = 0, least = -1
        cdef int g
        cdef int* costs
        if self.hybrid and not self.complete_gold:
            # Training with arc-hybrid needs no mask: the dynamic oracle tells the correct
            # actions of any state, and the static one's derivation of a partial tree is
            # completed first (complete_gold, below).
            return
        if not self.hybrid and not self.partial_gold:
            return   # a complete tree: the static oracle always knows, and exploration needs no mask
        g = self.gold_action(state)
        if g >= 0:
            if self.complete_gold and scores[g] != -INFINITY:
                for a in range(self.n_actions):
                    if a != g:
                        scores[a] = -INFINITY
            return
        if self.hybrid:
            # The dynamic oracle knows which actions lose a known arc: keep the others.
            costs = <int*>malloc(self.n_actions * sizeof(int))
            if costs == NULL:
                return
            self.action_costs(state, costs)
            for a in range(self.n_actions):
                if scores[a] != -INFINITY and costs[a] >= 0 and (least < 0 or costs[a] < least):
                    least = costs[a]
            if least >= 0:
                for a in range(self.n_actions):
                    if scores[a] != -INFINITY and costs[a] != least:
                        scores[a] = -INFINITY
            free(costs)
            return
        for a in range(self.n_actions):
            if scores[a] != -INFINITY and not self._breaks_known(state, a):
                n_left += 1
        if n_left == 0:
            return
        for a in range(self.n_actions):
            if scores[a] != -INFINITY and self._breaks_known(state, a):
                scores[a] = -INFINITY

    cdef bint _breaks_known(self, const void* state, int action) noexcept nogil:
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef const int* nl = self.arr(state, A_NL)
        cdef const int* nr = self.arr(state, A_NR)
        cdef int dep, head, h, label
        if action == SHIFT:
            return False
        if action == BREAK:
            dep = stack[0]
            return self.gold_heads[dep] >= 0 or nl[dep] + nr[dep] < self.gold_kids[dep]
        label = (action - N_FIXED_ACTIONS) // 2
        if (action - N_FIXED_ACTIONS) % 2 == 0:
            dep, head = stack[st.n_stack - 2], stack[st.n_stack - 1]
        else:
            dep, head = stack[st.n_stack - 1], stack[st.n_stack - 2]
        h = self.gold_heads[dep]
        if h == -1 or (h >= 0 and h != head):
            return True
        if nl[dep] + nr[dep] < self.gold_kids[dep] or self.gold_heads[head] == dep:
            return True
        return h == head and self.gold_labels[dep] >= 0 and self.gold_labels[dep] != label

    cdef bint _on_stack(self, const void* state, int token) noexcept nogil:
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int k
        for k in range(st.n_stack):
            if stack[k] == token:
                return True
        return False

    cdef int _move_costs(self, const void* state, int* costs) noexcept nogil:
        """arc-hybrid: the cost of each move (M_SHIFT, M_BREAK, M_LEFT, M_RIGHT; -1 when not
        valid), unlabelled: how many known gold arcs reachable from `state` it makes unreachable.
        A root is an arc from outside the span. In arc-hybrid a token in the buffer can still
        take any live token as its head, and be a root; a token on the stack can take a head from
        the buffer, or the token right below it, and be a root only from the stack's bottom; a
        token that left the stack heads nothing more (Goldberg and Nivre 2013, with the root
        after the buffer). Missing heads (-2) are no arcs: they cost nothing."""
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int n = self.n_tokens, b = st.buf, k, h, kids = 0, c
        cdef int s0 = stack[st.n_stack - 1] if st.n_stack >= 1 else -1
        cdef int s1 = stack[st.n_stack - 2] if st.n_stack >= 2 else -1
        costs[M_SHIFT] = costs[M_BREAK] = costs[M_LEFT] = costs[M_RIGHT] = -1
        if b < n:
            # q0 goes onto the stack: it loses its dependents there, a head there other than
            # s0, and being a root unless the stack was empty.
            h = self.gold_heads[b]
            c = 0
            for k in range(st.n_stack):
                if self.gold_heads[stack[k]] == b:
                    c += 1
            if h >= 0 and h != s0 and h < b and self._on_stack(state, h):
                c += 1
            if h == -1 and st.n_stack >= 1:
                c += 1
            costs[M_SHIFT] = c
        if s0 < 0:
            return 0
        # s0 leaves the stack (every arc move, and BREAK): it loses its dependents in the buffer.
        for k in range(b, n):
            if self.gold_heads[k] == s0:
                kids += 1
        h = self.gold_heads[s0]
        if b < n:
            costs[M_LEFT] = kids + ((h >= 0 and h != b and (h >= b or h == s1))
                                    or (h == -1 and st.n_stack == 1))
        if s1 >= 0:
            costs[M_RIGHT] = kids + (h >= b)
        if self.allow_break and st.n_stack == 1 and b < n:
            costs[M_BREAK] = kids + (h >= b)
            if self.eager_break and h == -1 and kids == 0:
                # s0's sentence is complete. SHIFT loses no arc (the BREAK can still come once
                # the next sentence's words before its root are reduced), but a parser that
                # learns to put it off learns to parse across the boundary: one for SHIFT.
                costs[M_SHIFT] += 1
        return 0

    cdef bint action_costs(self, const void* state, int* costs) noexcept nogil:
        """The dynamic oracle of arc-hybrid (Goldberg and Nivre 2013): each action's cost, the
        moves' (_move_costs) plus one for an arc to its gold head under a wrong known label; -1
        for an invalid action. arc-hybrid is arc-decomposable, so the least loss reachable from
        a state after an action is the state's plus the action's cost (the tests check it
        against search over every completion). arc-standard is not arc-decomposable: its costs
        come from the least loss before and after each move (_standard_costs)."""
        if not self.has_gold:
            return False
        if not self.hybrid:
            return self._standard_costs(state, costs, NULL) == 0
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int moves[4]
        cdef int a, label, h = -3, gl = -1, head_left = -3, head_right = -3
        self._move_costs(state, moves)
        if st.n_stack >= 1:
            h = self.gold_heads[stack[st.n_stack - 1]]
            gl = self.gold_labels[stack[st.n_stack - 1]]
            head_left = st.buf
            head_right = stack[st.n_stack - 2] if st.n_stack >= 2 else -3
        costs[SHIFT] = moves[M_SHIFT]
        costs[BREAK] = moves[M_BREAK]
        for label in range(self.n_labels):
            a = N_FIXED_ACTIONS + 2 * label
            costs[a] = moves[M_LEFT]
            if costs[a] >= 0 and h == head_left and gl >= 0 and gl != label:
                costs[a] += 1
            costs[a + 1] = moves[M_RIGHT]
            if costs[a + 1] >= 0 and h == head_right and gl >= 0 and gl != label:
                costs[a + 1] += 1
        return True

    cdef bint ranked_costs(self, const void* state, int* costs, const double* values) noexcept nogil:
        """arc-standard: only the moves (SHIFT, BREAK, LEFT-ARC, RIGHT-ARC) whose best-valued
        action could be the best-valued of least cost get their table (_standard_costs)."""
        if not self.has_gold:
            return False
        if self.hybrid:
            return self.action_costs(state, costs)
        return self._standard_costs(state, costs, values) == 0

    cdef int _cut(self, const void* state, int start, int* reach) noexcept nogil:
        """The first position c >= start that no known gold arc between live tokens (the stack's
        and the buffer's) crosses. Without BREAK, the span's end. With BREAK, the tokens from c on
        are a fresh sentence (or several) that no move before them can touch: once everything
        before c is one tree, BREAK starts them on an empty stack, so their least loss is the
        same in every state whose buffer starts at or before c, and costs need not count it.
        `reach` is scratch of n ints."""
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int n = self.n_tokens, k, d, h, lo, hi, far = -1, c
        if not self.allow_break or start >= n:
            return n
        for k in range(n):
            reach[k] = -1
        for k in range(st.n_stack + n - st.buf):
            d = stack[k] if k < st.n_stack else st.buf + k - st.n_stack
            h = self.gold_heads[d]
            if h < 0 or (h < st.buf and not self._on_stack(state, h)):
                continue
            lo, hi = (d, h) if d < h else (h, d)
            if lo < start:
                far = hi if hi > far else far
            elif hi > reach[lo]:
                reach[lo] = hi
        c = start
        while far >= c:
            c += 1
            if reach[c - 1] > far:
                far = reach[c - 1]
        return c

    cdef int _standard_costs(self, const void* state, int* costs, const double* values) noexcept nogil:
        """The dynamic oracle of arc-standard (Goldberg, Sartorio and Satta 2014): each move's
        cost is the least loss reachable after it minus the least loss reachable now (labels:
        one more for an arc to its gold head under a wrong known label); -1 for an invalid
        action. The least loss is the number of known gold heads the best reachable tree misses;
        _most_kept finds that tree exactly (the tests check it against search over every
        completion). Returns -1 when out of memory.

        With `values` (see ranked_costs), the moves are taken from the best-valued down, and
        once one of their actions costs nothing, a move whose actions are all valued below it
        gets no table (its costs stay -1): costs are never negative, so neither the least cost
        (0) nor the best-valued action of that cost can be among them. A greedy parser's best
        action is usually correct, so most states need two tables instead of four."""
        cdef const ParseStateC* st = <const ParseStateC*>state
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int n = self.n_tokens, P = st.n_stack, b = st.buf, k, N, cut, known = 0
        cdef int here, j, m, a, first
        cdef int order[4]
        cdef double best[4]
        cdef double v, found = -INFINITY
        cdef int* units
        cdef int* work
        for k in range(self.n_actions):
            costs[k] = -1
        units = <int*>malloc((2 * n + 1) * sizeof(int))
        if units == NULL:
            return -1
        cut = self._cut(state, b + 1 if b < n else n, units + n)
        N = P + cut - b
        for k in range(N):
            units[k] = stack[k] if k < P else b + k - P
            known += self.gold_heads[units[k]] != -2
        work = <int*>malloc((9 * N * N + N + 1) * sizeof(int))
        if work == NULL and N:
            free(units)
            return -1
        # The loss over live tokens is `known` minus the best table value: a move's cost is the
        # change in that, plus the loss of the arc (or root) it fixes.
        here = _most_kept(units, N, P, self.gold_heads, self.allow_break, work)
        # The moves that apply here (M_SHIFT, M_BREAK, M_LEFT, M_RIGHT), each with the best value
        # of its actions, ordered from the best-valued down (ties: the lower action first).
        m = 0
        for k in range(4):   # M_SHIFT, M_BREAK, M_LEFT, M_RIGHT
            if k == M_SHIFT and b >= n or k == M_BREAK and not (self.allow_break and P == 1 and b < n) \
                    or (k == M_LEFT or k == M_RIGHT) and P < 2:
                continue
            v = INFINITY
            if values != NULL:
                first = SHIFT if k == M_SHIFT else BREAK if k == M_BREAK else N_FIXED_ACTIONS + (k == M_RIGHT)
                v = values[first]
                if k == M_LEFT or k == M_RIGHT:
                    for a in range(first, self.n_actions, 2):
                        if values[a] > v:
                            v = values[a]
                if v == -INFINITY:
                    continue   # no candidate action: nothing to learn about it
            j = m
            while j > 0 and best[j - 1] < v:
                order[j], best[j] = order[j - 1], best[j - 1]
                j -= 1
            order[j], best[j] = k, v
            m += 1
        for j in range(m):
            if best[j] < found:
                break
            self._move_cost(state, order[j], units, N, P, here, work, costs)
            if values != NULL:
                for a in range(self.n_actions):
                    if costs[a] == 0 and values[a] > found:
                        found = values[a]
        free(units)
        free(work)
        return 0

    cdef void _move_cost(self, const void* state, int move, int* units, int N, int P, int here,
                         int* work, int* costs) noexcept nogil:
        # The costs of `move`'s actions (see _standard_costs): here less the best table value
        # after the move, plus the arc's (or the root's) own loss and, for an arc, its label's.
        cdef const int* stack = self.arr(state, A_STACK)
        cdef int n = self.n_tokens, label, after, dep, head, lost, k
        cdef int* others
        if move == M_SHIFT:
            costs[SHIFT] = here - _most_kept(units, N, P + 1, self.gold_heads, self.allow_break, work)
        elif move == M_BREAK:
            dep = stack[P - 1]
            after = _most_kept(units + 1, N - 1, 0, self.gold_heads, True, work)
            costs[BREAK] = (self.gold_heads[dep] != -2 and self.gold_heads[dep] != -1) + here - after - (
                self.gold_heads[dep] != -2)
        else:
            # LEFT-ARC: s1 <- s0 (unit P - 2 leaves); RIGHT-ARC: s1 -> s0 (unit P - 1 leaves).
            k = move == M_RIGHT
            if k == 0:
                dep = stack[P - 2]
                head = stack[P - 1]
            else:
                dep = stack[P - 1]
                head = stack[P - 2]
            others = units + n   # scratch: units holds 2n + 1 ints
            memcpy(others, units, (P - 2 + k) * sizeof(int))
            memcpy(others + P - 2 + k, units + P - 1 + k, (N - P + 1 - k) * sizeof(int))
            after = _most_kept(others, N - 1, P - 1, self.gold_heads, self.allow_break, work)
            lost = (self.gold_heads[dep] != -2 and self.gold_heads[dep] != head) + here - after - (
                self.gold_heads[dep] != -2)
            for label in range(self.n_labels):
                costs[N_FIXED_ACTIONS + 2 * label + k] = lost + (
                    self.gold_heads[dep] == head and self.gold_labels[dep] >= 0
                    and self.gold_labels[dep] != label)

    cdef bint _may_descend(self, int q, int s0) noexcept nogil:
        """Whether token q (or nothing, q >= n) may be a descendant of s0 in the gold tree,
        following the known heads from q: a missing head on the way leaves it possible."""
        cdef int steps = 0, h
        if q >= self.n_tokens:
            return False
        h = q
        while steps <= self.n_tokens:
            h = self.gold_heads[h]
            if h == -2:
                return True
            if h == -1:
                return False
            if h == s0:
                return True
            steps += 1
        return False

    cdef int max_steps(self) noexcept nogil:
        return 2 * self.n_tokens - 1 if self.n_tokens else 0

    # Python helpers ----------------------------------------------------------------------------

    def set_allowed_keys(self, keys):
        """Restrict updates to `keys` (None: no restriction). With the keys seen at least twice
        in the gold derivations of the training data (ZPar's features from gold configurations,
        with a count cut-off), the weight table stays about half the size it otherwise reaches:
        most features of wrong predicted paths are never seen again."""
        if keys is None:
            self._allowed = None
            self.allowed = NULL
            self.n_allowed = 0
            return
        arr = numpy.ascontiguousarray(keys, dtype=numpy.uint64).reshape(-1)
        if arr.shape[0] > 1 and not (arr[1:] > arr[:-1]).all():
            # Saved keys are sorted and distinct already: numpy 2's unique (hash-based) takes
            # seconds on a parser's ~1M keys, and a system is built before a thread's first parse.
            arr = numpy.unique(arr)
        if len(arr) == 0:
            arr = numpy.zeros((1,), dtype=numpy.uint64)   # allows nothing (keys are never 0)
        self._allowed = arr
        cdef const hash_t[::1] view = arr
        self.allowed = &view[0]
        self.n_allowed = arr.shape[0]

    def oracle_keys(self):
        """The feature keys of every state on the oracle path where the oracle knows the action.
        Where it does not (missing heads, or a gold tree it cannot reach), the path goes on with
        SHIFT, else a RIGHT-ARC, and those states' keys are left out."""
        if not self.has_gold or self.n_tokens == 0:
            return numpy.zeros((0,), dtype=numpy.uint64)
        buf = bytearray(self.state_size)
        cdef char* s = buf
        out = numpy.zeros((self.max_steps() * self.max_features,), dtype=numpy.uint64)
        cdef hash_t[::1] o = out
        cdef int a, n = 0, t = 0, n_steps = self.max_steps()
        with nogil:
            self.init_state(s)
            while not self.is_final(s) and t < n_steps:
                a = self.gold_action(s)
                if a >= 0 and self.is_valid(s, a):
                    n += self.extract(s, &o[n])
                elif self.is_valid(s, SHIFT):
                    a = SHIFT
                elif self.is_valid(s, N_FIXED_ACTIONS + 1):
                    a = N_FIXED_ACTIONS + 1
                else:
                    break
                self.transition(s, a)
                t += 1
        return out[:n]

    def oracle_path(self):
        """The static oracle's actions for the bound gold tree, or None if it cannot reach it
        (a non-projective, cyclic or incomplete gold tree)."""
        if not self.has_gold:
            return None
        buf = bytearray(self.state_size)
        cdef char* s = buf
        cdef int a
        out = []
        self.init_state(s)
        while not self.is_final(s):
            a = self.gold_action(s)
            if a < 0 or not self.is_valid(s, a):
                return None
            out.append(a)
            self.transition(s, a)
        heads, labels = self.tree(bytes(buf))
        ok = (heads == self._gold_heads).all() and (labels == self._gold_labels).all()
        return numpy.asarray(out, dtype=numpy.int32) if ok else None

    def score_trees(self, atoms, heads, labels, bint allow_break=False):
        """Each tree's score: the sum of the action scores along its static-oracle path, the
        same as score_path(oracle_path()) after set_sentence(atoms, tree...), for m trees over
        one span at once (the atoms bound once, the paths walked in C). heads and labels: (m, n)
        as set_sentence's gold (every head known: -1 root, else an index in the span); -inf for
        a tree the oracle cannot reach (not projective). Leaves the span bound without gold.

        The trees of a k-best list share most of their paths: they are walked in the order of
        their heads, and while a tree's path repeats the previous tree's actions it is in the
        same state, so those actions' scores are taken from that walk instead of scoring the
        state again (the same numbers: only the scoring is skipped)."""
        heads = numpy.ascontiguousarray(heads, dtype=numpy.int32)
        labels = numpy.ascontiguousarray(labels, dtype=numpy.int32)
        atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
        cdef int n = atoms.shape[0] if atoms.ndim == 2 else -1
        if heads.ndim != 2 or heads.shape[1] != n or labels.shape[0] != heads.shape[0] or labels.shape[1] != n:
            raise ValueError(f"heads and labels must have shape (m, {n}), got {heads.shape} and {labels.shape}")
        cdef int m = heads.shape[0]
        if m and n and (heads.min() < -1 or heads.max() >= n or (heads == numpy.arange(n)).any()
                        or labels.min() < -1 or labels.max() >= self.n_labels):
            raise ValueError("tree heads must be -1 or another token's index in the span, labels -1 or a label id")
        kids = numpy.zeros((m, max(n, 1)), dtype=numpy.int32)
        rows = numpy.repeat(numpy.arange(m), n).reshape(m, n)
        numpy.add.at(kids, (rows[heads >= 0], heads[heads >= 0]), 1)
        self.set_sentence(atoms, allow_break=allow_break)
        out = numpy.full((m,), -numpy.inf)
        if not m or not n:
            return out
        # Walk order: lexicographic by heads (first word's head first), so neighbours share
        # long path prefixes.
        order = numpy.ascontiguousarray(numpy.lexsort(heads.T[::-1]), dtype=numpy.int64)
        cdef const int64_t[::1] O = order
        cdef const int[:, ::1] H = heads
        cdef const int[:, ::1] L = labels
        cdef const int[:, ::1] K = kids
        cdef double[::1] o = out
        buf = bytearray(self.state_size)
        cdef char* st = buf
        cdef int max_steps = 2 * n + 2
        cdef weight_t* scores = <weight_t*>calloc(self.n_actions, sizeof(weight_t))
        # the previous walk's actions and their scores, and the current walk's
        cdef int* walk_actions = <int*>calloc(2 * max_steps, sizeof(int))
        cdef double* walk_scores = <double*>calloc(2 * max_steps, sizeof(double))
        if scores == NULL or walk_actions == NULL or walk_scores == NULL:
            free(scores)
            free(walk_actions)
            free(walk_scores)
            raise MemoryError()
        cdef int* prev_a = walk_actions
        cdef int* cur_a = walk_actions + max_steps
        cdef double* prev_s = walk_scores
        cdef double* cur_s = walk_scores + max_steps
        cdef int* swap_a
        cdef double* swap_s
        cdef int prev_len = 0
        cdef int j, jj, a, t, step
        cdef double total, value
        cdef bint ok, shared
        try:
            with nogil:
                for jj in range(m):
                    j = <int>O[jj]
                    self.gold_heads = &H[j, 0]
                    self.gold_labels = &L[j, 0]
                    self.gold_kids = &K[j, 0]
                    self.has_gold = True
                    self.init_state(st)
                    total = 0.0
                    ok = True
                    shared = True
                    step = 0
                    while not self.is_final(st):
                        a = self.gold_action(st)
                        if a < 0 or not self.is_valid(st, a) or step >= max_steps:
                            ok = False
                            break
                        if shared and step < prev_len and prev_a[step] == a:
                            value = prev_s[step]
                        else:
                            shared = False
                            self.score(st, scores)
                            value = scores[a]
                        cur_a[step] = a
                        cur_s[step] = value
                        total += value
                        self.transition(st, a)
                        step += 1
                    swap_a = prev_a
                    prev_a = cur_a
                    cur_a = swap_a
                    swap_s = prev_s
                    prev_s = cur_s
                    cur_s = swap_s
                    prev_len = step
                    if ok:
                        for t in range(n):
                            if self.arr(st, A_HEAD)[t] != H[j, t] or self.arr(st, A_LABEL)[t] != L[j, t]:
                                ok = False
                                break
                    if ok:
                        o[j] = total
        finally:
            free(scores)
            free(walk_actions)
            free(walk_scores)
            self.has_gold = False
            self.gold_heads = self.gold_labels = self.gold_kids = NULL
        return out

    def tree(self, bytes state):
        """(heads, labels) of a state: -1 for unattached tokens (roots, once final)."""
        cdef const char* p = state
        cdef int n = self.n_tokens
        heads = numpy.empty((n,), dtype=numpy.int32)
        labels = numpy.empty((n,), dtype=numpy.int32)
        cdef int[::1] h = heads
        cdef int[::1] l = labels
        if n:
            memcpy(&h[0], self.arr(p, A_HEAD), n * sizeof(int))
            memcpy(&l[0], self.arr(p, A_LABEL), n * sizeof(int))
        return heads, labels

    def run(self, actions):
        """Apply `actions` from the initial state; return the final (heads, labels)."""
        cdef int[::1] acts = numpy.ascontiguousarray(actions, dtype=numpy.int32)
        buf = bytearray(self.state_size)
        cdef char* s = buf
        cdef int failed = self.apply(&acts[0] if acts.shape[0] else NULL, acts.shape[0], s)
        if failed:
            raise ValueError(run_error(failed, acts))
        return self.tree(bytes(buf))

    def stack_of(self, bytes state):
        cdef const char* p = state
        cdef const ParseStateC* st = <const ParseStateC*>p
        return [self.arr(p, A_STACK)[k] for k in range(st.n_stack)], st.buf

    def is_valid_action(self, bytes state, int action):
        cdef const char* p = state
        return self.is_valid(p, action)

    def action_name(self, int action, labels=None):
        if action == SHIFT:
            return "S"
        if action == BREAK:
            return "B"
        l = (action - N_FIXED_ACTIONS) // 2
        name = labels[l] if labels is not None else str(l)
        return ("L-" if (action - N_FIXED_ACTIONS) % 2 == 0 else "R-") + name


def run_error(int failed, actions) -> str:
    """The message for a failed `apply` (its return value `failed`) of `actions`."""
    t = -1 - failed
    if t < len(actions):
        return f"action {actions[t]} is not valid at step {t}"
    return "the actions do not complete the parse"


cdef int read_tree(ArcStandardSystem system, const char* state, int* heads, int* labels) noexcept nogil:
    """Copy a state's heads and labels (-1 for unattached tokens) to the two arrays."""
    cdef int n = system.n_tokens
    if n:
        memcpy(heads, system.arr(state, A_HEAD), n * sizeof(int))
        memcpy(labels, system.arr(state, A_LABEL), n * sizeof(int))
    return n
