"""AveragedWeights: Daume's lazy averaging against a naive average, and its state handling."""
import pickle

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structperc._core import weights as weights_module
from spacy_structperc._core.weights import PRECISIONS, AveragedWeights, sparse_rows


def _random_training(weights, rng, n_examples, keys, n_classes, snapshots, current):
    """Random updates over n_examples ticks; append the dense W after each example."""
    for _ in range(n_examples):
        for _ in range(int(rng.integers(0, 4))):   # some examples make no update at all
            key = int(rng.choice(keys))
            c = int(rng.integers(n_classes))
            delta = float(rng.choice([-1.0, 1.0, 0.5, -2.0]))
            weights.add(key, c, delta)
            current[(key, c)] = current.get((key, c), 0.0) + delta
        weights.next_example()
        snapshots.append(dict(current))


def _naive_average(snapshots, key, c):
    return sum(s.get((key, c), 0.0) for s in snapshots) / len(snapshots)


def _random_keys(rng, n):
    return [int(k) for k in rng.integers(1, 2**63, size=n, dtype=numpy.uint64)]


def test_lazy_average_equals_average_of_every_intermediate_weight_vector():
    rng = numpy.random.default_rng(1)
    C = 4
    keys = _random_keys(rng, 25)
    w = AveragedWeights(C, 64)
    snapshots, current = [], {}
    _random_training(w, rng, 300, keys, C, snapshots, current)
    assert w.clock == 300
    for key in keys:
        for c in range(C):
            assert w.get(key, c) == pytest.approx(current.get((key, c), 0.0))
            assert w.get(key, c, averaged=True) == pytest.approx(_naive_average(snapshots, key, c), abs=1e-4)


def test_averaged_scoring_uses_the_average_and_training_scoring_the_current_weights():
    rng = numpy.random.default_rng(2)
    C = 3
    keys = _random_keys(rng, 6)
    w = AveragedWeights(C, 64)
    snapshots, current = [], {}
    _random_training(w, rng, 40, keys, C, snapshots, current)
    expected_avg = [sum(_naive_average(snapshots, k, c) for k in keys) for c in range(C)]
    expected_cur = [sum(current.get((k, c), 0.0) for k in keys) for c in range(C)]
    w.set_use_averages(True)
    assert w.score(keys) == pytest.approx(expected_avg, abs=1e-4)
    w.set_use_averages(False)
    assert w.score(keys) == pytest.approx(expected_cur, abs=1e-4)


def test_average_is_recomputed_after_updates_made_while_predicting_with_averages():
    w = AveragedWeights(2, 64)
    w.add(7, 0, 1.0)
    w.next_example()
    w.set_use_averages(True)
    assert w.score([7])[0] == pytest.approx(1.0)
    w.add(7, 0, 1.0)       # W = 2, U = 1, clock = 1: average 2 - 1 = 1
    w.next_example()       # clock 2: average 2 - 1/2 = 1.5
    w.average()
    assert w.score([7])[0] == pytest.approx(1.5)


def test_average_follows_clock_ticks_without_updates():
    # The average W - U / clock moves with the clock alone: examples without a mistake still
    # count. A view computed earlier (say for an evaluation during training) must not be reused.
    w = AveragedWeights(2, 64)
    w.next_example()
    w.add(7, 0, 1.0)          # made during example 2: U = 1
    w.next_example()
    assert w.get(7, 0, averaged=True) == pytest.approx(0.5)
    w.set_use_averages(True)
    assert w.score([7])[0] == pytest.approx(0.5)
    w.set_use_averages(False)
    for _ in range(2):
        w.next_example()      # examples 3 and 4: no updates
    assert w.get(7, 0, averaged=True) == pytest.approx(0.75)
    w.set_use_averages(True)
    assert w.score([7])[0] == pytest.approx(0.75)
    keys, avg = w.to_arrays(averaged=True)
    assert avg[0, 0] == pytest.approx(0.75)


def test_average_before_any_tick_is_the_current_weights():
    w = AveragedWeights(2, 64)
    w.add(11, 1, 3.0)
    assert w.get(11, 1, averaged=True) == 3.0


