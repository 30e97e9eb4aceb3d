"""Type stubs for arcstandard.pyx: labelled arc-standard parsing as a transition system."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
from numpy.typing import ArrayLike

from .transition import TransitionSystem
from .weights import AveragedWeights

ADDRESSES: Dict[str, int]
STRUCTURAL: Dict[str, int]
SYSTEMS: Tuple[str, ...]
DISTANCES: Tuple[str, ...]

class ParseTemplates:
    """Feature templates over parser-state positions (s0-s2, q0-q2, children, distance)."""

    n: int
    specs: List[dict]
    atom_names: List[str]
    def __init__(self, specs: Sequence[dict], atom_names: Sequence[str]) -> None: ...

class ArcStandardSystem(TransitionSystem):
    """SHIFT, BREAK, LEFT-ARC(l) and RIGHT-ARC(l) over one bound span."""

    templates: ParseTemplates
    n_labels: int
    n_tokens: int
    label_candidates: int
    allow_break: bool
    has_gold: bool
    hybrid: bool
    eager_break: bool
    break_bias: float
    complete_gold: bool
    def __init__(self, templates: ParseTemplates, weights: AveragedWeights, n_labels: int,
                 label_candidates: int = ..., system: str = ...) -> None: ...
    @property
    def system(self) -> str: ...
    def set_sentence(self, atoms: ArrayLike, heads: Optional[ArrayLike] = ...,
                     labels: Optional[ArrayLike] = ..., allow_break: bool = ...) -> None: ...
    def set_allowed_keys(self, keys: Optional[ArrayLike]) -> None: ...
    def oracle_keys(self) -> numpy.ndarray: ...
    def oracle_path(self) -> Optional[numpy.ndarray]: ...
    def score_trees(self, atoms: ArrayLike, heads: ArrayLike, labels: ArrayLike,
                    allow_break: bool = ...) -> numpy.ndarray: ...
    def tree(self, state: bytes) -> Tuple[numpy.ndarray, numpy.ndarray]: ...
    def run(self, actions: ArrayLike) -> Tuple[numpy.ndarray, numpy.ndarray]: ...
    def stack_of(self, state: bytes) -> Tuple[List[int], int]: ...
    def is_valid_action(self, state: bytes, action: int) -> bool: ...
    def action_name(self, action: int, labels: Optional[Sequence[str]] = ...) -> str: ...

def run_error(failed: int, actions: Sequence[int]) -> str: ...
