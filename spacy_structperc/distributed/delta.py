"""Iterative parameter mixing by deltas: what travels each epoch is what changed, not the tables.

A *base* is one component's training state (what `AveragedWeights.state_arrays()` gives:
every key, ascending, with its rows of W and U, and the clock), held sparsely: the keys, and only
the cells (key, class) where W or U is not zero (a tagger's table on EWT: 7% of them), as flat
indices `row * C + class` with their W and U. Every party (the driver and each worker) holds the
base of the current mix. An epoch then costs:

* a shard trains from the base and sends back a *shard delta*: the keys it added and the cells
  whose W or U differ from the base, with their new values (`shard_delta`);
* the driver folds the shard deltas into a *mix message* (`mix_message`): the new keys, the
  shards' coefficients and clocks, and the mixed values of every cell some shard changed;
* every party applies the message to its base (`apply_mix`), the driver and the workers by the
  same code, so they hold the same mix bit for bit.

The result is exactly what `WeightsMixer` makes of the shards' full states, bit for bit (tested):
a cell no shard changed holds the base value in every shard, so its mix is the mixer's formula
applied to that value, which `apply_mix` replays on every non-zero cell of the base (a zero
stays zero under the formula; no bytes travel for any of them); a changed cell's mix is computed
by the driver from each shard's value there (the base value for shards that did not change it),
with the mixer's operations in the mixer's order, and sent. A key only some shards have counts
as zero in the others, as in the mixer; a shard with coefficient 0 adds no keys, as in the mixer.
(Signs of zero aside: a -0.0 may come out +0.0, which scores the same.)
"""
from typing import Dict, List, Sequence, Tuple

import numpy

Base = Dict[str, object]
CHUNK = 1 << 16          # cells per numpy pass: the temporaries stay in cache


def make_base(keys, W, U, clock) -> Base:
    """A (sparse) base from a dense training state, keys ascending."""
    keys = numpy.ascontiguousarray(keys, dtype=numpy.uint64)
    if keys.size > 1 and not bool(numpy.all(keys[1:] > keys[:-1])):
        raise ValueError("a base needs its keys in ascending order, each once")
    W = numpy.asarray(W, dtype=numpy.float32)
    U = numpy.asarray(U, dtype=numpy.float64)
    C = int(W.shape[1])
    parts = []
    for a, b in _row_chunks(keys.size, C):
        nz = (W[a:b] != 0) | (U[a:b] != 0)
        r, c = numpy.nonzero(nz)
        parts.append(((a + r) * C + c, W[a:b][r, c], U[a:b][r, c]))
    cells = numpy.concatenate([p[0] for p in parts]).astype(numpy.int64) if parts else numpy.zeros(0, numpy.int64)
    return {"keys": keys, "n_classes": C, "cells": cells,
            "W": numpy.concatenate([p[1] for p in parts]) if parts else numpy.zeros(0, numpy.float32),
            "U": numpy.concatenate([p[2] for p in parts]) if parts else numpy.zeros(0, numpy.float64),
            "clock": int(clock)}


def dense_arrays(base: Base) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, int]:
    """(keys, W, U, clock) as `state_arrays()` gives them, for `load_arrays`."""
    C = base["n_classes"]
    W = numpy.zeros((base["keys"].size, C), dtype=numpy.float32)
    U = numpy.zeros((base["keys"].size, C), dtype=numpy.float64)
    W.reshape(-1)[base["cells"]] = base["W"]
    U.reshape(-1)[base["cells"]] = base["U"]
    return base["keys"], W, U, base["clock"]


def copy_base(base: Base) -> Base:
    return {k: (numpy.array(v) if isinstance(v, numpy.ndarray) else v) for k, v in base.items()}


