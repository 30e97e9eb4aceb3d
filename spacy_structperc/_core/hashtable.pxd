"""Hash probing of a weight table: hashed key -> row, in 16-byte buckets (key, row) grouped four
to a 64-byte cache line. A key's home is the first bucket of a group; insertion probes linearly
from there, and nothing is ever deleted. Declarations and inline code only: weights.pyx and
frozen.pyx compile it in."""
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free

from .typedefs cimport hash_t


cdef struct Bucket:
    hash_t key       # 0 marks an empty bucket
    int64_t row


cdef extern from *:
    """
    #define STRUCTPERC_PREFETCH(p) __builtin_prefetch((const void*)(p))
    """
    void prefetch "STRUCTPERC_PREFETCH"(const void* p) noexcept nogil

cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    #include <stdint.h>
    /* A hash table's buckets (16 bytes: key, row) in groups of four, one 64-byte cache line
       each: a key's home is the first bucket of a group, so its lookup reads whole lines. The
       memory is zeroed and line-aligned (calloc's large blocks start 16 bytes into a page, which
       would split every group over two lines); free() releases it. */
    static void* structperc_calloc_lines(size_t n, size_t size) {
        size_t bytes = n * size;
        void* p;
        if (n && bytes / n != size) return NULL;
        bytes = (bytes + 63) & ~(size_t)63;
        if (bytes == 0) bytes = 64;
        if (posix_memalign(&p, 64, bytes) != 0) return NULL;
        memset(p, 0, bytes);
        return p;
    }

    typedef struct { uint64_t key; int64_t row; } structperc_bucket;

    /* The row a bucket holds for key (not 0), or -1: the key's group (one cache line) is
       compared whole, with masks rather than a branch per bucket (where the key sits in its
       group is random, so such branches are mispredicted), then the next group only when all
       four buckets are taken. Insertion probes linearly from the group's first bucket and
       nothing is ever deleted, so every bucket between a key's home and the key is taken: an
       empty bucket in a group that does not hold the key means the key has no row. */
    static inline int64_t structperc_probe_groups(const void* table, size_t mask, size_t home,
                                                  uint64_t key) {
        const structperc_bucket* t = (const structperc_bucket*)table;
        size_t g = home;
        for (;;) {
            const structperc_bucket* b = t + g;
            uint64_t m0 = -(uint64_t)(b[0].key == key), m1 = -(uint64_t)(b[1].key == key);
            uint64_t m2 = -(uint64_t)(b[2].key == key), m3 = -(uint64_t)(b[3].key == key);
            uint64_t hit = m0 | m1 | m2 | m3;
            /* the matching bucket's row, or all ones (-1) when none matches */
            uint64_t r = ((uint64_t)b[0].row & m0) | ((uint64_t)b[1].row & m1)
                       | ((uint64_t)b[2].row & m2) | ((uint64_t)b[3].row & m3) | ~hit;
            if (__builtin_expect((hit != 0) | (b[0].key == 0) | (b[1].key == 0)
                                 | (b[2].key == 0) | (b[3].key == 0), 1))
                return (int64_t)r;
            g = (g + 4) & mask;
        }
    }
    """
    void* calloc_lines "structperc_calloc_lines"(size_t n, size_t size) noexcept nogil
    int64_t probe_groups "structperc_probe_groups"(const void* table, size_t mask, size_t home,
                                                   uint64_t key) noexcept nogil


cdef inline size_t _bucket(hash_t key, size_t mask) noexcept nogil:
    # A key's home: the first bucket of a group of four (one cache line, see
    # structperc_probe_groups). Keys are already well mixed 64-bit hashes; fold the high bits
    # in anyway.
    return <size_t>((key ^ (key >> 29)) & mask & ~(<size_t>3))


cdef inline size_t _round_pow2(size_t n) noexcept nogil:
    cdef size_t p = 1
    while p < n:
        p <<= 1
    return p


cdef inline int64_t probe(const Bucket* table, size_t capacity, hash_t key) noexcept nogil:
    # What key's bucket holds (its row, as the table stores it), or -1 when the key has no row.
    # Key 0 is stored as 1 (0 marks an empty bucket).
    if key == 0:
        key = 1
    cdef size_t mask = capacity - 1
    return probe_groups(table, mask, _bucket(key, mask), key)


cdef inline size_t slot_of(const Bucket* table, size_t mask, hash_t key) noexcept nogil:
    # The bucket that holds key (not 0), or the empty one where it goes.
    cdef size_t b = _bucket(key, mask)
    while table[b].key != 0 and table[b].key != key:
        b = (b + 1) & mask
    return b


cdef inline Bucket* rehash(Bucket* old, size_t old_capacity, size_t new_capacity) noexcept nogil:
    # The buckets moved into a table of new_capacity, the old one freed; NULL (the old one
    # kept) when out of memory.
    cdef Bucket* table = <Bucket*>calloc_lines(new_capacity, sizeof(Bucket))
    if table == NULL:
        return NULL
    cdef size_t mask = new_capacity - 1
    cdef size_t i, b
    for i in range(old_capacity):
        if old[i].key != 0:
            b = _bucket(old[i].key, mask)
            while table[b].key != 0:
                b = (b + 1) & mask
            table[b] = old[i]
    free(old)
    return table


cdef inline int find_block(const Bucket* table, size_t capacity, const hash_t* keys, int start, int stop,
                           int64_t* found) noexcept nogil:
    # The rows of keys[start:stop] (at most 64) that exist, into `found`, as their buckets hold
    # them (see probe); returns how many.
    # Lookups are cache misses, so every bucket is prefetched before the first is read.
    cdef size_t mask = capacity - 1
    cdef int i, n_found = 0
    cdef int64_t r
    cdef hash_t key
    for i in range(start, stop):
        prefetch(&table[_bucket(keys[i] if keys[i] else 1, mask)])
    for i in range(start, stop):
        key = keys[i] if keys[i] else 1
        r = probe_groups(table, mask, _bucket(key, mask), key)
        found[n_found] = r      # kept only if the key has a row (no branch on it)
        n_found += r >= 0
    return n_found
