"""The averaged perceptron for ranking (collins2001 Fig. 2), primal."""
from typing import Any, Dict, List, Optional, Sequence

import numpy

from .base import Reranker, _arr, _unarr
from .columns import FeatureIndex, _column_matrix, _useful


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
        from ..._core.ranking import perceptron_epoch

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
