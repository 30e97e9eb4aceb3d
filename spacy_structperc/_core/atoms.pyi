"""Type stubs for atoms.pyx: atom rows per word type, cached by orth id."""
from typing import Sequence

import numpy
from numpy.typing import ArrayLike

class AtomTable:
    """uint64 key -> a row of `n_cols` uint64 atoms; gathered for many keys in one C loop."""

    n_cols: int
    n_rows: int
    def __init__(self, n_cols: int) -> None: ...
    def __len__(self) -> int: ...
    def add(self, key: int, values: Sequence[int] | ArrayLike) -> int: ...
    def gather(self, keys: ArrayLike, out: numpy.ndarray) -> numpy.ndarray: ...