def test_reset_to_average_sets_weights_to_average_and_keeps_running_average_exact():
    rng = numpy.random.default_rng(3)
    C = 3
    keys = _random_keys(rng, 12)
    w = AveragedWeights(C, 64)
    snapshots, current = [], {}
    _random_training(w, rng, 50, keys, C, snapshots, current)
    avg = {(k, c): w.get(k, c, averaged=True) for k in keys for c in range(C)}
    w.reset_to_average()
    for (k, c), v in avg.items():
        assert w.get(k, c) == pytest.approx(v, abs=1e-5)                  # W jumped to the average
        assert w.get(k, c, averaged=True) == pytest.approx(v, abs=1e-5)   # the average did not move
    # The jump counts as the weight vector in force from now on (sun2009): keep training and the
    # running average is still the plain mean of every example's weights.
    current = {k: float(numpy.float32(v)) for k, v in avg.items()}
    _random_training(w, rng, 50, keys, C, snapshots, current)
    for k in keys:
        for c in range(C):
            assert w.get(k, c, averaged=True) == pytest.approx(_naive_average(snapshots, k, c), abs=1e-4)


def test_resize_keeps_weights_and_averages_and_adds_zero_columns():
    rng = numpy.random.default_rng(4)
    keys = _random_keys(rng, 30)
    w = AveragedWeights(2, 64)
    snapshots, current = [], {}
    _random_training(w, rng, 30, keys, 2, snapshots, current)
    before = {(k, c): (w.get(k, c), w.get(k, c, averaged=True)) for k in keys for c in range(2)}
    clock = w.clock
    w.resize(5)
    assert w.n_classes == 5 and w.clock == clock
    for (k, c), (cur, avg) in before.items():
        assert w.get(k, c) == cur
        assert w.get(k, c, averaged=True) == pytest.approx(avg)
    for k in keys:
        for c in range(2, 5):
            assert w.get(k, c) == 0.0 and w.get(k, c, averaged=True) == 0.0
    w.add(keys[0], 4, 2.0)
    assert w.get(keys[0], 4) == 2.0
    assert w.get(keys[0], 0) == before[(keys[0], 0)][0]
    with pytest.raises(ValueError):
        w.resize(3)


def test_add_rejects_out_of_range_class():
    w = AveragedWeights(3, 64)
    with pytest.raises(IndexError):
        w.add(5, 3, 1.0)
    with pytest.raises(ValueError):
        AveragedWeights(0)


def _build(order, C=3):
    w = AveragedWeights(C, 64)
    for key, c, delta in order:
        w.add(key, c, delta)
    return w


def test_to_arrays_is_sorted_pruned_and_independent_of_insertion_order():
    rng = numpy.random.default_rng(5)
    keys = _random_keys(rng, 200)
    updates = [(k, int(rng.integers(3)), float(rng.normal())) for k in keys]
    zeroed = 123456789
    updates += [(zeroed, 1, 1.0), (zeroed, 1, -1.0)]   # a row that ends up all zero
    a = _build(updates)
    b = _build(list(reversed(updates[:-2])) + updates[-2:])
    ka, wa = a.to_arrays(averaged=False)
    kb, wb = b.to_arrays(averaged=False)
    assert numpy.all(ka[1:] > ka[:-1])
    assert ka.tobytes() == kb.tobytes() and wa.tobytes() == wb.tobytes()
    assert zeroed not in set(ka.tolist())
    assert not numpy.any(numpy.all(wa == 0, axis=1))
    k_full, w_full = a.to_arrays(averaged=False, prune=False)
    assert zeroed in set(k_full.tolist())
    assert len(k_full) == a.n_rows == len(set(keys)) + 1
    assert ka.dtype == numpy.uint64 and wa.dtype == numpy.float32 and wa.shape == (len(ka), 3)


def test_to_arrays_averaged_returns_the_average():
    w = AveragedWeights(2, 64)
    w.add(3, 0, 4.0)
    w.next_example()
    w.next_example()
    w.add(3, 0, -4.0)        # W = 0 now, but it was 4 for both examples so far
    keys, avg = w.to_arrays(averaged=True)
    assert keys.tolist() == [3] and avg[0, 0] == pytest.approx(4.0)
    keys, cur = w.to_arrays(averaged=False)
    assert len(keys) == 0


def test_load_arrays_round_trip():
    rng = numpy.random.default_rng(6)
    keys = _random_keys(rng, 500)
    w = AveragedWeights(4, 64)
    for k in keys:
        w.add(k, int(rng.integers(4)), float(rng.normal()))
    k_arr, w_arr = w.to_arrays(averaged=False)
    other = AveragedWeights(4, 64)
    other.add(99, 0, 5.0)      # replaced, not merged
    other.load_arrays(k_arr, w_arr)
    assert other.get(99, 0) == 0.0
    for k in keys:
        for c in range(4):
            assert other.get(k, c) == w.get(k, c)
    k2, w2 = other.to_arrays(averaged=False)
    assert k2.tobytes() == k_arr.tobytes() and w2.tobytes() == w_arr.tobytes()
    # Loaded weights restart the average from themselves.
    assert other.clock == 0
    other.next_example()
    assert other.get(keys[0], 0, averaged=True) == pytest.approx(w.get(keys[0], 0))


