"""Mixing by deltas (distributed/delta.py) in the tables themselves is WeightsMixer on the shards'
full states, bit for bit; and the core hooks it stands on (set_cells, the change journal, the
in-place replay, the sparse state) against dense references."""
import numpy
import pytest

from spacy_structperc._core.weights import AveragedWeights, WeightsMixer
from spacy_structperc.distributed import delta as D

C = 5


def _table(rng, n, clock, noise=0.0):
    """A trained-looking table: n keys, most cells zero, W and U set."""
    keys = numpy.unique(rng.integers(1, 1 << 40, size=n, dtype=numpy.uint64))
    W = rng.normal(size=(keys.size, C)).astype(numpy.float32)
    U = rng.normal(size=(keys.size, C)) * clock
    sparse = rng.random(size=W.shape) < 0.7          # as in a real table, most cells are zero
    W[sparse], U[sparse] = 0.0, 0.0
    table = AveragedWeights(C, 1 << 10)
    table.load_arrays(keys, W, U, clock)
    table.set_noise(noise, 3)
    return table


def _copy(table):
    out = AveragedWeights(C, 1 << 10)
    out.load_arrays(*table.state_arrays())
    out.set_noise(table.noise_scale, table.noise_seed)
    return out


def _train(rng, table, n_steps, clock_steps, new=None):
    """Perceptron-style updates on some old and some new keys, with the journal on."""
    keys = table.state_arrays()[0]
    new = rng.integers(1, 1 << 40, size=7, dtype=numpy.uint64) if new is None else new
    table.start_journal()
    for _ in range(clock_steps):
        for _ in range(n_steps):
            key = int(rng.choice(keys)) if rng.random() < 0.8 else int(rng.choice(new))
            table.add(key, int(rng.integers(C)), float(rng.choice([-1.0, 1.0, 0.5])))
        table.next_example()
    return table


def _full_mix(tables, coefs):
    mixer = WeightsMixer(C, 1 << 10)
    for t, c in zip(tables, coefs):
        mixer.add_arrays(*t.state_arrays(), coef=c)
    return mixer.result().state_arrays()


def _equal_states(a, b):
    assert a[3] == b[3]
    assert numpy.array_equal(a[0], b[0])
    assert numpy.array_equal(a[1], b[1])     # bits, not approximately
    assert numpy.array_equal(a[2], b[2])


@pytest.mark.parametrize("coefs", [[1.0, 1.0], [1.0, 1.0, 1.0], [0.3, 0.5, 0.2], [3.0, 0.0, 5.0], [1.0]])
@pytest.mark.parametrize("noise", [0.0, 0.1])
def test_delta_mixing_in_the_tables_equals_full_mixing_bit_for_bit(coefs, noise):
    rng = numpy.random.default_rng(len(coefs) + int(10 * sum(coefs)))
    driver = _table(rng, 300, clock=40, noise=noise)
    shards = [_train(rng, _copy(driver), n_steps=6, clock_steps=10 + 3 * s) for s in range(len(coefs))]
    reference = _full_mix(shards, coefs)
    deltas = [D.shard_delta(t) for t in shards]
    message = D.mix_message(driver, deltas, coefs)
    D.apply_mix(driver, message)
    _equal_states(driver.state_arrays(), reference)
    # A worker's table (the mix plus its own shard's changes) reaches the same mix in place.
    for t, c in zip(shards, coefs):
        if c != 0.0:
            D.apply_mix(t, message)
            _equal_states(t.state_arrays(), reference)
    # Only what changed travelled: a few cells per shard, not the tables.
    assert all(d["keys"].size < 0.3 * 300 * C for d in deltas)


def test_epochs_of_delta_mixing_in_place_equal_full_mixing():
    """Three epochs, each shard's worker keeping its table: driver and workers stay the mixer's."""
    rng = numpy.random.default_rng(11)
    driver = _table(rng, 400, clock=30)
    workers = [_copy(driver), _copy(driver)]
    full = _copy(driver)
    for epoch in range(3):
        seeds = [int(rng.integers(1 << 30)) for _ in workers]
        for w, seed in zip(workers, seeds):
            _train(numpy.random.default_rng(seed), w, n_steps=8, clock_steps=12)
        refs = [_train(numpy.random.default_rng(seed), _copy(full), n_steps=8, clock_steps=12) for seed in seeds]
        coefs = [1.0, 2.0] if epoch == 1 else [1.0, 1.0]
        message = D.mix_message(driver, [D.shard_delta(w) for w in workers], coefs)
        D.apply_mix(driver, message)
        for w in workers:
            D.apply_mix(w, message)
        reference = _full_mix(refs, coefs)
        full = AveragedWeights(C, 1 << 10)
        full.load_arrays(*reference)
        for t in [driver] + workers:
            _equal_states(t.state_arrays(), reference)


