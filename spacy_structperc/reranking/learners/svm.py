"""A linear SVM on difference vectors (collins2001 §5.2), through scikit-learn."""

import numpy

from ...errors import Errors
from .base import Reranker, _arr, _unarr
from .columns import FeatureIndex, _column_matrix


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
