# cython: infer_types=True
"""Sequence labelling (tags, BIO chunks, latent states) as a transition system."""
from libc.stdlib cimport calloc, malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.math cimport INFINITY
from libc.stdint cimport int64_t, uint64_t
import numpy

from .typedefs cimport hash_t, atom_t, class_t, weight_t
from .templates cimport TemplateSet, TemplateC, MAX_HIST, extract_features, atom_at, mix64
from .transition cimport TransitionSystem
from .weights cimport AveragedWeights, FROZEN_NONE


# The word-type cache (TagSystem.type_vector, and hw_vector's history-word entries) starts at
# TC_INITIAL entries and doubles while its vectors take at most TC_MAX_BYTES; a full table at the
# cap is emptied and refilled. 32 MB per thread's system: UD EWT test (25k words) makes ~36k
# entries of 49 classes with the EWT tagger's templates, which a 16 MB cap emptied and refilled
# over and over (the history-word entries then cost more than they saved).
cdef size_t TC_INITIAL = 1024
cdef size_t TC_MAX_BYTES = 32 << 20
cdef bint _type_cache_on = True
# Binding with the cache scores TC_BLOCK positions at a time, each stage's memory reads
# (weight buckets, cache slots, cache vectors) prefetched for the whole block first.
cdef enum:
    TC_BLOCK = 8

cdef extern from *:
    """
    #define STRUCTPERC_TAG_PREFETCH(p) __builtin_prefetch((const void*)(p))
    """
    void prefetch "STRUCTPERC_TAG_PREFETCH"(const void* p) noexcept nogil


def set_type_cache(bint on):
    """Turn the word-type cache of loaded weights on or off for systems bound from now on
    (for agreement tests and A/B timing; on by default). Returns the previous setting."""
    global _type_cache_on
    previous = _type_cache_on
    _type_cache_on = on
    return previous


def type_cache():
    """Whether systems bound from now on use the word-type cache (see set_type_cache)."""
    return _type_cache_on


