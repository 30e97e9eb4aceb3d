from libc.stdint cimport int64_t
from .typedefs cimport hash_t, atom_t, class_t, weight_t
from .templates cimport TemplateSet, TemplateC, MAX_HIST
from .transition cimport TransitionSystem


cdef struct TagStateC:
    int i                   # the next position to label
    class_t hist[MAX_HIST]  # hist[0] is the previous decision; -1 before the start


cdef class TagSystem(TransitionSystem):
    """Sequence labelling as transitions: one action per token, the action being the label.

    A sentence is bound with `set_sentence`. Static feature keys are extracted once per sentence and
    their class scores cached per position (refreshed when the weights change), so lookahead and
    beam search pay only for the history features of each node.
    """
    cdef readonly TemplateSet templates
    cdef readonly int n_tokens
    cdef object _atoms, _gold, _allowed, _allowed_trans
    cdef const atom_t* atoms
    cdef const class_t* gold
    cdef const unsigned char* allowed        # n_tokens x n_actions, or NULL
    cdef const unsigned char* allowed_trans  # (n_actions + 1) x n_actions, row n_actions = start
    cdef hash_t* static_keys                 # n_tokens x n_static
    cdef int* n_static_keys
    cdef weight_t* static_scores             # n_tokens x n_actions
    cdef int64_t* static_version
    cdef hash_t* _keys
    cdef size_t _buffer_tokens
    # History templates that read no atoms and at most two labels score the same at every
    # position, so their rows are cached per (label-2, label-1) and refreshed when weights change.
    cdef TemplateC* cached_templates
    cdef int n_cached
    cdef TemplateC* direct_templates
    cdef int n_direct
    cdef weight_t* pure_cache         # (n_actions + 1)^2 x n_actions
    cdef int64_t* pure_version        # (n_actions + 1)^2

    # Word-type cache (loaded weights only): static templates whose atoms all sit at one offset
    # d score the same wherever the same atom values stand at i + d, so their summed class
    # scores are kept per (offset, values) in an open-addressing table private to this system
    # (each thread has its own), keyed by a 128-bit fingerprint of the values; a position then
    # adds one cached vector per offset instead of probing each template's row. bound_cached:
    # the bound sentence uses it (its static_keys then hold the mixed-offset templates only).
    cdef TemplateC* group_templates   # grouped by offset, group g = [group_start[g], group_start[g+1])
    cdef int* group_start
    cdef int* group_cols              # the (offset, atom column) pairs group g reads,
    cdef int* group_col_offset        # [col_start[g], col_start[g + 1])
    cdef int* col_start
    cdef int n_groups
    cdef TemplateC* mixed_templates
    cdef int n_mixed
    cdef bint bound_cached
    cdef hash_t* tc_fp                # 2 x capacity fingerprint words; (0, 0) = empty
    cdef weight_t* tc_vec             # capacity x n_actions
    cdef size_t tc_capacity
    cdef size_t tc_count
    cdef int64_t tc_version
    cdef void* tc_owner               # the weights object the entries were read from

    # History-word cache (with the word-type cache): when every direct history template reads
    # the previous label and atoms at offset 0 only (t-1 x w0, t-1 x suffix, ...), their summed
    # row depends only on (the word's values in those columns, label-1), so it is kept in the
    # word-type table under a fingerprint of both: a position then adds one cached vector
    # instead of hashing and probing each template's row after every decision. hw_fp holds each
    # bound position's fingerprint of the columns (2 words per position).
    cdef bint hw_ok                   # the direct templates qualify
    cdef bint hw_bound                # the bound sentence uses the cache
    cdef int* hw_cols
    cdef int* hw_col_offset           # n_hw_cols zeros (the fingerprint reads offsets)
    cdef int n_hw_cols
    cdef hash_t* hw_fp

    cdef const weight_t* pure_row(self, const class_t* hist) noexcept nogil
    cdef const weight_t* hw_vector(self, int i, const class_t* hist) noexcept nogil
    cdef hash_t* tc_block_fp          # per block of positions: fingerprints and slots
    cdef size_t* tc_block_slot

    cdef const weight_t* type_vector(self, int g, int i) noexcept nogil
    cdef void _tc_fingerprint(self, int g, int i, hash_t* fp) noexcept nogil
    cdef void _tc_begin(self, size_t n_new) noexcept nogil
    cdef size_t _tc_find(self, const hash_t* fp, bint* is_new) noexcept nogil
    cdef size_t _tc_slot(self, int g, int i, const hash_t* fp) noexcept nogil
    cdef int _tc_resize(self, size_t capacity) noexcept nogil
    cdef void _fill_static_rows(self) noexcept nogil
    cdef void _hw_fingerprint(self, int i, hash_t* fp) noexcept nogil

    cdef int bind(self, const atom_t* atoms, int n, const unsigned char* allowed) except -1 nogil
    cdef int _reserve(self, size_t n) except -1 nogil
    cdef const weight_t* static_row(self, int i) noexcept nogil
    cdef void history_scores(self, int i, const class_t* hist, weight_t* out) noexcept nogil
    cdef bint is_allowed(self, int i, int prev, int action) noexcept nogil
