"""Pseudo-projective parsing (Nivre & Nilsson 2005), through spaCy's own implementation.

Training trees are projectivized by `Example.get_aligned_parse(projectivize=True)` (HEAD
decoration: a lifted arc's label becomes `label||head_label`); after prediction, spaCy's
`deprojectivize` re-attaches decorated arcs and strips the decoration. This adapter is the one
place the parser touches those functions, and it checks for cycles first: spaCy's projectivize
assumes a tree and would not return on a cyclic one.
"""
from typing import List, Optional, Sequence, Tuple

from spacy.pipeline._parser_internals import nonproj as _nonproj
from spacy.tokens import Doc
from spacy.training import Example

from ..errors import Errors

DELIMITER = _nonproj.DELIMITER


def is_decorated(label: str) -> bool:
    return DELIMITER in label


def undecorated(label: str) -> str:
    """relcl||nsubj -> relcl"""
    return label.partition(DELIMITER)[0]


def find_cycle(heads: Sequence[Optional[int]]) -> Optional[List[int]]:
    """Tokens on a cycle of `heads` (head == self marks a root; None is unknown), or None."""
    n = len(heads)
    state = [0] * n   # 0 unvisited, 1 on the current path, 2 done
    for start in range(n):
        path = []
        i: Optional[int] = start
        while i is not None and state[i] == 0:
            state[i] = 1
            path.append(i)
            h = heads[i]
            i = None if h is None or h == i else h
        if i is not None and state[i] == 1:
            return path[path.index(i):]
        for j in path:
            state[j] = 2
    return None


def projective_gold(eg: Example, name: str = "parser") -> Tuple[List[Optional[int]], List[Optional[str]]]:
    """Gold heads (index in eg.predicted, head == self for roots, None if unaligned) and labels
    (decorated where an arc was lifted, None if unknown) for eg.predicted's tokens."""
    ref = eg.reference
    ref_heads = [t.head.i for t in ref]
    cycle = find_cycle(ref_heads)
    if cycle:
        raise ValueError(Errors.S100.format(name=name, tokens=cycle,
                                            words=[ref[i].text for i in cycle][:10]))
    if all(t.has_head() for t in ref):
        return eg.get_aligned_parse(projectivize=True)
    # Partial trees: spaCy's projectivize takes a missing head (head == self) for a root and
    # lifts the arcs over it, so `amod` under `obj` becomes a root `amod||obj`. Missing heads
    # stay missing instead, and a known arc that no projective tree can hold with the other
    # known arcs (it crosses one, or spans a root) is dropped to missing too.
    heads, deps = eg.get_aligned_parse(projectivize=False)
    return _drop_crossing_arcs(heads, deps)


def _drop_crossing_arcs(heads: List[Optional[int]], deps: List[Optional[str]]):
    """Mark missing (head == self, no label) every arc that crosses an earlier kept arc or has
    a root strictly inside it: the rest nest or are disjoint, as a projective tree's arcs are."""
    n = len(heads)
    heads, deps = list(heads), list(deps)
    is_root = [h == i and bool(deps[i]) for i, h in enumerate(heads)]
    roots_before = [0] * (n + 1)
    for i in range(n):
        roots_before[i + 1] = roots_before[i] + is_root[i]
    arcs = sorted(((min(i, h), -max(i, h), i) for i, h in enumerate(heads) if h is not None and h != i))
    stack: List[int] = []   # hi of the open arcs, innermost last
    for lo, neg_hi, dep in arcs:
        hi = -neg_hi
        while stack and stack[-1] <= lo:
            stack.pop()
        crosses = bool(stack) and stack[-1] < hi
        if crosses or roots_before[hi] - roots_before[lo + 1] > 0:
            heads[dep], deps[dep] = dep, ""
            continue
        stack.append(hi)
    return heads, deps


def deprojectivize(doc: Doc) -> Doc:
    """Re-attach lifted arcs (decorated labels) and remove the decoration, in place."""
    return _nonproj.deprojectivize(doc)
