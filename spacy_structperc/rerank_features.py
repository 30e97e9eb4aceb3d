"""Global features of dependency trees for k-best reranking (collins2001 §2, §5).

The base parser scores a tree as a sum of local decisions over its stack and queue; a reranker
sees each candidate tree whole. The groups below are what the beam cannot see, or sees only in
part (Charniak & Johnson 2005 and Collins 2000 use the same kinds for constituency trees):

- ``arcs``: head tag / word, dependent tag / word, label, direction and distance of every arc;
- ``grandparent``: grandparent, head and dependent tags with both labels;
- ``siblings``: adjacent dependents on one side of a head (tags and labels);
- ``children``: each head's full sequence of dependent labels, and of dependent tags, with the
  head's position marked (the head's "production");
- ``coordination``: for every ``conj`` dependent, the head and conjunct tags and words, the
  coordinating word (the ``cc`` child of the conjunct) and whether the conjuncts' tags agree;
- ``paths``: the sequence of labels from each token up to three ancestors, and the root's tag
  and word with the number of roots;
- ``spans``: the length (bucketed) of each subtree by its head's tag and label;
- ``valency``: each head's numbers of left and right dependents, by tag and by word.

A feature is a tuple of integers (group id, atoms...) hashed to a uint64 key with the same
kind of 64-bit mixing the core's templates use, so candidates are sparse vectors of the same
keys the kernels and weight tables take. Atoms are spaCy string hashes (stable across processes).
The base parser's score is not hashed: it is the real-valued feature L(x) of collins2001 §2,
handled by each learner.
"""
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy
from spacy.strings import get_string_id

GROUPS = ("arcs", "grandparent", "siblings", "children", "coordination", "paths", "spans",
          "valency")
_MASK = (1 << 64) - 1
_GOLDEN = numpy.uint64(0x9E3779B97F4A7C15)
_M1 = numpy.uint64(0xBF58476D1CE4E5B9)
_M2 = numpy.uint64(0x94D049BB133111EB)
# Fixed ids for the few string constants the features use (any distinct constants will do).
NONE, LEFT, RIGHT, HEAD_MARK = 1, 2, 3, 4


def _bucket(d: int) -> int:
    d = abs(d)
    return d if d <= 5 else (6 if d <= 10 else 7)


def hash_rows(rows: numpy.ndarray) -> numpy.ndarray:
    """Hash each row of a (n, P) uint64 array to one nonzero uint64 (splitmix64 rounds)."""
    rows = numpy.ascontiguousarray(rows, dtype=numpy.uint64)
    with numpy.errstate(over="ignore"):
        h = numpy.full((rows.shape[0],), 0xCBF29CE484222325, dtype=numpy.uint64)
        for j in range(rows.shape[1]):
            h = (h ^ rows[:, j]) + _GOLDEN
            h = (h ^ (h >> numpy.uint64(30))) * _M1
            h = (h ^ (h >> numpy.uint64(27))) * _M2
            h = h ^ (h >> numpy.uint64(31))
    h[h == 0] = 1
    return h


