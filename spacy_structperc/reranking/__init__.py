"""k-best reranking (collins2001): learners over candidate lists, the global features of the
candidates, and the reranker a component holds.

- ``candidates``: the candidate lists every learner reads;
- ``learners``: the rerankers, one module each (perceptron, boosting, svm, dual), with what they
  share (``base``) and the primal learners' feature columns (``columns``);
- ``features``: the feature groups a component chooses, over the C extractor
  (``_core/rerank_features.pyx``).
"""
from .features import (FEATURES_VERSION, GROUPS, ChunkFeatures, TreeFeatures, node_labels)
from .candidates import CandidateLists, choose
from .learners import (BASE_KEY, BASE_NORMS, KERNELS, LEARNERS, BoostingReranker,
                       DualReranker, FeatureIndex, PerceptronReranker, Reranker, SVMReranker,
                       make_reranker, reranker_from_dict)

__all__ = ["FEATURES_VERSION", "GROUPS", "ChunkFeatures", "TreeFeatures", "node_labels",
           "BASE_KEY", "BASE_NORMS", "KERNELS", "LEARNERS", "BoostingReranker", "CandidateLists", "DualReranker",
           "FeatureIndex", "PerceptronReranker", "Reranker", "SVMReranker", "choose",
           "make_reranker", "reranker_from_dict"]
