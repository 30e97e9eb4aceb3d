"""Type stubs for batch.pyx: decoding a batch of inputs in one call, with the GIL released."""
from typing import Optional, Tuple

import numpy
from numpy.typing import ArrayLike

from .arcstandard import ArcStandardSystem
from .tagging import TagSystem

DECODERS: Tuple[str, ...]

def tag(system: TagSystem, decoder: str, param: int, atoms: ArrayLike,
        allowed: Optional[ArrayLike], windows: ArrayLike,
        start_mask: Optional[ArrayLike] = ..., gap: Optional[float] = ...) -> numpy.ndarray: ...
def parse(system: ArcStandardSystem, decoder: str, param: int, atoms: ArrayLike, spans: ArrayLike,
          window: int, heads: numpy.ndarray, labels: numpy.ndarray) -> None: ...
