# cython: infer_types=True
"""Beam search with violation-fixing perceptron updates (huang2012 Secs. 4-5).

Written against the TransitionSystem interface. All hypotheses of a beam take the same number of
steps (one per token for taggers, 2n - 1 for an arc-standard parser), so step t of every
hypothesis is comparable with step t of the gold derivation.
"""
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memcpy
from libc.math cimport INFINITY
from cpython.exc cimport PyErr_CheckSignals
import numpy

from .typedefs cimport weight_t
from .transition cimport TransitionSystem, update_paths

UPDATE_METHODS = ("standard", "early", "max-violation", "latest", "hybrid")


cdef int _cmp_candidates(const void* a, const void* b) noexcept nogil:
    # Higher score first; ties broken by parent then action, so results are deterministic.
    cdef const Candidate* x = <const Candidate*>a
    cdef const Candidate* y = <const Candidate*>b
    if x.score > y.score:
        return -1
    if x.score < y.score:
        return 1
    if x.parent != y.parent:
        return -1 if x.parent < y.parent else 1
    if x.action != y.action:
        return -1 if x.action < y.action else 1
    return 0


cdef class BeamSearch:
    def __cinit__(self, TransitionSystem system, int width):
        if width < 1:
            raise ValueError(f"beam width must be >= 1, got {width}")
        self.system = system
        self.width = width
        self.scores = <weight_t*>malloc(max(1, system.n_actions) * sizeof(weight_t))
        self.cands = <Candidate*>malloc(max(1, width * system.n_actions) * sizeof(Candidate))
        if self.scores == NULL or self.cands == NULL:
            raise MemoryError()
        self.reserve()

    def __dealloc__(self):
        free(self.states); free(self.item_score); free(self.item_parent); free(self.item_action)
        free(self.item_gold); free(self.beam_size); free(self.gold_score); free(self.gold_actions)
        free(self.cands); free(self.scores); free(self.gold_state)

    cdef int reserve(self) except -1 nogil:
        """Size the buffers for the input bound to the system now (its steps and state size)."""
        cdef size_t W = self.width, N, S = self.system.state_size
        self.n_steps = self.system.max_steps()
        self.steps_done = 0
        N = max(1, self.n_steps)
        if self.item_score == NULL or N > self.steps_capacity:
            N = max(N, 2 * self.steps_capacity)
            free(self.item_score); free(self.item_parent); free(self.item_action)
            free(self.item_gold); free(self.beam_size); free(self.gold_score); free(self.gold_actions)
            self.item_score = <double*>malloc(N * W * sizeof(double))
            self.item_parent = <int*>malloc(N * W * sizeof(int))
            self.item_action = <int*>malloc(N * W * sizeof(int))
            self.item_gold = <char*>calloc(N * W, sizeof(char))
            self.beam_size = <int*>calloc(N, sizeof(int))
            self.gold_score = <double*>malloc(N * sizeof(double))
            self.gold_actions = <int*>malloc(N * sizeof(int))
            if not (self.item_score and self.item_parent and self.item_action and self.item_gold
                    and self.beam_size and self.gold_score and self.gold_actions):
                with gil:
                    raise MemoryError()
            self.steps_capacity = N
        if self.states == NULL or S > self.state_capacity:
            free(self.states); free(self.gold_state)
            self.states = <char*>malloc(2 * W * S + 1)
            self.gold_state = <char*>malloc(S + 1)
            if self.states == NULL or self.gold_state == NULL:
                with gil:
                    raise MemoryError()
            self.state_capacity = S
        return 0

    cdef int search(self, bint track_gold, bint check_signals) except -1 nogil:
        """Fill the beams of every step. With track_gold, also follow the gold derivation.
        With check_signals, take the GIL every 64 steps to let Ctrl-C stop a long search."""
        cdef int W = self.width, A = self.system.n_actions
        cdef size_t S = self.system.state_size
        cdef Candidate* cands = self.cands
        cdef weight_t* scores = self.scores
        cdef char* gold_state = self.gold_state
        cdef char* cur = self.states
        cdef char* nxt = self.states + W * S
        cdef char* tmp
        cdef int t, k, a, n_cands, n_cur, n_next, g
        cdef double base, gold_total = 0.0
        self.gold_known = track_gold
        self.system.init_state(cur)
        if track_gold:
            self.system.init_state(gold_state)
        n_cur = 1
        t = 0
        while t < self.n_steps:
            if check_signals and t % 64 == 0:
                with gil:
                    PyErr_CheckSignals()
            n_cands = 0
            for k in range(n_cur):
                if self.system.is_final(cur + k * S):
                    continue
                self.system.score(cur + k * S, scores)
                base = self.item_score[(t - 1) * W + k] if t > 0 else 0.0
                for a in range(A):
                    if scores[a] != -INFINITY:
                        cands[n_cands].score = base + scores[a]
                        cands[n_cands].parent = k
                        cands[n_cands].action = a
                        n_cands += 1
            if track_gold and self.gold_known:
                g = self.system.gold_action(gold_state)
                self.system.score(gold_state, scores)
                if g < 0 or scores[g] == -INFINITY:
                    self.gold_known = False
                else:
                    gold_total += scores[g]
                    self.gold_score[t] = gold_total
                    self.gold_actions[t] = g
                    self.system.transition(gold_state, g)
            if n_cands == 0:
                break
            qsort(cands, n_cands, sizeof(Candidate), _cmp_candidates)
            n_next = n_cands if n_cands < W else W
            for k in range(n_next):
                memcpy(nxt + k * S, cur + cands[k].parent * S, S)
                self.system.transition(nxt + k * S, cands[k].action)
                self.item_score[t * W + k] = cands[k].score
                self.item_parent[t * W + k] = cands[k].parent
                self.item_action[t * W + k] = cands[k].action
                if track_gold and self.gold_known:
                    self.item_gold[t * W + k] = (
                        (t == 0 or self.item_gold[(t - 1) * W + cands[k].parent])
                        and cands[k].action == self.gold_actions[t]
                    )
                else:
                    self.item_gold[t * W + k] = 0
            self.beam_size[t] = n_next
            tmp = cur
            cur = nxt
            nxt = tmp
            n_cur = n_next
            t += 1
        self.steps_done = t
        return 0

    cdef int run(self, bint track_gold) except -1:
        with nogil:
            self.search(track_gold, True)
        return 0

    cdef int best_into(self, int* out) noexcept nogil:
        """Write the best complete derivation to out; return its length, which is less than
        the bound input's steps when the search found no complete analysis."""
        if self.steps_done == 0:
            return 0
        return self.backtrack(self.steps_done - 1, 0, out)

    cdef int backtrack(self, int t, int k, int* out) noexcept nogil:
        """Write the actions of item k at step t (t + 1 actions) to out."""
        cdef int s = t
        while s >= 0:
            out[s] = self.item_action[s * self.width + k]
            k = self.item_parent[s * self.width + k]
            s -= 1
        return t + 1

    def best_path(self):
        if self.steps_done == 0:
            return numpy.zeros((0,), dtype=numpy.int32)
        out = numpy.zeros((self.steps_done,), dtype=numpy.int32)
        cdef int[::1] o = out
        self.backtrack(self.steps_done - 1, 0, &o[0])
        return out

    def gold_path(self, int t):
        return numpy.array([self.gold_actions[s] for s in range(t + 1)], dtype=numpy.int32)

    def best_prefix(self, int t):
        out = numpy.zeros((t + 1,), dtype=numpy.int32)
        cdef int[::1] o = out
        self.backtrack(t, 0, &o[0])
        return out

    def step_summary(self):
        """Per step: (best score, gold score, gold prefix in beam, best item is the gold prefix)."""
        rows = []
        cdef int t, k
        for t in range(self.steps_done):
            in_beam = any(self.item_gold[t * self.width + k] for k in range(self.beam_size[t]))
            rows.append((self.item_score[t * self.width], self.gold_score[t], bool(in_beam),
                         bool(self.item_gold[t * self.width])))
        return rows

    def complete(self, int k):
        """Up to k complete hypotheses of the final beam, best first: a list of (score, actions).

        Every hypothesis takes the same number of steps, so the final beam holds complete ones
        only; it holds at most `width` of them (fewer when fewer derivations exist). Nothing is
        returned when the search stopped early (no valid action). Derivations are distinct, but
        two of them may build the same structure; see kbest() for distinct outputs.
        """
        cdef int t = self.steps_done - 1, i, n
        if self.n_steps == 0:
            return [(0.0, numpy.zeros((0,), dtype=numpy.int32))]
        if self.steps_done < self.n_steps or k < 1:
            return []
        n = min(k, self.beam_size[t])
        out = []
        cdef int[::1] o
        for i in range(n):
            path = numpy.zeros((self.steps_done,), dtype=numpy.int32)
            o = path
            self.backtrack(t, i, &o[0])
            out.append((self.item_score[t * self.width + i], path))
        return out


