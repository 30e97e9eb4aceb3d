# cython: infer_types=True
"""The dual-form (voted) kernel perceptron over any Kernel (kernel.pyx).

A perceptron in dual form keeps no weight vector: its score of an item x is
``f(x) = sum_i a_i K(s_i, x)`` over the support items s_i it made mistakes on (collins2001 §5.4,
Fig. 4; Freund & Schapire's voted perceptron; carreras2003 §3 uses three of them with a degree-2
polynomial kernel).

Python surface
--------------
``DualPerceptron(kernel, prediction="averaged", budget=0, budget_policy="oldest", cache_mb=0,
expand="auto")``
    ``update(item, delta, item_id=-1)`` adds ``delta * phi(item)`` to the perceptron: a new
    support item with coefficient delta, or, when ``item_id >= 0`` names an item already in
    support, delta is merged into its coefficient (an item id must always mean one feature
    vector). ``tick()`` advances the clock: call it once per training example, mistake or not.
    ``score(item, item_id=-1, mode=None)``, ``score_batch(items, item_ids=None, mode=None)`` and
    ``rank(items, item_ids=None, mode=None)`` score with ``mode`` (or the ``prediction``
    setting when None):

    - ``"last"``: the current perceptron, ``sum_i a_i K(s_i, x)`` (use it while training);
    - ``"averaged"``: the average of the perceptrons after every example, computed with Daume's
      trick: an update of ``delta`` at clock c also adds ``c * delta`` to ``u_i``, and the
      average after T ticks is ``sum_i (a_i - u_i / T) K(s_i, x)``;
    - ``"voted"``: Freund & Schapire's vote. Every prefix of the update history is a perceptron
      ``v_j``; it survived ``c_{j+1} - c_j`` examples (clock of the next update minus its own,
      T for the last), and votes with that weight. ``score`` returns
      ``sum_j survival_j * sign(v_j . x) / T`` (its sign is the prediction); ``rank`` gives each
      candidate the share of votes of the prefixes whose argmax it is (ties go to the first
      candidate; a prefix that scores every candidate alike abstains). Costs one pass over the
      update history per item (per candidate set for ``rank``): meant for prediction, not for
      decoding during training.

    ``score_batch`` scores items independently (binary decisions); ``rank`` scores a candidate set
    (collins2001 Fig. 4: on a mistake call ``update(gold, +1)``, ``update(predicted, -1)``, then
    ``tick()``). In modes "last" and "averaged" the two return the same scores.

    ``budget`` (0: none) bounds the live support items: when an update adds one beyond the
    budget, the oldest item (``budget_policy="oldest"``) or the one with the smallest |a_i|
    (``"smallest"``, ties to the oldest) is forgotten: the current, averaged and voted
    predictions become those of the update history without that item's updates. Forgotten items
    are swept out of the kernel's store in batches, which renumbers support ids.

    ``expand`` ("auto": on for a PolynomialKernel of degree <= 2; True; False): keep, next to the
    support items, the kernel's explicit feature map as primal weights (``Expansion``: one weight
    per key and per pair of keys, with Daume accumulators), so that "last" and "averaged" scores
    cost the n (n + 1) / 2 pairs of the query's n keys instead of the postings of its keys over
    the whole support (Kudo & Matsumoto's PKE). Same scores up to float rounding (features are
    64-bit hashes: two coincide with probability ~2^-64); more memory (~50 bytes per distinct
    feature). The voted prediction always reads kernel rows.

    ``cache_mb`` (0: off) keeps, per item id, the sparse kernel row K(s_i, x) of the support
    items seen so far; the next query of that id computes only the items added since. Memory is
    bounded: once the cache is full no new ids are cached, and a row that would overflow it is
    dropped. It pays for kernels whose pairs are dear (a tree kernel); for the polynomial kernel
    over features shared by most items the rows are dense and the cache is slower than the
    inverted index (benchmarks/bench_kernel.py measures both).

    ``to_bytes()`` / ``from_bytes(data)``: msgpack (srsly) of little-endian numpy buffers with a
    kind key, a format version and a checksum of the body; the kernel's class name, parameters and
    support items, the coefficients, accumulators and update history. Damaged bytes raise
    ``ValueError`` [S280]. ``pickle`` goes through the same bytes.
"""
from libc.math cimport isfinite, fabs
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.stdint cimport int64_t, uint8_t

