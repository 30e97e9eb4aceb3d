"""What every reranker shares: the base score as a feature, and array serialization."""
from typing import Any, Dict, Optional

import numpy

from ...errors import Errors
from ..candidates import CandidateLists, choose

# How a learner puts the base score on the scale of its indicator features (see Reranker):
# "global" divides by one spread fitted on the training lists, "list" by each list's own spread.
BASE_NORMS = ("global", "list")
BASE_KEY = 0x5BA5E5C0DE5C0DE1   # the key of the base score when a learner sees it as a feature


def _arr(a: numpy.ndarray) -> Dict[str, Any]:
    a = numpy.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": a.tobytes()}


def _unarr(d: Dict[str, Any]) -> numpy.ndarray:
    return numpy.frombuffer(d["data"], dtype=numpy.dtype(d["dtype"])).reshape(d["shape"]).copy()


class Reranker:
    """Base class: a scoring function over candidate lists, trained on jackknifed lists.

    Every learner sees the base score as one real-valued feature, relative to the list's best
    (so it is <= 0) and normalized by `base_norm` (BASE_NORMS): "global" multiplies it by
    `scale`, one over the mean spread of the training lists (fitted once); "list" divides each
    list by its own mean spread (CandidateLists.list_relative_base).
    """

    name = "reranker"
    base_norm = "global"
    scale = 1.0

    def _set_base_norm(self, base_norm: str) -> None:
        if base_norm not in BASE_NORMS:
            raise ValueError(Errors.S247.format(norm=base_norm, options=list(BASE_NORMS)))
        self.base_norm = base_norm

    def _fit_base(self, train: CandidateLists) -> None:
        """Fit the base score's normalization on the training lists."""
        self.scale = _base_scale(train) if self.base_norm == "global" else 1.0

    def _base(self, lists: CandidateLists) -> numpy.ndarray:
        """The normalized base score of every candidate (the feature the weight w0 multiplies)."""
        if self.base_norm == "list":
            return lists.list_relative_base()
        return lists.relative_base() * self.scale

    def fit(self, train: CandidateLists, dev: Optional[CandidateLists] = None) -> "Reranker":
        raise NotImplementedError

    def scores(self, lists: CandidateLists) -> numpy.ndarray:
        raise NotImplementedError

    def choose(self, lists: CandidateLists) -> numpy.ndarray:
        return choose(lists, self.scores(lists))

    def _key_scores(self, lists: CandidateLists, distinct: bool) -> numpy.ndarray:
        """phi(z) . Theta of every candidate for the linear learners (weights `w` over the
        columns of `index`), looked up by key in a hash table built once per weight vector."""
        from ..._core.rerank_features import KeyWeights

        cached = self.__dict__.get("_key_weights")
        if cached is None or cached[0] is not self.w or cached[1] is not self.index.keys:
            cached = (self.w, self.index.keys, KeyWeights(self.index.keys, self.w))
            self._key_weights = cached
        return cached[2].scores(lists.key_ptr, lists.keys, distinct)

    def to_dict(self) -> Dict[str, Any]:
        raise NotImplementedError

    def from_dict(self, data: Dict[str, Any]) -> "Reranker":
        raise NotImplementedError


def _base_scale(lists: CandidateLists) -> float:
    """1 / the spread of relative base scores over the lists' non-first candidates, so the base
    feature is on the scale of an indicator count."""
    rel = lists.relative_base()
    rest = rel[rel < 0]
    return 1.0 / float(numpy.mean(-rest)) if len(rest) else 1.0
