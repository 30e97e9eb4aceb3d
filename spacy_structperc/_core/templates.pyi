"""Type stubs for templates.pyx: hashed conjunction feature templates over atom tables."""
from typing import Any, List, Optional, Sequence, Tuple

import numpy
from numpy.typing import ArrayLike

class TemplateSet:
    """Feature templates (conjunctions of (offset, atom) parts and label history), hashed."""

    n_static: int
    n_history: int
    max_history: int
    pure_history: bool
    n_cols: int
    atom_names: List[str]
    specs: List[dict]
    def __init__(self, specs: Sequence[dict], atom_names: Sequence[str]) -> None: ...
    def __len__(self) -> int: ...
    def __reduce__(self) -> Tuple[Any, ...]: ...
    def static_keys(self, atoms: ArrayLike, i: int) -> numpy.ndarray: ...
    def history_keys(self, atoms: ArrayLike, i: int, hist: Sequence[int]) -> numpy.ndarray: ...
