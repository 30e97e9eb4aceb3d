# cython: infer_types=True
"""Averaged weights over hashed features: the one parameter store every component shares.

AveragedWeights trains float32 rows with lazy averaging (Daume's form) and scores with them; a
loaded model's rows are read in place by its base class FrozenRows (frozen.pyx), found through
the hash table of hashtable.pxd. Mixing tables trained apart is in mixing.pyx.
"""
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.math cimport NAN
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
cimport cython
import numpy

from .typedefs cimport hash_t, weight_t
from .weights cimport CHUNK, UEntry, FrozenRows, FROZEN_NONE, cell_of, chunk_of
from .frozen cimport _row_from
from .hashtable cimport Bucket, _bucket, _round_pow2, find_block, prefetch, rehash, slot_of
from .templates cimport mix64, TIED_BIT

# Names of frozen.pyx that were defined here once: every import of them from this module works.
from .frozen import (DEF_MIN_BUCKETS, MAX_CLASSES, PRECISIONS, half_conversion, half_to_float_array,
                     set_half_conversion, sparse_rows)

cdef extern from *:
    int ctz64 "__builtin_ctzll"(unsigned long long x) noexcept nogil


cdef inline uint64_t _ukey(int64_t row, int c) noexcept nogil:
    return (((<uint64_t>row) << 16) | <uint64_t>c) + 1


cdef inline weight_t _averaged(weight_t w, double u, double clock) noexcept nogil:
    # The one formula for an averaged weight, so scores computed on the fly, a materialized
    # view and saved weights agree to the bit.
    return <weight_t>(<double>w - u / clock)


