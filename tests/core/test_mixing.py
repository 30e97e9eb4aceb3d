"""Iterative parameter mixing of AveragedWeights (McDonald, Hall and Mann 2010): the mix of W,
its averaging state (U, clock), and training continued from a mix, against naive references."""
import numpy
import pytest

from spacy_structperc._core.weights import AveragedWeights, WeightsMixer, mix_weights, mixing_coefficients


def _train(weights, rng, n_examples, keys, n_classes, history=None, current=None):
    """Random updates over n_examples ticks; optionally record W after every example."""
    current = {} if current is None else current
    for _ in range(n_examples):
        for _ in range(int(rng.integers(0, 4))):
            key, c = int(rng.choice(keys)), int(rng.integers(n_classes))
            delta = float(rng.choice([-1.0, 1.0, 0.5, -2.0]))
            weights.add(key, c, delta)
            current[(key, c)] = current.get((key, c), 0.0) + delta
        weights.next_example()
        if history is not None:
            history.append(dict(current))
    return current


def _keys(rng, n):
    return [int(k) for k in rng.integers(1, 2**63, size=n, dtype=numpy.uint64)]


def _dense(weights, keys, averaged):
    return numpy.array([[weights.get(k, c, averaged=averaged) for c in range(weights.n_classes)]
                        for k in keys])


def _shards(seed, sizes, C=4, n_keys=30):
    rng = numpy.random.default_rng(seed)
    keys = _keys(rng, n_keys)
    tables = []
    for n in sizes:
        # Each shard sees a different subset of the features, so keys are missing from some.
        sub = [k for k in keys if rng.random() < 0.7]
        w = AveragedWeights(C, 64)
        _train(w, rng, n, sub, C)
        tables.append(w)
    return keys, tables


def test_mixing_one_shard_is_the_identity():
    keys, (table,) = _shards(3, [57])
    mixed = mix_weights([table])
    assert mixed.clock == table.clock
    k0, W0 = table.to_arrays(averaged=False, prune=False)
    k1, W1 = mixed.to_arrays(averaged=False, prune=False)
    assert numpy.array_equal(k0, k1)
    assert numpy.array_equal(W0, W1)
    numpy.testing.assert_allclose(_dense(mixed, keys, True), _dense(table, keys, True), rtol=1e-6, atol=1e-6)
    # With any single positive coefficient too.
    scaled = mix_weights([table], [7.5])
    numpy.testing.assert_allclose(_dense(scaled, keys, False), _dense(table, keys, False), rtol=1e-6)
    numpy.testing.assert_allclose(_dense(scaled, keys, True), _dense(table, keys, True), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("coefficients", [None, [3.0, 1.0, 0.0], [0.2, 0.5, 0.3]])
def test_mix_equals_the_hand_computed_weighted_average(coefficients):
    keys, tables = _shards(4, [40, 55, 31])
    coef = numpy.array(coefficients if coefficients is not None else [1.0, 1.0, 1.0])
    mu = coef / coef.sum()
    mixed = mix_weights(tables, coefficients)
    current = sum(m * _dense(t, keys, False) for m, t in zip(mu, tables))
    averaged = sum(m * _dense(t, keys, True) for m, t in zip(mu, tables))
    numpy.testing.assert_allclose(_dense(mixed, keys, False), current, rtol=1e-5, atol=1e-5)
    # The averaged view of the mix is the mix of the shards' averaged views.
    numpy.testing.assert_allclose(_dense(mixed, keys, True), averaged, rtol=1e-5, atol=1e-5)
    assert mixed.clock == round(float((mu * [t.clock for t in tables]).sum()))


def test_streaming_arrays_equals_mixing_tables():
    keys, tables = _shards(5, [20, 25])
    by_tables = mix_weights(tables, [2.0, 1.0])
    mixer = WeightsMixer(4)
    for table, coef in zip(tables, [2.0, 1.0]):
        k, W, U, clock = table.state_arrays()
        mixer.add_arrays(k, W, U, clock, coef)
    by_arrays = mixer.result()
    for a, b in zip(by_tables.state_arrays(), by_arrays.state_arrays()):
        numpy.testing.assert_allclose(a, b, rtol=1e-12)
    with pytest.raises(ValueError):
        mixer.result()   # spent


def test_training_continues_from_a_mix_with_the_average_weighing_history_by_the_mixed_clock():
    """After k more examples from a mix (averaged view A0, clock T0), the average is
    (T0 * A0 + sum of the k new weight vectors) / (T0 + k): every epoch weighs alike."""
    rng = numpy.random.default_rng(6)
    C = 3
    keys, tables = _shards(7, [30, 34], C=C, n_keys=12)
    mixed = mix_weights(tables)
    T0 = mixed.clock
    A0 = _dense(mixed, keys, True)
    start = {(k, c): mixed.get(k, c) for k in keys for c in range(C)}
    history = []
    _train(mixed, rng, 25, keys, C, history=history, current=dict(start))
    naive = (T0 * A0 + sum(numpy.array([[h.get((k, c), 0.0) for c in range(C)] for k in keys])
                           for h in history)) / (T0 + 25)
    numpy.testing.assert_allclose(_dense(mixed, keys, True), naive, rtol=1e-4, atol=1e-4)


def test_untrained_shards_mix_without_a_clock():
    a, b = AveragedWeights(2, 64), AveragedWeights(2, 64)
    mixed = mix_weights([a, b])
    assert mixed.clock == 0 and mixed.n_rows == 0
    with pytest.raises(ValueError):
        mix_weights([a], [0.0])
    with pytest.raises(ValueError):
        mix_weights([AveragedWeights(2, 64), AveragedWeights(3, 64)])


def test_mistake_weighted_coefficients():
    assert mixing_coefficients([3, 1], "mistakes") == [0.75, 0.25]
    assert mixing_coefficients([0, 0], "mistakes") == [1.0, 1.0]
    assert mixing_coefficients([5, 0], "uniform") == [1.0, 1.0]
    with pytest.raises(ValueError):
        mixing_coefficients([1], "median")


def test_mixing_keeps_the_first_tables_settings_and_does_not_touch_the_shards():
    keys, tables = _shards(8, [10, 12])
    tables[0].set_noise(0.01, 5)
    before = [t.state_arrays() for t in tables]
    mixed = mix_weights(tables)
    assert mixed.noise_scale == 0.01 and mixed.noise_seed == 5
    for t, b in zip(tables, before):
        for x, y in zip(t.state_arrays(), b):
            assert numpy.array_equal(x, y)
