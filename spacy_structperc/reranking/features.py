"""Global features of candidate analyses for k-best reranking: the settings side.

The features themselves are defined once, in C, in ``_core/rerank_features.pyx`` (its docstring
lists every group). These classes hold a component's choice of groups and the label atoms the
groups read, and turn candidates into hashed keys.

``FEATURES_VERSION`` names the definition: a reranker saves it with its weights, and a reranker
saved under another definition is refused (S246), since its weights would be read against keys
that mean something else.
"""
from typing import Dict, List, Sequence, Tuple

import numpy
from spacy.strings import get_string_id
from spacy.util import registry

from .._core.rerank_features import (CHUNK_GROUPS, TREE_GROUPS, chunk_features, group_mask,
                                     hash_pairs, tree_features)

# 1: the Python extractor (keys depended on the tree's longest feature); 2: the C extractor.
FEATURES_VERSION = 2
# "consensus" is computed over a sentence's whole k-best list (below), the others per tree in C.
GROUPS = TREE_GROUPS + ("consensus",)
# The groups of rerank_features.v1, before edges and lexical were added.
GROUPS_V1 = TREE_GROUPS[:8]


class TreeFeatures:
    """The feature keys of candidate dependency trees (groups: GROUPS).

    The groups of TREE_GROUPS describe one tree (_core/rerank_features.pyx). ``consensus``
    describes a tree against the other candidates of its list: for each token, the share of the
    list's trees that give it the same head (and the same head and label), in tenths, alone and
    with the arc label and the token's tag. Arcs every candidate shares weigh alike in all of
    them, so the group speaks only where the list disagrees, and lets the learner prefer the
    majority's arcs there (a learned form of minimum-Bayes-risk decoding over the list).
    """

    def __init__(self, groups: Sequence[str] = GROUPS, conj_label: str = "conj",
                 cc_label: str = "cc"):
        unknown = [g for g in groups if g not in GROUPS]
        if unknown:
            raise ValueError(f"unknown feature groups {unknown}; expected some of {list(GROUPS)}")
        self.mask = group_mask([g for g in groups if g in TREE_GROUPS], TREE_GROUPS)
        self.consensus = "consensus" in groups
        self.groups = tuple(g for g in GROUPS if g in groups)
        self.conj_label = conj_label
        self.cc_label = cc_label
        self._conj = int(get_string_id(conj_label))
        self._cc = int(get_string_id(cc_label))

    def to_dict(self) -> Dict:
        return {"groups": list(self.groups), "conj_label": self.conj_label, "cc_label": self.cc_label}

    def batch(self, words, tags, heads, labels) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """(ptr, keys) of the k trees of one sentence's list: heads and labels (k, n), see
        _core.rerank_features.tree_features."""
        ptr, keys = tree_features(words, tags, heads, labels, self.mask, self._conj, self._cc)
        if not self.consensus:
            return ptr, keys
        heads = numpy.atleast_2d(numpy.asarray(heads, dtype=numpy.int64))
        labels = numpy.atleast_2d(numpy.asarray(labels, dtype=numpy.uint64))
        extra = consensus_keys(numpy.asarray(tags, dtype=numpy.uint64), heads, labels)
        per = extra.shape[1]
        pieces = []
        for i in range(len(ptr) - 1):
            pieces.append(keys[ptr[i]:ptr[i + 1]])
            pieces.append(extra[i])
        out_ptr = ptr + per * numpy.arange(len(ptr))
        return out_ptr, (numpy.concatenate(pieces) if pieces else keys)

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


_C300, _C301, _C302, _C303 = (numpy.uint64(x) for x in (300, 301, 302, 303))


def consensus_keys(tags: numpy.ndarray, heads: numpy.ndarray, labels: numpy.ndarray) -> numpy.ndarray:
    """(k, 4 n) keys of the consensus group (see TreeFeatures) of k trees of one sentence."""
    k, n = heads.shape
    if n == 0:
        return numpy.zeros((k, 0), dtype=numpy.uint64)
    same_head = heads[:, None, :] == heads[None, :, :]                      # (k, k, n)
    same_arc = same_head & (labels[:, None, :] == labels[None, :, :])
    share_h = numpy.rint(10 * same_head.mean(axis=1)).astype(numpy.uint64)  # (k, n) tenths
    share_a = numpy.rint(10 * same_arc.mean(axis=1)).astype(numpy.uint64)
    t = numpy.broadcast_to(tags, (k, n)).ravel()
    sh, sa, lab = share_h.ravel(), share_a.ravel(), labels.ravel()
    c = lambda v: numpy.full((k * n,), v, dtype=numpy.uint64)
    out = numpy.stack([hash_pairs(c(_C300), sh), hash_pairs(hash_pairs(c(_C301), sh), lab),
                       hash_pairs(hash_pairs(c(_C302), sh), t), hash_pairs(c(_C303), sa)], axis=1)
    return out.reshape(k, 4 * n)


def node_labels(tags, labels) -> numpy.ndarray:
    """The tree kernel's node labels: each node's tag and arc label hashed together."""
    return hash_pairs(tags, labels)


@registry.misc("spacy-structperc.rerank_features.v1")
def rerank_features(arcs: bool = True, grandparent: bool = True, siblings: bool = True,
                    children: bool = True, coordination: bool = True, paths: bool = True,
                    spans: bool = True, valency: bool = True) -> List[str]:
    """The global tree-feature groups of a parser's reranker, as first defined (without edges
    and lexical): for the `features` setting of the parser's `reranker` block. The groups are
    documented in spacy_structperc/_core/rerank_features.pyx."""
    on = dict(arcs=arcs, grandparent=grandparent, siblings=siblings, children=children,
              coordination=coordination, paths=paths, spans=spans, valency=valency)
    return [g for g, v in on.items() if v]


@registry.misc("spacy-structperc.rerank_features.v2")
def rerank_features_v2(arcs: bool = True, grandparent: bool = True, siblings: bool = True,
                       children: bool = True, coordination: bool = True, paths: bool = True,
                       spans: bool = True, valency: bool = True, edges: bool = True,
                       lexical: bool = True, consensus: bool = True) -> List[str]:
    """The global tree-feature groups of a parser's reranker (spacy_structperc/_core/
    rerank_features.pyx documents them): v1's, the subtrees' edges and neighbours (edges),
    bilexical grandparent and sibling features (lexical), and each arc's agreement with the
    rest of the k-best list (consensus, spacy_structperc/reranking/features.py)."""
    on = dict(arcs=arcs, grandparent=grandparent, siblings=siblings, children=children,
              coordination=coordination, paths=paths, spans=spans, valency=valency, edges=edges,
              lexical=lexical, consensus=consensus)
    return [g for g, v in on.items() if v]
