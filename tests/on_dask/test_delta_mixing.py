"""Mixing by deltas (distributed/delta.py) is WeightsMixer on the shards' full states, bit for bit."""
import numpy
import pytest

from spacy_structperc._core.weights import AveragedWeights, WeightsMixer
from spacy_structperc.distributed import delta as D

C = 5


def _base(rng, n, clock):
    keys = numpy.unique(rng.integers(1, 1 << 40, size=n, dtype=numpy.uint64))
    W = rng.normal(size=(keys.size, C)).astype(numpy.float32)
    U = rng.normal(size=(keys.size, C)) * clock
    sparse = rng.random(size=W.shape) < 0.7          # as in a real table, most cells are zero
    W[sparse], U[sparse] = 0.0, 0.0
    return D.make_base(keys, W, U, clock)


def _trained_shard(rng, base, n_steps, clock_steps):
    """A shard's full state after training from `base`: an AveragedWeights loaded with the base,
    perceptron-style updates on some old and some new keys."""
    table = AveragedWeights(C, 1 << 10)
    table.load_arrays(*D.dense_arrays(base))
    new = rng.integers(1, 1 << 40, size=7, dtype=numpy.uint64)
    for _ in range(clock_steps):
        for _ in range(n_steps):
            key = int(rng.choice(base["keys"])) if rng.random() < 0.8 else int(rng.choice(new))
            table.add(key, int(rng.integers(C)), float(rng.choice([-1.0, 1.0, 0.5])))
        table.next_example()
    return table.state_arrays()


def _full_mix(states, coefs):
    mixer = WeightsMixer(C, 1 << 10)
    for (keys, W, U, clock), c in zip(states, coefs):
        mixer.add_arrays(keys, W, U, clock, c)
    return mixer.result().state_arrays()


def _dense(base):
    keys, W, U, clock = D.dense_arrays(base)
    return {"keys": keys, "W": W, "U": U, "clock": clock}


def _delta_mix(base, states, coefs):
    deltas = [D.shard_delta(base, *s) for s in states]
    message = D.mix_message(base, deltas, coefs)
    return _dense(D.apply_mix(D.copy_base(base), message)), deltas, message


@pytest.mark.parametrize("coefs", [[1.0, 1.0], [1.0, 1.0, 1.0], [0.3, 0.5, 0.2], [3.0, 0.0, 5.0], [1.0]])
def test_delta_mixing_equals_full_mixing_bit_for_bit(coefs):
    rng = numpy.random.default_rng(len(coefs) + int(10 * sum(coefs)))
    base = _base(rng, 300, clock=40)
    states = [_trained_shard(rng, base, n_steps=6, clock_steps=10 + 3 * s) for s in range(len(coefs))]
    mixed, deltas, message = _delta_mix(base, states, coefs)
    keys, W, U, clock = _full_mix(states, coefs)
    assert mixed["clock"] == clock
    assert numpy.array_equal(mixed["keys"], keys)
    assert numpy.array_equal(mixed["W"], W)     # bits, not approximately
    assert numpy.array_equal(mixed["U"], U)
    # And only what changed travelled: a few cells per shard, not the tables.
    assert all(d["keys"].size < 0.3 * base["keys"].size * C for d in deltas)


def test_one_shard_delta_mix_is_the_shards_state():
    rng = numpy.random.default_rng(7)
    base = _base(rng, 200, clock=25)
    state = _trained_shard(rng, base, n_steps=5, clock_steps=9)
    mixed, _, _ = _delta_mix(base, [state], [1.0])
    keys, W, U, clock = state
    assert numpy.array_equal(mixed["keys"], keys) and mixed["clock"] == clock
    assert numpy.array_equal(mixed["W"], W)
    # U goes through U * (1 / T) * T, as in WeightsMixer: equal up to that rounding.
    numpy.testing.assert_allclose(mixed["U"], U, rtol=1e-13, atol=0)


def test_a_delta_holds_exactly_the_changed_cells():
    rng = numpy.random.default_rng(3)
    base = _base(rng, 50, clock=10)
    keys, W, U, _ = (x.copy() if hasattr(x, "copy") else x for x in D.dense_arrays(base))
    W[4, 2] += 1.0            # W and U changed
    U[4, 2] += 10.0
    U[9, 0] -= 3.0            # only U (an update undone later in the epoch)
    new_key = numpy.uint64(int(keys.max()) + 1)
    keys = numpy.append(keys, new_key)
    W = numpy.vstack([W, numpy.zeros((1, C), numpy.float32)])
    U = numpy.vstack([U, numpy.zeros((1, C))])
    W[-1, 1] = 2.0
    d = D.shard_delta(base, keys, W, U, 11)
    got = sorted(zip(d["keys"].tolist(), d["cols"].tolist()))
    assert got == sorted([(int(base["keys"][4]), 2), (int(base["keys"][9]), 0), (int(new_key), 1)])
    assert d["new_keys"].tolist() == [int(new_key)] and d["clock"] == 11


def test_a_shard_that_lost_base_keys_is_refused():
    rng = numpy.random.default_rng(5)
    base = _base(rng, 20, clock=3)
    keys, W, U, _ = D.dense_arrays(base)
    with pytest.raises(ValueError):
        D.shard_delta(base, keys[1:], W[1:], U[1:], 4)


def test_epochs_of_delta_mixing_equal_full_mixing():
    """Three epochs of shards trained from the last mix: the bases stay the mixer's."""
    rng = numpy.random.default_rng(11)
    full = _base(rng, 400, clock=30)
    mixed = D.copy_base(full)
    for epoch in range(3):
        states = [_trained_shard(rng, full, n_steps=8, clock_steps=12) for _ in range(2)]
        coefs = [1.0, 2.0] if epoch == 1 else [1.0, 1.0]
        message = D.mix_message(mixed, [D.shard_delta(mixed, *s) for s in states], coefs)
        mixed = D.apply_mix(mixed, message)
        full = D.make_base(*_full_mix(states, coefs))
        a, b = _dense(mixed), _dense(full)
        assert numpy.array_equal(a["keys"], b["keys"]) and a["clock"] == b["clock"]
        assert numpy.array_equal(a["W"], b["W"]) and numpy.array_equal(a["U"], b["U"])
        # Sparse: only the non-zero cells are held.
        assert mixed["cells"].size == numpy.count_nonzero((b["W"] != 0) | (b["U"] != 0))


def test_a_sparse_base_holds_the_dense_state():
    rng = numpy.random.default_rng(2)
    keys = numpy.arange(1, 41, dtype=numpy.uint64)
    W = numpy.zeros((40, C), numpy.float32)
    U = numpy.zeros((40, C))
    W[3, 1], U[3, 1], U[7, 4], W[39, 0] = 1.5, -20.0, 3.0, -2.0
    base = D.make_base(keys, W, U, 9)
    assert base["cells"].tolist() == [3 * C + 1, 7 * C + 4, 39 * C + 0]
    k2, W2, U2, clock = D.dense_arrays(base)
    assert numpy.array_equal(k2, keys) and numpy.array_equal(W2, W) and numpy.array_equal(U2, U) and clock == 9
