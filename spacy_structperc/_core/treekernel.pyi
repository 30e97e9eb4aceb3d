"""Type stubs for treekernel.pyx: a Collins-Duffy convolution kernel over dependency trees."""
from typing import Any, Dict, Tuple

import numpy

from .kernel import Kernel

class DepTree:
    n: int
    base: float
    raw: Tuple[bytes, bytes, float]
    def __init__(self, heads: numpy.ndarray, labels: numpy.ndarray, base: float = ...) -> None: ...

class DependencyTreeKernel(Kernel):
    lambda_: float
    base_weight: float
    def __init__(self, lambda_: float = ..., base_weight: float = ...) -> None: ...
    def params(self) -> Dict[str, Any]: ...
    def support_state(self) -> Dict[str, Any]: ...
    def load_support_state(self, state: Dict[str, Any]) -> None: ...