def test_load_arrays_rejects_mismatched_shapes():
    w = AveragedWeights(3, 64)
    with pytest.raises(ValueError):
        w.load_arrays(numpy.arange(1, 5, dtype=numpy.uint64), numpy.zeros((4, 2), dtype=numpy.float32))
    with pytest.raises(ValueError):
        w.load_arrays(numpy.arange(1, 5, dtype=numpy.uint64), numpy.zeros((3, 3), dtype=numpy.float32))
    with pytest.raises(ValueError):
        w.load_arrays(numpy.arange(1, 5, dtype=numpy.uint64), numpy.zeros((4, 3), dtype=numpy.float32),
                      numpy.zeros((4, 2)))


def test_pickle_preserves_full_training_state_so_continued_training_is_identical():
    rng = numpy.random.default_rng(7)
    C = 3
    keys = _random_keys(rng, 40)
    w = AveragedWeights(C, 64)
    _random_training(w, rng, 60, keys, C, [], {})
    copy = pickle.loads(pickle.dumps(w))
    for a, b in zip(w.state_arrays(), copy.state_arrays()):
        if isinstance(a, numpy.ndarray):
            assert a.tobytes() == b.tobytes()
        else:
            assert a == b
    assert copy.clock == w.clock == 60 and copy.n_classes == C
    # Same further updates on both: bit-identical state and averages.
    seed = 8
    _random_training(w, numpy.random.default_rng(seed), 30, keys, C, [], {})
    _random_training(copy, numpy.random.default_rng(seed), 30, keys, C, [], {})
    for a, b in zip(w.state_arrays(), copy.state_arrays()):
        if isinstance(a, numpy.ndarray):
            assert a.tobytes() == b.tobytes()
        else:
            assert a == b
    ka, wa = w.to_arrays(averaged=True)
    kb, wb = copy.to_arrays(averaged=True)
    assert ka.tobytes() == kb.tobytes() and wa.tobytes() == wb.tobytes()


def test_pickle_preserves_use_averages():
    w = AveragedWeights(2, 64)
    w.add(5, 1, 2.0)
    w.next_example()
    w.add(5, 1, 2.0)
    w.set_use_averages(True)
    copy = pickle.loads(pickle.dumps(w))
    assert copy.use_averages
    assert copy.score([5]).tolist() == w.score([5]).tolist()


def test_table_grows_far_past_initial_buckets():
    rng = numpy.random.default_rng(9)
    w = AveragedWeights(2, 16)
    initial = w.n_buckets
    keys = _random_keys(rng, 20000)
    # Keys that agree in their low bits probe the same buckets.
    keys += [(i << 40) | 1 for i in range(1, 3000)]
    keys = list(dict.fromkeys(keys))
    for i, k in enumerate(keys):
        w.add(k, i % 2, float(i % 7 + 1))
    assert w.n_rows == len(keys)
    assert w.n_buckets >= 2 * len(keys) > 8 * initial
    for i, k in enumerate(keys):
        assert w.get(k, i % 2) == float(i % 7 + 1)
        assert w.get(k, 1 - i % 2) == 0.0
    assert w.get(424242424242, 0) == 0.0   # absent keys are still absent


def test_averaged_scores_on_the_fly_equal_the_materialized_average_to_the_bit():
    rng = numpy.random.default_rng(11)
    C = 5
    keys = _random_keys(rng, 20)
    w = AveragedWeights(C, 64)
    _random_training(w, rng, 60, keys, C, [], {})
    w.set_use_averages(True)
    on_the_fly = w.score(keys)
    assert not w.averages_materialized
    w.average()
    assert w.averages_materialized
    assert numpy.array_equal(w.score(keys), on_the_fly)
    saved_keys, saved = w.to_arrays(averaged=True, prune=False)
    for key, row in zip(saved_keys.tolist(), saved):   # what is saved is what was scored
        assert numpy.array_equal(w.score([key]), row)
    w.next_example()            # the clock moves: the copy is stale and is not read
    assert not w.averages_materialized
    assert not numpy.array_equal(w.score(keys), on_the_fly)


def test_accumulators_exist_only_once_something_is_trained():
    w = AveragedWeights(3, 64)
    assert not w.has_accumulators
    w.load_arrays(numpy.array([5, 9], dtype=numpy.uint64), numpy.ones((2, 3), dtype=numpy.float32))
    assert not w.has_accumulators           # a loaded model is its own average
    w.set_use_averages(True)
    assert list(w.score([5, 9])) == [2.0, 2.0, 2.0]
    w.next_example()
    w.set_use_averages(False)
    w.add(5, 1, 1.0)                         # training it further starts the accumulators
    assert w.has_accumulators
    w.next_example()
    assert w.get(5, 1, averaged=True) == pytest.approx(1.5)
    assert w.get(5, 0, averaged=True) == 1.0


