from .typedefs cimport hash_t, atom_t, class_t

cdef enum:
    MAX_PARTS = 6       # atoms or history references in one conjunction
    MAX_HIST = 4        # previous decisions a history-based feature may look at

# Out-of-range positions read these instead of 0, so "previous word is <s>" is a real feature.
cdef extern from *:
    """
    #define STRUCTPERC_PAD_BEFORE 0x5bd1e9955bd1e995ULL
    #define STRUCTPERC_PAD_AFTER 0x27d4eb2f165667c5ULL
    """
    const atom_t PAD_BEFORE "STRUCTPERC_PAD_BEFORE"
    const atom_t PAD_AFTER "STRUCTPERC_PAD_AFTER"


cdef struct TemplateC:
    hash_t seed
    int n_atoms
    int atom_offset[MAX_PARTS]   # token offset relative to the current position
    int atom_col[MAX_PARTS]      # column in the atom table
    int n_hist
    int hist_offset[MAX_PARTS]   # 1 = the previous decision, 2 = the one before, ...
    hash_t key_set               # bits forced on and off in the template's keys: bit TIED_BIT
    hash_t key_clear             # marks label-level ("tied") features, see TemplateSet


# Keys always have bit 0 set (0 marks empty buckets); bit 1 marks tied features in sets that
# have any, so AveragedWeights with tie_width > 1 updates them across a group of classes.
cdef enum:
    TIED_BIT = 2


cdef inline hash_t mix64(hash_t h) noexcept nogil:
    # MurmurHash3's finaliser: every input bit affects every output bit.
    h ^= h >> 33
    h *= 0xff51afd7ed558ccdULL
    h ^= h >> 33
    h *= 0xc4ceb9fe1a85ec53ULL
    h ^= h >> 33
    return h


cdef inline hash_t hash_combine(hash_t h, hash_t v) noexcept nogil:
    return mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)))


cdef inline atom_t atom_at(const atom_t* atoms, int n_tokens, int n_cols, int i, int col) noexcept nogil:
    if i < 0:
        return PAD_BEFORE
    if i >= n_tokens:
        return PAD_AFTER
    return atoms[i * n_cols + col]


cdef inline hash_t history_value(class_t c) noexcept nogil:
    # Decisions enter hashes shifted by 2 so that "before the start" (-1) is 1 and never 0.
    return <hash_t>(c + 2)


cdef int extract_features(const TemplateC* templates, int n_templates, const atom_t* atoms,
                          int n_tokens, int n_cols, int i, const class_t* hist,
                          hash_t* keys) noexcept nogil


cdef class TemplateSet:
    """Conjunction templates compiled to C structs, split into static and history templates."""
    cdef TemplateC* c_static
    cdef TemplateC* c_history
    cdef readonly int n_static
    cdef readonly int n_history
    cdef readonly int max_history     # the largest history offset any template uses
    cdef readonly bint pure_history   # no history template reads atoms: scores cacheable per sentence
    cdef readonly int n_cols
    cdef readonly object atom_names
    cdef readonly object specs