def _base_rows(base: Base, a: int, b: int, C: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Rows a..b of the base, dense."""
    cells = base["cells"]
    i, j = numpy.searchsorted(cells, [a * C, b * C])
    W = numpy.zeros((b - a) * C, dtype=numpy.float32)
    U = numpy.zeros((b - a) * C, dtype=numpy.float64)
    W[cells[i:j] - a * C] = base["W"][i:j]
    U[cells[i:j] - a * C] = base["U"][i:j]
    return W.reshape(b - a, C), U.reshape(b - a, C)


def _unique(values: numpy.ndarray) -> numpy.ndarray:
    """Sorted distinct values (numpy's hash-based `unique` is many times slower on these)."""
    values = numpy.sort(values)
    if values.size < 2:
        return values
    keep = numpy.empty(values.size, dtype=bool)
    keep[0] = True
    numpy.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _row_chunks(n_rows: int, n_cols: int):
    step = max(1, CHUNK // max(1, n_cols))
    for a in range(0, n_rows, step):
        yield a, min(n_rows, a + step)


def shard_delta(base: Base, keys, W, U, clock) -> Dict[str, object]:
    """What a shard that trained from `base` changed: its new keys, and every cell (key, class)
    whose W or U is not the base's (cells of new keys: the non-zero ones), with the new values.
    `keys, W, U, clock` is the shard's state as `state_arrays()` gives it."""
    bkeys = base["keys"]
    C = base["n_classes"]
    pos = numpy.searchsorted(keys, bkeys)
    if pos.size and (pos[-1] >= keys.size or not numpy.array_equal(keys[pos], bkeys)):
        raise ValueError("a shard's state lost keys of the base it trained from")
    same_layout = keys.size == bkeys.size
    out_keys: List[numpy.ndarray] = []
    out_cols: List[numpy.ndarray] = []
    out_W: List[numpy.ndarray] = []
    out_U: List[numpy.ndarray] = []

    def take(row_keys, Ws, Us, changed):
        r, c = numpy.nonzero(changed)
        out_keys.append(row_keys[r])
        out_cols.append(c.astype(numpy.int32))
        out_W.append(Ws[r, c])
        out_U.append(Us[r, c])

    for a, b in _row_chunks(bkeys.size, C):
        if same_layout:
            Ws, Us = W[a:b], U[a:b]
        else:
            Ws, Us = W[pos[a:b]], U[pos[a:b]]
        bW, bU = _base_rows(base, a, b, C)
        take(bkeys[a:b], Ws, Us, (Ws != bW) | (Us != bU))
    if same_layout:
        new_rows = numpy.zeros(0, dtype=numpy.int64)
    else:
        is_new = numpy.ones(keys.size, dtype=bool)
        is_new[pos] = False
        new_rows = numpy.flatnonzero(is_new)
        for a, b in _row_chunks(new_rows.size, C):
            rows = new_rows[a:b]
            Ws, Us = W[rows], U[rows]
            take(keys[rows], Ws, Us, (Ws != 0) | (Us != 0))

    def cat(parts, dtype):
        return numpy.concatenate(parts).astype(dtype, copy=False) if parts else numpy.zeros(0, dtype=dtype)

    return {"new_keys": numpy.ascontiguousarray(keys[new_rows], dtype=numpy.uint64),
            "keys": cat(out_keys, numpy.uint64), "cols": cat(out_cols, numpy.int32),
            "W": cat(out_W, numpy.float32), "U": cat(out_U, numpy.float64), "clock": int(clock)}


def _mixed_clock(coefs: Sequence[float], clocks: Sequence[int]):
    """The mixer's bookkeeping: the sum of coefficients and the mixed clock."""
    sum_coef = 0.0
    sum_coef_clock = 0.0
    for c, T in zip(coefs, clocks):
        if not c >= 0.0:
            raise ValueError(f"mixing coefficients must be >= 0, got {c}")
        if T < 0:
            raise ValueError(f"clock must be >= 0, got {T}")
        sum_coef += c
        sum_coef_clock += c * float(T)
    if not coefs or sum_coef <= 0.0:
        raise ValueError("nothing to mix: add at least one shard with a positive coefficient")
    clock = int(sum_coef_clock / sum_coef + 0.5)
    if any(T > 0 for T in clocks) and clock < 1:
        clock = 1
    return sum_coef, clock


def _mix_values(values_W, values_U, coefs, clocks, sum_coef, clock):
    """The mixer's arithmetic on aligned per-shard values (float32 W, float64 U), in its order."""
    n = values_W[0].shape if values_W else (0,)
    acc_W = numpy.zeros(n, dtype=numpy.float32)
    acc_U = numpy.zeros(n, dtype=numpy.float64)
    for vW, vU, c, T in zip(values_W, values_U, coefs, clocks):
        if c == 0.0:
            continue
        acc_W += numpy.float32(c) * vW
        if T > 0:
            acc_U += (c / float(T)) * vU
    if sum_coef != 1.0:
        acc_W *= numpy.float32(1.0 / sum_coef)
    acc_U *= float(clock) / sum_coef
    return acc_W, acc_U


def _extended_keys(base: Base, new_keys: numpy.ndarray) -> numpy.ndarray:
    """The base's keys and `new_keys` (sorted, none in the base), in ascending order."""
    if not new_keys.size:
        return base["keys"]
    return numpy.insert(base["keys"], numpy.searchsorted(base["keys"], new_keys), new_keys)


def mix_message(base: Base, deltas: Sequence[Dict[str, object]], coefs: Sequence[float]) -> Dict[str, object]:
    """Fold the shard deltas (shard order) with (unnormalized) coefficients into the message that
    turns `base` into the mix (`apply_mix`)."""
    coefs = [float(c) for c in coefs]
    if len(coefs) != len(deltas):
        raise ValueError(f"{len(coefs)} coefficients for {len(deltas)} shards")
    clocks = [int(d["clock"]) for d in deltas]
    sum_coef, clock = _mixed_clock(coefs, clocks)
    live = [d for d, c in zip(deltas, coefs) if c != 0.0]
    new_parts = [numpy.asarray(d["new_keys"], dtype=numpy.uint64) for d in live]
    new_keys = _unique(numpy.concatenate(new_parts)) if new_parts else numpy.zeros(0, numpy.uint64)
    ext = _extended_keys(base, new_keys)
    C = base["n_classes"]
    cids = [numpy.searchsorted(ext, d["keys"]).astype(numpy.int64) * C + d["cols"] for d in deltas]
    live_cids = [cid for cid, c in zip(cids, coefs) if c != 0.0]
    cells = _unique(numpy.concatenate(live_cids)) if live_cids else numpy.zeros(0, numpy.int64)
    # The base's values at those cells (zero for new keys).
    row_keys = ext[cells // C]
    cols = cells % C
    brow = numpy.searchsorted(base["keys"], row_keys)
    brow_c = numpy.minimum(brow, max(base["keys"].size - 1, 0))
    in_base = (brow < base["keys"].size) & (base["keys"][brow_c] == row_keys) if base["keys"].size else \
        numpy.zeros(cells.size, dtype=bool)
    W0, U0 = _sparse_values(base, brow_c * C + cols, in_base)
    values_W, values_U = [], []
    for d, cid, c in zip(deltas, cids, coefs):
        if c == 0.0:
            values_W.append(None)
            values_U.append(None)
            continue
        at = numpy.searchsorted(cells, cid)
        vW, vU = W0.copy(), U0.copy()
        vW[at] = d["W"]
        vU[at] = d["U"]
        values_W.append(vW)
        values_U.append(vU)
    mW, mU = _mix_values(values_W, values_U, coefs, clocks, sum_coef, clock)
    return {"new_keys": new_keys, "coefs": coefs, "clocks": clocks, "clock": clock, "cells": cells,
            "W": mW, "U": mU}


def _sparse_values(base: Base, flat: numpy.ndarray, valid: numpy.ndarray):
    """The base's W and U at flat cells (zero where absent, or where `valid` is false)."""
    W = numpy.zeros(flat.size, dtype=numpy.float32)
    U = numpy.zeros(flat.size, dtype=numpy.float64)
    cells = base["cells"]
    if cells.size and flat.size:
        at = numpy.minimum(numpy.searchsorted(cells, flat), cells.size - 1)
        hit = valid & (cells[at] == flat)
        W[hit] = base["W"][at[hit]]
        U[hit] = base["U"][at[hit]]
    return W, U


def _replay(Wf: numpy.ndarray, Uf: numpy.ndarray, coefs, clocks, sum_coef: float, clock: int) -> None:
    """`_mix_values` with every shard holding the same value, on every cell, in place: chunk by
    chunk, with reused buffers. For one or two shards of coefficient 1 the W formula is exactly
    the identity (w + w is exact, halving it too; only a -0.0 would turn +0.0), so it is skipped."""
    live = [(float(c), int(T)) for c, T in zip(coefs, clocks) if c != 0.0]
    skip_W = len(live) <= 2 and all(c == 1.0 for c, _ in live)
    n = Wf.size
    step = min(CHUNK, max(n, 1))
    accW, tmpW = numpy.empty(step, numpy.float32), numpy.empty(step, numpy.float32)
    accU, tmpU = numpy.empty(step, numpy.float64), numpy.empty(step, numpy.float64)
    w_scale = numpy.float32(1.0 / sum_coef)
    u_scale = float(clock) / sum_coef
    for a in range(0, n, step):
        b = min(n, a + step)
        m = b - a
        if not skip_W:
            w, acc, tmp = Wf[a:b], accW[:m], tmpW[:m]
            acc.fill(0.0)
            for c, _ in live:
                numpy.multiply(w, numpy.float32(c), out=tmp)
                acc += tmp
            if sum_coef != 1.0:
                acc *= w_scale
            w[...] = acc
        u, acc64, tmp64 = Uf[a:b], accU[:m], tmpU[:m]
        acc64.fill(0.0)
        for c, T in live:
            if T > 0:
                numpy.multiply(u, c / float(T), out=tmp64)
                acc64 += tmp64
        numpy.multiply(acc64, u_scale, out=u)


def apply_mix(base: Base, message: Dict[str, object], in_place: bool = True) -> Base:
    """The mix: `base` with the message's new keys, the mixer's formula replayed on its non-zero
    cells, and the message's values on the cells some shard changed. Reuses `base`'s value
    arrays when `in_place` (the caller gives the old base up)."""
    new_keys = numpy.asarray(message["new_keys"], dtype=numpy.uint64)
    C = base["n_classes"]
    keys, cells = base["keys"], base["cells"]
    W, U = (base["W"], base["U"]) if in_place else (numpy.array(base["W"]), numpy.array(base["U"]))
    if new_keys.size:
        shift = numpy.searchsorted(new_keys, keys)            # new keys before each old row
        rows = cells // C
        cells = (rows + shift[rows]) * C + cells % C
        keys = numpy.insert(keys, numpy.searchsorted(keys, new_keys), new_keys)
    coefs, clocks, clock = message["coefs"], message["clocks"], int(message["clock"])
    sum_coef, _ = _mixed_clock(coefs, clocks)
    _replay(W, U, coefs, clocks, sum_coef, clock)
    # The changed cells take the message's values: drop them from the base part, merge.
    m_cells = numpy.asarray(message["cells"], dtype=numpy.int64)
    if m_cells.size:
        at = numpy.minimum(numpy.searchsorted(m_cells, cells), m_cells.size - 1)
        keep = m_cells[at] != cells if cells.size else numpy.zeros(0, dtype=bool)
        all_cells = numpy.concatenate([cells[keep], m_cells])
        order = numpy.argsort(all_cells, kind="stable")
        cells = all_cells[order]
        W = numpy.concatenate([W[keep], message["W"]])[order]
        U = numpy.concatenate([U[keep], message["U"]])[order]
    nz = (W != 0) | (U != 0)
    if not bool(nz.all()):
        cells, W, U = cells[nz], W[nz], U[nz]
    return {"keys": keys, "n_classes": C, "cells": cells, "W": W, "U": U, "clock": clock}


def message_nbytes(message: Dict[str, object]) -> int:
    return sum(v.nbytes for v in message.values() if isinstance(v, numpy.ndarray))


__all__ = ["make_base", "copy_base", "shard_delta", "mix_message", "apply_mix", "message_nbytes"]