cdef inline void _fingerprint(const atom_t* atoms, int n_tokens, int n_cols, int i, const int* offsets,
                              const int* cols, int n, hash_t seed, hash_t* fp) noexcept nogil:
    # 128 bits over the values of n columns at position i + offsets[k] (a position outside the
    # sentence reads the padding values, as the templates do); a used slot's second word is
    # never 0.
    cdef int k
    cdef hash_t h1 = 0x243f6a8885a308d3ULL + seed
    cdef hash_t h2 = 0x13198a2e03707344ULL ^ (seed << 32)
    cdef atom_t v
    for k in range(n):
        v = atom_at(atoms, n_tokens, n_cols, i + offsets[k], cols[k])
        h1 = (h1 ^ v) * 0x9e3779b97f4a7c15ULL
        h1 ^= h1 >> 29
        h2 = (h2 + v) * 0xc2b2ae3d27d4eb4fULL
        h2 ^= h2 >> 31
    fp[0] = mix64(h1)
    fp[1] = mix64(h2) | 1


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
        self._split_static_templates()
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
        cols = []
        self.hw_ok = self.n_direct > 0
        for t in range(self.n_direct):
            tpl = &self.direct_templates[t]
            if not (tpl.n_hist == 1 and tpl.hist_offset[0] == 1
                    and all(tpl.atom_offset[k] == 0 for k in range(tpl.n_atoms))):
                self.hw_ok = False
            for k in range(tpl.n_atoms):
                if tpl.atom_col[k] not in cols:
                    cols.append(tpl.atom_col[k])
        self.n_hw_cols = len(cols)
        self.hw_cols = <int*>calloc(max(1, len(cols)), sizeof(int))
        self.hw_col_offset = <int*>calloc(max(1, len(cols)), sizeof(int))   # all offset 0
        if self.hw_cols == NULL or self.hw_col_offset == NULL:
            raise MemoryError()
        for k, col in enumerate(cols):
            self.hw_cols[k] = col

    def _split_static_templates(self):
        # Static templates whose atoms all read one offset form that offset's group (scored per
        # word type through the cache); the others ("mixed") are probed per position. Caching
        # the mixed ones too (per word bigram) was slower: 2.5 vs 2.1 us/word for the tagger.
        cdef int t, p, k, n = self.templates.n_static
        cdef TemplateC* tpl
        groups = {}
        mixed = []
        for t in range(n):
            tpl = &self.templates.c_static[t]
            offsets = tuple(sorted({tpl.atom_offset[p] for p in range(tpl.n_atoms)}))
            if len(offsets) == 1:
                groups.setdefault(offsets, []).append(t)
            else:
                mixed.append(t)
        order = sorted(groups, key=lambda o: (len(o), o))
        cols_of = []
        for d in order:
            cols = []
            for t in groups[d]:
                tpl = &self.templates.c_static[t]
                for p in range(tpl.n_atoms):
                    if (tpl.atom_offset[p], tpl.atom_col[p]) not in cols:
                        cols.append((tpl.atom_offset[p], tpl.atom_col[p]))
            cols_of.append(cols)
        self.n_groups = len(order)
        self.n_mixed = len(mixed)
        n_cols = sum(len(cols) for cols in cols_of)
        self.group_templates = <TemplateC*>calloc(max(1, n), sizeof(TemplateC))
        self.mixed_templates = <TemplateC*>calloc(max(1, n), sizeof(TemplateC))
        self.group_start = <int*>calloc(self.n_groups + 1, sizeof(int))
        self.col_start = <int*>calloc(self.n_groups + 1, sizeof(int))
        self.group_cols = <int*>calloc(max(1, n_cols), sizeof(int))
        self.group_col_offset = <int*>calloc(max(1, n_cols), sizeof(int))
        cdef size_t capacity = TC_INITIAL
        while capacity < 4 * TC_BLOCK * self.n_groups:    # a block's new entries always fit
            capacity *= 2
        self.tc_fp = <hash_t*>calloc(2 * capacity, sizeof(hash_t))
        self.tc_vec = <weight_t*>malloc(capacity * max(1, self.n_actions) * sizeof(weight_t))
        self.tc_block_fp = <hash_t*>malloc(2 * TC_BLOCK * max(1, self.n_groups) * sizeof(hash_t))
        self.tc_block_slot = <size_t*>malloc(TC_BLOCK * max(1, self.n_groups) * sizeof(size_t))
        if not (self.group_templates and self.mixed_templates and self.group_start
                and self.col_start and self.group_cols and self.group_col_offset and self.tc_fp
                and self.tc_vec and self.tc_block_fp and self.tc_block_slot):
            raise MemoryError()
        self.tc_capacity = capacity
        self.tc_count = 0
        self.tc_version = -1
        k = 0
        for t in mixed:
            self.mixed_templates[k] = self.templates.c_static[t]
            k += 1
        k = 0
        cdef int c = 0
        for g, d in enumerate(order):
            self.group_start[g] = k
            self.col_start[g] = c
            for t in groups[d]:
                self.group_templates[k] = self.templates.c_static[t]
                k += 1
            for offset, col in cols_of[g]:
                self.group_col_offset[c] = offset
                self.group_cols[c] = col
                c += 1
        self.group_start[self.n_groups] = k
        self.col_start[self.n_groups] = c

    def __dealloc__(self):
        free(self.hw_cols)
        free(self.hw_col_offset)
        free(self.hw_fp)
        free(self.group_templates)
        free(self.mixed_templates)
        free(self.group_start)
        free(self.group_col_offset)
        free(self.col_start)
        free(self.group_cols)
        free(self.tc_fp)
        free(self.tc_vec)
        free(self.tc_block_fp)
        free(self.tc_block_slot)
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
        # The cache pays where weights stay fixed for many sentences: a loaded model's.
        self.bound_cached = (_type_cache_on and self.n_groups > 0
                             and self.weights.frozen_type != FROZEN_NONE)
        cdef const TemplateC* extracted = self.mixed_templates if self.bound_cached else self.templates.c_static
        cdef int n_extracted = self.n_mixed if self.bound_cached else n_static
        for i in range(n):
            self.n_static_keys[i] = extract_features(
                extracted, n_extracted, self.atoms, n, self.templates.n_cols,
                i, NULL, &self.static_keys[i * n_static]
            )
            self.static_version[i] = -1
        if self.bound_cached:
            self._fill_static_rows()
        self.hw_bound = self.bound_cached and self.hw_ok
        if self.hw_bound:
            for i in range(n):
                self._hw_fingerprint(i, &self.hw_fp[2 * i])
        return 0

    cdef void _hw_fingerprint(self, int i, hash_t* fp) noexcept nogil:
        # The history-word columns at position i (offset 0), seeded as one more group.
        _fingerprint(self.atoms, self.n_tokens, self.templates.n_cols, i, self.hw_col_offset,
                     self.hw_cols, self.n_hw_cols, <hash_t>self.n_groups, fp)

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
        p = realloc(self.hw_fp, 2 * n * sizeof(hash_t))
        if p != NULL:
            self.hw_fp = <hash_t*>p
        ok = ok and p != NULL
        if not ok:
            with gil:
                raise MemoryError()
        self._buffer_tokens = n
        return 0

    cdef const weight_t* static_row(self, int i) noexcept nogil:
        cdef weight_t* row = &self.static_scores[i * self.n_actions]
        cdef const weight_t* vec
        cdef int g, c
        if self.static_version[i] != self.weights.version:
            memset(row, 0, self.n_actions * sizeof(weight_t))
            self.weights.add_rows(&self.static_keys[i * self.templates.n_static],
                                  self.n_static_keys[i], row)
            if self.bound_cached:
                for g in range(self.n_groups):
                    vec = self.type_vector(g, i)
                    for c in range(self.n_actions):
                        row[c] += vec[c]
            self.static_version[i] = self.weights.version
        return row

    cdef const weight_t* type_vector(self, int g, int i) noexcept nogil:
        """The summed rows of group g's templates at position i, from the cache (filled on a
        miss). Valid until the next call."""
        cdef hash_t fp[2]
        self._tc_fingerprint(g, i, fp)
        self._tc_begin(1)
        return &self.tc_vec[self._tc_slot(g, i, fp) * self.n_actions]

    cdef void _tc_fingerprint(self, int g, int i, hash_t* fp) noexcept nogil:
        # Group g's columns at position i + their offsets.
        cdef int k0 = self.col_start[g]
        _fingerprint(self.atoms, self.n_tokens, self.templates.n_cols, i, &self.group_col_offset[k0],
                     &self.group_cols[k0], self.col_start[g + 1] - k0, <hash_t>g, fp)

    cdef void _tc_begin(self, size_t n_new) noexcept nogil:
        # Make room for n_new entries (so _tc_slot never moves the table): empty the table if
        # the weights changed since it was filled; grow it, or empty it at the size cap.
        cdef size_t capacity = self.tc_capacity
        cdef size_t C = max(1, self.n_actions)
        if self.tc_version != self.weights.version or self.tc_owner != <void*>self.weights:
            memset(self.tc_fp, 0, 2 * self.tc_capacity * sizeof(hash_t))
            self.tc_count = 0
            self.tc_version = self.weights.version
            self.tc_owner = <void*>self.weights
        if (self.tc_count + n_new) * 2 <= capacity:
            return
        while (self.tc_count + n_new) * 2 > capacity and 2 * capacity * C * sizeof(weight_t) <= TC_MAX_BYTES:
            capacity *= 2
        if capacity > self.tc_capacity:
            self._tc_resize(capacity)
        if (self.tc_count + n_new) * 2 > self.tc_capacity:
            memset(self.tc_fp, 0, 2 * self.tc_capacity * sizeof(hash_t))
            self.tc_count = 0

    cdef size_t _tc_find(self, const hash_t* fp, bint* is_new) noexcept nogil:
        # The slot of fingerprint fp; a new one (room reserved by _tc_begin) gets a zeroed
        # vector for the caller to fill, and is_new set.
        cdef int C = self.n_actions
        cdef size_t mask = self.tc_capacity - 1
        cdef size_t b = fp[0] & mask
        is_new[0] = False
        while self.tc_fp[2 * b + 1] != 0:
            if self.tc_fp[2 * b] == fp[0] and self.tc_fp[2 * b + 1] == fp[1]:
                return b
            b = (b + 1) & mask
        self.tc_fp[2 * b] = fp[0]
        self.tc_fp[2 * b + 1] = fp[1]
        self.tc_count += 1
        memset(&self.tc_vec[b * C], 0, C * sizeof(weight_t))
        is_new[0] = True
        return b

    cdef size_t _tc_slot(self, int g, int i, const hash_t* fp) noexcept nogil:
        # The slot of fingerprint fp, its vector computed from group g's templates at position
        # i if it is new (room reserved by _tc_begin).
        cdef bint is_new
        cdef int n
        cdef size_t b = self._tc_find(fp, &is_new)
        if is_new:
            n = extract_features(&self.group_templates[self.group_start[g]],
                                 self.group_start[g + 1] - self.group_start[g], self.atoms,
                                 self.n_tokens, self.templates.n_cols, i, NULL, self._keys)
            self.weights.add_rows(self._keys, n, &self.tc_vec[b * self.n_actions])
        return b

    cdef void _fill_static_rows(self) noexcept nogil:
        # Every position's static row of the bound sentence, TC_BLOCK positions at a time:
        # prefetch the mixed keys' buckets and the cache slots, find the slots (prefetching
        # their vectors), then add mixed rows and vectors.
        cdef int G = self.n_groups, C = self.n_actions, S = self.templates.n_static
        cdef int i, i0, i1, g, j, line
        cdef size_t mask
        cdef size_t row_bytes = C * sizeof(weight_t)
        cdef weight_t* row
        cdef const weight_t* vec
        cdef int c
        i0 = 0
        while i0 < self.n_tokens:
            i1 = min(self.n_tokens, i0 + <int>TC_BLOCK)
            self._tc_begin((i1 - i0) * G)
            mask = self.tc_capacity - 1
            for i in range(i0, i1):
                self.weights.prefetch_keys(&self.static_keys[i * S], self.n_static_keys[i])
                for g in range(G):
                    j = (i - i0) * G + g
                    self._tc_fingerprint(g, i, &self.tc_block_fp[2 * j])
                    prefetch(&self.tc_fp[2 * (self.tc_block_fp[2 * j] & mask)])
            for i in range(i0, i1):
                for g in range(G):
                    j = (i - i0) * G + g
                    self.tc_block_slot[j] = self._tc_slot(g, i, &self.tc_block_fp[2 * j])
                    vec = &self.tc_vec[self.tc_block_slot[j] * C]
                    for line in range(0, <int>row_bytes, 64):
                        prefetch(<const char*>vec + line)
            for i in range(i0, i1):
                row = &self.static_scores[i * C]
                memset(row, 0, row_bytes)
                self.weights.add_rows(&self.static_keys[i * S], self.n_static_keys[i], row)
                for g in range(G):
                    vec = &self.tc_vec[self.tc_block_slot[(i - i0) * G + g] * C]
                    for c in range(C):
                        row[c] += vec[c]
                self.static_version[i] = self.weights.version
            i0 = i1

    cdef int _tc_resize(self, size_t capacity) noexcept nogil:
        # Rehash into a table of `capacity` entries (a power of two); -1 (table unchanged) when
        # memory is short.
        cdef size_t C = self.n_actions, b, e, mask = capacity - 1
        cdef hash_t* fp = <hash_t*>calloc(2 * capacity, sizeof(hash_t))
        cdef weight_t* vec = <weight_t*>malloc(capacity * max(C, 1) * sizeof(weight_t))
        if fp == NULL or vec == NULL:
            free(fp)
            free(vec)
            return -1
        for e in range(self.tc_capacity):
            if self.tc_fp[2 * e + 1] != 0:
                b = self.tc_fp[2 * e] & mask
                while fp[2 * b + 1] != 0:
                    b = (b + 1) & mask
                fp[2 * b] = self.tc_fp[2 * e]
                fp[2 * b + 1] = self.tc_fp[2 * e + 1]
                memcpy(&vec[b * C], &self.tc_vec[e * C], C * sizeof(weight_t))
        free(self.tc_fp)
        free(self.tc_vec)
        self.tc_fp = fp
        self.tc_vec = vec
        self.tc_capacity = capacity
        return 0

    def clear_type_cache(self):
        """Empty the word-type cache (for cold-cache timing and tests)."""
        memset(self.tc_fp, 0, 2 * self.tc_capacity * sizeof(hash_t))
        self.tc_count = 0

    @property
    def type_cache_entries(self):
        """How many (offset, word type) score vectors the cache holds now."""
        return self.tc_count

    @property
    def bound_with_type_cache(self):
        """Whether the bound sentence is scored through the word-type cache."""
        return bool(self.bound_cached)

    def static_class_scores(self, int i):
        """The static templates' class scores at position i of the bound sentence (a copy)."""
        if not 0 <= i < self.n_tokens:
            raise IndexError(f"position {i} is outside the bound sentence of {self.n_tokens}")
        out = numpy.empty((self.n_actions,), dtype=numpy.float32)
        cdef float[::1] o = out
        memcpy(&o[0], self.static_row(i), self.n_actions * sizeof(weight_t))
        return out

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

    cdef const weight_t* hw_vector(self, int i, const class_t* hist) noexcept nogil:
        # The direct history templates' summed row at position i after label hist[0], from the
        # word-type table (computed on a miss). Valid until the table's next change.
        cdef hash_t fp[2]
        cdef hash_t label = <hash_t>(hist[0] + 2)
        cdef bint is_new
        cdef int n
        fp[0] = mix64(self.hw_fp[2 * i] ^ (label * 0x9e3779b97f4a7c15ULL))
        fp[1] = mix64(self.hw_fp[2 * i + 1] + label * 0xc2b2ae3d27d4eb4fULL) | 1
        self._tc_begin(1)
        cdef size_t b = self._tc_find(fp, &is_new)
        cdef weight_t* vec = &self.tc_vec[b * self.n_actions]
        if is_new:
            n = extract_features(self.direct_templates, self.n_direct, self.atoms, self.n_tokens,
                                 self.templates.n_cols, i, hist, self._keys)
            self.weights.add_rows(self._keys, n, vec)
        return vec

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
        if self.hw_bound:
            pure = self.hw_vector(i, st.hist)
            for a in range(self.n_actions):
                scores[a] += pure[a]
        elif self.n_direct:
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
        cdef int n_static
        if self.bound_cached:    # static_keys hold the mixed templates' keys only
            n_static = extract_features(self.templates.c_static, self.templates.n_static, self.atoms,
                                        self.n_tokens, self.templates.n_cols, i, NULL, keys)
        else:
            n_static = self.n_static_keys[i]
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


