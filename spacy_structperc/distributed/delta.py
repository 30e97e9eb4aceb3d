"""Iterative parameter mixing by deltas: what travels each epoch is what changed, not the tables.

Every party (the driver and each worker) holds the current mix in the component's own
`AveragedWeights` table, and changes it in place; nothing holds a second copy. An epoch costs:

* a shard trains from the mix with the table's change journal on (`start_journal`) and sends
  back a *shard delta* (`shard_delta`): the keys it added and every cell (key, class) an update
  wrote, with its new W and U, read from the journal (no dense copy of the table);
* the driver folds the shard deltas into a *mix message* (`mix_message`): the new keys, the
  shards' coefficients and clocks, and the mixed values of every cell some shard wrote; the
  base values (what the other shards hold there) it reads from its own table;
* every party applies the message to its table in place (`apply_mix`), the driver and the
  workers by the same code, so they hold the same mix bit for bit: the mixer's formula replayed
  on every cell (`AveragedWeights.replay_mix`), then the message's values on the cells it names
  (`set_cells`). A worker's table holds the mix plus what its own shard wrote, and all of that
  is in the message, so it too ends at the mix.

The result is exactly what `WeightsMixer` makes of the shards' full states, bit for bit (tested):
a cell no shard wrote holds the base value in every shard, so its mix is the mixer's formula
applied to that value, which the replay computes; a written cell's mix is computed by the driver
from each shard's value there (the base value for shards that did not write it), with the
mixer's operations in the mixer's order. A key only some shards have counts as zero in the
others, as in the mixer; a shard with coefficient 0 adds no keys, as in the mixer (a worker whose
shard had coefficient 0 cannot reach the mix from its table, and reloads the full state).
(Signs of zero aside: a -0.0 may come out +0.0, which scores the same.)

A *base* is the full state of a table, sparse (`full_base`, `load_base`): for a worker that
does not hold the mix (a fresh or restarted one).
"""
from typing import Dict, List, Sequence, Tuple

import numpy

Base = Dict[str, object]


def full_base(weights) -> Base:
    """The table's whole training state, sparse (only cells where W or U is not zero)."""
    keys, cells, W, U, clock = weights.state_cells()
    return {"keys": keys, "n_classes": weights.n_classes, "cells": cells, "W": W, "U": U, "clock": int(clock)}


def load_base(weights, base: Base) -> None:
    """Make `base` the table's training state (its settings: tie width, noise, stay)."""
    if base["n_classes"] != weights.n_classes:
        raise ValueError(f"a base of {base['n_classes']} classes for a table of {weights.n_classes}")
    weights.load_cells(base["keys"], base["cells"], base["W"], base["U"], base["clock"])


def shard_delta(weights) -> Dict[str, object]:
    """What a shard changed since `weights.start_journal()`: its new keys, and every cell an
    update wrote (and every non-zero cell of a new key), with the cells' W and U now."""
    keys, cols, W, U, new_keys = weights.journal_cells()
    return {"new_keys": new_keys, "keys": keys, "cols": cols, "W": W, "U": U, "clock": int(weights.clock)}


def _unique(values: numpy.ndarray) -> numpy.ndarray:
    """Sorted distinct values (numpy's hash-based `unique` is many times slower on these)."""
    values = numpy.sort(values)
    if values.size < 2:
        return values
    keep = numpy.empty(values.size, dtype=bool)
    keep[0] = True
    numpy.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


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
    n = next((v.shape for v in values_W if v is not None), (0,))
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


def _replay_factors(coefs, clocks, sum_coef: float, clock: int):
    """`_mix_values` with every shard holding the same value, as `replay_mix`'s factors. For one
    or two shards of coefficient 1 the W formula is exactly the identity (w + w is exact, halving
    it too; only a -0.0 would turn +0.0), so W is left alone (no factors)."""
    live = [(float(c), int(T)) for c, T in zip(coefs, clocks) if c != 0.0]
    skip_W = len(live) <= 2 and all(c == 1.0 for c, _ in live)
    w_factors = [] if skip_W else [c for c, _ in live]
    w_scale = float(numpy.float32(1.0 / sum_coef)) if sum_coef != 1.0 else 1.0
    u_factors = [c / float(T) for c, T in live if T > 0]
    return w_factors, w_scale, u_factors, float(clock) / sum_coef