def test_sorted_rows_and_gather_are_to_arrays_in_slices():
    rng = numpy.random.default_rng(12)
    C = 4
    keys = _random_keys(rng, 30)
    w = AveragedWeights(C, 64)
    _random_training(w, rng, 50, keys, C, [], {})
    for averaged in (True, False):
        k_all, weights = w.to_arrays(averaged=averaged)
        k_rows, rows = w.sorted_rows(averaged=averaged)
        assert numpy.array_equal(k_all, k_rows)
        pieces = [w.gather(rows[i:i + 7], averaged=averaged) for i in range(0, len(rows), 7)]
        assert numpy.array_equal(numpy.concatenate(pieces), weights)
    with pytest.raises(IndexError):
        w.gather(numpy.array([w.n_rows], dtype=numpy.int64))


# Sparse accumulators: only for the weights updates touched ------------------------------------

@pytest.mark.parametrize("C", [65, 130])
def test_lazy_average_with_many_classes_equals_the_naive_average(C):
    # More than 64 classes: the per-row marks of which accumulators exist span several words.
    rng = numpy.random.default_rng(21)
    keys = _random_keys(rng, 12)
    w = AveragedWeights(C, 64)
    snapshots, current = [], {}
    _random_training(w, rng, 120, keys, C, snapshots, current)
    assert w.n_accumulators == len(current)   # one per (key, class) updated
    for key in keys:
        for c in range(C):
            assert w.get(key, c, averaged=True) == pytest.approx(_naive_average(snapshots, key, c), abs=1e-4)
    w.set_use_averages(True)
    on_the_fly = w.score(keys)
    w.average()
    assert numpy.array_equal(w.score(keys), on_the_fly)


def test_accumulators_are_only_for_touched_weights():
    w = AveragedWeights(100, 64)
    for key in range(1, 1001):
        w.add(key, key % 100, 1.0)
        w.next_example()
    assert w.n_rows == 1000 and w.n_accumulators == 1000   # not 100,000
    w.add(1, 1, -1.0)                                      # the same weight again: no new one
    assert w.n_accumulators == 1000


def test_state_arrays_round_trip_and_resize_keep_sparse_accumulators():
    rng = numpy.random.default_rng(22)
    keys = _random_keys(rng, 15)
    w = AveragedWeights(60, 64)
    _random_training(w, rng, 80, keys, 60, [], {})
    k, W, U, clock = w.state_arrays()
    assert numpy.count_nonzero(U) <= w.n_accumulators
    copy = AveragedWeights(60, 64)
    copy.load_arrays(k, W, U, clock)
    assert numpy.array_equal(copy.to_arrays()[1], w.to_arrays()[1])
    before = w.to_arrays(prune=False)[1]
    w.resize(150)                                          # 1 -> 3 words of marks per row
    after = w.to_arrays(prune=False)[1]
    assert numpy.array_equal(after[:, :60], before) and not after[:, 60:].any()
    w.add(keys[0], 140, 1.0)
    w.next_example()
    assert w.get(keys[0], 140, averaged=True) == pytest.approx(1.0 / 81.0)


# Loaded rows read in place: sparse, in reduced precision ----------------------------------------

def _trained(rng, C=9, n_keys=200):
    w = AveragedWeights(C, 64)
    keys = _random_keys(rng, n_keys)
    _random_training(w, rng, 400, keys, C, [], {})
    return w, keys


@pytest.mark.parametrize("precision", PRECISIONS)
def test_frozen_rows_score_what_they_export_and_stay_close_to_float32(precision):
    rng = numpy.random.default_rng(23)
    w, keys = _trained(rng)
    k, dense = w.to_arrays()
    counts, cols, values, scales = sparse_rows(dense, precision)
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.uint32)
    f = AveragedWeights(9, 1)
    f.load_frozen(k, indptr, cols, values, scales)
    assert f.precision == precision and f.n_rows == len(k) and not f.has_accumulators
    assert f.frozen_arrays()[2] is values or numpy.shares_memory(f.frozen_arrays()[2], values)   # not copied
    exported = f.to_arrays(prune=False)[1]
    for key, row in zip(k.tolist()[:50], exported[:50]):
        assert numpy.array_equal(f.score([key]), row)     # dequantized while adding, to the bit
    if precision == "float32":
        assert numpy.array_equal(exported, dense)
    elif precision == "float16":
        assert numpy.allclose(exported, dense, rtol=2 ** -11, atol=1e-7)
    else:
        assert numpy.all(numpy.abs(exported - dense) <= scales[:, None] / 2 + 1e-6)
        assert not numpy.array_equal(exported, dense)
    assert f.score([12345]).tolist() == [0.0] * 9          # unknown keys add nothing
    again = pickle.loads(pickle.dumps(f))
    assert again.precision == precision and numpy.array_equal(again.to_arrays()[1], f.to_arrays()[1])
    # Training a loaded table copies its rows into float32 weights first.
    f.add(int(k[0]), 3, 1.0)
    assert f.precision is None
    assert f.get(int(k[0]), 3) == pytest.approx(float(exported[0, 3]) + 1.0)
    assert f.get(int(k[1]), 2) == float(exported[1, 2])


