from libc.stdint cimport int64_t
from .typedefs cimport hash_t, atom_t, weight_t
from .templates cimport MAX_PARTS
from .transition cimport TransitionSystem


cdef enum:
    # Actions: SHIFT, BREAK, then one LEFT-ARC and one RIGHT-ARC per label.
    SHIFT = 0
    BREAK = 1
    N_FIXED_ACTIONS = 2

cdef enum:
    # Positions a feature can read. Children are those of the arcs built so far.
    ADDR_S0, ADDR_S1, ADDR_S2, ADDR_Q0, ADDR_Q1, ADDR_Q2
    ADDR_S0L, ADDR_S0R, ADDR_S0L2, ADDR_S0R2
    ADDR_S1L, ADDR_S1R, ADDR_S1L2, ADDR_S1R2
    ADDR_DIST    # the distance s0 - s1, bucketed; not a token
    # q0's leftmost (and second-leftmost) children: only arc-hybrid builds arcs into the
    # buffer's front. After ADDR_DIST, so that the keys of earlier models stay as they were.
    ADDR_Q0L, ADDR_Q0L2
    ADDR_DIST0   # the distance q0 - s0, bucketed: what an arc-hybrid LEFT-ARC spans
    # The token just before the buffer's front (the last one shifted): with q0, where a
    # sentence may end (the BREAK decision). Last, so that earlier models' keys stay.
    ADDR_QM1
    N_ADDR

cdef enum:
    # Structural attributes; an attribute >= 0 is a column of the atom table.
    ATTR_DEP = -1   # the label of the arc into the token
    ATTR_VL = -2    # number of left children
    ATTR_VR = -3    # number of right children
    ATTR_LSET = -5  # the set of left children's labels (Zhang and Nivre 2011)
    ATTR_RSET = -6  # the set of right children's labels
    ATTR_DIST = -4


cdef struct ParseStateC:
    # The fixed header of a state blob; `n_tokens`-long int arrays follow it (see arcstandard.pyx).
    int n_stack
    int buf


cdef struct ParseTemplateC:
    hash_t seed
    int n_parts
    int addr[MAX_PARTS]
    int attr[MAX_PARTS]


cdef class ParseTemplates:
    """Conjunction templates over parser-state positions, compiled to C structs."""
    cdef ParseTemplateC* c
    cdef readonly int n
    # Keys are extracted in this order of the templates: first those reading only the queue
    # (q0-q2 and the bias: the same while the buffer does not move), then those reading only
    # s0's atoms and the queue (the same after a LEFT-ARC), then the rest; see _score.
    cdef int* order
    cdef readonly int n_queue      # templates order[:n_queue] read only the queue
    cdef readonly int n_s0_queue   # templates order[:n_s0_queue] read only s0's atoms and the queue
    cdef readonly object specs
    cdef readonly object atom_names


cdef class ArcStandardSystem(TransitionSystem):
    cdef readonly ParseTemplates templates
    cdef readonly int n_labels
    cdef readonly int n_tokens
    cdef readonly int label_candidates
    cdef readonly bint allow_break
    cdef readonly bint hybrid       # arc-hybrid: LEFT-ARC attaches s0 to q0 (else arc-standard)
    cdef public bint eager_break   # dynamic oracle: SHIFT after a complete sentence costs one
    cdef readonly bint has_gold
    cdef public bint complete_gold   # score(): only the oracle's action where it knows one
    cdef bint partial_gold           # some gold head is unknown (-2)
    cdef public bint keep_gold_arcs  # training with exploration: label pruning keeps a gold arc (_gold_arc)
    cdef public weight_t break_bias  # added to BREAK's score where it is valid, without gold
    cdef object _allowed
    cdef const hash_t* allowed     # sorted keys updates may touch; NULL: all
    cdef Py_ssize_t n_allowed
    cdef object _atoms, _gold_heads, _gold_labels, _gold_kids
    cdef const atom_t* atoms
    cdef int n_cols
    cdef const int* gold_heads     # per token: head index, -1 root, -2 unknown
    cdef const int* gold_labels    # per token: label id, -1 unknown
    cdef const int* gold_kids      # per token: number of gold dependents
    cdef hash_t* _keys
    # Scores by feature signature: the state a decision moves to was scored as a child in the
    # lookahead of that decision, so it is looked up, not recomputed (valid for one version).
    cdef hash_t* cache_sig
    cdef int64_t* cache_version
    cdef weight_t* cache_scores
    # Greedy decoding (score_argmax without gold): the partial sums of the queue templates'
    # rows (valid for buffer position prefix_buf) and of those plus s0's (for prefix_s0 too),
    # both for weights version prefix_version (they are always stored together); reset when a
    # span is bound.
    cdef weight_t* prefix_q
    cdef weight_t* prefix_qs0
    cdef int prefix_buf, prefix_s0
    cdef int64_t prefix_version

    cdef int* arr(self, const void* state, int k) noexcept nogil
    cdef void bind(self, const atom_t* atoms, int n, bint allow_break) noexcept nogil
    cdef int apply(self, const int* actions, int n_actions, char* state) noexcept nogil
    cdef void resolve(self, const void* state, int* tok) noexcept nogil
    cdef int extract(self, const void* state, hash_t* keys) noexcept nogil
    cdef int _extract_range(self, const void* state, const int* tok, int lo, int hi, hash_t* keys) noexcept nogil
    cdef int _from_kept(self, int buf, int s0, int m, weight_t* scores) noexcept nogil
    cdef void _score_greedy(self, const void* state, weight_t* scores) noexcept nogil
    cdef void _score_moves_greedy(self, const void* state, weight_t* scores) noexcept nogil
    cdef bint is_valid(self, const void* state, int action) noexcept nogil
    cdef void _score(self, const void* state, weight_t* scores, bint search) noexcept nogil
    cdef void prune(self, weight_t* scores, int start, int keep) noexcept nogil
    cdef bint _may_descend(self, int q, int s0) noexcept nogil
    cdef void mask_inconsistent(self, const void* state, weight_t* scores) noexcept nogil
    cdef bint _breaks_known(self, const void* state, int action) noexcept nogil
    cdef bint _on_stack(self, const void* state, int token) noexcept nogil
    cdef int _move_costs(self, const void* state, int* costs) noexcept nogil
    cdef int _cut(self, const void* state, int start, int* reach) noexcept nogil
    cdef int _standard_costs(self, const void* state, int* costs, const double* values) noexcept nogil
    cdef void _move_cost(self, const void* state, int move, int* units, int N, int P, int here,
                         int* work, int* costs) noexcept nogil
    cdef int _gold_arc(self, const void* state) noexcept nogil


cdef int read_tree(ArcStandardSystem system, const char* state, int* heads, int* labels) noexcept nogil