cdef class AveragedWeights(FrozenRows):
    def __cinit__(self, int n_classes, size_t n_buckets=1 << 16):
        # FrozenRows.__cinit__ has checked n_classes and made the key table.
        self._rows_capacity = 0
        self._pool = NULL
        self._pool_used = 0
        self._pool_cap = 0
        self._rowmap = NULL
        self._kpr = (n_classes + CHUNK - 1) // CHUNK
        self._U = NULL
        self._u_capacity = 0
        self._u_count = 0
        self._umask = NULL
        self._mask_words = (n_classes + 63) // 64
        self._avg = NULL
        self._avg_valid = False
        self.use_averages = False
        self.clock = 0
        self.tie_width = 1
        self._dirty = NULL
        self._dirty_rows = 0
        self._jrows = NULL
        self._jn = 0
        self._jcap = 0
        self._jstart_rows = 0
        self._journal_lost = False

    def __dealloc__(self):
        # FrozenRows.__dealloc__ frees the key table and the hot rows. No method is called
        # here: when FrozenRows.__cinit__ refuses the arguments, this runs on an object whose
        # method table is still FrozenRows' (and whose pointers are all NULL).
        free(self._pool)
        free(self._rowmap)
        free(self._U)
        free(self._umask)
        free(self._avg)
        free(self._dirty)
        free(self._jrows)

    @property
    def has_accumulators(self):
        """Whether the averaging accumulators exist (only once something has been trained)."""
        return self._U != NULL

    @property
    def n_accumulators(self):
        """How many (row, class) averaging accumulators exist: one per weight updates touched."""
        return self._u_count

    @property
    def n_chunks(self):
        """How many chunks of 16 classes the current weights hold: those updates (or loaded
        nonzero weights) have written. A table read in place (load_frozen) holds none."""
        return self._pool_used

    @property
    def averages_materialized(self):
        """Whether average() has made a copy of the averaged weights that is still valid."""
        return self._avg_valid

    # The rows' chunks (see weights.pxd). Each class of a row is read and written as before, one
    # float each, so every sum is the same to the bit: an absent chunk reads as zeros.

    cdef weight_t* _chunk_w(self, size_t r, int k) except NULL nogil:
        # Row r's chunk k, made (at zero) if it has none. It may move the pool: pointers into it
        # from before are stale.
        cdef uint32_t* at = &self._rowmap[r * <size_t>self._kpr + <size_t>k]
        cdef size_t cap
        cdef weight_t* pool
        if at[0] == 0:
            if self._pool_used == self._pool_cap:
                cap = max(self._pool_cap * 2, <size_t>1024)
                if cap > <size_t>0xFFFFFFFF:
                    cap = <size_t>0xFFFFFFFF
                if cap <= self._pool_used:
                    with gil:
                        raise MemoryError("too many weight chunks")
                pool = <weight_t*>realloc(self._pool, cap * CHUNK * sizeof(weight_t))
                if pool == NULL:
                    with gil:
                        raise MemoryError("could not grow the weight rows")
                self._pool = pool
                self._pool_cap = cap
            memset(&self._pool[self._pool_used * CHUNK], 0, CHUNK * sizeof(weight_t))
            self._pool_used += 1
            at[0] = <uint32_t>self._pool_used
        return &self._pool[<size_t>(at[0] - 1) * CHUNK]

    cdef weight_t* _cell_w(self, size_t r, int c) except NULL nogil:
        return self._chunk_w(r, c // CHUNK) + c % CHUNK

    cdef void _row_into(self, size_t r, weight_t* out) noexcept nogil:
        # out[:n_classes] = row r.
        cdef int k, C = self.n_classes
        cdef int lo, n
        cdef const weight_t* chunk
        for k in range(self._kpr):
            lo = k * CHUNK
            n = min(CHUNK, C - lo)
            chunk = chunk_of(self, r, k)
            if chunk == NULL:
                memset(&out[lo], 0, n * sizeof(weight_t))
            else:
                memcpy(&out[lo], chunk, n * sizeof(weight_t))

    cdef void _row_add(self, size_t r, weight_t* scores) noexcept nogil:
        # scores[:n_classes] += row r (an absent chunk adds nothing, as its zeros would).
        cdef int k, j, C = self.n_classes
        cdef int lo, n
        cdef const weight_t* chunk
        for k in range(self._kpr):
            chunk = chunk_of(self, r, k)
            if chunk != NULL:
                lo = k * CHUNK
                n = min(CHUNK, C - lo)
                for j in range(n):
                    scores[lo + j] += chunk[j]

    cdef int _row_set(self, size_t r, const weight_t* src) except -1 nogil:
        # Row r = src[:n_classes]; a chunk of zeros is made only where the row has one already.
        cdef int k, j, C = self.n_classes
        cdef int lo, n
        cdef bint nonzero
        cdef weight_t* chunk
        for k in range(self._kpr):
            lo = k * CHUNK
            n = min(CHUNK, C - lo)
            nonzero = chunk_of(self, r, k) != NULL
            j = 0
            while not nonzero and j < n:
                nonzero = src[lo + j] != 0
                j += 1
            if nonzero:
                chunk = self._chunk_w(r, k)
                memcpy(chunk, &src[lo], n * sizeof(weight_t))
        return 0

    cdef void _row_clear(self, size_t r) noexcept nogil:
        # Row r reads as zeros (its chunks, if any, are left unused).
        memset(&self._rowmap[r * <size_t>self._kpr], 0, self._kpr * sizeof(uint32_t))

    cdef void _free_rows(self) noexcept nogil:
        free(self._pool)
        free(self._rowmap)
        self._pool = NULL
        self._rowmap = NULL
        self._pool_used = 0
        self._pool_cap = 0

    cdef int64_t _insert(self, hash_t key) except -1 nogil:
        """Return the row of key, creating a zero row if it is new (a row to write to: loaded
        rows read in place are copied into float32 weights first)."""
        if self.frozen_type != FROZEN_NONE:
            self._thaw()
        if key == 0:
            key = 1
        cdef size_t b = slot_of(self._table, self._capacity - 1, key)
        if self._table[b].key == key:
            return self._table[b].row
        if (self.n_rows + 1) * 2 > self._capacity:
            self._grow_table()
            return self._insert(key)
        if self.n_rows == self._rows_capacity:
            self._grow_rows(max(self._rows_capacity * 2, 1024))
        cdef int64_t row = self.n_rows
        self._table[b].key = key
        self._table[b].row = row
        self.n_rows += 1
        self._row_clear(row)
        if self._umask != NULL:
            memset(&self._umask[row * self._mask_words], 0, self._mask_words * sizeof(uint64_t))
        if self.noise_scale != 0.0:
            self._init_noise(key, row)
        return row

    cdef int _init_noise(self, hash_t key, int64_t row) except -1 nogil:
        # A pure function of (seed, key, class): runs that see features in any order agree.
        cdef int c
        cdef hash_t h
        for c in range(self.n_classes):
            h = mix64(key ^ mix64(self.noise_seed + <hash_t>c * 0x9e3779b97f4a7c15ULL))
            self._cell_w(<size_t>row, c)[0] = <weight_t>(
                self.noise_scale * ((<double>(h >> 11) / 9007199254740992.0) * 2.0 - 1.0))
        return 0

    cdef int _grow_table(self) except -1 nogil:
        cdef Bucket* table = rehash(self._table, self._capacity, self._capacity * 2)
        if table == NULL:
            with gil:
                raise MemoryError("could not grow the feature table")
        self._table = table
        self._capacity *= 2
        return 0

    cdef int _grow_rows(self, size_t n) except -1 nogil:
        cdef uint32_t* rowmap = <uint32_t*>realloc(self._rowmap, n * <size_t>self._kpr * sizeof(uint32_t))
        if rowmap == NULL:
            with gil:
                raise MemoryError("could not grow the weight rows")
        self._rowmap = rowmap
        cdef uint64_t* umask
        if self._umask != NULL:
            umask = <uint64_t*>realloc(self._umask, n * self._mask_words * sizeof(uint64_t))
            if umask == NULL:
                with gil:
                    raise MemoryError("could not grow the weight rows")
            self._umask = umask
        free(self._avg)
        self._avg = NULL
        self._avg_valid = False
        self._rows_capacity = n
        return 0

    cdef int _thaw(self) except -1 nogil:
        """Copy loaded rows (read in place, in their saved precision) into float32 weights this
        table owns, so they can be trained; nothing to do for rows W already holds."""
        if self.frozen_type == FROZEN_NONE:
            return 0
        cdef size_t C = self.n_classes
        cdef size_t cap = max(self.n_rows, <size_t>1024)
        # The rows of a table read in place are all there is (load_frozen released any others).
        # The chunks are counted first, so that the pool is allocated once and filling it
        # cannot fail half-way.
        self._free_rows()
        cdef size_t r, b, n_chunks = 0
        cdef int k, j, lo, n
        cdef int64_t v
        cdef weight_t* row = <weight_t*>malloc(max(C, <size_t>1) * sizeof(weight_t))
        if row != NULL:
            for r in range(self.n_rows):
                self._frozen_row(r, row)
                for k in range(self._kpr):
                    lo = k * CHUNK
                    n = min(CHUNK, <int>C - lo)
                    for j in range(n):
                        if row[lo + j] != 0:
                            n_chunks += 1
                            break
        self._rowmap = <uint32_t*>calloc(cap * <size_t>self._kpr, sizeof(uint32_t))
        self._pool_cap = max(n_chunks, <size_t>1024)
        self._pool = <weight_t*>malloc(self._pool_cap * CHUNK * sizeof(weight_t))
        # Buckets get their row index back (one pass through _rows_by_entry, not a search per
        # bucket).
        cdef int64_t* row_at = NULL
        if row != NULL and self._rowmap != NULL and self._pool != NULL and n_chunks < <size_t>0xFFFFFFFF:
            row_at = self._rows_by_entry()
        if row_at == NULL:
            free(row)
            self._free_rows()
            with gil:
                raise MemoryError("could not allocate the weight rows")
        for r in range(self.n_rows):
            self._frozen_row(r, row)
            self._row_set(r, row)   # within the pool's capacity: no allocation
        free(row)
        self._drop_hot_rows()
        for b in range(self._capacity):
            v = self._table[b].row
            if self._table[b].key != 0:
                self._table[b].row = _row_from(v, row_at)
        free(row_at)
        self._rows_capacity = cap
        with gil:
            self._forget_frozen()
        return 0

    cdef int _ensure_accumulators(self) except -1 nogil:
        # No accumulator is zero: until now W was its own average (clock 0, or a loaded model),
        # and W - 0 / clock keeps it so.
        if self._U == NULL:
            self._U = <UEntry*>calloc(1024, sizeof(UEntry))
            self._umask = <uint64_t*>calloc(max(self._rows_capacity, 1) * self._mask_words, sizeof(uint64_t))
            if self._U == NULL or self._umask == NULL:
                self._free_accumulators()
                with gil:
                    raise MemoryError("could not allocate the averaging accumulators")
            self._u_capacity = 1024
            self._u_count = 0
        return 0

    cdef void _free_accumulators(self) noexcept nogil:
        free(self._U)
        free(self._umask)
        self._U = NULL
        self._umask = NULL
        self._u_capacity = 0
        self._u_count = 0

    cdef double* _u_slot(self, int64_t row, int c) except NULL nogil:
        # The accumulator of (row, c), created at zero (and marked in _umask) if new. The table
        # is filled up to 3/4: it is read only by updates and averaging, not by scoring W.
        if (self._u_count + 1) * 4 > self._u_capacity * 3:
            self._u_grow()
        cdef uint64_t key = _ukey(row, c)
        cdef size_t mask = self._u_capacity - 1
        cdef size_t b = <size_t>(mix64(key) & mask)
        while self._U[b].key != 0:
            if self._U[b].key == key:
                return &self._U[b].value
            b = (b + 1) & mask
        self._U[b].key = key
        self._U[b].value = 0.0
        self._u_count += 1
        self._umask[row * self._mask_words + c // 64] |= (<uint64_t>1) << (c % 64)
        return &self._U[b].value

    cdef double _u_get(self, int64_t row, int c) noexcept nogil:
        if self._U == NULL:
            return 0.0
        cdef uint64_t key = _ukey(row, c)
        cdef size_t mask = self._u_capacity - 1
        cdef size_t b = <size_t>(mix64(key) & mask)
        while self._U[b].key != 0:
            if self._U[b].key == key:
                return self._U[b].value
            b = (b + 1) & mask
        return 0.0

    cdef int _u_grow(self) except -1 nogil:
        cdef size_t old_capacity = self._u_capacity
        cdef size_t capacity = max(old_capacity * 2, <size_t>1024)
        cdef UEntry* old = self._U
        cdef UEntry* table = <UEntry*>calloc(capacity, sizeof(UEntry))
        if table == NULL:
            with gil:
                raise MemoryError("could not grow the averaging accumulators")
        cdef size_t i, b, mask = capacity - 1
        for i in range(old_capacity):
            if old[i].key != 0:
                b = <size_t>(mix64(old[i].key) & mask)
                while table[b].key != 0:
                    b = (b + 1) & mask
                table[b] = old[i]
        self._U = table
        self._u_capacity = capacity
        free(old)
        return 0

    cdef void _averaged_row(self, int64_t r, weight_t* out) noexcept nogil:
        # Row r's averaged weights W - U / clock (W itself where no accumulator exists, which
        # is what the formula gives there).
        self._row_into(<size_t>r, out)
        if self._U == NULL or self.clock == 0:
            return
        cdef double t = <double>self.clock
        cdef int w, c
        cdef uint64_t bits
        for w in range(self._mask_words):
            bits = self._umask[r * self._mask_words + w]
            while bits:
                c = w * 64 + ctz64(bits)
                out[c] = _averaged(out[c], self._u_get(r, c), t)
                bits &= bits - 1

    cdef bint _averages_on_the_fly(self) noexcept nogil:
        return self.use_averages and not self._avg_valid and self._U != NULL and self.clock > 0

    cdef void prefetch_keys(self, const hash_t* keys, int n_keys) noexcept nogil:
        # Start loading the buckets of keys that add_rows will look up soon.
        cdef size_t mask = self._capacity - 1
        cdef int i
        for i in range(n_keys):
            prefetch(&self._table[_bucket(keys[i] if keys[i] else 1, mask)])

    cdef void add_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil:
        # Lookups are cache misses, so they are issued in three passes (buckets, then rows,
        # then sums) to let the memory system serve them in parallel.
        cdef int j, c, k, n_found = 0
        cdef int C = self.n_classes
        cdef bint dense = self.use_averages and self._avg_valid
        cdef int64_t found[64]
        cdef const weight_t* w
        cdef const weight_t* chunk
        cdef int start
        if self.frozen_type != FROZEN_NONE:
            self._add_frozen_rows(keys, n_keys, scores)
            return
        if self._averages_on_the_fly():
            self._add_averaged_rows(keys, n_keys, scores)
            return
        for start in range(0, n_keys, 64):
            n_found = find_block(self._table, self._capacity, keys, start, min(n_keys, start + 64), found)
            if dense:   # average()'s materialized view: dense rows
                for j in range(n_found):
                    # Every cache line of the row: a parser's rows (~100 classes) span seven.
                    w = &self._avg[found[j] * C]
                    for c in range(0, C, 16):
                        prefetch(&w[c])
                for j in range(n_found):
                    w = &self._avg[found[j] * C]
                    for c in range(C):
                        scores[c] += w[c]
                continue
            for j in range(n_found):
                prefetch(&self._rowmap[<size_t>found[j] * <size_t>self._kpr])
            for j in range(n_found):
                for k in range(self._kpr):
                    chunk = chunk_of(self, <size_t>found[j], k)
                    if chunk != NULL:
                        prefetch(chunk)
            for j in range(n_found):
                self._row_add(<size_t>found[j], scores)

    cdef void score_prefix(self, const hash_t* keys, int n_keys, int m, weight_t* out) noexcept nogil:
        # out[:m] += classes 0..m-1 of the rows, the floats add_rows makes from out to the bit
        # (each class is summed over the rows in key order either way), reading only those
        # classes of a loaded table: a parser state where only SHIFT and BREAK are valid needs
        # two of 108. The caller sets out[:m] (zeros, or the sums of rows before these keys).
        cdef int c, C = self.n_classes
        cdef weight_t tmp[256]
        cdef weight_t* full
        if m > C:
            m = C
        if self.frozen_type == FROZEN_NONE or m == C:
            full = &tmp[0]
            if C > 256:
                full = <weight_t*>malloc(C * sizeof(weight_t))
            if full == NULL:   # out of memory: nothing to read the sums into
                for c in range(m):
                    out[c] = NAN
                return
            memset(full, 0, C * sizeof(weight_t))
            memcpy(full, out, m * sizeof(weight_t))
            self.add_rows(keys, n_keys, full)
            memcpy(out, full, m * sizeof(weight_t))
            if C > 256:
                free(full)
            return
        self._add_frozen_prefix(keys, n_keys, m, out)

    cdef void _add_averaged_rows(self, const hash_t* keys, int n_keys, weight_t* scores) noexcept nogil:
        # Scores with the average W - U / clock of each row, without a copy of the model.
        cdef int i, c, j, k, lo, n
        cdef int C = self.n_classes
        cdef int words = self._mask_words
        cdef double clock = <double>self.clock
        cdef int64_t r
        cdef const weight_t* chunk
        cdef const uint64_t* bits
        cdef weight_t x
        for i in range(n_keys):
            r = self.find(keys[i])
            if r >= 0:
                bits = &self._umask[r * words]
                for k in range(self._kpr):
                    chunk = chunk_of(self, <size_t>r, k)
                    lo = k * CHUNK
                    n = min(CHUNK, C - lo)
                    for j in range(n):
                        c = lo + j
                        x = 0 if chunk == NULL else chunk[j]
                        if bits[c >> 6] & ((<uint64_t>1) << (c & 63)):
                            scores[c] += _averaged(x, self._u_get(r, c), clock)
                        elif chunk != NULL:
                            scores[c] += x

    cdef int update(self, hash_t key, int clas, weight_t delta) except -1 nogil:
        if delta == 0:
            return 0
        cdef int64_t r = self._insert(key)
        if self._U == NULL:
            self._ensure_accumulators()
        cdef int c = clas
        cdef int end
        if self.tie_width > 1 and (key & TIED_BIT):
            c -= clas % self.tie_width
            end = c + self.tie_width
        else:
            end = c + 1
        cdef double* u
        while c < end:
            self._cell_w(<size_t>r, c)[0] += delta
            u = self._u_slot(r, c)
            u[0] += <double>self.clock * <double>delta
            if self._dirty != NULL:
                self._journal_mark(r, c)
            c += 1
        self._avg_valid = False
        self.version += 1
        return 0

    cdef int update_many(self, const hash_t* keys, int n_keys, int clas, weight_t delta) except -1 nogil:
        cdef int i
        for i in range(n_keys):
            self.update(keys[i], clas, delta)
        return 0

    cdef void tick(self) noexcept nogil:
        self.clock += 1
        self._avg_valid = False   # the average W - U / clock moves with the clock alone

    def next_example(self):
        """Tick the averaging clock: call once per training example, mistake or not."""
        self.tick()

    def average(self):
        """Materialize the averaged view (W - U / clock), if updates have invalidated it.

        Averaged scores do not need it (they are computed as rows are read); it makes them
        cheaper to read, for as long as no update or clock tick invalidates it, at the cost of
        one more copy of the weights.
        """
        if self._avg_valid:
            return
        cdef size_t n = self.n_rows * self.n_classes
        if self._U == NULL:
            return   # W is the average
        if self._avg == NULL and self._rows_capacity > 0:
            self._avg = <weight_t*>calloc(self._rows_capacity * self.n_classes, sizeof(weight_t))
            if self._avg == NULL:
                raise MemoryError()
        cdef size_t r, C = self.n_classes
        with nogil:
            for r in range(self.n_rows):
                self._averaged_row(r, &self._avg[r * C])
        self._avg_valid = True

    def set_use_averages(self, bint value):
        """Score with the averaged weights (prediction) or the current weights (training).
        Setting the value it already has changes nothing, the version included: every predict
        call sets it, and a new version would empty the score caches keyed on it (a loaded
        model's word-type cache) at every batch."""
        if value == self.use_averages:
            return
        self.use_averages = value
        self.version += 1

    def set_tie_width(self, int width):
        """Update keys marked tied (TIED_BIT) across groups of `width` classes (1 = never)."""
        if width < 1 or self.n_classes % width:
            raise ValueError(f"tie width {width} does not divide {self.n_classes} classes")
        self.tie_width = width

    def set_noise(self, double scale, hash_t seed=0):
        """Start rows created from now on at seeded uniform noise in [-scale, scale]."""
        if not scale >= 0.0:
            raise ValueError(f"noise scale must be >= 0, got {scale}")
        self.noise_scale = scale
        self.noise_seed = seed

    def reset_to_average(self):
        """Replace the current weights by the averaged ones, keeping the running average exact.

        The jump is recorded as an ordinary update at the current clock, so the average over all
        examples stays correct (sun2009's modified parameter averaging).
        """
        if self._U == NULL or self.clock == 0:
            return   # W is the average already
        cdef size_t i
        cdef double delta, t = <double>self.clock
        cdef weight_t avg
        cdef weight_t* w
        cdef uint64_t key
        for i in range(self._u_capacity):
            key = self._U[i].key
            if key == 0:
                continue
            key -= 1
            w = self._cell_w(<size_t>(key >> 16), <int>(key & 0xffff))
            avg = _averaged(w[0], self._U[i].value, t)
            delta = <double>avg - <double>w[0]
            w[0] = avg
            self._U[i].value += t * delta
            if self._dirty != NULL:
                self._journal_mark(<int64_t>(key >> 16), <int>(key & 0xffff))
        self._avg_valid = False
        self.version += 1

    def resize(self, int n_classes):
        """Grow the number of classes, keeping existing weights; new columns start at zero."""
        if n_classes < self.n_classes:
            raise ValueError("AveragedWeights can only grow")
        if n_classes == self.n_classes:
            return
        if n_classes > MAX_CLASSES:
            raise ValueError(f"n_classes must be at most {MAX_CLASSES}, got {n_classes}")
        self._thaw()
        self._drop_journal()
        cdef size_t r
        cdef size_t cap = max(self._rows_capacity, 1)
        cdef int words_old = self._mask_words, words = (n_classes + 63) // 64
        # A chunk holds the same classes whatever n_classes is (the new ones are zeros in the
        # last chunk's tail, or new chunks): only each row's list of chunks grows.
        cdef int kpr_old = self._kpr, kpr = (n_classes + CHUNK - 1) // CHUNK
        cdef uint32_t* rowmap = <uint32_t*>calloc(cap * <size_t>kpr, sizeof(uint32_t))
        cdef uint64_t* umask = NULL
        if self._umask != NULL:
            umask = <uint64_t*>calloc(cap * words, sizeof(uint64_t))
        if rowmap == NULL or (self._umask != NULL and umask == NULL):
            free(rowmap)
            free(umask)
            raise MemoryError()
        for r in range(self.n_rows):
            memcpy(&rowmap[r * kpr], &self._rowmap[r * kpr_old], kpr_old * sizeof(uint32_t))
            if umask != NULL:   # accumulators are keyed by (row, class): only the marks move
                memcpy(&umask[r * words], &self._umask[r * words_old], words_old * sizeof(uint64_t))
        free(self._rowmap)
        free(self._avg)
        self._rowmap = rowmap
        self._kpr = kpr
        if umask != NULL:
            free(self._umask)
            self._umask = umask
        self._mask_words = words
        self._avg = NULL
        self._avg_valid = False
        self._rows_capacity = cap
        self.n_classes = n_classes
        self.version += 1

    # Python-level access, for tests and for the component layer.

    def get(self, uint64_t key, int clas, bint averaged=False):
        cdef int64_t r = self.find(key)
        if r < 0:
            return 0.0
        if not 0 <= clas < self.n_classes:
            raise IndexError(f"class {clas} out of range for {self.n_classes} classes")
        cdef weight_t[::1] row
        if self.frozen_type != FROZEN_NONE:
            row = numpy.empty((self.n_classes,), dtype=numpy.float32)
            self._frozen_row(r, &row[0])
            return float(row[clas])
        cdef weight_t w = cell_of(self, <size_t>r, clas)
        if averaged and self._U != NULL and self.clock > 0:
            return float(_averaged(w, self._u_get(r, clas), <double>self.clock))
        return float(w)

    def add(self, uint64_t key, int clas, float delta):
        if not 0 <= clas < self.n_classes:
            raise IndexError(f"class {clas} out of range for {self.n_classes} classes")
        self.update(key, clas, delta)

    def score(self, keys):
        """Sum the rows of `keys` (a sequence of uint64) into a vector of class scores."""
        cdef uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        out = numpy.zeros((self.n_classes,), dtype=numpy.float32)
        cdef float[::1] o = out
        if k.shape[0]:
            self.add_rows(&k[0], k.shape[0], &o[0])
        return out

    def score_prefix_of(self, keys, int m):
        """score(keys)[:m], the same floats, reading only the first m classes of a loaded table."""
        if not 0 <= m <= self.n_classes:
            raise ValueError(f"m must be in 0..{self.n_classes}, got {m}")
        cdef uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        out = numpy.zeros((max(m, 1),), dtype=numpy.float32)
        cdef float[::1] o = out
        if k.shape[0] and m:
            self.score_prefix(&k[0], k.shape[0], m, &o[0])
        return out[:m]

    def to_arrays(self, bint averaged=True, bint prune=True):
        """Return (keys, weights): keys sorted ascending so identical models give identical bytes.

        With `prune`, rows whose weights are all zero are dropped. The weights are gathered once,
        in key order, straight into the output (a model can be hundreds of MB); `sorted_rows`
        and `gather` do the same a slice at a time.
        """
        keys, rows = self.sorted_rows(averaged, prune)
        return keys, self.gather(rows, averaged)

    def sorted_rows(self, bint averaged=True, bint prune=True, double min_abs=0.0):
        """(keys, rows): every key in ascending order with its row index, for `gather`.

        With `prune`, keys whose (averaged) weights are all at most `min_abs` in absolute value
        are left out (all zero, with the default 0).
        """
        cdef size_t C = self.n_classes
        keys, rows = self._keys_and_rows()
        cdef int64_t[::1] r
        cdef size_t i, c
        order = numpy.argsort(keys, kind="stable")
        keys = keys[order]
        rows = rows[order]
        cdef unsigned char[::1] kp
        cdef bint on_the_fly = averaged and self._U != NULL and self.clock > 0
        cdef double t = <double>self.clock
        cdef size_t at
        cdef weight_t[::1] buf = numpy.empty((C,), dtype=numpy.float32)
        cdef weight_t v
        if prune and len(keys):
            keep = numpy.zeros((len(keys),), dtype=numpy.uint8)
            kp = keep
            r = rows
            for i in range(len(keys)):
                if self.frozen_type != FROZEN_NONE:
                    self._frozen_row(r[i], &buf[0])
                elif on_the_fly:
                    self._averaged_row(r[i], &buf[0])
                else:
                    self._row_into(<size_t>r[i], &buf[0])
                for c in range(C):
                    v = buf[c]
                    if v > min_abs or v < -min_abs:
                        kp[i] = 1
                        break
            keep = keep.view(numpy.bool_)
            keys = keys[keep]
            rows = rows[keep]
        return keys, rows

    def gather(self, rows, bint averaged=True):
        """The weights (averaged: W - U / clock, computed here) of `rows`, as float32 n x C."""
        cdef int64_t[::1] r = numpy.ascontiguousarray(rows, dtype=numpy.int64)
        cdef size_t C = self.n_classes
        out = numpy.empty((r.shape[0], C), dtype=numpy.float32)
        cdef float[:, ::1] o = out
        cdef size_t i, c
        cdef double t = <double>self.clock
        cdef const weight_t* w
        cdef const double* u
        for i in range(<size_t>r.shape[0]):
            if r[i] < 0 or <size_t>r[i] >= self.n_rows:
                raise IndexError(f"row {r[i]} out of range for {self.n_rows} rows")
            if self.frozen_type != FROZEN_NONE:
                self._frozen_row(r[i], &o[i, 0])
                continue
            if averaged:
                self._averaged_row(r[i], &o[i, 0])
            else:
                self._row_into(<size_t>r[i], &o[i, 0])
        return out

    def state_arrays(self):
        """The full training state (keys, W, U, clock) as dense arrays, for distributed mixing
        (`WeightsMixer.add_arrays`); pickling sends `state_cells`, the nonzero cells only."""
        keys, rows = self.sorted_rows(averaged=False, prune=False)
        W = self.gather(rows, averaged=False)
        cdef size_t C = self.n_classes
        U = numpy.zeros((len(keys), C), dtype=numpy.float64)
        if self._U == NULL:
            return keys, W, U, self.clock
        position = numpy.empty((self.n_rows,), dtype=numpy.int64)
        position[rows] = numpy.arange(len(rows), dtype=numpy.int64)
        cdef int64_t[::1] pos = position
        cdef double[:, ::1] u = U
        cdef size_t i
        cdef uint64_t key
        for i in range(self._u_capacity):
            key = self._U[i].key
            if key != 0:
                key -= 1
                u[pos[key >> 16], key & 0xffff] = self._U[i].value
        return keys, W, U, self.clock

    # Training side of distributed mixing: the cdef parts update() and the table need are here;
    # mixing.pyx has the rest (cells read and written in place, the change journal, the mixing
    # formula replayed in place, the training state as sparse cells).

    cdef int _journal_mark(self, int64_t row, int c) except -1 nogil:
        # Record that update() wrote (row, c); a row's first mark appends it to _jrows.
        cdef size_t words = self._mask_words
        cdef size_t n, at, w
        cdef uint64_t* dirty
        cdef int64_t* jrows
        cdef bint first = True
        if <size_t>row >= self._dirty_rows:
            n = max(self._rows_capacity, <size_t>row + 1)
            dirty = <uint64_t*>realloc(self._dirty, n * words * sizeof(uint64_t))
            if dirty == NULL:
                with gil:
                    raise MemoryError("could not grow the change journal")
            memset(&dirty[self._dirty_rows * words], 0, (n - self._dirty_rows) * words * sizeof(uint64_t))
            self._dirty = dirty
            self._dirty_rows = n
        at = <size_t>row * words
        for w in range(words):
            if self._dirty[at + w]:
                first = False
                break
        if first:
            if self._jn == self._jcap:
                jrows = <int64_t*>realloc(self._jrows, max(self._jcap * 2, <size_t>1024) * sizeof(int64_t))
                if jrows == NULL:
                    with gil:
                        raise MemoryError("could not grow the change journal")
                self._jrows = jrows
                self._jcap = max(self._jcap * 2, <size_t>1024)
            self._jrows[self._jn] = row
            self._jn += 1
        self._dirty[at + <size_t>(c // 64)] |= (<uint64_t>1) << (c % 64)
        return 0

    cdef void _journal_free(self) noexcept nogil:
        free(self._dirty)
        free(self._jrows)
        self._dirty = NULL
        self._jrows = NULL
        self._dirty_rows = 0
        self._jn = 0
        self._jcap = 0

    def _drop_journal(self):
        # A reload or resize renumbers rows or classes: a started journal no longer says anything.
        if self._dirty != NULL:
            self._journal_free()
            self._journal_lost = True

    cdef int64_t _insert_zero(self, hash_t key) except -1 nogil:
        # The row of key, created at zero if new (no noise: a mix's new rows are what the shards
        # sent, and zero elsewhere, as in WeightsMixer).
        cdef size_t before = self.n_rows
        cdef int64_t r = self._insert(key)
        if self.n_rows > before:
            self._row_clear(<size_t>r)
        return r

    @property
    def journal_on(self):
        """Whether the change journal records updates (see start_journal)."""
        return self._dirty != NULL

    cdef bint _row_dirty(self, size_t r) noexcept nogil:
        cdef size_t w
        if r >= self._dirty_rows:
            return False
        for w in range(<size_t>self._mask_words):
            if self._dirty[r * self._mask_words + w]:
                return True
        return False

    cdef double _u_at(self, int64_t row, int c) noexcept nogil:
        # The accumulator of (row, c), looked up only where _umask says one exists.
        if self._umask == NULL or not (self._umask[row * self._mask_words + c // 64] >> (c % 64)) & 1:
            return 0.0
        return self._u_get(row, c)

    cdef bint _cell_out(self, size_t r, int c, bint is_new) noexcept nogil:
        # Whether journal_cells reports (r, c): written since the start, or non-zero in a new row.
        if r < self._dirty_rows and (self._dirty[r * self._mask_words + c // 64] >> (c % 64)) & 1:
            return True
        if not is_new:
            return False
        if cell_of(self, r, c) != 0:
            return True
        return self._u_at(r, c) != 0.0

    def start_journal(self):
        """Start the change journal afresh: from now on every (key, class) that an update (or
        reset_to_average) writes is recorded, and rows created are new, until the next call.
        Costs a bit per (row, class) written and one test per update."""
        return _mixing()._start_journal(self)

    def stop_journal(self):
        """Stop recording changes and free the journal."""
        return _mixing()._stop_journal(self)

    def journal_rows(self):
        """(keys, new): the keys of the rows updated or created since start_journal(), ascending,
        and whether each row is new (created since then)."""
        return _mixing()._journal_rows(self)

    def journal_cells(self):
        """What changed since start_journal(), sparse: (keys, cols, W, U, new_keys) with the
        current W and U of every cell an update wrote and every non-zero cell of a new row, cells
        in key order, and the new rows' keys ascending. Reads only the table's buckets and the
        written cells: no dense copy of the state."""
        return _mixing()._journal_cells(self)

    def rows_of(self, keys):
        """The row of each key (int64), -1 where absent."""
        return _mixing()._rows_of(self, keys)

    def get_cells(self, keys, cols):
        """(W, U) at the cells (keys[i], cols[i]): float32 current weights and float64
        accumulators, zero where the key is absent."""
        return _mixing()._get_cells(self, keys, cols)

    def insert_keys(self, keys):
        """Create a zero row for each key not in the table yet."""
        return _mixing()._insert_keys(self, keys)

    def set_cells(self, keys, cols, W, U):
        """Write W (float32) and U (float64, the averaging accumulators) at the cells
        (keys[i], cols[i]) in place; keys not in the table get zero rows first. Other cells, the
        clock and the journal are left as they are."""
        return _mixing()._set_cells(self, keys, cols, W, U)

    def replay_mix(self, w_factors, double w_scale, u_factors, double u_scale, int64_t clock):
        """Every cell in place through the mixing formula of shards that all hold its value:
        W <- (sum_k float32(w_factors[k]) * W) * float32(w_scale), in float32 and in that order
        (W unchanged when w_factors is empty; no scaling when w_scale is 1), U <-
        (sum_k U * u_factors[k]) * u_scale in float64; then the clock is `clock`. With the
        factors WeightsMixer uses, a cell no shard changed gets the value the mixer gives it."""
        return _mixing()._replay_mix(self, w_factors, w_scale, u_factors, u_scale, clock)

    def state_cells(self):
        """The training state sparsely: (keys, cells, W, U, clock) with every key ascending and
        the cells where W or U is not zero, as flat indices position * n_classes + class (in
        ascending order), with their W (float32) and U (float64). `load_cells` reads it back."""
        return _mixing()._state_cells(self)

    def load_cells(self, keys, cells, W, U, int64_t clock=0):
        """Replace the contents by a sparse state (as `state_cells` gives it): the keys
        (ascending, each once) with zero rows, then W and U at the flat cells."""
        return _mixing()._load_cells(self, keys, cells, W, U, clock)

    def load_arrays(self, keys, weights, accumulators=None, clock=0):
        """Replace the contents by `weights` for `keys`; the average restarts from them."""
        keys = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        weights = numpy.ascontiguousarray(weights, dtype=numpy.float32)
        if weights.ndim != 2 or weights.shape[0] != keys.shape[0] or weights.shape[1] != self.n_classes:
            raise ValueError(
                f"weights of shape {weights.shape} do not fit {keys.shape[0]} keys x {self.n_classes} classes"
            )
        if accumulators is not None:
            accumulators = numpy.ascontiguousarray(accumulators, dtype=numpy.float64)
            if accumulators.shape != weights.shape:
                raise ValueError("accumulators must have the shape of weights")
        self._drop_journal()
        self._clear(max(self._capacity, _round_pow2(2 * len(keys) + 2)))
        self._free_accumulators()
        if self.frozen_type != FROZEN_NONE:
            self._forget_frozen()
        self._free_rows()
        self._rows_capacity = 0
        self._grow_rows(max(len(keys), 1024))
        if accumulators is not None:
            self._ensure_accumulators()
        cdef const uint64_t[::1] k = keys
        cdef const float[:, ::1] w = weights
        cdef const double[:, ::1] u
        if accumulators is not None:
            u = accumulators
        cdef size_t i, C = self.n_classes
        cdef int c
        cdef int64_t r
        for i in range(len(keys)):
            r = self._insert(k[i])
            self._row_set(<size_t>r, &w[i, 0])
            if accumulators is not None:
                for c in range(<int>C):
                    if u[i, c] != 0.0:
                        self._u_slot(r, c)[0] = u[i, c]
        self.clock = clock
        self._avg_valid = False
        self.version += 1

    cdef int _release_rows(self) except -1:
        # load_frozen replaces the rows: the weights, accumulators and journal go.
        self._drop_journal()
        self._free_rows()
        self._free_accumulators()
        free(self._avg)
        self._avg = NULL
        self._avg_valid = False
        self._rows_capacity = 0
        self.clock = 0
        return 0

    def __reduce__(self):
        if self.frozen_type != FROZEN_NONE:
            return (_rebuild_frozen, (self.n_classes, self._frozen_keys(), self._frozen_owner, self.use_averages,
                                      self.noise_scale, self.noise_seed, self.tie_width))
        # The training state as its nonzero cells: a dense copy of W and U would be ~1.8 GB for
        # a parser trained in this process (n_process=2 pickles the live component).
        keys, cells, W, U, clock = self.state_cells()
        return (_rebuild_cells, (self.n_classes, self._capacity, keys, cells, W, U, clock, self.use_averages,
                                 self.noise_scale, self.noise_seed, self.tie_width))


def _rebuild_frozen(n_classes, keys, arrays, use_averages, noise_scale, noise_seed, tie_width):
    weights = AveragedWeights(n_classes, 1)
    weights.set_tie_width(tie_width)
    weights.load_frozen(keys, *arrays)
    weights.set_use_averages(use_averages)
    weights.set_noise(noise_scale, noise_seed)
    return weights


def _rebuild_cells(n_classes, n_buckets, keys, cells, W, U, clock, use_averages, noise_scale, noise_seed,
                   tie_width):
    weights = AveragedWeights(n_classes, n_buckets)
    weights.set_tie_width(tie_width)
    weights.load_cells(keys, cells, W, U, clock)
    weights.set_use_averages(use_averages)
    weights.set_noise(noise_scale, noise_seed)
    return weights


def _mixing():
    # mixing.pyx cimports this module: imported on first use.
    from . import mixing
    return mixing


# WeightsMixer, mix_weights and mixing_coefficients were defined here once; mixing.pyx has them,
# and imports this module, so they are looked up on first use.
def __getattr__(name):
    if name in ("WeightsMixer", "mix_weights", "mixing_coefficients"):
        from . import mixing
        return getattr(mixing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
