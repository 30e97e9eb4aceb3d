"""Rerankers over k-best candidate lists (collins2001 §2, §4.4, §5).

A training set is m sentences, each with the candidates G(x_i) a base model proposed (its k-best
list), every candidate with the base model's score L (collins2001 §2's log-probability feature;
here the beam's perceptron score), a sparse vector of global features (uint64 keys, see
reranking/features.py) and its loss against the gold analysis. The gold analysis is usually not in
the list, so the target of training is the list's best candidate (its "oracle": least loss,
then highest base score), as in Collins 2000.

Learners (``LEARNERS``), all choosing ``argmax_z  w_0 L(z) + Theta . phi(z)``:

- ``perceptron``: the averaged perceptron for ranking (Fig. 2), primal;
- ``boosting``: ranking AdaBoost (Fig. 3): the feature of largest |r_s| each round, the
  number of rounds chosen on dev; ``w_0`` is fixed first by minimizing the exponential loss
  (Collins 2000);
- ``svm``: a linear SVM on difference vectors phi(oracle) - phi(z) (§5.2, the soft-margin
  problem), through scikit-learn (``pip install -e ".[rerank]"`` from the checkout);
- ``dual``: the perceptron in dual form (Fig. 4) on the shared kernel core
  (``_core/dual.pyx``), with the polynomial kernel over the features or the dependency-tree
  kernel (``_core/treekernel.pyx``).

Every learner serializes to msgpack-able dicts of numbers and bytes (no pickle).
"""

from typing import Any, Dict

from ...errors import Errors
from ..candidates import CandidateLists, choose
from .base import BASE_KEY, BASE_NORMS, Reranker
from .boosting import BoostingReranker
from .columns import FeatureIndex, _column_matrix, _indicators, _linear_scores, _useful
from .dual import KERNELS, DualReranker
from .perceptron import PerceptronReranker
from .svm import SVMReranker

LEARNERS = ("perceptron", "boosting", "svm", "dual")

__all__ = ["BASE_KEY", "BASE_NORMS", "KERNELS", "LEARNERS", "BoostingReranker", "CandidateLists", "DualReranker",
           "FeatureIndex", "PerceptronReranker", "Reranker", "SVMReranker", "choose", "make_reranker",
           "reranker_from_dict", "_column_matrix", "_indicators", "_linear_scores", "_useful"]


def make_reranker(learner: str, **settings) -> Reranker:
    """A reranker by name (see LEARNERS); unknown names raise S240."""
    classes = {"perceptron": PerceptronReranker, "boosting": BoostingReranker,
               "svm": SVMReranker, "dual": DualReranker}
    if learner not in classes:
        raise ValueError(Errors.S240.format(learner=learner, options=list(LEARNERS)))
    return classes[learner](**settings)


def reranker_from_dict(data: Dict[str, Any]) -> Reranker:
    return make_reranker(data["learner"]).from_dict(data)