class TreeFeatures:
    """Extracts the global features of candidate trees (see the module docstring)."""

    def __init__(self, groups: Sequence[str] = GROUPS, conj_label: str = "conj", cc_label: str = "cc"):
        unknown = [g for g in groups if g not in GROUPS]
        if unknown:
            raise ValueError(f"unknown feature groups {unknown}; expected some of {GROUPS}")
        self.groups = tuple(g for g in GROUPS if g in groups)
        self.conj_label = conj_label
        self.cc_label = cc_label
        self._conj = int(get_string_id(conj_label))
        self._cc = int(get_string_id(cc_label))

    def to_dict(self) -> Dict:
        return {"groups": list(self.groups), "conj_label": self.conj_label, "cc_label": self.cc_label}

    def __call__(self, words, tags, heads, labels) -> numpy.ndarray:
        """The feature keys (uint64, with repeats: counts) of one tree.

        words, tags: uint64 atom per token; heads: head index per token, -1 for a root;
        labels: uint64 label id per token (`token.dep`; the root label for roots).
        """
        n = len(heads)
        if n == 0:
            return numpy.zeros((0,), dtype=numpy.uint64)
        w = [int(x) for x in words]
        t = [int(x) for x in tags]
        h = [int(x) for x in heads]
        lab = [int(x) for x in labels]
        kids: List[List[int]] = [[] for _ in range(n)]
        roots = []
        for d in range(n):
            if h[d] < 0:
                roots.append(d)
            else:
                kids[h[d]].append(d)
        F: List[Tuple[int, ...]] = []
        add = F.append
        groups = self.groups
        if "arcs" in groups:
            for d in range(n):
                g = h[d]
                if g < 0:
                    continue
                direction = LEFT if d < g else RIGHT
                dist = _bucket(d - g)
                add((10, t[g], t[d], lab[d], direction, dist))
                add((11, w[g], t[d], lab[d], direction))
                add((12, t[g], w[d], lab[d], direction))
                add((13, w[g], w[d], lab[d]))
        if "grandparent" in groups:
            for d in range(n):
                g = h[d]
                if g < 0:
                    continue
                gg = h[g]
                if gg < 0:
                    add((20, NONE, t[g], t[d], lab[g], lab[d]))
                else:
                    add((20, t[gg], t[g], t[d], lab[g], lab[d]))
                    add((21, lab[g], lab[d], LEFT if d < g else RIGHT, LEFT if g < gg else RIGHT))
        for g in range(n):
            ks = kids[g]
            left = [d for d in ks if d < g]
            right = [d for d in ks if d > g]
            if "siblings" in groups:
                for side, seq in ((LEFT, left[::-1]), (RIGHT, right)):
                    prev = NONE
                    prev_l = NONE
                    for d in seq:
                        add((30, t[g], prev, t[d], side))
                        add((31, t[g], prev_l, lab[d], side))
                        prev, prev_l = t[d], lab[d]
                    add((30, t[g], prev, NONE, side))
                    add((31, t[g], prev_l, NONE, side))
            if "children" in groups:
                seq_l = [lab[d] for d in left] + [HEAD_MARK] + [lab[d] for d in right]
                seq_t = [t[d] for d in left] + [HEAD_MARK] + [t[d] for d in right]
                add((40, t[g], lab[g]) + tuple(seq_l))
                add((41, t[g]) + tuple(seq_t))
                add((42, w[g]) + tuple(seq_l))
            if "valency" in groups:
                nl, nr = min(len(left), 4), min(len(right), 4)
                add((70, t[g], nl, nr))
                add((71, w[g], nl, nr))
                add((72, lab[g], nl + nr))
        if "coordination" in groups:
            conj, cc = self._conj, self._cc
            for d in range(n):
                g = h[d]
                if g < 0 or lab[d] != conj:
                    continue
                cc_word = next((w[c] for c in kids[d] if lab[c] == cc), NONE)
                add((50, t[g], t[d], cc_word))
                add((51, w[g], w[d]))
                add((52, lab[g], int(t[g] == t[d]), cc_word))
                add((53, t[g], t[d], _bucket(d - g)))
        if "paths" in groups:
            for d in range(n):
                path = [lab[d]]
                a = h[d]
                while a >= 0 and len(path) < 4:
                    path.append(lab[a])
                    a = h[a]
                add((60,) + tuple(path[:3]))
                add((61, t[d]) + tuple(path[:4]))
            for r in roots:
                add((62, t[r], w[r], min(len(roots), 3)))
        if "spans" in groups:
            size = [1] * n
            order = self._bottom_up(h, kids, roots)
            for d in order:
                for c in kids[d]:
                    size[d] += size[c]
            for d in range(n):
                add((80, t[d], lab[d], _bucket(size[d] - 1)))
        if not F:
            return numpy.zeros((0,), dtype=numpy.uint64)
        width = max(len(f) for f in F)
        arr = numpy.zeros((len(F), width + 1), dtype=numpy.uint64)
        for i, f in enumerate(F):
            arr[i, 0] = len(f)
            arr[i, 1:len(f) + 1] = [x & _MASK for x in f]
        return hash_rows(arr)

    @staticmethod
    def _bottom_up(h, kids, roots) -> List[int]:
        out, stack = [], list(roots)
        while stack:
            d = stack.pop()
            out.append(d)
            stack.extend(kids[d])
        return out[::-1]