def prefix_scores(AveragedWeights weights, keys, int m):
    """For each row of `keys` (n x F uint64 feature keys), classes 0..m-1 of the sum of its
    keys' rows (weights.score_prefix_of of each row, in one nogil loop): an (n, m) float32
    array. The tagger's second pass (pos = "predict") scores its candidates so, a few columns of
    the tagger's own table, where a Python call per token would cost as much as the tagging."""
    cdef const uint64_t[:, ::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64).reshape(
        (len(keys), -1))
    if not 0 <= m <= weights.n_classes:
        raise ValueError(f"m must be in 0..{weights.n_classes}, got {m}")
    cdef Py_ssize_t i, n = k.shape[0]
    cdef int n_keys = k.shape[1]
    out = numpy.zeros((n, max(m, 1)), dtype=numpy.float32)
    cdef float[:, ::1] o = out
    if n and n_keys and m:
        with nogil:
            for i in range(n):
                if i + 1 < n:   # the next row's buckets load while this row is summed
                    weights.prefetch_keys(&k[i + 1, 0], n_keys)
                weights.score_prefix(&k[i, 0], n_keys, m, &o[i, 0])
    return out[:, :m]


cdef inline uint64_t _pos_mix(uint64_t h, uint64_t v) noexcept nogil:
    h ^= v
    h *= 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 31)