from .kernel cimport Kernel, PolynomialKernel
from .expansion cimport Expansion
from .slots cimport _grow, _next_cap

import hashlib

import numpy
import srsly

from ..errors import Errors
from .expansion import _expansion_for
from .kernel import _KERNELS

FORMAT_VERSION = 1
KIND = "spacy-structperc.DualPerceptron"
PREDICTIONS = ("last", "averaged", "voted")
BUDGET_POLICIES = ("oldest", "smallest")


def _mode_of(mode, name="mode"):
    try:
        return PREDICTIONS.index(mode)
    except ValueError:
        raise ValueError(Errors.S283.format(setting=name, requirement=f"one of {PREDICTIONS}",
                                            value=mode)) from None


cdef class DualPerceptron:
    """A perceptron in dual form over any Kernel: last, averaged and voted predictions."""

    def __cinit__(self, *args, **kwargs):
        self._by_id = {}
        self._row_of_id = {}

    def __init__(self, Kernel kernel not None, prediction="averaged", int64_t budget=0,
                 budget_policy="oldest", double cache_mb=0.0, expand="auto"):
        if kernel.n_items != 0:
            raise ValueError(Errors.S286.format(n=kernel.n_items))
        if budget < 0:
            raise ValueError(Errors.S283.format(setting="budget", requirement="an integer >= 0 (0: none)",
                                                value=budget))
        if budget_policy not in BUDGET_POLICIES:
            raise ValueError(Errors.S283.format(setting="budget_policy", requirement=f"one of {BUDGET_POLICIES}",
                                                value=budget_policy))
        if not (cache_mb >= 0.0 and isfinite(cache_mb)):
            raise ValueError(Errors.S283.format(setting="cache_mb", requirement="a number >= 0 (0: off)",
                                                value=cache_mb))
        self.kernel = kernel
        self._mode = _mode_of(prediction, "prediction")
        self.budget = budget
        self._policy = BUDGET_POLICIES.index(budget_policy)
        self.cache_limit = <int64_t>(cache_mb * 1048576.0)
        self.expansion = _expansion_for(kernel, expand)

    def __dealloc__(self):
        self._free_state()

    cdef void _free_state(self) noexcept:
        self._clear_cache()
        free(self._rows)
        self._rows = NULL
        self._rows_cap = 0
        free(self._a)
        free(self._u)
        free(self._ids)
        free(self._alive)
        free(self._ev_item)
        free(self._ev_delta)
        free(self._ev_clock)
        free(self._idx)
        free(self._val)
        free(self._dense)
        self._a = self._u = NULL
        self._ids = NULL
        self._alive = NULL
        self._ev_item = NULL
        self._ev_delta = NULL
        self._ev_clock = NULL
        self._idx = NULL
        self._val = NULL
        self._dense = NULL
        self._cap = self._ev_cap = self._scratch_cap = 0
        self._n_total = self._n_dead = self._oldest = 0
        self.n_support = self.n_events = self.clock = 0
        self._a_sum = self._u_sum = 0.0
        self._by_id = {}

    # Settings

    @property
    def prediction(self):
        """"last", "averaged" or "voted": what score/score_batch/rank use when no mode is given."""
        return PREDICTIONS[self._mode]

    @prediction.setter
    def prediction(self, value):
        self._mode = _mode_of(value, "prediction")

    @property
    def expanded(self):
        """Whether "last" and "averaged" scores come from the primal expansion (see Expansion)."""
        return self.expansion is not None

    @property
    def budget_policy(self):
        return BUDGET_POLICIES[self._policy]

    @property
    def cache_mb(self):
        return self.cache_limit / 1048576.0

    def __len__(self):
        return self.n_support

    # Storage

    cdef int _ensure_support(self, int64_t n) except -1:
        if n <= self._cap:
            return 0
        cdef int64_t cap = _next_cap(self._cap, n, 1024)
        _grow(<void**>&self._a, cap, sizeof(double))
        _grow(<void**>&self._u, cap, sizeof(double))
        _grow(<void**>&self._ids, cap, sizeof(int64_t))
        _grow(<void**>&self._alive, cap, sizeof(uint8_t))
        self._cap = cap
        return 0

    cdef int _ensure_scratch(self, int64_t n) except -1:
        if n <= self._scratch_cap:
            return 0
        cdef int64_t cap = _next_cap(self._scratch_cap, n, 1024)
        _grow(<void**>&self._idx, cap, sizeof(int64_t))
        _grow(<void**>&self._val, cap, sizeof(double))
        free(self._dense)
        self._dense = <double*>calloc(cap, sizeof(double))   # all zero between uses
        if self._dense == NULL:
            raise MemoryError()
        self._scratch_cap = cap
        return 0

    cdef int _add_event(self, int64_t item, double delta) except -1:
        if self.n_events == self._ev_cap:
            self._ev_cap = _next_cap(self._ev_cap, self.n_events + 1, 1024)
            _grow(<void**>&self._ev_item, self._ev_cap, sizeof(int64_t))
            _grow(<void**>&self._ev_delta, self._ev_cap, sizeof(double))
            _grow(<void**>&self._ev_clock, self._ev_cap, sizeof(int64_t))
        self._ev_item[self.n_events] = item
        self._ev_delta[self.n_events] = delta
        self._ev_clock[self.n_events] = self.clock
        self.n_events += 1
        return 0

    def update(self, item, double delta, int64_t item_id=-1):
        """Add ``delta * phi(item)``: a new support item, or merged into item ``item_id``'s.

        Returns the support id (ids change when the budget sweeps forgotten items out).
        """
        if delta == 0.0:
            return -1
        if not isfinite(delta):
            raise ValueError(Errors.S283.format(setting="delta", requirement="finite", value=delta))
        cdef int64_t i
        cdef bint new = True
        if item_id >= 0:
            found = self._by_id.get(item_id)
            if found is not None:
                i = found
                new = False
        if new:
            if self.kernel.n_items != self._n_total:
                raise ValueError(Errors.S286.format(n=self.kernel.n_items))
            i = self.kernel.store_item(item)
            self._ensure_support(i + 1)
            self._a[i] = 0.0
            self._u[i] = 0.0
            self._ids[i] = item_id
            self._alive[i] = 1
            self._n_total = i + 1
            self.n_support += 1
            if item_id >= 0:
                self._by_id[item_id] = i
        self._a[i] += delta
        self._u[i] += <double>self.clock * delta
        self._a_sum += delta
        self._u_sum += <double>self.clock * delta
        self._add_event(i, delta)
        if self.expansion is not None:
            self.expansion.add_item(<PolynomialKernel>self.kernel, i, delta, <double>self.clock * delta)
        if new and self.budget > 0 and self.n_support > self.budget:
            self._enforce_budget(i)
            if self._n_dead >= max(self.n_support, 256):
                self._compact()
                i = self.n_support - 1   # the newest item keeps its place at the end
        return i

    def tick(self):
        """Advance the clock: once per training example, mistake or not."""
        self.clock += 1

    def next_example(self):
        """Alias of tick(), as AveragedWeights names it."""
        self.clock += 1

    cdef int _drop(self, int64_t item) except -1:
        if self.expansion is not None:
            self.expansion.add_item(<PolynomialKernel>self.kernel, item, -self._a[item], -self._u[item])
        self._alive[item] = 0
        self._a_sum -= self._a[item]
        self._u_sum -= self._u[item]
        self._a[item] = 0.0
        self._u[item] = 0.0
        self.n_support -= 1
        self._n_dead += 1
        if self._ids[item] >= 0:
            self._by_id.pop(self._ids[item], None)
        return 0

    cdef int _enforce_budget(self, int64_t keep) except -1:
        cdef int64_t i, victim
        cdef double best, mag
        while self.n_support > self.budget:
            if self._policy == 0:
                while not self._alive[self._oldest]:
                    self._oldest += 1
                victim = self._oldest
            else:
                victim = -1
                best = 0.0
                for i in range(self._n_total):
                    if self._alive[i] and i != keep:
                        mag = fabs(self._a[i])
                        if victim < 0 or mag < best:
                            victim = i
                            best = mag
            if victim < 0 or victim == keep:
                break
            self._drop(victim)
        return 0

    cdef int _compact(self) except -1:
        """Sweep forgotten items out of the kernel and the history; support ids are renumbered."""
        if self._n_dead == 0:
            return 0
        cdef int64_t n_old = self._n_total
        keep = numpy.empty((max(self.n_support, 1),), dtype=numpy.int64)
        remap = numpy.full((max(n_old, 1),), -1, dtype=numpy.int64)
        cdef int64_t[::1] K = keep
        cdef int64_t[::1] R = remap
        cdef int64_t i, j = 0, e, m = 0
        for i in range(n_old):
            if self._alive[i]:
                K[j] = i
                R[i] = j
                j += 1
        self.kernel.compact(&K[0], j)
        for e in range(j):
            i = K[e]
            self._a[e] = self._a[i]
            self._u[e] = self._u[i]
            self._ids[e] = self._ids[i]
            self._alive[e] = 1
        for e in range(self.n_events):
            i = R[self._ev_item[e]]
            if i >= 0:
                self._ev_item[m] = i
                self._ev_delta[m] = self._ev_delta[e]
                self._ev_clock[m] = self._ev_clock[e]
                m += 1
        self.n_events = m
        self._n_total = j
        self._n_dead = 0
        self._oldest = 0
        self._by_id = {self._ids[e]: e for e in range(j) if self._ids[e] >= 0}
        self._clear_cache()
        return 0

    def compact(self):
        """Sweep forgotten (over-budget) items out now; predictions do not change."""
        self._compact()

    # The kernel-row cache

    cdef void _clear_cache(self) noexcept:
        cdef int64_t r
        for r in range(self._n_rows):
            free(self._rows[r].idx)
            free(self._rows[r].val)
        self._n_rows = 0
        self.cache_bytes = 0
        self._row_of_id = {}

    def clear_cache(self):
        self._clear_cache()

    cdef int64_t _full_row(self, object item, int64_t item_id, double* base, int64_t** idx,
                           double** val) except -1:
        """The kernel row of item over every support id; from the cache when it can be."""
        cdef int64_t N = self._n_total
        cdef int64_t n, m, cap
        cdef double b = 0.0
        cdef CachedRow* e
        cdef int64_t* new_idx
        cdef double* new_val
        self._ensure_scratch(N)
        cdef bint caching = self.cache_limit > 0 and item_id >= 0
        if caching:
            slot = self._row_of_id.get(item_id)
            if slot is not None:
                e = &self._rows[<int64_t>slot]
                if e.covered < N:
                    self.kernel.prepare(item)
                    with nogil:
                        m = self.kernel.row(e.covered, N, self._idx, self._val, &b)
                    if e.nnz + m > e.cap:
                        cap = _next_cap(e.cap, e.nnz + m, 16)
                        if self.cache_bytes + (cap - e.cap) * 16 > self.cache_limit:
                            # Full: give this row up and serve the query uncached.
                            self._forget_row(<int64_t>slot, item_id)
                            return self._uncached_row(item, base, idx, val, False, item_id)
                        new_idx = <int64_t*>realloc(e.idx, cap * sizeof(int64_t))
                        if new_idx == NULL:
                            raise MemoryError()
                        e.idx = new_idx
                        new_val = <double*>realloc(e.val, cap * sizeof(double))
                        if new_val == NULL:
                            raise MemoryError()
                        e.val = new_val
                        self.cache_bytes += (cap - e.cap) * 16
                        e.cap = cap
                    if m:
                        memcpy(&e.idx[e.nnz], self._idx, m * sizeof(int64_t))
                        memcpy(&e.val[e.nnz], self._val, m * sizeof(double))
                    e.nnz += m
                    e.covered = N
                self.cache_hits += 1
                base[0] = e.base
                idx[0] = e.idx
                val[0] = e.val
                return e.nnz
        return self._uncached_row(item, base, idx, val, caching, item_id)

    cdef int64_t _uncached_row(self, object item, double* base, int64_t** idx, double** val,
                               bint cache_it, int64_t item_id) except -1:
        cdef int64_t N = self._n_total
        cdef int64_t n
        self.kernel.prepare(item)
        with nogil:
            n = self.kernel.row(0, N, self._idx, self._val, base)
        idx[0] = self._idx
        val[0] = self._val
        if cache_it:
            self.cache_misses += 1
            if self.cache_bytes + (n + 1) * 16 + <int64_t>sizeof(CachedRow) <= self.cache_limit:
                self._cache_row(item_id, n, base[0])
        return n

    cdef int _cache_row(self, int64_t item_id, int64_t n, double base) except -1:
        if self._n_rows == self._rows_cap:
            self._rows_cap = _next_cap(self._rows_cap, self._n_rows + 1, 1024)
            _grow(<void**>&self._rows, self._rows_cap, sizeof(CachedRow))
        cdef CachedRow* e = &self._rows[self._n_rows]
        e.cap = max(n, 1)
        e.idx = <int64_t*>malloc(e.cap * sizeof(int64_t))
        e.val = <double*>malloc(e.cap * sizeof(double))
        if e.idx == NULL or e.val == NULL:
            free(e.idx)
            free(e.val)
            raise MemoryError()
        if n:
            memcpy(e.idx, self._idx, n * sizeof(int64_t))
            memcpy(e.val, self._val, n * sizeof(double))
        e.nnz = n
        e.covered = self._n_total
        e.base = base
        self.cache_bytes += e.cap * 16 + <int64_t>sizeof(CachedRow)
        self._row_of_id[item_id] = self._n_rows
        self._n_rows += 1
        return 0

    cdef int _forget_row(self, int64_t slot, int64_t item_id) except -1:
        # Move the last row into the slot.
        cdef CachedRow* e = &self._rows[slot]
        self.cache_bytes -= e.cap * 16 + <int64_t>sizeof(CachedRow)
        free(e.idx)
        free(e.val)
        del self._row_of_id[item_id]
        cdef int64_t last = self._n_rows - 1
        if slot != last:
            self._rows[slot] = self._rows[last]
            for key, value in self._row_of_id.items():
                if value == last:
                    self._row_of_id[key] = slot
                    break
        self._n_rows = last
        return 0

    @property
    def n_cached_rows(self):
        return self._n_rows

    # Scoring

    cdef double _score_row(self, const int64_t* idx, const double* val, int64_t n, double base,
                           int mode) noexcept nogil:
        cdef int64_t t, i
        cdef double sa = 0.0, su = 0.0
        cdef double T = <double>self.clock
        if mode == 0 or self.clock == 0:
            for t in range(n):
                sa += self._a[idx[t]] * val[t]
            return sa + base * self._a_sum
        for t in range(n):
            i = idx[t]
            sa += self._a[i] * val[t]
            su += self._u[i] * val[t]
        return (sa - su / T) + base * (self._a_sum - self._u_sum / T)

    cdef double _voted_binary(self, const double* k_of, double base) noexcept nogil:
        # k_of[i] + base is K(s_i, x); the prefix perceptron after each update votes
        # sign(prefix score) weighted by the examples it survived.
        cdef int64_t e, i, c, prev = 0
        cdef double P = 0.0, votes = 0.0
        if self.clock == 0:
            return 0.0
        for e in range(self.n_events):
            i = self._ev_item[e]
            if not self._alive[i]:
                continue
            c = self._ev_clock[e]
            if c > prev:
                if P > 0:
                    votes += <double>(c - prev)
                elif P < 0:
                    votes -= <double>(c - prev)
                prev = c
            P += self._ev_delta[e] * (base + k_of[i])
        if self.clock > prev:
            if P > 0:
                votes += <double>(self.clock - prev)
            elif P < 0:
                votes -= <double>(self.clock - prev)
        return votes / <double>self.clock

    cdef double score_one(self, object item, int64_t item_id, int mode) except? -1:
        cdef double base = 0.0, result, sw = 0.0, su = 0.0
        cdef PolynomialKernel poly
        cdef Expansion expansion = self.expansion
        cdef int64_t n_features
        if mode != 2 and expansion is not None:
            poly = <PolynomialKernel>self.kernel
            poly.prepare(item)
            with nogil:
                _drop_unseen_keys(poly)
            n_features = expansion.expand(poly._qkeys, poly._qvals, poly._qn, True)
            with nogil:
                expansion.dot(n_features, &sw, &su)
                if mode == 0 or self.clock == 0:
                    result = sw + poly._base * self._a_sum
                else:
                    result = (sw - su / <double>self.clock) + poly._base * (
                        self._a_sum - self._u_sum / <double>self.clock)
            return result
        cdef int64_t* idx
        cdef double* val
        cdef int64_t n = self._full_row(item, item_id, &base, &idx, &val)
        cdef int64_t t
        cdef double* dense = self._dense
        with nogil:
            if mode == 2:
                for t in range(n):
                    dense[idx[t]] = val[t]
                result = self._voted_binary(dense, base)
                for t in range(n):
                    dense[idx[t]] = 0.0
            else:
                result = self._score_row(idx, val, n, base, mode)
        return result

    def score(self, item, int64_t item_id=-1, mode=None):
        """The score of one item (its sign is the binary decision); see the module docstring."""
        cdef int m = self._mode if mode is None else _mode_of(mode)
        return self.score_one(item, item_id, m)

    def score_batch(self, items, item_ids=None, mode=None):
        """Scores of many items, each on its own (binary decisions), as a float64 array."""
        cdef int m = self._mode if mode is None else _mode_of(mode)
        items = list(items)
        cdef int64_t j, n = len(items)
        if item_ids is not None and len(item_ids) != n:
            raise ValueError(f"{len(item_ids)} item ids for {n} items")
        out = numpy.empty((n,), dtype=numpy.float64)
        cdef double[::1] o = out
        for j in range(n):
            o[j] = self.score_one(items[j], -1 if item_ids is None else int(item_ids[j]), m)
        return out

    def rank(self, items, item_ids=None, mode=None):
        """Scores of a candidate set, its argmax the prediction (collins2001 Fig. 4).

        "last"/"averaged": the scores; "voted": each candidate's share of the votes of the prefix
        perceptrons whose argmax it is.
        """
        cdef int m = self._mode if mode is None else _mode_of(mode)
        if m != 2:
            return self.score_batch(items, item_ids, mode=PREDICTIONS[m])
        items = list(items)
        cdef int64_t n_cand = len(items)
        if item_ids is not None and len(item_ids) != n_cand:
            raise ValueError(f"{len(item_ids)} item ids for {n_cand} items")
        cdef int64_t N = self._n_total
        K = numpy.empty((n_cand, max(N, 1)), dtype=numpy.float64)
        votes = numpy.zeros((n_cand,), dtype=numpy.float64)
        prefix = numpy.zeros((n_cand,), dtype=numpy.float64)
        if n_cand == 0 or self.clock == 0:
            return votes
        cdef double[:, ::1] Kv = K
        cdef double[::1] V = votes
        cdef double[::1] P = prefix
        cdef int64_t c, t, e, i, clk, best, prev = 0
        cdef double base = 0.0, delta, w
        cdef int64_t* idx
        cdef double* val
        cdef int64_t n
        for c in range(n_cand):
            n = self._full_row(items[c], -1 if item_ids is None else int(item_ids[c]), &base, &idx, &val)
            with nogil:
                for t in range(N):
                    Kv[c, t] = base
                for t in range(n):
                    Kv[c, idx[t]] += val[t]
        with nogil:
            for e in range(self.n_events):
                i = self._ev_item[e]
                if not self._alive[i]:
                    continue
                clk = self._ev_clock[e]
                if clk > prev:
                    best = _vote(&P[0], n_cand)
                    if best >= 0:
                        V[best] += <double>(clk - prev)
                    prev = clk
                delta = self._ev_delta[e]
                for c in range(n_cand):
                    P[c] += delta * Kv[c, i]
            if self.clock > prev:
                best = _vote(&P[0], n_cand)
                if best >= 0:
                    V[best] += <double>(self.clock - prev)
        return votes / float(self.clock)

    # Inspection

    def coefficients(self):
        """(a, u) over support ids: coefficients and Daume accumulators (0 for forgotten items)."""
        a = numpy.zeros((self._n_total,), dtype=numpy.float64)
        u = numpy.zeros((self._n_total,), dtype=numpy.float64)
        cdef int64_t i
        for i in range(self._n_total):
            a[i] = self._a[i]
            u[i] = self._u[i]
        return a, u

    def alive(self):
        """Boolean mask over support ids: False for items the budget forgot (until a sweep)."""
        return numpy.array([bool(self._alive[i]) for i in range(self._n_total)], dtype=bool)

    def history(self):
        """The update history (support id, delta, clock) as three arrays, oldest first."""
        cdef int64_t e
        items = numpy.array([self._ev_item[e] for e in range(self.n_events)], dtype=numpy.int64)
        deltas = numpy.array([self._ev_delta[e] for e in range(self.n_events)], dtype=numpy.float64)
        clocks = numpy.array([self._ev_clock[e] for e in range(self.n_events)], dtype=numpy.int64)
        return items, deltas, clocks

    # Serialization

    def to_bytes(self):
        """msgpack of the kernel and the perceptron's state, with a checksum of the body."""
        self._compact()
        cdef int64_t n = self._n_total
        a, u = self.coefficients()
        ids = numpy.array([self._ids[i] for i in range(n)], dtype="<i8")
        ev_item, ev_delta, ev_clock = self.history()
        kernel = self.kernel
        body = {
            "kernel": {"class": type(kernel).__name__, "params": kernel.params(),
                       "state": kernel.support_state()},
            "prediction": self.prediction,
            "budget": int(self.budget),
            "budget_policy": self.budget_policy,
            "cache_mb": self.cache_mb,
            "expand": self.expansion is not None,
            "clock": int(self.clock),
            "n_support": int(n),
            "coef": a.astype("<f8").tobytes(),
            "accum": u.astype("<f8").tobytes(),
            "item_ids": ids.tobytes(),
            "event_item": ev_item.astype("<i8").tobytes(),
            "event_delta": ev_delta.astype("<f8").tobytes(),
            "event_clock": ev_clock.astype("<i8").tobytes(),
        }
        body_bytes = srsly.msgpack_dumps(body)
        return srsly.msgpack_dumps({
            "kind": KIND,
            "format_version": FORMAT_VERSION,
            "checksum": hashlib.blake2b(body_bytes, digest_size=16).hexdigest(),
            "body": body_bytes,
        })

    def from_bytes(self, data):
        """Load what to_bytes wrote (kernel included); damaged bytes raise ValueError [S280]."""
        try:
            outer = srsly.msgpack_loads(data)
        except Exception as e:   # msgpack raises several unrelated types on garbage
            raise ValueError(Errors.S280.format(reason=f"not msgpack ({type(e).__name__})")) from None
        if not isinstance(outer, dict) or outer.get("kind") != KIND:
            raise ValueError(Errors.S280.format(reason="no kernel perceptron header"))
        version = outer.get("format_version")
        if not isinstance(version, int):
            raise ValueError(Errors.S280.format(reason="missing format version"))
        if version > FORMAT_VERSION:
            raise ValueError(Errors.S281.format(found=version, supported=FORMAT_VERSION))
        body_bytes = outer.get("body")
        if not isinstance(body_bytes, bytes) or not isinstance(outer.get("checksum"), str):
            raise ValueError(Errors.S280.format(reason="missing body or checksum"))
        if hashlib.blake2b(body_bytes, digest_size=16).hexdigest() != outer["checksum"]:
            raise ValueError(Errors.S280.format(reason="checksum mismatch"))
        try:
            body = srsly.msgpack_loads(body_bytes)
            spec = body["kernel"]
            cls_name = spec["class"]
        except Exception as e:
            raise ValueError(Errors.S280.format(reason=f"unreadable body ({type(e).__name__})")) from None
        cls = _KERNELS.get(cls_name)
        if cls is None:
            raise ValueError(Errors.S282.format(cls=cls_name, known=sorted(_KERNELS)))
        try:
            kernel = cls(**spec["params"])
            kernel.load_support_state(spec["state"])
            n = int(body["n_support"])
            clock = int(body["clock"])
            a = numpy.frombuffer(body["coef"], dtype="<f8").astype(numpy.float64)
            u = numpy.frombuffer(body["accum"], dtype="<f8").astype(numpy.float64)
            ids = numpy.frombuffer(body["item_ids"], dtype="<i8").astype(numpy.int64)
            ev_item = numpy.frombuffer(body["event_item"], dtype="<i8").astype(numpy.int64)
            ev_delta = numpy.frombuffer(body["event_delta"], dtype="<f8").astype(numpy.float64)
            ev_clock = numpy.frombuffer(body["event_clock"], dtype="<i8").astype(numpy.int64)
            if kernel.n_items != n or a.shape[0] != n or u.shape[0] != n or ids.shape[0] != n:
                raise ValueError("support arrays do not match the kernel's support items")
            if ev_delta.shape != ev_item.shape or ev_clock.shape != ev_item.shape:
                raise ValueError("update history arrays differ in length")
            if clock < 0 or (ev_item.shape[0] and (ev_item.min() < 0 or ev_item.max() >= n)):
                raise ValueError("update history refers to unknown support items")
            if ev_clock.shape[0] and (ev_clock[0] < 0 or numpy.any(numpy.diff(ev_clock) < 0) or ev_clock[-1] > clock):
                raise ValueError("update history is out of clock order")
            if not (numpy.all(numpy.isfinite(a)) and numpy.all(numpy.isfinite(u)) and numpy.all(numpy.isfinite(ev_delta))):
                raise ValueError("coefficients are not finite")
            # The coefficients are the sums of their updates, in history order (bit for bit).
            a_check = numpy.zeros((n,), dtype=numpy.float64)
            u_check = numpy.zeros((n,), dtype=numpy.float64)
            for e in range(ev_item.shape[0]):
                a_check[ev_item[e]] += ev_delta[e]
                u_check[ev_item[e]] += float(ev_clock[e]) * ev_delta[e]
            if not (numpy.array_equal(a_check, a) and numpy.array_equal(u_check, u)):
                raise ValueError("coefficients do not match the update history")
            live_ids = ids[ids >= 0]
            if numpy.unique(live_ids).shape[0] != live_ids.shape[0]:
                raise ValueError("an item id names two support items")
            prediction = _mode_of(body["prediction"], "prediction")
            budget = int(body["budget"])
            policy = BUDGET_POLICIES.index(body["budget_policy"])
            cache_mb = float(body.get("cache_mb", 0.0))
            expansion = _expansion_for(kernel, bool(body.get("expand", False)))
            if budget < 0 or not (cache_mb >= 0):
                raise ValueError("bad settings")
        except (KeyError, TypeError, ValueError, IndexError, OverflowError, AttributeError) as e:
            raise ValueError(Errors.S280.format(reason=str(e))) from None
        cdef Expansion typed_expansion = expansion
        self._free_state()
        self.kernel = kernel
        self._mode = prediction
        self.budget = budget
        self._policy = policy
        self.cache_limit = <int64_t>(cache_mb * 1048576.0)
        self.expansion = expansion
        self._ensure_support(n)
        cdef int64_t i
        for i in range(n):
            self._a[i] = a[i]
            self._u[i] = u[i]
            self._ids[i] = ids[i]
            self._alive[i] = 1
            if ids[i] >= 0:
                self._by_id[int(ids[i])] = i
        self._n_total = n
        self.n_support = n
        for e in range(ev_item.shape[0]):
            self.clock = ev_clock[e]
            self._add_event(ev_item[e], ev_delta[e])
            # The running sums too, in the order the original made them.
            self._a_sum += ev_delta[e]
            self._u_sum += float(ev_clock[e]) * ev_delta[e]
            if typed_expansion is not None:
                # Replayed in history order: the same sums as the original's, bit for bit
                # unless the budget subtracted forgotten items from them.
                typed_expansion.add_item(<PolynomialKernel>kernel, ev_item[e], ev_delta[e],
                                         float(ev_clock[e]) * ev_delta[e])
        self.clock = clock
        return self

    def __reduce__(self):
        return (_load_dual_perceptron, (self.to_bytes(),))


cdef void _drop_unseen_keys(PolynomialKernel poly) noexcept nogil:
    """Keep only the query keys some support item has had: every expanded feature with another
    key has weight 0 (a word seen in no mistake, for one). The kernel's key table is small and
    warm, the expansion's large and cold, and a query's pairs shrink with the square of its keys."""
    cdef int64_t j, m = 0
    for j in range(poly._qn):
        if poly._find(poly._qkeys[j]) >= 0:
            poly._qkeys[m] = poly._qkeys[j]
            poly._qvals[m] = poly._qvals[j]
            m += 1
    poly._qn = m


def _load_dual_perceptron(data):
    return DualPerceptron(Kernel()).from_bytes(data)


cdef inline int64_t _vote(const double* P, int64_t n) noexcept nogil:
    """The argmax of P (the first on ties), or -1 when every entry is equal (abstain)."""
    cdef int64_t c, best = 0
    cdef double lo = P[0]
    for c in range(1, n):
        if P[c] > P[best]:
            best = c
        if P[c] < lo:
            lo = P[c]
    if P[best] == lo:
        return -1
    return best