NO_ANALYSIS = "beam search found no complete analysis under the constraints"


def decode(TransitionSystem system, int width):
    """The best complete derivation found by beam search of the given width."""
    cdef BeamSearch beam = BeamSearch(system, width)
    beam.run(False)
    path = beam.best_path()
    if len(path) < system.max_steps():
        raise ValueError(NO_ANALYSIS)
    return path


def find_violation(BeamSearch beam, str method):
    """Pick the update step t per huang2012; None when there is nothing (valid) to update.

    Returns (t, is_valid): update the gold prefix of length t + 1 against the beam's best prefix at
    step t. For "standard" the full sequences are used even when that update is invalid
    (w . dPhi > 0), which is what huang2012 Fig. 5 counts.
    """
    summary = beam.step_summary()
    T = len(summary)
    if T == 0:
        return None
    final_best, final_gold, _, final_is_gold = summary[T - 1]
    standard_needed = not final_is_gold
    if method == "standard":
        if not standard_needed:
            return None
        return T - 1, final_best >= final_gold
    early = None
    for t, (_, _, in_beam, _) in enumerate(summary):
        if not in_beam:
            early = t
            break
    if method == "early" or (method == "hybrid" and not (standard_needed and final_best >= final_gold)):
        if early is not None:
            return early, True
        return (T - 1, True) if standard_needed else None
    if method == "hybrid":
        return T - 1, True
    violations = [(t, b - g) for t, (b, g, _, is_gold) in enumerate(summary) if not is_gold and b >= g]
    if not violations:
        return None
    if method == "max-violation":
        # Most violated first; among equals the earliest, as a shorter update is cheaper.
        return max(violations, key=lambda x: (x[1], -x[0]))[0], True
    if method == "latest":
        return violations[len(violations) - 1][0], True
    raise ValueError(f"unknown update method {method!r}; expected one of {UPDATE_METHODS}")


