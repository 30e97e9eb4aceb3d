"""Type stubs for lookahead.pyx: greedy decoding with depth-D lookahead and the margin
perceptron (tsuruoka2011)."""
from typing import Any, List, Optional, Tuple

import numpy

from .transition import TransitionSystem

NO_ACTION: str

class Lookahead:
    depth: int
    gap: float
    def __init__(self, system: TransitionSystem, depth: int) -> None: ...

def search_gap(gap: Optional[float]) -> float: ...
def decode(system: TransitionSystem, depth: int = ..., gap: Optional[float] = ...) -> numpy.ndarray: ...
def train(system: TransitionSystem, depth: int = ..., margin: float = ...,
          record: bool = ..., dynamic: bool = ..., explore: float = ...,
          seed: int = ...) -> Tuple[int, int, Optional[List[Any]]]: ...
