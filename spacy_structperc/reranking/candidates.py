"""Candidate lists in flat arrays: the input every reranker learns from and scores."""
import math
from typing import Any, Dict, Iterable, List, Sequence

import numpy


class CandidateLists:
    """m candidate lists in flat arrays.

    offsets (m + 1): sentence i's candidates are rows offsets[i]:offsets[i + 1]; base (N): the
    base model's score; loss (N): errors against gold (NaN when unknown); key_ptr (N + 1) /
    keys: each candidate's feature keys (repeats are counts); tree_ptr (N + 1) / heads / nodes:
    each candidate's tree (head per node, -1 root; node label), for the tree kernel.
    """

    def __init__(self, offsets, base, loss, key_ptr, keys, tree_ptr=None, heads=None, nodes=None):
        self.offsets = numpy.asarray(offsets, dtype=numpy.int64)
        self.base = numpy.asarray(base, dtype=numpy.float64)
        self.loss = numpy.asarray(loss, dtype=numpy.float64)
        self.key_ptr = numpy.asarray(key_ptr, dtype=numpy.int64)
        self.keys = numpy.asarray(keys, dtype=numpy.uint64)
        self.tree_ptr = None if tree_ptr is None else numpy.asarray(tree_ptr, dtype=numpy.int64)
        self.heads = None if heads is None else numpy.asarray(heads, dtype=numpy.int32)
        self.nodes = None if nodes is None else numpy.asarray(nodes, dtype=numpy.uint64)

    @classmethod
    def build(cls, sentences: Iterable[Sequence[Dict[str, Any]]]) -> "CandidateLists":
        """From lists of candidates, each a dict with base, loss, keys and optionally heads and
        nodes (the tree)."""
        offsets, base, loss, kp, keys, tp, heads, nodes = [0], [], [], [0], [], [0], [], []
        has_trees = True
        for cands in sentences:
            for c in cands:
                base.append(c["base"])
                loss.append(c.get("loss", math.nan))
                k = numpy.asarray(c["keys"], dtype=numpy.uint64)
                keys.append(k)
                kp.append(kp[-1] + len(k))
                if c.get("heads") is None:
                    has_trees = False
                else:
                    heads.append(numpy.asarray(c["heads"], dtype=numpy.int32))
                    nodes.append(numpy.asarray(c["nodes"], dtype=numpy.uint64))
                    tp.append(tp[-1] + len(heads[-1]))
            offsets.append(offsets[-1] + len(cands))
        cat = lambda xs, dt: numpy.concatenate(xs).astype(dt) if xs else numpy.zeros((0,), dtype=dt)
        if has_trees and heads:
            return cls(offsets, base, loss, kp, cat(keys, numpy.uint64), tp, cat(heads, numpy.int32),
                       cat(nodes, numpy.uint64))
        return cls(offsets, base, loss, kp, cat(keys, numpy.uint64))

    @property
    def n_sentences(self) -> int:
        return len(self.offsets) - 1

    def __len__(self) -> int:
        return len(self.base)

    def keys_of(self, j: int) -> numpy.ndarray:
        return self.keys[self.key_ptr[j]:self.key_ptr[j + 1]]

    def tree_of(self, j: int):
        a, b = self.tree_ptr[j], self.tree_ptr[j + 1]
        return self.heads[a:b], self.nodes[a:b]

    def relative_base(self) -> numpy.ndarray:
        """Each candidate's base score minus the best base score of its list (<= 0)."""
        out = numpy.zeros_like(self.base)
        for i in range(self.n_sentences):
            a, b = self.offsets[i], self.offsets[i + 1]
            if b > a:
                out[a:b] = self.base[a:b] - self.base[a:b].max()
        return out

    def list_relative_base(self) -> numpy.ndarray:
        """relative_base() divided, list by list, by the mean gap between the list's best base
        score and its other candidates' (0 for a list whose candidates all score alike). Adding
        a constant to a list's base scores, or multiplying them by a positive number, leaves
        this unchanged, so lists from base models whose scores have another scale (jackknife
        fold models against the full model) read alike."""
        rel = self.relative_base()
        out = numpy.zeros_like(rel)
        sizes = numpy.diff(self.offsets)
        if not len(rel):
            return out
        sent = numpy.repeat(numpy.arange(self.n_sentences), sizes)
        below = rel < 0
        gap_sum = numpy.bincount(sent[below], weights=-rel[below], minlength=self.n_sentences)
        gap_n = numpy.bincount(sent[below], minlength=self.n_sentences)
        spread = numpy.where(gap_n > 0, gap_sum / numpy.maximum(gap_n, 1), 0.0)
        ok = spread[sent] > 0
        out[ok] = rel[ok] / spread[sent][ok]
        return out

    def oracle(self) -> numpy.ndarray:
        """Per sentence, the row of the least-loss candidate (ties: the higher base score)."""
        out = numpy.zeros((self.n_sentences,), dtype=numpy.int64)
        for i in range(self.n_sentences):
            a, b = self.offsets[i], self.offsets[i + 1]
            order = numpy.lexsort((-self.base[a:b], self.loss[a:b]))
            out[i] = a + order[0]
        return out

    def first(self) -> numpy.ndarray:
        """Per sentence, the base model's 1-best (the list's first row)."""
        return self.offsets[:-1].copy()

    def subset(self, sentences: Sequence[int]) -> "CandidateLists":
        return self._rows([numpy.arange(self.offsets[i], self.offsets[i + 1]) for i in sentences])

    def _rows(self, per_sentence: List[numpy.ndarray]) -> "CandidateLists":
        sizes = numpy.array([len(r) for r in per_sentence], dtype=numpy.int64)
        rows = numpy.concatenate(per_sentence).astype(numpy.int64) if per_sentence else numpy.zeros((0,), dtype=numpy.int64)
        offsets = numpy.concatenate([[0], numpy.cumsum(sizes)])
        kl = numpy.diff(self.key_ptr)[rows]
        keys = self.keys[_ranges(self.key_ptr[rows], kl)]
        out = CandidateLists(offsets, self.base[rows], self.loss[rows],
                             numpy.concatenate([[0], numpy.cumsum(kl)]), keys)
        if self.tree_ptr is not None:
            tl = numpy.diff(self.tree_ptr)[rows]
            at = _ranges(self.tree_ptr[rows], tl)
            out.tree_ptr = numpy.concatenate([[0], numpy.cumsum(tl)]).astype(numpy.int64)
            out.heads, out.nodes = self.heads[at], self.nodes[at]
        return out

    def head(self, k: int) -> "CandidateLists":
        """The first k candidates of every list."""
        rows = [numpy.arange(self.offsets[i], min(self.offsets[i + 1], self.offsets[i] + k))
                for i in range(self.n_sentences)]
        return self._rows(rows)

    @classmethod
    def concat(cls, parts: Sequence["CandidateLists"]) -> "CandidateLists":
        out = {}
        names = ["base", "loss", "keys"] + (["heads", "nodes"] if all(p.tree_ptr is not None for p in parts) else [])
        for name in names:
            out[name] = numpy.concatenate([getattr(p, name) for p in parts])
        for name, ln in (("offsets", None), ("key_ptr", "keys"), ("tree_ptr", "heads")):
            if name == "tree_ptr" and "heads" not in out:
                continue
            acc, pieces = 0, [numpy.zeros((1,), dtype=numpy.int64)]
            for p in parts:
                arr = getattr(p, name)
                pieces.append(arr[1:] + acc)
                acc += arr[-1]
            out[name] = numpy.concatenate(pieces)
        return cls(**out)

    def to_dict(self) -> Dict[str, numpy.ndarray]:
        out = {k: getattr(self, k) for k in ("offsets", "base", "loss", "key_ptr", "keys")}
        if self.tree_ptr is not None:
            out.update(tree_ptr=self.tree_ptr, heads=self.heads, nodes=self.nodes)
        return out

    def save(self, path) -> None:
        numpy.savez(path, **self.to_dict())

    @classmethod
    def load(cls, path) -> "CandidateLists":
        with numpy.load(path) as f:
            return cls(**{k: f[k] for k in f.files})


def choose(lists: CandidateLists, scores: numpy.ndarray) -> numpy.ndarray:
    """Per sentence, the row of the highest score (ties: the earlier row, i.e. the base order)."""
    out = numpy.zeros((lists.n_sentences,), dtype=numpy.int64)
    for i in range(lists.n_sentences):
        a, b = lists.offsets[i], lists.offsets[i + 1]
        out[i] = a + int(numpy.argmax(scores[a:b]))
    return out


def _ranges(starts: numpy.ndarray, lens: numpy.ndarray) -> numpy.ndarray:
    """The concatenation of arange(starts[i], starts[i] + lens[i])."""
    starts, lens = numpy.asarray(starts, dtype=numpy.int64), numpy.asarray(lens, dtype=numpy.int64)
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    if not len(lens):
        return numpy.zeros((0,), dtype=numpy.int64)
    offs = numpy.repeat(starts - numpy.concatenate([[0], numpy.cumsum(lens)[:-1]]), lens)
    return numpy.arange(int(lens.sum()), dtype=numpy.int64) + offs
