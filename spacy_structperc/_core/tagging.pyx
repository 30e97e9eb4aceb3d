# cython: infer_types=True
"""Sequence labelling (tags, BIO chunks, latent states) as a transition system."""
from libc.stdlib cimport calloc, malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.math cimport INFINITY
from libc.stdint cimport int64_t
import numpy

from .typedefs cimport hash_t, atom_t, class_t, weight_t
from .templates cimport TemplateSet, TemplateC, MAX_HIST, extract_features
from .transition cimport TransitionSystem
from .weights cimport AveragedWeights


cdef class TagSystem(TransitionSystem):
    def __init__(self, TemplateSet templates, AveragedWeights weights, allowed_transitions=None):
        """allowed_transitions: optional bool array (n_classes + 1, n_classes); row n_classes is
        the start of the sentence. Used for BIO validity: only allowed label bigrams are searched.
        """
        self.templates = templates
        self.weights = weights
        self.n_actions = weights.n_classes
        self.state_size = sizeof(TagStateC)
        self.max_features = templates.n_static + templates.n_history + 1
        self._keys = <hash_t*>calloc(self.max_features, sizeof(hash_t))
        self.n_tokens = 0
        self._buffer_tokens = 0
        self._split_history_templates()
        self.set_allowed_transitions(allowed_transitions)
        self.set_sentence(numpy.zeros((0, templates.n_cols), dtype=numpy.uint64))

    def _split_history_templates(self):
        cdef int t, k, n = self.templates.n_history
        cdef int M = self.n_actions + 1
        cdef TemplateC* tpl
        self.cached_templates = <TemplateC*>calloc(max(1, n), sizeof(TemplateC))
        self.direct_templates = <TemplateC*>calloc(max(1, n), sizeof(TemplateC))
        self.pure_cache = <weight_t*>calloc(M * M * self.n_actions, sizeof(weight_t))
        self.pure_version = <int64_t*>malloc(M * M * sizeof(int64_t))
        if not (self.cached_templates and self.direct_templates and self.pure_cache and self.pure_version):
            raise MemoryError()
        for k in range(M * M):
            self.pure_version[k] = -1
        self.n_cached = self.n_direct = 0
        for t in range(n):
            tpl = &self.templates.c_history[t]
            cacheable = tpl.n_atoms == 0 and all(tpl.hist_offset[k] <= 2 for k in range(tpl.n_hist))
            if cacheable:
                self.cached_templates[self.n_cached] = tpl[0]
                self.n_cached += 1
            else:
                self.direct_templates[self.n_direct] = tpl[0]
                self.n_direct += 1

    def __dealloc__(self):
        free(self.cached_templates)
        free(self.direct_templates)
        free(self.pure_cache)
        free(self.pure_version)
        free(self._keys)
        free(self.static_keys)
        free(self.n_static_keys)
        free(self.static_scores)
        free(self.static_version)

    def set_allowed_transitions(self, allowed_transitions):
        if allowed_transitions is None:
            self._allowed_trans = None
            self.allowed_trans = NULL
            return
        arr = numpy.ascontiguousarray(allowed_transitions, dtype=numpy.uint8)
        if arr.shape != (self.n_actions + 1, self.n_actions):
            raise ValueError(f"allowed_transitions must have shape {(self.n_actions + 1, self.n_actions)}")
        self._allowed_trans = arr
        cdef const unsigned char[:, ::1] view = arr
        self.allowed_trans = &view[0, 0]

    def set_sentence(self, atoms, gold=None, allowed=None):
        """Bind a sentence: atoms (n_tokens, n_cols) uint64; gold labels (-1 = missing);
        allowed (n_tokens, n_classes) bool restricting each position's labels."""
        atoms = numpy.ascontiguousarray(atoms, dtype=numpy.uint64)
        if atoms.ndim != 2 or atoms.shape[1] != self.templates.n_cols:
            raise ValueError(
                f"atoms must have shape (n_tokens, {self.templates.n_cols}), got {atoms.shape}"
            )
        cdef int n = atoms.shape[0]
        if gold is None:
            gold = numpy.full((n,), -1, dtype=numpy.int32)
        else:
            gold = numpy.ascontiguousarray(gold, dtype=numpy.int32)
            if gold.shape != (n,):
                raise ValueError(f"gold must have shape ({n},), got {gold.shape}")
            if n and (gold.max() >= self.n_actions or gold.min() < -1):
                raise ValueError("gold labels must be -1 (missing) or a class id")
        cdef const atom_t[:, ::1] a = atoms
        with nogil:
            self.bind(&a[0, 0] if n else NULL, n, NULL)
        self._atoms = atoms
        self._gold = gold
        cdef const class_t[::1] g = gold
        self.gold = &g[0] if n else NULL
        self.set_position_mask(allowed)

    cdef int bind(self, const atom_t* atoms, int n, const unsigned char* allowed) except -1 nogil:
        """Bind n tokens' atoms (n x n_cols, owned by the caller and kept alive while bound)
        without gold, with an optional position mask (n x n_classes, likewise), and extract
        their static features. The Python-side references are the caller's to set."""
        self.atoms = atoms if n else NULL
        self.n_tokens = n
        self.gold = NULL
        self.allowed = allowed if n else NULL
        self._reserve(n)
        cdef int i, n_static = self.templates.n_static
        for i in range(n):
            self.n_static_keys[i] = extract_features(
                self.templates.c_static, n_static, self.atoms, n, self.templates.n_cols,
                i, NULL, &self.static_keys[i * n_static]
            )
            self.static_version[i] = -1
        return 0

    def set_position_mask(self, allowed):
        """Restrict the labels of each position of the bound sentence ((n_tokens, n_classes) bool,
        or None for no restriction), keeping its extracted features."""
        cdef const unsigned char[:, ::1] view
        if allowed is None:
            self._allowed = None
            self.allowed = NULL
            return
        allowed = numpy.ascontiguousarray(allowed, dtype=numpy.uint8)
        if allowed.shape != (self.n_tokens, self.n_actions):
            raise ValueError(f"allowed must have shape {(self.n_tokens, self.n_actions)}")
        self._allowed = allowed
        if self.n_tokens:
            view = allowed
            self.allowed = &view[0, 0]
        else:
            self.allowed = NULL

    cdef int _reserve(self, size_t n) except -1 nogil:
        if n <= self._buffer_tokens:
            return 0
        n = max(n, 2 * self._buffer_tokens, 64)
        cdef size_t S = max(1, self.templates.n_static)
        cdef void* p
        p = realloc(self.static_keys, n * S * sizeof(hash_t))
        if p != NULL:
            self.static_keys = <hash_t*>p
        cdef bint ok = p != NULL
        p = realloc(self.n_static_keys, n * sizeof(int))
        if p != NULL:
            self.n_static_keys = <int*>p
        ok = ok and p != NULL
        p = realloc(self.static_scores, n * self.n_actions * sizeof(weight_t))
        if p != NULL:
            self.static_scores = <weight_t*>p
        ok = ok and p != NULL
        p = realloc(self.static_version, n * sizeof(int64_t))
        if p != NULL:
            self.static_version = <int64_t*>p
        ok = ok and p != NULL
        if not ok:
            with gil:
                raise MemoryError()
        self._buffer_tokens = n
        return 0

    cdef const weight_t* static_row(self, int i) noexcept nogil:
        cdef weight_t* row = &self.static_scores[i * self.n_actions]
        if self.static_version[i] != self.weights.version:
            memset(row, 0, self.n_actions * sizeof(weight_t))
            self.weights.add_rows(&self.static_keys[i * self.templates.n_static],
                                  self.n_static_keys[i], row)
            self.static_version[i] = self.weights.version
        return row

    cdef const weight_t* pure_row(self, const class_t* hist) noexcept nogil:
        cdef int M = self.n_actions + 1
        cdef int idx = (hist[1] + 1) * M + (hist[0] + 1)
        cdef weight_t* row = &self.pure_cache[idx * self.n_actions]
        cdef int n
        if self.pure_version[idx] != self.weights.version:
            memset(row, 0, self.n_actions * sizeof(weight_t))
            n = extract_features(self.cached_templates, self.n_cached, self.atoms, self.n_tokens,
                                 self.templates.n_cols, 0, hist, self._keys)
            self.weights.add_rows(self._keys, n, row)
            self.pure_version[idx] = self.weights.version
        return row

    cdef void history_scores(self, int i, const class_t* hist, weight_t* out) noexcept nogil:
        cdef int a, n
        cdef const weight_t* pure
        if self.n_cached:
            pure = self.pure_row(hist)
            memcpy(out, pure, self.n_actions * sizeof(weight_t))
        else:
            memset(out, 0, self.n_actions * sizeof(weight_t))
        if self.n_direct:
            n = extract_features(self.direct_templates, self.n_direct, self.atoms, self.n_tokens,
                                 self.templates.n_cols, i, hist, self._keys)
            self.weights.add_rows(self._keys, n, out)

    cdef bint is_allowed(self, int i, int prev, int action) noexcept nogil:
        if self.allowed != NULL and not self.allowed[i * self.n_actions + action]:
            return False
        if self.allowed_trans != NULL:
            if prev < 0:
                prev = self.n_actions
            if not self.allowed_trans[prev * self.n_actions + action]:
                return False
        return True

    cdef void init_state(self, void* state) noexcept nogil:
        cdef TagStateC* st = <TagStateC*>state
        st.i = 0
        cdef int k
        for k in range(MAX_HIST):
            st.hist[k] = -1

    cdef bint is_final(self, const void* state) noexcept nogil:
        return (<const TagStateC*>state).i >= self.n_tokens

    cdef void transition(self, void* state, int action) noexcept nogil:
        cdef TagStateC* st = <TagStateC*>state
        cdef int k
        for k in range(MAX_HIST - 1, 0, -1):
            st.hist[k] = st.hist[k - 1]
        st.hist[0] = action
        st.i += 1

    cdef void score(self, const void* state, weight_t* scores) noexcept nogil:
        cdef const TagStateC* st = <const TagStateC*>state
        cdef int i = st.i
        cdef int a, n
        cdef const weight_t* static = self.static_row(i)
        cdef const weight_t* pure
        if self.n_cached:
            pure = self.pure_row(st.hist)
            for a in range(self.n_actions):
                scores[a] = static[a] + pure[a]
        else:
            memcpy(scores, static, self.n_actions * sizeof(weight_t))
        if self.n_direct:
            n = extract_features(self.direct_templates, self.n_direct, self.atoms, self.n_tokens,
                                 self.templates.n_cols, i, st.hist, self._keys)
            self.weights.add_rows(self._keys, n, scores)
        if self.allowed != NULL or self.allowed_trans != NULL:
            for a in range(self.n_actions):
                if not self.is_allowed(i, st.hist[0], a):
                    scores[a] = -INFINITY

    cdef int features(self, const void* state, hash_t* keys) noexcept nogil:
        cdef const TagStateC* st = <const TagStateC*>state
        cdef int i = st.i
        cdef int n_static = self.n_static_keys[i]
        memcpy(keys, &self.static_keys[i * self.templates.n_static], n_static * sizeof(hash_t))
        return n_static + extract_features(
            self.templates.c_history, self.templates.n_history, self.atoms, self.n_tokens,
            self.templates.n_cols, i, st.hist, &keys[n_static])

    cdef int gold_action(self, const void* state) noexcept nogil:
        cdef int i = (<const TagStateC*>state).i
        if i >= self.n_tokens or self.gold == NULL:
            return -1
        return self.gold[i]

    cdef int max_steps(self) noexcept nogil:
        return self.n_tokens

    def _bound_atoms(self):
        return self._atoms

    def _bound_allowed(self):
        return self._allowed

    @property
    def gold_labels(self):
        return numpy.array(self._gold, copy=True)