def pos_keys(tags, offsets, words, rows, spec, seeds):
    """The second pass's feature keys (tagger/pos.py, PosPass.keys, which documents them): for
    each of `rows`, one key per template of `spec` (templates x 3 part codes, -1 = none: 0 the
    token's tag value, 1 / 2 the previous / next token's in its Doc (0 outside it), 3 word,
    4 next word, 5 suffix, 6 title * 2 + Doc-initial), seeded by `seeds`. tags: tag value per
    token (class + 1, 0 unknown); offsets: the Docs' bounds; words: tokens x 3 (lower, s3,
    is_title)."""
    cdef const int64_t[::1] t = numpy.ascontiguousarray(tags, dtype=numpy.int64)
    cdef const int64_t[::1] off = numpy.ascontiguousarray(offsets, dtype=numpy.int64)
    cdef const uint64_t[:, ::1] w = numpy.ascontiguousarray(words, dtype=numpy.uint64)
    cdef const int64_t[::1] r = numpy.ascontiguousarray(rows, dtype=numpy.int64)
    cdef const int64_t[:, ::1] sp = numpy.ascontiguousarray(spec, dtype=numpy.int64)
    cdef const uint64_t[::1] sd = numpy.ascontiguousarray(seeds, dtype=numpy.uint64)
    cdef Py_ssize_t n = r.shape[0], T = sp.shape[0], i, j, d = 0, tok, a, b
    if sd.shape[0] < T or sp.shape[1] != 3 or w.shape[1] != 3 or w.shape[0] != t.shape[0]:
        raise ValueError("pos_keys: seeds, spec or words of the wrong shape")
    if n and (numpy.min(rows) < 0 or numpy.max(rows) >= t.shape[0]):
        raise IndexError("pos_keys: a row outside the tokens")
    out = numpy.empty((n, T), dtype=numpy.uint64)
    cdef uint64_t[:, ::1] o = out
    cdef uint64_t v[7]
    cdef uint64_t h
    cdef int p
    with nogil:
        for i in range(n):
            tok = r[i]
            while d + 1 < off.shape[0] - 1 and off[d + 1] <= tok:
                d += 1
            while d > 0 and off[d] > tok:
                d -= 1
            a = off[d]
            b = off[d + 1]
            v[0] = <uint64_t>t[tok]
            v[1] = <uint64_t>t[tok - 1] if tok - 1 >= a else 0
            v[2] = <uint64_t>t[tok + 1] if tok + 1 < b else 0
            v[3] = w[tok, 0]
            v[4] = w[tok + 1, 0] if tok + 1 < b else 0
            v[5] = w[tok, 1]
            v[6] = w[tok, 2] * 2 + (1 if tok == a else 0)
            for j in range(T):
                h = sd[j]
                for p in range(3):
                    if sp[j, p] >= 0:
                        h = _pos_mix(h, v[sp[j, p]])
                h *= 0xBF58476D1CE4E5B9ULL
                h ^= h >> 29
                o[i, j] = h if h else 1
    return out
