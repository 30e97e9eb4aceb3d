"""Ranking AdaBoost (collins2001 Fig. 3) over indicator features."""
import math
from typing import Dict, List, Optional

import numpy

from ..candidates import _ranges, choose
from .base import Reranker, _arr, _unarr
from .columns import FeatureIndex, _indicators, _linear_scores


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
