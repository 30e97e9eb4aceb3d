"""Type stubs for occurrences.pyx: each token's other occurrences of its word in its Doc."""
from typing import Tuple

import numpy

def first_occurrences(words: numpy.ndarray, offsets: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]: ...
def value_sets(first: numpy.ndarray, bits: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]: ...
