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
    return eg.get_aligned_parse(projectivize=True)


def deprojectivize(doc: Doc) -> Doc:
    """Re-attach lifted arcs (decorated labels) and remove the decoration, in place."""
    return _nonproj.deprojectivize(doc)
