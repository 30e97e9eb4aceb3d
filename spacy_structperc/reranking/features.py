"""Global features of candidate analyses for k-best reranking: the settings side.

The features themselves are defined once, in C, in ``_core/rerank_features.pyx`` (its docstring
lists every group). These classes hold a component's choice of groups and the label atoms the
groups read, and turn candidates into hashed keys.

``FEATURES_VERSION`` names the definition: a reranker saves it with its weights, and a reranker
saved under another definition is refused (S246), since its weights would be read against keys
that mean something else.
"""
from typing import Dict, Sequence, Tuple

import numpy
from spacy.strings import get_string_id

from .._core.rerank_features import (CHUNK_GROUPS, TREE_GROUPS, chunk_features, group_mask,
                                     hash_pairs, tree_features)

# 1: the Python extractor (keys depended on the tree's longest feature); 2: the C extractor.
FEATURES_VERSION = 2
GROUPS = TREE_GROUPS
# The groups of rerank_features.v1, before edges and lexical were added.
GROUPS_V1 = TREE_GROUPS[:8]


class TreeFeatures:
    """The feature keys of candidate dependency trees (groups: TREE_GROUPS)."""

    def __init__(self, groups: Sequence[str] = TREE_GROUPS, conj_label: str = "conj",
                 cc_label: str = "cc"):
        self.mask = group_mask(list(groups), TREE_GROUPS)
        self.groups = tuple(g for g in TREE_GROUPS if g in groups)
        self.conj_label = conj_label
        self.cc_label = cc_label
        self._conj = int(get_string_id(conj_label))
        self._cc = int(get_string_id(cc_label))

    def to_dict(self) -> Dict:
        return {"groups": list(self.groups), "conj_label": self.conj_label, "cc_label": self.cc_label}

    def batch(self, words, tags, heads, labels) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """(ptr, keys) of k trees of one sentence: heads and labels (k, n), see
        _core.rerank_features.tree_features."""
        return tree_features(words, tags, heads, labels, self.mask, self._conj, self._cc)

    def __call__(self, words, tags, heads, labels) -> numpy.ndarray:
        """The keys (uint64, repeats are counts) of one tree: words, tags and labels are atoms
        per token, heads the head index per token (-1 for a root)."""
        return self.batch(words, tags, heads, labels)[1]


class ChunkFeatures:
    """The feature keys of candidate chunkings (groups: CHUNK_GROUPS)."""

    def __init__(self, groups: Sequence[str] = CHUNK_GROUPS):
        self.mask = group_mask(list(groups), CHUNK_GROUPS)
        self.groups = tuple(g for g in CHUNK_GROUPS if g in groups)

    def to_dict(self) -> Dict:
        return {"groups": list(self.groups)}

    def batch(self, words, tags, classes) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """(ptr, keys) of k chunkings of one sentence: classes (k, n) BIO classes."""
        return chunk_features(words, tags, classes, self.mask)

    def __call__(self, words, tags, classes) -> numpy.ndarray:
        return self.batch(words, tags, classes)[1]


def node_labels(tags, labels) -> numpy.ndarray:
    """The tree kernel's node labels: each node's tag and arc label hashed together."""
    return hash_pairs(tags, labels)
