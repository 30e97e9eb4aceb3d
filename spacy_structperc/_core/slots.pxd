"""Growable C buffers and linear-probing slot tables, shared by the kernel core (kernel.pyx,
expansion.pyx, dual.pyx). Declarations and inline code only."""
from libc.stdlib cimport calloc, free, realloc
from libc.stdint cimport int64_t, uint64_t


cdef struct KeySlot:
    uint64_t key
    int64_t list1        # index of the key's postings + 1; 0 marks an empty slot


cdef struct PrimalSlot:
    uint64_t key         # 0 marks an empty slot
    double w             # sum_i a_i phi_f(s_i)
    double u             # sum over updates of clock * delta * phi_f(s_i)


cdef inline int _grow(void** ptr, int64_t n, size_t size) except -1:
    cdef void* p = realloc(ptr[0], <size_t>max(n, 1) * size)
    if p == NULL:
        raise MemoryError()
    ptr[0] = p
    return 0


cdef inline int64_t _next_cap(int64_t have, int64_t need, int64_t least) noexcept nogil:
    cdef int64_t cap = max(have, least)
    while cap < need:
        cap *= 2
    return cap


cdef inline size_t _slot(uint64_t key, size_t mask) noexcept nogil:
    # Keys may be small integers in tests: mix them (murmur3's finalizer).
    key ^= key >> 33
    key *= 0xff51afd7ed558ccdULL
    key ^= key >> 33
    return <size_t>(key & mask)


ctypedef fused AnySlot:
    KeySlot
    PrimalSlot


cdef inline bint _used(AnySlot* slot) noexcept nogil:
    if AnySlot is KeySlot:
        return slot.list1 != 0   # a key table's keys are the caller's: any value, 0 included
    else:
        return slot.key != 0     # an expansion's keys are hashes, never 0


cdef inline AnySlot* _rehash(AnySlot* old, size_t old_capacity, size_t new_capacity) except NULL:
    """A linear-probing table moved into a larger one; the old one is freed."""
    cdef AnySlot* table = <AnySlot*>calloc(new_capacity, sizeof(AnySlot))
    if table == NULL:
        raise MemoryError()
    cdef size_t mask = new_capacity - 1
    cdef size_t i, b
    for i in range(old_capacity):
        if _used(&old[i]):
            b = _slot(old[i].key, mask)
            while _used(&table[b]):
                b = (b + 1) & mask
            table[b] = old[i]
    free(old)
    return table