def train(TransitionSystem system, int width, str method="max-violation"):
    """One violation-fixing perceptron step on the bound input.

    Returns a dict: updated (bool), step (int or None), invalid (the standard update was not a
    violation), violation (w . dPhi of the update, before it; <= 0 for valid updates), wrong
    (number of steps where the final best derivation differs from gold).
    """
    if method not in UPDATE_METHODS:
        raise ValueError(f"unknown update method {method!r}; expected one of {UPDATE_METHODS}")
    cdef BeamSearch beam = BeamSearch(system, width)
    beam.run(True)
    result = {"updated": False, "step": None, "invalid": False, "violation": 0.0, "wrong": 0}
    if not beam.gold_known:
        raise ValueError(
            "the gold derivation is unknown or invalid at some step; complete partial gold "
            "annotation before beam training"
        )
    if beam.steps_done == 0:
        return result
    best = beam.best_path()
    gold = beam.gold_path(beam.steps_done - 1)
    result["wrong"] = int((best != gold).sum())
    choice = find_violation(beam, method)
    if choice is None:
        return result
    t, valid = choice
    gold_prefix = beam.gold_path(t)
    best_prefix = beam.best_prefix(t)
    summary = beam.step_summary()[t]
    result["step"] = t
    result["violation"] = summary[1] - summary[0]
    result["invalid"] = not valid
    result["updated"] = True
    system.update_with_paths(gold_prefix, best_prefix)
    return result



def kbest(TransitionSystem system, int width, int k, key=None):
    """The k best distinct complete analyses found by beam search of the given width.

    Returns a list of (score, actions), best first (ties in beam order), at most
    min(k, width) long: the final beam is the only source, so k larger than the beam gives at
    most `width` analyses (widen the beam for more). `key(actions)` maps a derivation to the
    structure it builds (e.g. a parser's (heads, labels) as bytes); derivations with an equal key
    are one analysis, scored by the best of them. The first entry is `decode`'s 1-best. An empty
    input has exactly one analysis, the empty one, scored 0. Raises ValueError if the search found
    no complete analysis.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    cdef BeamSearch beam = BeamSearch(system, width)
    beam.run(False)
    found = beam.complete(width)
    if not found:
        raise ValueError("beam search found no complete analysis under the constraints")
    if key is None:
        return found[:k]
    out, seen = [], set()
    for score, path in found:
        h = key(path)
        if h in seen:
            continue
        seen.add(h)
        out.append((score, path))
        if len(out) == k:
            break
    return out
