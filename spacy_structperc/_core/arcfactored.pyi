"""Type stubs for arcfactored.pyx: the graph-based model (first order, McDonald et al. 2005; or with
adjacent siblings, McDonald and Pereira 2006)."""
from typing import Tuple

import numpy
from numpy.typing import ArrayLike

from .weights import AveragedWeights

N_TEMPLATES: int

class ArcModel:
    """Hashed arc features, averaged-perceptron training with Eisner decoding, tree scores."""

    weights: AveragedWeights
    order: int
    def __init__(self, n_buckets: int = ..., order: int = ...) -> None: ...
    def set_weights(self, weights: AveragedWeights) -> None: ...
    def arc_keys(self, words: ArrayLike, tags: ArrayLike, tag_ids: ArrayLike, h: int, d: int) -> numpy.ndarray: ...
    def train_epoch(self, words: numpy.ndarray, tags: numpy.ndarray, tag_ids: numpy.ndarray,
                    sent_ptr: numpy.ndarray, gold_heads: numpy.ndarray, order: numpy.ndarray) -> Tuple[int, int]: ...
    def finish(self) -> None: ...
    def decode(self, words: numpy.ndarray, tags: numpy.ndarray, tag_ids: numpy.ndarray,
               sent_ptr: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]: ...
    def score_trees(self, words: numpy.ndarray, tags: numpy.ndarray, tag_ids: numpy.ndarray,
                    sent_ptr: numpy.ndarray, cand_sent: numpy.ndarray, cand_heads: numpy.ndarray) -> numpy.ndarray: ...
