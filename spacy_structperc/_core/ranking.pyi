"""Type stubs for ranking.pyx: the averaged ranking perceptron's epoch in C."""
from typing import Tuple

import numpy

def perceptron_epoch(order: numpy.ndarray, offsets: numpy.ndarray, ptr: numpy.ndarray,
                     cols: numpy.ndarray, base: numpy.ndarray, loss: numpy.ndarray,
                     oracle: numpy.ndarray, w: numpy.ndarray, u: numpy.ndarray,
                     w0u0: numpy.ndarray, c: int, fixed: bool) -> Tuple[int, int]: ...