def test_sparse_rows_prune_small_weights_and_keep_classes_ascending():
    dense = numpy.array([[0.0, 0.3, -2.0, 0.0], [0.1, -0.1, 0.0, 0.0], [5.0, 0.0, 0.0, -0.6]], dtype=numpy.float32)
    counts, cols, values, _ = sparse_rows(dense, "float32", 0.5)
    assert counts.tolist() == [1, 0, 2]
    assert cols.tolist() == [2, 0, 3] and values.tolist() == [-2.0, 5.0, pytest.approx(-0.6)]
    counts, cols, values, scales = sparse_rows(dense, "int8")
    assert counts.tolist() == [2, 2, 2]
    assert values.tolist() == [19, -127, 127, -127, 127, -15]
    assert scales.tolist() == pytest.approx([2.0 / 127, 0.1 / 127, 5.0 / 127])
    with pytest.raises(ValueError, match="float16"):
        sparse_rows(numpy.array([[1e6]], dtype=numpy.float32), "float16")


def test_load_frozen_rejects_inconsistent_arrays():
    f = AveragedWeights(3, 1)
    keys = numpy.array([3, 7], dtype=numpy.uint64)
    good = (numpy.array([0, 1, 3], dtype=numpy.uint32), numpy.array([0, 1, 2], dtype=numpy.uint8),
            numpy.array([1, 2, 3], dtype=numpy.float32))
    f.load_frozen(keys, *good)
    assert f.score([3, 7]).tolist() == [1.0, 2.0, 3.0]
    bad = {
        "bounds": (numpy.array([0, 4, 3], dtype=numpy.uint32),) + good[1:],
        "class": (good[0], numpy.array([0, 1, 3], dtype=numpy.uint8), good[2]),
        "length": good[:2] + (numpy.array([1, 2], dtype=numpy.float32),),
        "dtype": good[:2] + (numpy.array([1, 2, 3], dtype=numpy.float64),),
    }
    for case, arrays in bad.items():
        with pytest.raises(ValueError):
            AveragedWeights(3, 1).load_frozen(keys, *arrays)
    with pytest.raises(ValueError, match="twice"):
        AveragedWeights(3, 1).load_frozen(numpy.array([3, 3], dtype=numpy.uint64), *good)
    with pytest.raises(ValueError, match="scales"):
        AveragedWeights(3, 1).load_frozen(keys, good[0], good[1], good[2].astype(numpy.int8))


def _conversions():
    # The float16 conversions this CPU can run (software always; F16C where the CPU has it).
    previous = weights_module.half_conversion()
    found = ["software"]
    try:
        weights_module.set_half_conversion("f16c")
        found.append("f16c")
    except ValueError:
        pass
    weights_module.set_half_conversion(previous)
    return found


@pytest.mark.parametrize("conversion", ["software", "f16c"])
def test_half_to_float_matches_numpy_on_all_65536_values(conversion):
    if conversion not in _conversions():
        pytest.skip("this CPU has no F16C")
    halves = numpy.arange(65536, dtype=numpy.uint32).astype(numpy.uint16).view(numpy.float16)
    expected = halves.astype(numpy.float32).view(numpy.uint32)
    previous = weights_module.set_half_conversion(conversion)
    try:
        got = weights_module.half_to_float_array(halves).view(numpy.uint32)
    finally:
        weights_module.set_half_conversion(previous)
    wrong = numpy.nonzero(got != expected)[0]
    assert wrong.size == 0, [hex(int(h)) for h in wrong[:8]]   # NaN payloads and -0.0 too


