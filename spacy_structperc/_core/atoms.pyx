# cython: infer_types=True
"""Atom rows per word type, cached by orth id and gathered for many tokens in one C loop.

A lexical atom depends only on the word's text, so each word type's row is computed once (in
Python, by the definitions in spacy_structperc/atoms.py) and stored here; the rows of a batch
of tokens are then copied by one loop over their orth ids. The table knows nothing of spaCy: it
maps uint64 keys to uint64 rows.

Thread safety: every method runs with the GIL held and never releases it or calls back into
Python while it reads or writes the table, so a row is only ever seen complete and `add` of a
key another thread added first keeps the first row (equal anyway: rows are functions of the
text).
"""
from libc.stdlib cimport calloc, malloc, realloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport uint64_t, int64_t
import numpy

from .templates cimport mix64


cdef class AtomTable:
    """uint64 key -> a row of `n_cols` uint64 atoms (open addressing; key 0 is kept apart)."""
    cdef readonly int n_cols
    cdef uint64_t* _keys        # bucket keys, 0 = empty
    cdef int64_t* _slots        # row of each bucket
    cdef size_t _capacity       # buckets, a power of two
    cdef uint64_t* _rows        # n_rows x n_cols
    cdef readonly size_t n_rows
    cdef size_t _rows_capacity
    cdef int64_t _zero_row      # the row of key 0, or -1

    def __cinit__(self, int n_cols):
        if n_cols < 0:
            raise ValueError(f"n_cols must be >= 0, got {n_cols}")
        self.n_cols = n_cols
        self._capacity = 1024
        self._keys = <uint64_t*>calloc(self._capacity, sizeof(uint64_t))
        self._slots = <int64_t*>calloc(self._capacity, sizeof(int64_t))
        self._rows_capacity = 512
        self._rows = <uint64_t*>calloc(self._rows_capacity * max(1, n_cols), sizeof(uint64_t))
        self._zero_row = -1
        if not (self._keys and self._slots and self._rows):
            raise MemoryError()

    def __dealloc__(self):
        free(self._keys)
        free(self._slots)
        free(self._rows)

    def __len__(self):
        return self.n_rows

    cdef inline int64_t find(self, uint64_t key) noexcept nogil:
        if key == 0:
            return self._zero_row
        cdef size_t mask = self._capacity - 1
        cdef size_t b = <size_t>(mix64(key) & mask)
        while self._keys[b] != 0:
            if self._keys[b] == key:
                return self._slots[b]
            b = (b + 1) & mask
        return -1

    cdef int _grow(self) except -1:
        cdef size_t old_cap = self._capacity, new_cap = old_cap * 2, i, b, mask = new_cap - 1
        cdef uint64_t* keys = <uint64_t*>calloc(new_cap, sizeof(uint64_t))
        cdef int64_t* slots = <int64_t*>calloc(new_cap, sizeof(int64_t))
        if keys == NULL or slots == NULL:
            free(keys)
            free(slots)
            raise MemoryError()
        for i in range(old_cap):
            if self._keys[i] != 0:
                b = <size_t>(mix64(self._keys[i]) & mask)
                while keys[b] != 0:
                    b = (b + 1) & mask
                keys[b] = self._keys[i]
                slots[b] = self._slots[i]
        free(self._keys)
        free(self._slots)
        self._keys = keys
        self._slots = slots
        self._capacity = new_cap
        return 0

    def add(self, uint64_t key, values) -> int:
        """Store `values` (n_cols ints) as the row of `key`, unless it has one; return its row."""
        # Python calls (which may let another thread run) come first; from find() on, nothing
        # gives up the GIL until the row is published.
        cdef const uint64_t[::1] v = numpy.ascontiguousarray(values, dtype=numpy.uint64)
        if v.shape[0] != self.n_cols:
            raise ValueError(f"a row has {self.n_cols} values, got {v.shape[0]}")
        cdef int64_t row = self.find(key)
        if row >= 0:
            return row
        cdef uint64_t* rows
        if self.n_rows == self._rows_capacity:
            rows = <uint64_t*>realloc(self._rows, 2 * self._rows_capacity * max(1, self.n_cols) * sizeof(uint64_t))
            if rows == NULL:
                raise MemoryError()
            self._rows = rows
            self._rows_capacity *= 2
        if 2 * (self.n_rows + 1) > self._capacity:
            self._grow()
        row = self.n_rows
        if self.n_cols:
            memcpy(&self._rows[row * self.n_cols], &v[0], self.n_cols * sizeof(uint64_t))
        cdef size_t mask = self._capacity - 1, b
        if key == 0:
            self._zero_row = row
        else:
            b = <size_t>(mix64(key) & mask)
            while self._keys[b] != 0:
                b = (b + 1) & mask
            self._slots[b] = row
            self._keys[b] = key
        self.n_rows += 1
        return row

    def gather(self, keys, out):
        """Copy the row of keys[i] into out[i] (an (n, n_cols) uint64 array) for every key that
        has one; return the positions of those that have none (their rows are left as they
        were), as an int64 array."""
        cdef const uint64_t[::1] k = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
        cdef uint64_t[:, ::1] o = out
        cdef Py_ssize_t n = k.shape[0], i, n_missing = 0
        if o.shape[0] != n or o.shape[1] != self.n_cols:
            raise ValueError(f"out must have shape ({n}, {self.n_cols}), got {(o.shape[0], o.shape[1])}")
        missing = numpy.empty((n,), dtype=numpy.int64)
        cdef int64_t[::1] m = missing
        cdef int64_t row
        cdef size_t width = self.n_cols * sizeof(uint64_t)
        for i in range(n):
            row = self.find(k[i])
            if row < 0:
                m[n_missing] = i
                n_missing += 1
            elif width:
                memcpy(&o[i, 0], &self._rows[row * self.n_cols], width)
        return missing[:n_missing]
