"""Type stubs for gazetteer.pyx: n-gram lookups in typed name lists, and longest matches."""
from typing import Tuple

import numpy

KEY_SEED: int
FILTER_WORDS: int

def prefix_hashes(tokens: numpy.ndarray, offsets: numpy.ndarray) -> numpy.ndarray: ...
def prefix_filter(prefixes: numpy.ndarray) -> numpy.ndarray: ...
def scan(words: numpy.ndarray, seg_end: numpy.ndarray, max_length: int, prefixes: numpy.ndarray,
         entries: numpy.ndarray, bitmap: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]: ...
def longest(starts: numpy.ndarray, ends: numpy.ndarray, ids: numpy.ndarray, codes: numpy.ndarray,
            values: numpy.ndarray, out: numpy.ndarray) -> None: ...