def _mixed_density_rows(rng, n_rows, C):
    # Rows from nearly empty to full, as trained models have (bias-like rows are dense).
    dense = rng.normal(0.0, 1.0, size=(n_rows, C)).astype(numpy.float32)
    density = rng.choice([0.02, 0.1, 0.3, 0.6, 1.0], size=n_rows)
    dense[rng.random((n_rows, C)) > density[:, None]] = 0.0
    dense[::7, ::3] = 2.0 ** -20     # values float16 keeps only as subnormals
    return dense


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("conversion", ["software", "f16c"])
@pytest.mark.parametrize("C", [3, 12, 37, 108, 131])
def test_widened_hot_rows_score_to_the_bit_as_sparse_rows(precision, conversion, C):
    # C: runs of hot float16 rows are added 64, 32, 8 and 4 classes at a time, then one by one;
    # these class counts take each of those steps alone and together (108: a parser's).
    if conversion not in _conversions():
        pytest.skip("this CPU has no F16C")
    rng = numpy.random.default_rng(5)
    n = 300
    keys = numpy.sort(numpy.array(_random_keys(rng, n), dtype=numpy.uint64))
    counts, cols, values, scales = sparse_rows(_mixed_density_rows(rng, n, C), precision)
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.uint32)
    previous = weights_module.set_half_conversion(conversion)
    try:
        f = AveragedWeights(C, 1)
        f.load_frozen(keys, indptr, cols, values, scales)
        hot = int((counts * 4 >= C).sum())
        assert 0 < hot < n and f.n_dense == hot           # load widens every hot row
        queries = [rng.choice(numpy.append(keys, [12345, 0]), size=rng.integers(1, 150)) for _ in range(60)]
        queries.append(numpy.concatenate([keys, keys]))   # more than one block of 64 keys
        widened = [f.score(q) for q in queries]
        exported = f.to_arrays(prune=False)
        got = [f.get(int(keys[i]), min(5, C - 1)) for i in range(0, n, 17)]
        assert 0 < f.widen_hot_rows(3 * 48 * 4) < hot      # a budget: some hot rows stay sparse
        partly = [f.score(q) for q in queries]
        assert f.widen_hot_rows(0) == 0
        sparse = [f.score(q) for q in queries]
        for a, b, c in zip(widened, partly, sparse):
            assert numpy.array_equal(a.view(numpy.uint32), c.view(numpy.uint32))
            assert numpy.array_equal(b.view(numpy.uint32), c.view(numpy.uint32))
        assert f.widen_hot_rows() == hot
        again = f.to_arrays(prune=False)
        assert numpy.array_equal(again[0], exported[0]) and numpy.array_equal(again[1], exported[1])
        assert numpy.array_equal(f.sorted_rows(prune=False)[0], keys)
        assert [f.get(int(keys[i]), min(5, C - 1)) for i in range(0, n, 17)] == got
        copy = pickle.loads(pickle.dumps(f))
        assert copy.n_dense == hot and numpy.array_equal(copy.score(queries[0]), widened[0])
        # Training a widened table drops the dense rows and keeps every row's weights.
        f.add(int(keys[0]), 1, 1.0)
        assert f.precision is None and f.n_dense == 0
        assert f.get(int(keys[0]), 1) == pytest.approx(float(exported[1][0, 1]) + 1.0)
        assert f.get(int(keys[3]), 2) == float(exported[1][3, 2])
        assert numpy.array_equal(f.sorted_rows(prune=False)[0], keys)
    finally:
        weights_module.set_half_conversion(previous)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_first_classes_alone_score_to_the_bit_as_whole_rows(precision):
    # score_prefix (a parser state where only SHIFT and BREAK are valid) reads a few classes of
    # each row; every storage a row can have must give score()'s floats for them.
    rng = numpy.random.default_rng(8)
    C, n = 37, 300
    keys = numpy.sort(numpy.array(_random_keys(rng, n), dtype=numpy.uint64))
    counts, cols, values, scales = sparse_rows(_mixed_density_rows(rng, n, C), precision)
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.uint32)
    f = AveragedWeights(C, 1)
    f.load_frozen(keys, indptr, cols, values, scales)
    queries = [rng.choice(numpy.append(keys, [12345, 0]), size=rng.integers(1, 150)) for _ in range(40)]
    queries.append(numpy.concatenate([keys, keys]))
    for budget in (None, 3 * 48 * 4, 0):   # all hot rows widened, some, none
        if budget is not None:
            f.widen_hot_rows(budget)
        for q in queries:
            whole = f.score(q)
            for m in (0, 1, 2, 5, C):
                got = f.score_prefix_of(q, m)
                assert numpy.array_equal(got.view(numpy.uint32), whole[:m].view(numpy.uint32)), (budget, m)
    f.add(int(keys[0]), 1, 1.0)   # a trained table: the whole rows' sums, cut
    assert f.precision is None
    for q in queries[:5]:
        assert numpy.array_equal(f.score_prefix_of(q, 2), f.score(q)[:2])
    with pytest.raises(ValueError):
        f.score_prefix_of(queries[0], C + 1)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16])