def mix_message(weights, deltas: Sequence[Dict[str, object]], coefs: Sequence[float]) -> Dict[str, object]:
    """Fold the shard deltas (shard order) with (unnormalized) coefficients into the message that
    turns `weights` (the table holding the mix the shards started from) into the new mix
    (`apply_mix`). Reads the table, does not change it."""
    coefs = [float(c) for c in coefs]
    if len(coefs) != len(deltas):
        raise ValueError(f"{len(coefs)} coefficients for {len(deltas)} shards")
    clocks = [int(d["clock"]) for d in deltas]
    sum_coef, clock = _mixed_clock(coefs, clocks)
    live = [d for d, c in zip(deltas, coefs) if c != 0.0]
    new_parts = [numpy.asarray(d["new_keys"], dtype=numpy.uint64) for d in live]
    new_keys = _unique(numpy.concatenate(new_parts)) if new_parts else numpy.zeros(0, numpy.uint64)
    C = weights.n_classes
    n_rows = weights.n_rows

    def cell_ids(d):
        # (row, class) as one int64: the table's rows, new keys numbered after them.
        rows = weights.rows_of(d["keys"])
        absent = rows < 0
        if absent.any():
            at = numpy.searchsorted(new_keys, d["keys"][absent])
            if at.size and (int(at.max()) >= new_keys.size or
                            not numpy.array_equal(new_keys[at], d["keys"][absent])):
                raise ValueError("a shard's delta names keys that are neither in the mix nor new")
            rows[absent] = n_rows + at.astype(numpy.int64)
        return rows * C + numpy.asarray(d["cols"], dtype=numpy.int64)

    cids = [cell_ids(d) if c != 0.0 else None for d, c in zip(deltas, coefs)]
    live_cids = [cid for cid in cids if cid is not None]
    all_cids = numpy.concatenate(live_cids) if live_cids else numpy.zeros(0, numpy.int64)
    all_keys = numpy.concatenate([numpy.asarray(d["keys"], dtype=numpy.uint64) for d in live]) if live else \
        numpy.zeros(0, numpy.uint64)
    order = numpy.argsort(all_cids, kind="stable")
    sorted_cids = all_cids[order]
    first = numpy.ones(sorted_cids.size, dtype=bool)
    if sorted_cids.size > 1:
        numpy.not_equal(sorted_cids[1:], sorted_cids[:-1], out=first[1:])
    cells = sorted_cids[first]
    keys = all_keys[order][first]
    cols = (cells % C).astype(numpy.int32)
    W0, U0 = weights.get_cells(keys, cols)        # the base's values; zero for new keys
    values_W, values_U = [], []
    for d, cid, c in zip(deltas, cids, coefs):
        if cid is None:
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
    return {"new_keys": new_keys, "coefs": coefs, "clocks": clocks, "clock": clock,
            "keys": keys, "cols": cols, "W": mW, "U": mU}


def apply_mix(weights, message: Dict[str, object]) -> None:
    """Turn the table (the mix the shards started from, plus at most what one shard of
    coefficient > 0 changed since) into the new mix, in place."""
    coefs, clocks, clock = message["coefs"], message["clocks"], int(message["clock"])
    sum_coef, _ = _mixed_clock(coefs, clocks)
    weights.insert_keys(message["new_keys"])
    weights.replay_mix(*_replay_factors(coefs, clocks, sum_coef, clock), clock)
    weights.set_cells(message["keys"], message["cols"], message["W"], message["U"])


def message_nbytes(message: Dict[str, object]) -> int:
    return sum(v.nbytes for v in message.values() if isinstance(v, numpy.ndarray))


__all__ = ["full_base", "load_base", "shard_delta", "mix_message", "apply_mix", "message_nbytes"]
