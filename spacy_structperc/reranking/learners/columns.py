"""The feature index of the primal learners: hashed keys -> columns, and candidates as CSR
rows of columns."""
from typing import List, Optional

import numpy

from ..candidates import CandidateLists


class FeatureIndex:
    """The keys seen at least `min_count` times in training, sorted; keys -> column ids."""

    def __init__(self, keys: Optional[numpy.ndarray] = None):
        self.keys = numpy.zeros((0,), dtype=numpy.uint64) if keys is None else numpy.asarray(keys, dtype=numpy.uint64)

    @classmethod
    def fit(cls, lists: CandidateLists, min_count: int = 1) -> "FeatureIndex":
        keys, counts = numpy.unique(lists.keys, return_counts=True)
        return cls(keys[counts >= min_count])

    def __len__(self) -> int:
        return len(self.keys)

    def columns(self, keys: numpy.ndarray):
        """(columns, mask): the column of each key, and which keys are in the index."""
        if len(self.keys) == 0:
            return numpy.zeros((len(keys),), dtype=numpy.int64), numpy.zeros((len(keys),), dtype=bool)
        pos = numpy.searchsorted(self.keys, keys)
        pos = numpy.minimum(pos, len(self.keys) - 1)
        return pos, self.keys[pos] == keys


def _column_matrix(index: FeatureIndex, lists: CandidateLists):
    """(ptr, cols): each candidate's in-index feature columns, CSR (repeats kept)."""
    cols, ok = index.columns(lists.keys)
    row = numpy.repeat(numpy.arange(len(lists)), numpy.diff(lists.key_ptr))
    cols, row = cols[ok], row[ok]
    ptr = numpy.zeros((len(lists) + 1,), dtype=numpy.int64)
    numpy.add.at(ptr, row + 1, 1)
    return numpy.cumsum(ptr), cols


def _indicators(index: FeatureIndex, lists: CandidateLists):
    """(ptr, cols, rows): each candidate's distinct in-index columns (phi_s in {0, 1}), CSR."""
    ptr, cols = _column_matrix(index, lists)
    rows = numpy.repeat(numpy.arange(len(lists)), numpy.diff(ptr))
    V = len(index)
    pairs = numpy.unique(rows.astype(numpy.int64) * (V + 1) + cols)
    rows, cols = pairs // (V + 1), pairs % (V + 1)
    return numpy.searchsorted(rows, numpy.arange(len(lists) + 1)), cols, rows


def _useful(lists: CandidateLists, oracle: numpy.ndarray) -> List[int]:
    """The sentences with something to learn: some candidate is worse than the oracle."""
    return [i for i in range(lists.n_sentences)
            if lists.loss[lists.offsets[i]:lists.offsets[i + 1]].max() > lists.loss[oracle[i]]]


def _linear_scores(w: numpy.ndarray, ptr: numpy.ndarray, cols: numpy.ndarray) -> numpy.ndarray:
    """phi(z) . w for every candidate z (CSR rows)."""
    contrib = w[cols] if len(cols) else numpy.zeros((0,))
    sums = numpy.concatenate([[0.0], numpy.cumsum(contrib)])
    return sums[ptr[1:]] - sums[ptr[:-1]]