def test_a_full_row_out_of_class_order_is_still_read_by_its_classes(dtype):
    # Full rows are added densely only when load found every full row's classes in order.
    f = AveragedWeights(4, 1)
    keys = numpy.array([3, 7], dtype=numpy.uint64)
    indptr = numpy.array([0, 4, 8], dtype=numpy.uint32)
    ordered = numpy.array([0, 1, 2, 3], dtype=numpy.uint8)
    values = numpy.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=dtype)
    f.load_frozen(keys, indptr, numpy.concatenate([ordered, ordered]), values)
    assert f.score([3, 7]).tolist() == [6.0, 8.0, 10.0, 12.0]
    f.load_frozen(keys, indptr, numpy.concatenate([ordered, ordered[::-1]]), values)
    assert f.score([3]).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert f.score([7]).tolist() == [8.0, 7.0, 6.0, 5.0]
    assert f.score_prefix_of([3, 7], 2).tolist() == [9.0, 9.0]
    for budget in (0, 1 << 20):
        f.widen_hot_rows(budget)
        assert f.score([3, 7]).tolist() == [9.0, 9.0, 9.0, 9.0]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_loaded_key_finds_its_own_row_among_empty_ones(precision):
    # A sparse row's bucket holds where its entries start, not its index (see SPARSE_REF), and
    # empty rows start where the next row does: each key must still find its own row, before
    # and after hot rows are widened and dropped, and score what that row holds.
    rng = numpy.random.default_rng(11)
    C, n = 8, 400
    dense = rng.normal(0.0, 1.0, size=(n, C)).astype(numpy.float32)
    dense[rng.random(n) < 0.5] = 0.0                     # runs of empty rows
    dense[rng.random((n, C)) < 0.7] = 0.0
    keys = numpy.array(_random_keys(rng, n), dtype=numpy.uint64)
    counts, cols, values, scales = sparse_rows(dense, precision)
    assert (counts == 0).sum() > 100
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.uint32)
    f = AveragedWeights(C, 1)
    f.load_frozen(keys, indptr, cols, values, scales)
    expected = [f.score([k]) for k in keys]
    for budget in (None, 0, 1 << 20):
        if budget is not None:
            f.widen_hot_rows(budget)
        assert f.rows_of(keys).tolist() == list(range(n))
        assert numpy.array_equal(f._frozen_keys(), keys)
        for k, e in zip(keys, expected):
            assert numpy.array_equal(f.score([k]), e)
        for i in range(0, n, 7):
            row = numpy.zeros((C,), dtype=numpy.float32)
            row[cols[indptr[i]:indptr[i + 1]]] = 1.0
            assert (f.score([keys[i]]) != 0).tolist() == (row != 0).tolist()


def test_a_signalling_nan_in_a_sparse_float16_row_sums_to_the_same_bits_with_either_conversion():
    # Sparse float16 entries are added with F16C without a NaN check too (the add quiets a
    # signalling NaN whichever conversion widened it): the sums' bits are the software path's.
    if "f16c" not in _conversions():
        pytest.skip("this CPU has no F16C")
    C = 16
    keys = numpy.array([11, 22, 33], dtype=numpy.uint64)
    values = numpy.ones((9,), dtype=numpy.float16)
    values[4] = numpy.uint16(0x7C01).view(numpy.float16)      # a signalling NaN
    values[7] = numpy.uint16(0xFE05).view(numpy.float16)      # a quiet one, negative
    cols = numpy.array([0, 5, 7, 5, 6, 11, 1, 2, 5], dtype=numpy.uint8)
    indptr = numpy.array([0, 3, 6, 9], dtype=numpy.uint32)     # 3 of 16 classes: no row is hot
    sums = {}
    for conversion in ("software", "f16c"):
        previous = weights_module.set_half_conversion(conversion)
        try:
            f = AveragedWeights(C, 1)
            f.load_frozen(keys, indptr, cols, values)
            assert f.n_dense == 0
            sums[conversion] = [f.score(q).view(numpy.uint32) for q in (keys, keys[::-1], keys[1:2])]
        finally:
            weights_module.set_half_conversion(previous)
    for a, b in zip(sums["software"], sums["f16c"]):
        assert numpy.array_equal(a, b)
    assert sums["f16c"][2][6] == 0x7FC02000       # the signalling NaN's payload, quieted
    assert sums["f16c"][0][2] == 0xFFC0A000       # the quiet NaN as it was


