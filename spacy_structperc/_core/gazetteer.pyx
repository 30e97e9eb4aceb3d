# cython: infer_types=True, boundscheck=False, wraparound=False, cdivision=True
"""Gazetteer matching in C: every token n-gram of a batch looked up in typed name lists.

A list entry is a sequence of token ids (spaCy's LOWER hashes). Its key is the running hash of
its tokens (`hash_combine`, as the feature templates hash), so an n-gram is looked up by
extending a hash one token at a time: the scan from token i stops at the first n-gram that is
not a prefix of any entry, which for most tokens is the first. Both tables are sorted uint64
arrays, searched by bisection. A 64-bit collision between an n-gram and an entry is the only
way a wrong match can happen (about n-grams x entries / 2**64).

The Python side (spacy_structperc/ner/gazetteers.py) owns the lists, the jackknife folds and
the atom values; this module only finds the matches and gives each token its longest one.
"""
from libc.stdint cimport uint64_t, int64_t, int32_t
import numpy

from .templates cimport hash_combine

cdef uint64_t _KEY_SEED = 0x6a09e667f3bcc909ULL
KEY_SEED = _KEY_SEED


cdef inline bint _contains(const uint64_t[::1] table, uint64_t h, Py_ssize_t* where) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = table.shape[0], mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if table[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    where[0] = lo
    return lo < table.shape[0] and table[lo] == h


def prefix_hashes(const uint64_t[::1] tokens, const int64_t[::1] offsets):
    """The running hash of every prefix of every key (key k is tokens[offsets[k]:offsets[k+1]]):
    out[offsets[k] + n - 1] is the hash of its first n tokens, so out[offsets[k+1] - 1] is the
    key's own."""
    out = numpy.zeros((tokens.shape[0],), dtype=numpy.uint64)
    cdef uint64_t[::1] o = out
    cdef Py_ssize_t k, i
    cdef uint64_t h
    with nogil:
        for k in range(offsets.shape[0] - 1):
            h = _KEY_SEED
            for i in range(offsets[k], offsets[k + 1]):
                h = hash_combine(h, tokens[i])
                o[i] = h
    return out


# A bit per 2**-FILTER_BITS of the hash space, set where some prefix of an entry hashes: most
# tokens start no entry, and one bit tells so without bisecting the prefix table.
cdef enum:
    FILTER_BITS = 17
FILTER_WORDS = (1 << FILTER_BITS) // 64


cdef inline uint64_t _filter_bit(uint64_t h) noexcept nogil:
    return (h * 0x9E3779B97F4A7C15ULL) >> (64 - FILTER_BITS)


def prefix_filter(const uint64_t[::1] prefixes):
    """The bitmap `scan` tests before bisecting `prefixes`: bit _filter_bit(h) is set for
    every prefix hash h."""
    out = numpy.zeros((FILTER_WORDS,), dtype=numpy.uint64)
    cdef uint64_t[::1] o = out
    cdef Py_ssize_t i
    cdef uint64_t bit
    for i in range(prefixes.shape[0]):
        bit = _filter_bit(prefixes[i])
        o[bit >> 6] |= (<uint64_t>1) << (bit & 63)
    return out


cdef Py_ssize_t _scan(const uint64_t[::1] words, const int64_t[::1] seg_end, int max_length,
                      const uint64_t[::1] prefixes, const uint64_t[::1] entries,
                      const uint64_t[::1] bitmap, Py_ssize_t capacity,
                      int64_t* starts, int64_t* ends, int64_t* ids) noexcept nogil:
    """Writes the first `capacity` matches; returns how many there are."""
    cdef Py_ssize_t n = words.shape[0], i, j, stop, where, count = 0
    cdef uint64_t h, bit
    for i in range(n):
        h = _KEY_SEED
        stop = seg_end[i]
        if stop > i + max_length:
            stop = i + max_length
        for j in range(i, stop):
            h = hash_combine(h, words[j])
            bit = _filter_bit(h)
            if not (bitmap[bit >> 6] >> (bit & 63)) & 1:
                break
            if not _contains(prefixes, h, &where):
                break
            if _contains(entries, h, &where):
                if count < capacity:
                    starts[count] = i
                    ends[count] = j + 1
                    ids[count] = where
                count += 1
    return count


def scan(const uint64_t[::1] words, const int64_t[::1] seg_end, int max_length,
         const uint64_t[::1] prefixes, const uint64_t[::1] entries, const uint64_t[::1] bitmap):
    """(starts, ends, entry indices) of every n-gram words[i:j] with j <= seg_end[i] and
    j - i <= max_length whose hash is entries[index] (`entries` sorted, `prefixes` sorted and
    holding every prefix hash of every entry, `bitmap` its prefix_filter), in order of i, then j."""
    cdef Py_ssize_t count, capacity = words.shape[0] + 16
    starts = numpy.zeros((capacity,), dtype=numpy.int64)
    ends = numpy.zeros((capacity,), dtype=numpy.int64)
    ids = numpy.zeros((capacity,), dtype=numpy.int64)
    cdef int64_t[::1] s = starts, e = ends, d = ids
    with nogil:
        count = _scan(words, seg_end, max_length, prefixes, entries, bitmap, capacity, &s[0], &e[0], &d[0])
    if count > capacity:   # more matches than tokens: scan again into arrays that hold them all
        starts, ends, ids = (numpy.zeros((count,), dtype=numpy.int64) for _ in range(3))
        s, e, d = starts, ends, ids
        with nogil:
            _scan(words, seg_end, max_length, prefixes, entries, bitmap, count, &s[0], &e[0], &d[0])
    return starts[:count], ends[:count], ids[:count]


def longest(const int64_t[::1] starts, const int64_t[::1] ends, const int64_t[::1] ids,
            const int32_t[:, ::1] codes, const uint64_t[:, ::1] values, uint64_t[:, ::1] out):
    """For each group g (a column of `codes` and `out`): out[k, g] = values[c, p] for the longest
    match (the earliest of equal length) covering token k among the matches (starts, ends, ids:
    as `scan` gives them) whose entry has a code c = codes[id, g] > 0 in that group, p being the
    token's position in it (0 B, 1 I, 2 L, 3 U). Tokens without one keep their value."""
    cdef Py_ssize_t n = out.shape[0], n_groups = out.shape[1], m, g, k, length, c, p
    best = numpy.zeros((n, n_groups), dtype=numpy.int64)
    cdef int64_t[:, ::1] b = best
    with nogil:
        for m in range(starts.shape[0]):
            length = ends[m] - starts[m]
            for g in range(n_groups):
                c = codes[ids[m], g]
                if c <= 0:
                    continue
                for k in range(starts[m], ends[m]):
                    if length <= b[k, g]:
                        continue
                    b[k, g] = length
                    if length == 1:
                        p = 3
                    elif k == starts[m]:
                        p = 0
                    elif k == ends[m] - 1:
                        p = 2
                    else:
                        p = 1
                    out[k, g] = values[c, p]