def test_set_cells_then_the_state_equals_the_dense_reference():
    rng = numpy.random.default_rng(4)
    table = _table(rng, 60, clock=12)
    keys, W, U, clock = (numpy.array(x) if hasattr(x, "shape") else x for x in table.state_arrays())
    new_key = numpy.uint64(int(keys.max()) + 1)
    cell_keys = numpy.array([keys[3], keys[3], keys[10], new_key, keys[20]], dtype=numpy.uint64)
    cols = numpy.array([0, 4, 2, 1, 3], dtype=numpy.int32)
    w = numpy.array([1.5, -2.0, 0.0, 3.0, 7.0], dtype=numpy.float32)
    u = numpy.array([10.0, 0.0, -4.0, 0.0, 0.0])
    table.set_cells(cell_keys, cols, w, u)
    W, U = numpy.vstack([W, numpy.zeros((1, C), numpy.float32)]), numpy.vstack([U, numpy.zeros((1, C))])
    keys = numpy.append(keys, new_key)
    for k, c, wv, uv in zip(cell_keys, cols, w, u):
        i = int(numpy.flatnonzero(keys == k)[0])
        W[i, c], U[i, c] = wv, uv
    got = table.state_arrays()
    _equal_states(got, (keys, W, U, clock))
    assert numpy.array_equal(table.get_cells(cell_keys, cols)[0], w)
    assert numpy.array_equal(table.get_cells(cell_keys, cols)[1], u)
    # Absent keys read as zero.
    assert table.get_cells(numpy.array([int(new_key) + 5], numpy.uint64), [0])[0].tolist() == [0.0]
    with pytest.raises(ValueError):
        table.set_cells(cell_keys[:1], numpy.array([C], numpy.int32), w[:1], u[:1])


def test_the_journal_lists_exactly_the_rows_and_cells_changed_since_its_reset():
    rng = numpy.random.default_rng(8)
    table = _table(rng, 80, clock=5, noise=0.05)
    keys = table.state_arrays()[0]
    table.add(int(keys[0]), 1, 1.0)          # before the reset: not listed
    table.start_journal()
    before = table.state_arrays()
    new_key = int(keys.max()) + 1
    table.add(int(keys[7]), 2, 1.0)
    table.next_example()
    table.add(int(keys[7]), 2, -1.0)         # W back where it was; U is not: still listed
    table.add(int(keys[30]), 4, 0.5)
    table.add(new_key, 3, 2.0)               # a new row, started at noise
    got_keys, is_new = table.journal_rows()
    assert got_keys.tolist() == sorted([int(keys[7]), int(keys[30]), new_key])
    assert is_new.tolist() == [k == new_key for k in got_keys.tolist()]
    ck, cc, cw, cu, new_keys = table.journal_cells()
    assert new_keys.tolist() == [new_key]
    old_cells = sorted((k, c) for k, c in zip(ck.tolist(), cc.tolist()) if k != new_key)
    assert old_cells == sorted([(int(keys[7]), 2), (int(keys[30]), 4)])
    # Every cell of the new row is there (noise makes them all non-zero), with its values.
    assert sorted(c for k, c in zip(ck.tolist(), cc.tolist()) if k == new_key) == list(range(C))
    now = table.state_arrays()
    for k, c, w, u in zip(ck, cc, cw, cu):
        i = int(numpy.flatnonzero(now[0] == k)[0])
        assert now[1][i, c] == w and now[2][i, c] == u
    # Nothing else changed.
    same = numpy.isin(now[0], before[0])
    changed = (now[1][same] != before[1]) | (now[2][same] != before[2])
    rows, cols = numpy.nonzero(changed)
    assert sorted(zip(now[0][same][rows].tolist(), cols.tolist())) == old_cells
    # A restart empties it; a reload drops it (an error, not an empty answer).
    table.start_journal()
    assert table.journal_rows()[0].size == 0 and table.journal_cells()[0].size == 0
    table.load_arrays(*table.state_arrays())
    with pytest.raises(ValueError):
        table.journal_cells()


def test_the_sparse_state_holds_the_dense_state():
    rng = numpy.random.default_rng(2)
    table = _table(rng, 50, clock=9)
    keys, cells, W, U, clock = table.state_cells()
    dk, dW, dU, dclock = table.state_arrays()
    assert numpy.array_equal(keys, dk) and clock == dclock
    nz = (dW != 0) | (dU != 0)
    assert cells.tolist() == numpy.flatnonzero(nz.reshape(-1)).tolist()
    assert numpy.array_equal(W, dW.reshape(-1)[cells]) and numpy.array_equal(U, dU.reshape(-1)[cells])
    other = AveragedWeights(C, 16)
    other.load_cells(keys, cells, W, U, clock)
    _equal_states(other.state_arrays(), (dk, dW, dU, dclock))


def test_a_delta_naming_keys_neither_in_the_mix_nor_new_is_refused():
    rng = numpy.random.default_rng(5)
    driver = _table(rng, 20, clock=3)
    shard = _train(rng, _copy(driver), 3, 2)
    d = D.shard_delta(shard)
    d["keys"] = d["keys"].copy()
    d["keys"][0] = numpy.uint64(1 << 50)
    d["new_keys"] = numpy.zeros(0, numpy.uint64)
    with pytest.raises(ValueError):
        D.mix_message(driver, [d], [1.0])