@pytest.mark.parametrize("conversion", ["software", "f16c"])
def test_a_nan_in_a_hot_float16_row_keeps_its_bits_as_its_sparse_add_does(conversion):
    # Runs of hot float16 rows are added with F16C without a NaN check (the conversion quiets
    # a signalling NaN, the add would anyway): the sums' bits are still the sparse add's.
    if conversion not in _conversions():
        pytest.skip("this CPU has no F16C")
    C = 12
    keys = numpy.array([11, 22, 33], dtype=numpy.uint64)
    dense = numpy.ones((3, C), dtype=numpy.float16)
    dense[1, 5] = numpy.uint16(0x7C01).view(numpy.float16)     # a signalling NaN
    cols = numpy.tile(numpy.arange(C, dtype=numpy.uint8), 3)
    indptr = numpy.array([0, C, 2 * C, 3 * C], dtype=numpy.uint32)
    previous = weights_module.set_half_conversion(conversion)
    try:
        f = AveragedWeights(C, 1)
        f.load_frozen(keys, indptr, cols, dense.reshape(-1))
        assert f.n_dense == 3
        widened = f.score(keys).view(numpy.uint32)
        f.widen_hot_rows(0)
        sparse = f.score(keys).view(numpy.uint32)
    finally:
        weights_module.set_half_conversion(previous)
    assert numpy.array_equal(widened, sparse)
    assert widened[5] == 0x7FC02000          # the NaN's payload, quieted
    assert widened[0] == numpy.float32(3.0).view(numpy.uint32)


@settings(max_examples=60, deadline=None)
@given(C=st.sampled_from([1, 15, 16, 17, 108, 300]),
       updates=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 10**6), st.sampled_from([1.0, -1.0, 0.5, -2.0])),
                        max_size=60),
       grow=st.integers(0, 40))
def test_rows_hold_only_the_chunks_updates_wrote_and_read_as_dense_rows(C, updates, grow):
    # The current weights keep a row's chunks of 16 classes only where an update wrote; every
    # read (scores, cells, exported rows, the average, after a resize or a reload) equals a
    # dense reference, and the chunk count is the number of (row, chunk) pairs written.
    keys = [2 * k + 1 for k in range(8)]
    w = AveragedWeights(C, 16)
    dense = numpy.zeros((len(keys), C + grow), dtype=numpy.float32)
    written = set()
    for k, c, delta in updates:
        c %= C
        w.add(keys[k], c, delta)
        w.next_example()
        dense[k, c] += numpy.float32(delta)
        written.add((k, c // 16))
    assert w.n_chunks == len(written)
    if grow:
        w.resize(C + grow)
    C2 = C + grow
    for k, key in enumerate(keys):
        numpy.testing.assert_array_equal(w.score([key]), dense[k, :C2])
        assert [w.get(key, c) for c in range(C2)] == dense[k, :C2].tolist()
    exported, rows = w.to_arrays(averaged=False)
    assert sorted(exported.tolist()) == sorted(keys[k] for k in {k for k, _ in written if dense[k].any()})
    for key, row in zip(exported.tolist(), rows):
        numpy.testing.assert_array_equal(row, dense[keys.index(key), :C2])
    again = pickle.loads(pickle.dumps(w))
    assert again.n_chunks <= w.n_chunks   # reloaded rows keep only their nonzero chunks
    for key in keys:
        numpy.testing.assert_array_equal(again.score([key]), w.score([key]))
        w.set_use_averages(True)
        again.set_use_averages(True)
        numpy.testing.assert_array_equal(again.score([key]), w.score([key]))
        w.set_use_averages(False)
        again.set_use_averages(False)


def test_a_pickled_training_table_carries_its_nonzero_cells_not_dense_rows():
    # n_process=2 pickles a live component: a parser trained in this process has ~1.4M rows of
    # 108 classes with ~4 nonzero, and dense copies of W and U would be ~1.8 GB.
    C, n = 108, 2000
    w = AveragedWeights(C, 16)
    for key in range(1, n + 1):
        w.add(key, key % C, 1.0)
        w.next_example()
        w.add(key, (key * 7) % C, -1.0)
    size = len(pickle.dumps(w))
    assert size < n * C * (4 + 8) / 20
    again = pickle.loads(pickle.dumps(w))
    assert (again.n_rows, again.clock) == (w.n_rows, w.clock)
    for key in (1, 500, n):
        for c in (key % C, (key * 7) % C):
            assert again.get(key, c) == w.get(key, c)
            assert again.get(key, c, averaged=True) == w.get(key, c, averaged=True)
