"""The perceptron for ranking in dual form (collins2001 Fig. 4) on the shared kernel core."""
from typing import Any, Dict, List

import numpy

from ...errors import Errors
from ..candidates import CandidateLists
from .base import BASE_KEY, Reranker
from .columns import _useful


KERNELS = ("linear", "poly", "tree")


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
        from ..._core.kernel import PolynomialKernel
        if self.kernel_name == "linear":
            return PolynomialKernel(degree=1, coef0=0.0)
        if self.kernel_name == "poly":
            return PolynomialKernel(degree=self.degree, coef0=1.0)
        from ..._core.treekernel import DependencyTreeKernel
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
        from ..._core.dual import DualPerceptron
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
        from ..._core.dual import DualPerceptron
        for k in ("degree", "lambda_", "base_weight", "epochs", "max_sentences", "prediction",
                  "seed", "scale"):
            setattr(self, k, data[k])
        self._set_base_norm(data.get("base_norm", "global"))
        self.kernel_name = data["kernel"]
        self.model = None
        if data["model"] is not None:
            self.model = DualPerceptron(self._make_kernel()).from_bytes(data["model"])
        return self
