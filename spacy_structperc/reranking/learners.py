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
  problem), through scikit-learn (``pip install spacy-structperc[rerank]``);
- ``dual``: the perceptron in dual form (Fig. 4) on the shared kernel core
  (``_core/kernel.pyx``), with the polynomial kernel over the features or the dependency-tree
  kernel (``_core/treekernel.pyx``).

Every learner serializes to msgpack-able dicts of numbers and bytes (no pickle).
"""
import math
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import numpy

from ..errors import Errors

LEARNERS = ("perceptron", "boosting", "svm", "dual")
KERNELS = ("linear", "poly", "tree")
# How a learner puts the base score on the scale of its indicator features (see Reranker):
# "global" divides by one spread fitted on the training lists, "list" by each list's own spread.
BASE_NORMS = ("global", "list")
BASE_KEY = 0x5BA5E5C0DE5C0DE1   # the key of the base score when a learner sees it as a feature


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


# ---------------------------------------------------------------------------------------------
# The feature index: hashed keys -> columns, for the primal learners


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
        from .._core.rerank_features import KeyWeights

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


class PerceptronReranker(Reranker):
    """The averaged perceptron for ranking (collins2001 Fig. 2), over the global features and the
    base score (a real-valued feature scaled by `base_scale`). On a mistake (the chosen
    candidate has a higher loss than the list's oracle) Theta += phi(oracle) - phi(chosen).
    Averaging uses Daume's trick (w - u / c).

    base_weights: None learns the base score's weight like any other; a list of numbers fixes it
    (the perceptron then learns corrections to the base model, as Collins 2000 fixes it before
    boosting) and, given dev lists, keeps the value whose model makes the fewest dev errors (a
    null in the list stands for the learned weight). Given dev lists, the epoch is chosen on dev
    too (`chosen_epoch`). The epochs run in C (_core/ranking.pyx).

    holdout: without dev lists (as inside `spacy train`) and with more than one base weight to
    choose from, every `holdout`-th training list is held out, the weight and the epoch are
    chosen on those lists as they would be on dev, and the perceptron is then trained on all
    lists with that weight for that many epochs (`selection` records the search). This is the
    line search on held-out data that collins2001 uses for its other free settings (C of the
    SVM, §5.2; the rounds of boosting, §5.3), applied to the base score's weight; the paper
    itself leaves that weight to Collins 2000, which fixes it before the features (as
    BoostingReranker does). The held-out lists are jackknifed like all training lists, so the
    reranker has not seen them; they come from fold models, not from the full base model.
    0 or 1: no holdout (the learned weight, or the first of base_weights).
    """

    name = "perceptron"

    def __init__(self, epochs: int = 10, min_count: int = 1, seed: int = 0,
                 base_weights: Optional[Sequence[float]] = None, base_norm: str = "global",
                 holdout: int = 0):
        self.epochs = epochs
        self.min_count = min_count
        self.seed = seed
        self.base_weights = None if base_weights is None else [None if x is None else float(x) for x in base_weights]
        self._set_base_norm(base_norm)
        self.holdout = int(holdout)
        self.index = FeatureIndex()
        self.w = numpy.zeros((0,))
        self.w0 = 0.0
        self.scale = 1.0
        self.curve: List[Dict[str, float]] = []
        self.dev_losses: Dict[str, float] = {}
        self.chosen_epoch = 0
        self.chosen_base_weight: Optional[float] = None
        self.selection: Dict[str, Any] = {}

    def fit(self, train, dev=None):
        options = [None] if self.base_weights is None else self.base_weights
        if dev is None and self.holdout > 1 and len(options) > 1 and \
                train.n_sentences >= 2 * self.holdout:
            h = self.holdout
            held = [i for i in range(train.n_sentences) if i % h == h - 1]
            rest = [i for i in range(train.n_sentences) if i % h != h - 1]
            probe = PerceptronReranker(self.epochs, self.min_count, self.seed, options,
                                       self.base_norm, holdout=0)
            probe.fit(train.subset(rest), train.subset(held))
            self._fit(train, None, [probe.chosen_base_weight], probe.chosen_epoch)
            self.selection = {"on": f"every {h}th training list", "losses": probe.dev_losses,
                              "base_weight": probe.chosen_base_weight, "epochs": probe.chosen_epoch}
            self.dev_losses = dict(probe.dev_losses)
            self.chosen_epoch = probe.chosen_epoch
            return self
        self.selection = {"on": "dev"} if dev is not None and len(options) > 1 else {}
        return self._fit(train, dev, options if dev is not None else options[:1], self.epochs)

    def _fit(self, train, dev, options, epochs):
        self.index = FeatureIndex.fit(train, self.min_count)
        self._fit_base(train)
        ptr, cols = _column_matrix(self.index, train)
        base = self._base(train)
        oracle = train.oracle()
        useful = _useful(train, oracle)
        best = None
        self.dev_losses = {}
        for fixed in options:
            w, w0, curve = self._train(train, ptr, cols, base, oracle, useful, fixed, dev, epochs)
            self.w, self.w0 = w, w0
            dev_loss = float(dev.loss[self.choose(dev)].sum()) if dev is not None else 0.0
            self.dev_losses[str(fixed)] = dev_loss
            if best is None or dev_loss < best[0]:
                best = (dev_loss, w, w0, curve, self.chosen_epoch, fixed)
        _, self.w, self.w0, self.curve, self.chosen_epoch, self.chosen_base_weight = best
        return self

    def _train(self, train, ptr, cols, base, oracle, useful, fixed, dev, epochs):
        """The epochs (in C, _core/ranking.pyx); with dev lists, the averaged weights of the
        epoch with the fewest dev errors are kept (`chosen_epoch`), else the last epoch's."""
        from .._core.ranking import perceptron_epoch

        V = len(self.index)
        w, u = numpy.zeros((V,)), numpy.zeros((V,))
        w0u0 = numpy.array([0.0 if fixed is None else float(fixed), 0.0])
        c = 1
        rng = numpy.random.default_rng(self.seed)
        curve = []
        args = (numpy.ascontiguousarray(train.offsets, dtype=numpy.int64),
                numpy.ascontiguousarray(ptr, dtype=numpy.int64),
                numpy.ascontiguousarray(cols, dtype=numpy.int64),
                numpy.ascontiguousarray(base, dtype=numpy.float64),
                numpy.ascontiguousarray(train.loss, dtype=numpy.float64),
                numpy.ascontiguousarray(oracle, dtype=numpy.int64))
        average = lambda: (w - u / c, (w0u0[0] - w0u0[1] / c) if fixed is None else float(fixed))
        best = None
        for epoch in range(epochs):
            order = numpy.ascontiguousarray(rng.permutation(useful), dtype=numpy.int64)
            mistakes, c = perceptron_epoch(order, *args, w, u, w0u0, c, fixed is not None)
            point = {"epoch": epoch + 1, "mistakes": int(mistakes)}
            if dev is not None:
                self.w, self.w0 = average()
                point["dev_loss"] = float(dev.loss[self.choose(dev)].sum())
                if best is None or point["dev_loss"] < best[0]:
                    best = (point["dev_loss"], self.w, self.w0, epoch + 1)
            curve.append(point)
        if best is not None:
            self.chosen_epoch = best[3]
            return best[1], best[2], curve
        self.chosen_epoch = epochs
        return (*average(), curve)

    def scores(self, lists):
        return self._key_scores(lists, False) + self.w0 * self._base(lists)

    def to_dict(self):
        return {"learner": self.name, "epochs": self.epochs, "min_count": self.min_count,
                "seed": self.seed, "base_weights": self.base_weights, "keys": _arr(self.index.keys),
                "w": _arr(self.w), "w0": self.w0, "scale": self.scale, "base_norm": self.base_norm,
                "holdout": self.holdout}

    def from_dict(self, data):
        self.epochs, self.min_count, self.seed = data["epochs"], data["min_count"], data["seed"]
        self.base_weights = data.get("base_weights")
        self._set_base_norm(data.get("base_norm", "global"))
        self.holdout = data.get("holdout", 0)
        self.index = FeatureIndex(_unarr(data["keys"]))
        self.w, self.w0, self.scale = _unarr(data["w"]), data["w0"], data["scale"]
        return self


class BoostingReranker(Reranker):
    """Ranking AdaBoost (collins2001 Fig. 3) over indicator features (phi_s in {0, 1}).

    Triples (x_i, oracle_i, z) for every candidate z whose loss exceeds the oracle's. The base
    score's weight w_0 is set first, minimizing the exponential loss over the triples (Collins
    2000); then each round picks s_t = argmax |r_s| and adds 1/2 log((1 + r)/(1 - r)) to
    Theta_s. The exponential loss Z (the sum the distribution D normalizes) falls every round
    (`loss_curve`). Updates after a round touch only the triples whose candidates have feature
    s_t. The number of rounds is chosen on dev (every `eval_every` rounds) when dev is given.
    """

    name = "boosting"

    def __init__(self, rounds: int = 2000, min_count: int = 2, eval_every: int = 50, smooth: float = 1e-4,
                 base_norm: str = "global"):
        self._set_base_norm(base_norm)
        self.rounds = rounds
        self.min_count = min_count
        self.eval_every = eval_every
        self.smooth = smooth
        self.index = FeatureIndex()
        self.w = numpy.zeros((0,))
        self.w0 = 0.0
        self.scale = 1.0
        self.loss_curve: List[float] = []
        self.dev_curve: List[Dict[str, float]] = []
        self.chosen_rounds = 0

    def fit(self, train, dev=None):
        self.index = FeatureIndex.fit(train, self.min_count)
        self._fit_base(train)
        ptr, cols, rows = _indicators(self.index, train)
        base = self._base(train)
        oracle = train.oracle()
        good, bad, share = [], [], []
        for i in range(train.n_sentences):
            a, b = train.offsets[i], train.offsets[i + 1]
            g = oracle[i]
            worse = [z for z in range(a, b) if train.loss[z] > train.loss[g]]
            for z in worse:
                good.append(g)
                bad.append(z)
                share.append(1.0 / (b - a - 1))
        good = numpy.asarray(good, dtype=numpy.int64)
        bad = numpy.asarray(bad, dtype=numpy.int64)
        share = numpy.asarray(share)
        V = len(self.index)
        self.w = numpy.zeros((V,))
        if len(good) == 0:
            self.w0 = 1.0
            return self
        dbase = base[good] - base[bad]
        self.w0 = _minimize_exp_loss(share, dbase)
        margin = self.w0 * dbase
        D = share * numpy.exp(-margin)
        # Candidate -> triples: a candidate is the bad side of at most one triple; a sentence's
        # triples are contiguous and share its oracle (the good side).
        n_tr = len(good)
        bad_tr = numpy.full((len(train),), -1, dtype=numpy.int64)
        bad_tr[bad] = numpy.arange(n_tr)
        good_start = numpy.zeros((len(train),), dtype=numpy.int64)
        good_len = numpy.zeros((len(train),), dtype=numpy.int64)
        if n_tr:
            first = numpy.concatenate([[True], good[1:] != good[:-1]])
            starts = numpy.flatnonzero(first)
            good_start[good[starts]] = starts
            good_len[good[starts]] = numpy.diff(numpy.concatenate([starts, [n_tr]]))
        # Feature -> candidates.
        feat_ptr, feat_cands = _invert(cols, V, rows)
        # r~_s = sum_t D_t (phi_s(good_t) - phi_s(bad_t))
        cw = numpy.zeros((len(train),))
        numpy.add.at(cw, good, D)
        numpy.add.at(cw, bad, -D)
        r = numpy.bincount(cols, weights=cw[rows], minlength=V).astype(numpy.float64)
        Z = float(D.sum())
        self.loss_curve = [Z]
        self.dev_curve = []
        history = []
        dev_base = dev_ptr = dev_cols = None
        if dev is not None:
            dev_ptr, dev_cols, _ = _indicators(self.index, dev)
            dev_base = self._base(dev)
        best = (math.inf, 0)
        for t in range(1, self.rounds + 1):
            if not Z > 1e-300:
                break
            rs = r / Z
            s = int(numpy.argmax(numpy.abs(rs)))
            rt = float(rs[s])
            if abs(rt) < 1e-12:
                break
            rt = max(-1 + self.smooth, min(1 - self.smooth, rt))
            delta = 0.5 * math.log((1 + rt) / (1 - rt))
            self.w[s] += delta
            history.append((s, delta))
            # The triples whose candidates have feature s.
            cands = feat_cands[feat_ptr[s]:feat_ptr[s + 1]]
            trs = numpy.concatenate([bad_tr[cands][bad_tr[cands] >= 0],
                                     _ranges(good_start[cands], good_len[cands])])
            trs = numpy.unique(trs)
            has = numpy.zeros((len(train),), dtype=numpy.float64)
            has[cands] = 1.0
            d = has[good[trs]] - has[bad[trs]]
            moved = d != 0
            trs, d = trs[moved], d[moved]
            old = D[trs]
            new = old * numpy.exp(-delta * d)
            D[trs] = new
            dD = new - old
            Z += float(dD.sum())
            dcw = numpy.zeros((len(train),))
            numpy.add.at(dcw, good[trs], dD)
            numpy.add.at(dcw, bad[trs], -dD)
            touched = numpy.unique(numpy.concatenate([good[trs], bad[trs]]))
            lens = ptr[touched + 1] - ptr[touched]
            entries = _ranges(ptr[touched], lens)
            r += numpy.bincount(cols[entries], weights=numpy.repeat(dcw[touched], lens), minlength=V)
            self.loss_curve.append(Z)
            if dev is not None and (t % self.eval_every == 0 or t == self.rounds):
                sc = _linear_scores(self.w, dev_ptr, dev_cols) + self.w0 * dev_base
                dev_loss = float(dev.loss[choose(dev, sc)].sum())
                self.dev_curve.append({"round": t, "dev_loss": dev_loss})
                if dev_loss < best[0]:
                    best = (dev_loss, t)
        self.history = history
        self.chosen_rounds = best[1] if dev is not None and best[1] else len(history)
        self.w = numpy.zeros((V,))
        for s, delta in history[:self.chosen_rounds]:
            self.w[s] += delta
        return self

    def scores(self, lists):
        return self._key_scores(lists, True) + self.w0 * self._base(lists)

    def to_dict(self):
        return {"learner": self.name, "rounds": self.rounds, "min_count": self.min_count,
                "eval_every": self.eval_every, "smooth": self.smooth, "keys": _arr(self.index.keys),
                "w": _arr(self.w), "w0": self.w0, "scale": self.scale, "chosen_rounds": self.chosen_rounds,
                "base_norm": self.base_norm}

    def from_dict(self, data):
        for k in ("rounds", "min_count", "eval_every", "smooth", "w0", "scale", "chosen_rounds"):
            setattr(self, k, data[k])
        self._set_base_norm(data.get("base_norm", "global"))
        self.index = FeatureIndex(_unarr(data["keys"]))
        self.w = _unarr(data["w"])
        return self


def _ranges(starts: numpy.ndarray, lens: numpy.ndarray) -> numpy.ndarray:
    """The concatenation of arange(starts[i], starts[i] + lens[i])."""
    starts, lens = numpy.asarray(starts, dtype=numpy.int64), numpy.asarray(lens, dtype=numpy.int64)
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    if not len(lens):
        return numpy.zeros((0,), dtype=numpy.int64)
    offs = numpy.repeat(starts - numpy.concatenate([[0], numpy.cumsum(lens)[:-1]]), lens)
    return numpy.arange(int(lens.sum()), dtype=numpy.int64) + offs


def _invert(targets: numpy.ndarray, n: int, values: Optional[numpy.ndarray] = None):
    """CSR of positions (or `values`) grouped by target: ptr (n + 1), items."""
    order = numpy.argsort(targets, kind="stable")
    ptr = numpy.searchsorted(targets[order], numpy.arange(n + 1))
    items = order if values is None else values[order]
    return ptr, items


def _minimize_exp_loss(share: numpy.ndarray, d: numpy.ndarray) -> float:
    """argmin_{w >= 0} sum_t share_t exp(-w d_t), by bisection on the derivative."""
    f = lambda w: float(-(share * d * numpy.exp(-w * d)).sum())
    lo, hi = 0.0, 1.0
    if f(lo) >= 0:
        return 0.0
    while f(hi) < 0 and hi < 1e4:
        hi *= 2
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


class SVMReranker(Reranker):
    """A linear soft-margin SVM on difference vectors phi(oracle) - phi(z) (collins2001 §5.2),
    each also added negated with label -1 so the classes balance; scikit-learn's LinearSVC."""

    name = "svm"

    def __init__(self, C: float = 0.1, min_count: int = 2, max_pairs: int = 0, base_norm: str = "global"):
        self._set_base_norm(base_norm)
        self.C = C
        self.min_count = min_count
        self.max_pairs = max_pairs
        self.index = FeatureIndex()
        self.w = numpy.zeros((0,))
        self.w0 = 0.0
        self.scale = 1.0

    def fit(self, train, dev=None):
        try:
            from scipy import sparse
            from sklearn.svm import LinearSVC
        except ImportError:
            raise ImportError(Errors.S241.format(learner=self.name)) from None
        self.index = FeatureIndex.fit(train, self.min_count)
        self._fit_base(train)
        ptr, cols = _column_matrix(self.index, train)
        V = len(self.index)
        rows = numpy.repeat(numpy.arange(len(train)), numpy.diff(ptr))
        X = sparse.csr_matrix((numpy.ones(len(cols)), (rows, cols)), shape=(len(train), V))
        base = self._base(train)
        X = sparse.hstack([X, sparse.csr_matrix(base[:, None])]).tocsr()
        oracle = train.oracle()
        good, bad = [], []
        for i in range(train.n_sentences):
            a, b = train.offsets[i], train.offsets[i + 1]
            g = oracle[i]
            for z in range(a, b):
                if train.loss[z] > train.loss[g]:
                    good.append(g)
                    bad.append(z)
        if not good:
            self.w, self.w0 = numpy.zeros((V,)), 1.0
            return self
        diff = X[good] - X[bad]
        sign = numpy.where(numpy.arange(len(good)) % 2 == 0, 1.0, -1.0)
        diff = sparse.diags(sign) @ diff
        # seeded: the dual solver visits the pairs in a random order, and an unseeded fit of the
        # same lists gave another reranker on every refit (and in every copy of a pipeline)
        clf = LinearSVC(C=self.C, fit_intercept=False, loss="hinge", max_iter=5000, dual=True, random_state=0)
        clf.fit(diff, sign)
        coef = clf.coef_.ravel()
        self.w, self.w0 = coef[:V].copy(), float(coef[V])
        return self

    def scores(self, lists):
        return self._key_scores(lists, True) + self.w0 * self._base(lists)

    def to_dict(self):
        return {"learner": self.name, "C": self.C, "min_count": self.min_count,
                "max_pairs": self.max_pairs, "keys": _arr(self.index.keys), "w": _arr(self.w),
                "w0": self.w0, "scale": self.scale, "base_norm": self.base_norm}

    def from_dict(self, data):
        self.C, self.min_count, self.max_pairs = data["C"], data["min_count"], data["max_pairs"]
        self._set_base_norm(data.get("base_norm", "global"))
        self.index = FeatureIndex(_unarr(data["keys"]))
        self.w, self.w0, self.scale = _unarr(data["w"]), data["w0"], data["scale"]
        return self


class DualReranker(Reranker):
    """The perceptron for ranking in dual form (collins2001 Fig. 4) on the shared kernel core.

    kernel: "linear" (the primal perceptron's ranking, exactly), "poly" (degree `degree`,
    coef0 1) over the global features with the base score as one more (scaled) feature, or
    "tree" (the dependency-tree kernel, with the base score as a linear term weighted
    `base_weight`). On a mistake: update(oracle, +1), update(chosen, -1); the clock ticks once per
    sentence. `max_sentences` (0: all) trains on the first sentences only: a kernel row costs one
    kernel evaluation per support item, so training is quadratic in the mistakes.
    """

    name = "dual"

    def __init__(self, kernel: str = "poly", degree: int = 2, lambda_: float = 0.5,
                 base_weight: float = 1.0, epochs: int = 1, max_sentences: int = 0,
                 prediction: str = "averaged", seed: int = 0, base_norm: str = "global"):
        self._set_base_norm(base_norm)
        if kernel not in KERNELS:
            raise ValueError(Errors.S242.format(kernel=kernel, options=list(KERNELS)))
        self.kernel_name = kernel
        self.degree = degree
        self.lambda_ = lambda_
        self.base_weight = base_weight
        self.epochs = epochs
        self.max_sentences = max_sentences
        self.prediction = prediction
        self.seed = seed
        self.scale = 1.0
        self.model = None
        self.curve: List[Dict[str, float]] = []

    def _make_kernel(self):
        from .._core.kernel import PolynomialKernel
        if self.kernel_name == "linear":
            return PolynomialKernel(degree=1, coef0=0.0)
        if self.kernel_name == "poly":
            return PolynomialKernel(degree=self.degree, coef0=1.0)
        from .._core.treekernel import DependencyTreeKernel
        return DependencyTreeKernel(lambda_=self.lambda_, base_weight=self.base_weight)

    def items(self, lists: CandidateLists) -> List[Any]:
        base = self._base(lists)
        out = []
        if self.kernel_name == "tree":
            if lists.tree_ptr is None:
                raise ValueError(Errors.S243)
            for j in range(len(lists)):
                h, n = lists.tree_of(j)
                out.append((h, n, float(base[j])))
            return out
        for j in range(len(lists)):
            keys = lists.keys_of(j)
            out.append((numpy.concatenate([keys, numpy.array([BASE_KEY], dtype=numpy.uint64)]),
                        numpy.concatenate([numpy.ones((len(keys),), dtype=numpy.float32),
                                           numpy.array([base[j]], dtype=numpy.float32)])))
        return out

    def fit(self, train, dev=None):
        from .._core.kernel import DualPerceptron
        self._fit_base(train)
        if self.max_sentences and train.n_sentences > self.max_sentences:
            train = train.subset(range(self.max_sentences))
        items = self.items(train)
        oracle = train.oracle()
        self.model = DualPerceptron(self._make_kernel(), prediction=self.prediction)
        rng = numpy.random.default_rng(self.seed)
        useful = _useful(train, oracle)
        self.curve = []
        for epoch in range(self.epochs):
            mistakes = 0
            order = rng.permutation(useful) if self.seed is not None else useful
            for i in order:
                a, b = train.offsets[i], train.offsets[i + 1]
                s = self.model.score_batch(items[a:b], item_ids=list(range(a, b)), mode="last")
                z = a + int(numpy.argmax(s))
                g = oracle[i]
                if train.loss[z] > train.loss[g]:
                    mistakes += 1
                    self.model.update(items[g], 1.0, g)
                    self.model.update(items[z], -1.0, z)
                self.model.tick()
            self.curve.append({"epoch": epoch + 1, "mistakes": mistakes, "support": int(self.model.n_support)})
        return self

    def scores(self, lists):
        items = self.items(lists)
        out = numpy.zeros((len(lists),))
        for i in range(lists.n_sentences):
            a, b = lists.offsets[i], lists.offsets[i + 1]
            if b - a == 1:
                continue
            if self.prediction == "voted":
                out[a:b] = self.model.rank(items[a:b])
            else:
                out[a:b] = self.model.score_batch(items[a:b])
        return out

    def to_dict(self):
        return {"learner": self.name, "kernel": self.kernel_name, "degree": self.degree,
                "lambda_": self.lambda_, "base_weight": self.base_weight, "epochs": self.epochs,
                "max_sentences": self.max_sentences, "prediction": self.prediction,
                "seed": self.seed, "scale": self.scale, "base_norm": self.base_norm,
                "model": self.model.to_bytes() if self.model is not None else None}

    def from_dict(self, data):
        from .._core.kernel import DualPerceptron
        for k in ("degree", "lambda_", "base_weight", "epochs", "max_sentences", "prediction",
                  "seed", "scale"):
            setattr(self, k, data[k])
        self._set_base_norm(data.get("base_norm", "global"))
        self.kernel_name = data["kernel"]
        self.model = None
        if data["model"] is not None:
            self.model = DualPerceptron(self._make_kernel()).from_bytes(data["model"])
        return self


def make_reranker(learner: str, **settings) -> Reranker:
    """A reranker by name (see LEARNERS); unknown names raise S240."""
    classes = {"perceptron": PerceptronReranker, "boosting": BoostingReranker,
               "svm": SVMReranker, "dual": DualReranker}
    if learner not in classes:
        raise ValueError(Errors.S240.format(learner=learner, options=list(LEARNERS)))
    return classes[learner](**settings)


def reranker_from_dict(data: Dict[str, Any]) -> Reranker:
    return make_reranker(data["learner"]).from_dict(data)
