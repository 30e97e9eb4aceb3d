# cython: infer_types=True, boundscheck=False, wraparound=False, cdivision=True
"""The other occurrences of each token's word in its Doc, in C: what the document atoms read.

The context atoms (atoms.context_atoms: the cases and neighbours of a word's other occurrences)
and the NER's two-stage atoms (ner/aggregation.py: the labels of its other and earlier
occurrences) both group a batch's tokens by (Doc, word). `first_occurrences` finds each token's
group in one pass per Doc with an open-addressing table (a token's group is named by the index of
its first occurrence); `value_sets` then ORs a per-token bit set over each group. Both are linear
in the batch, where a sort of the batch was not, and a Doc's result never depends on the others
in its batch.
"""
from libc.stdint cimport uint64_t, int64_t
import numpy

from .templates cimport mix64


def first_occurrences(const uint64_t[::1] words, const int64_t[::1] offsets):
    """(first, second): for token i of Doc k (rows offsets[k]:offsets[k + 1]), first[i] is the
    index of the first token of Doc k whose word equals words[i] (i itself for a first
    occurrence), and second[f], for such a first occurrence f, the index of the second (-1 when
    the word occurs once; -1 at every other token)."""
    cdef Py_ssize_t n = words.shape[0], n_docs = offsets.shape[0] - 1
    first = numpy.empty((n,), dtype=numpy.int64)
    second = numpy.full((n,), -1, dtype=numpy.int64)
    cdef int64_t[::1] f = first, s = second
    cdef Py_ssize_t k, i, start, end, longest = 0, cap, slot
    cdef uint64_t mask
    cdef int64_t at
    for k in range(n_docs):
        if offsets[k + 1] - offsets[k] > longest:
            longest = offsets[k + 1] - offsets[k]
    cap = 8
    while cap < 2 * longest:
        cap *= 2
    table = numpy.full((cap,), -1, dtype=numpy.int64)
    cdef int64_t[::1] slots = table
    with nogil:
        for k in range(n_docs):
            start, end = offsets[k], offsets[k + 1]
            if end <= start:
                continue
            cap = 8
            while cap < 2 * (end - start):
                cap *= 2
            mask = cap - 1
            for i in range(start, end):
                slot = mix64(words[i]) & mask
                while True:
                    at = slots[slot]
                    if at < 0:
                        slots[slot] = i
                        f[i] = i
                        break
                    if words[at] == words[i]:
                        f[i] = at
                        if s[at] < 0:
                            s[at] = i
                        break
                    slot = (slot + 1) & mask
            for slot in range(cap):
                slots[slot] = -1
    return first, second


def value_sets(const int64_t[::1] first, const uint64_t[::1] bits):
    """(others, earlier, whole) for tokens grouped by `first` (first_occurrences' first: each
    group's tokens in text order, named by the index of the first): others[i] is the OR of
    bits[j] over the other tokens j of i's group, earlier[i] over those before i, whole[i] over
    all of them, i included."""
    cdef Py_ssize_t n = first.shape[0], i
    others = numpy.zeros((n,), dtype=numpy.uint64)
    earlier = numpy.zeros((n,), dtype=numpy.uint64)
    whole = numpy.zeros((n,), dtype=numpy.uint64)
    once = numpy.zeros((n,), dtype=numpy.uint64)    # per group: bits seen at least once
    twice = numpy.zeros((n,), dtype=numpy.uint64)   # ... at least twice
    cdef uint64_t[::1] o = others, e = earlier, w = whole, one = once, two = twice
    cdef int64_t r
    cdef uint64_t b
    with nogil:
        for i in range(n):
            r = first[i]
            b = bits[i]
            e[i] = one[r]
            two[r] |= one[r] & b
            one[r] |= b
        for i in range(n):
            r = first[i]
            b = bits[i]
            # A bit of i's own is among the others' only if two tokens of the group have it.
            o[i] = (one[r] & ~b) | (two[r] & b)
            w[i] = one[r]
    return others, earlier, whole
