"""The dual-form kernel perceptron: kernels against explicit computation, the dual against the
primal perceptron, voted/averaged predictions against brute force over every intermediate
perceptron, Novikoff's mistake bound, the budget, the row cache and serialization."""
import pickle
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest
import srsly
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_structperc._core.kernel import DualPerceptron, Kernel, PolynomialKernel, register_kernel
from spacy_structperc._core.weights import AveragedWeights


def _random_item(rng, n_keys=60, size=(3, 9), values=False, duplicates=False):
    n = int(rng.integers(*size))
    keys = rng.choice(numpy.arange(1, n_keys + 1), size=n, replace=duplicates).astype(numpy.uint64)
    if values:
        return keys, rng.normal(size=n).astype(numpy.float32)
    return keys


def _dense(item, dim):
    keys, values = item if isinstance(item, tuple) else (item, numpy.ones(len(item), dtype=numpy.float32))
    x = numpy.zeros(dim)
    numpy.add.at(x, numpy.asarray(keys, dtype=numpy.int64), numpy.asarray(values, dtype=numpy.float64))
    return x


def _poly(x, y, degree, coef0, gamma):
    return (gamma * float(x @ y) + coef0) ** degree


# ---------------------------------------------------------------------------------------------
# Kernels


@pytest.mark.parametrize("degree,coef0,gamma", [(1, 0.0, 1.0), (2, 1.0, 1.0), (3, 0.5, 0.3), (2, 0.0, 2.0)])
def test_polynomial_kernel_equals_explicit_computation_on_random_sparse_pairs(degree, coef0, gamma):
    rng = numpy.random.default_rng(degree)
    kernel = PolynomialKernel(degree, coef0, gamma)
    for _ in range(50):
        x = _random_item(rng, 20, values=bool(rng.integers(2)), duplicates=True)
        y = _random_item(rng, 20, values=bool(rng.integers(2)), duplicates=True)
        expected = _poly(_dense(x, 21), _dense(y, 21), degree, coef0, gamma)
        assert kernel(x, y) == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert kernel.k(y, x) == pytest.approx(expected, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("degree,coef0,gamma", [(1, 0.0, 1.0), (2, 1.0, 1.0), (3, 0.5, 0.3)])
def test_kernel_row_of_the_inverted_index_equals_every_pairwise_kernel(degree, coef0, gamma):
    rng = numpy.random.default_rng(10 + degree)
    kernel = PolynomialKernel(degree, coef0, gamma)
    support = [_random_item(rng, 40, values=bool(i % 2), duplicates=True) for i in range(60)]
    for i, item in enumerate(support):
        assert kernel.store(item) == i
    for _ in range(20):
        query = _random_item(rng, 45, values=bool(rng.integers(2)), duplicates=True)
        expected = [_poly(_dense(s, 46), _dense(query, 46), degree, coef0, gamma) for s in support]
        assert kernel.kernel_row(query) == pytest.approx(expected, rel=1e-6, abs=1e-9)
        # A part of the row, as the cache extends rows with the items added since.
        assert kernel.kernel_row(query, 17, 41) == pytest.approx(expected[17:41], rel=1e-6, abs=1e-9)


def test_a_repeated_key_counts_twice_in_queries_and_support_items():
    kernel = PolynomialKernel(1, 0.0, 1.0)
    kernel.store(numpy.array([5, 5, 9], dtype=numpy.uint64))
    assert kernel([5, 5, 9], [5]) == 2.0
    assert kernel.kernel_row(numpy.array([5, 5], dtype=numpy.uint64))[0] == 4.0
    assert kernel.kernel_row((numpy.array([5, 9]), numpy.array([0.5, 3.0])))[0] == pytest.approx(4.0)


def test_degree_2_kernel_equals_the_explicit_quadratic_feature_expansion():
    rng = numpy.random.default_rng(3)
    dim, coef0, gamma = 12, 1.5, 0.7
    kernel = PolynomialKernel(2, coef0, gamma)

    def phi(x):   # (gamma <x,y> + c)^2 = c^2 + 2 c gamma <x,y> + gamma^2 sum_jk x_j x_k y_j y_k
        return numpy.concatenate([[coef0], numpy.sqrt(2 * coef0 * gamma) * x, gamma * numpy.outer(x, x).ravel()])

    for _ in range(30):
        x = _random_item(rng, dim - 1, values=True)
        y = _random_item(rng, dim - 1, values=True)
        assert kernel(x, y) == pytest.approx(float(phi(_dense(x, dim)) @ phi(_dense(y, dim))), rel=1e-6)


def test_bad_items_and_settings_raise_coded_errors():
    kernel = PolynomialKernel()
    with pytest.raises(ValueError, match="S284"):
        kernel([1.5, 2.0], [1])
    with pytest.raises(ValueError, match="S284"):
        kernel(([1, 2], [1.0]), [1])
    with pytest.raises(ValueError, match="S284"):
        kernel(numpy.ones((2, 2), dtype=numpy.uint64), [1])
    with pytest.raises(ValueError, match="S283"):
        PolynomialKernel(degree=0)
    with pytest.raises(ValueError, match="S283"):
        DualPerceptron(PolynomialKernel(), prediction="median")
    with pytest.raises(ValueError, match="S283"):
        DualPerceptron(PolynomialKernel(), budget_policy="random")
    with pytest.raises(ValueError, match="S283"):
        DualPerceptron(PolynomialKernel(degree=3), expand=True)
    assert not DualPerceptron(PolynomialKernel(degree=3)).expanded
    used = PolynomialKernel()
    used.store([1])
    with pytest.raises(ValueError, match="S286"):
        DualPerceptron(used)


_small_vectors = st.lists(
    st.lists(st.tuples(st.integers(1, 8), st.floats(-3, 3, allow_nan=False, width=32)), max_size=6),
    min_size=2, max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(vectors=_small_vectors, degree=st.integers(1, 3), coef0=st.floats(0, 2), gamma=st.floats(0.05, 2))
def test_polynomial_kernel_is_symmetric_and_positive_semidefinite(vectors, degree, coef0, gamma):
    kernel = PolynomialKernel(degree, coef0, gamma)
    items = [(numpy.array([k for k, _ in v], dtype=numpy.uint64), numpy.array([x for _, x in v], dtype=numpy.float32))
             for v in vectors]
    gram = numpy.array([[kernel(x, y) for y in items] for x in items])
    assert numpy.array_equal(gram, gram.T)
    scale = max(1.0, float(numpy.abs(gram).max()))
    assert numpy.linalg.eigvalsh(gram).min() >= -1e-6 * scale


# ---------------------------------------------------------------------------------------------
# The dual perceptron against the primal one


@pytest.mark.parametrize("expand", [False, True])
def test_linear_dual_perceptron_equals_the_primal_averaged_weights_prediction_by_prediction(expand):
    rng = numpy.random.default_rng(7)
    teacher = rng.normal(size=61)
    dual = DualPerceptron(PolynomialKernel(1, 0.0, 1.0), expand=expand)
    assert dual.expanded == expand
    primal = AveragedWeights(1, 256)
    n_mistakes = 0
    for epoch in range(3):
        stream = numpy.random.default_rng(100 + epoch if epoch < 2 else 100)
        for _ in range(150):
            x = _random_item(stream, 60)
            y = 1.0 if teacher[x.astype(numpy.int64)].sum() > 0 else -1.0
            primal.set_use_averages(False)
            current = float(primal.score(x)[0])
            assert dual.score(x, mode="last") == pytest.approx(current, abs=1e-4)
            primal.set_use_averages(True)
            averaged = float(primal.score(x)[0])
            assert dual.score(x, mode="averaged") == pytest.approx(averaged, rel=1e-5, abs=1e-4)
            if y * dual.score(x, mode="last") <= 0:
                n_mistakes += 1
                dual.update(x, y)
                for key in x:
                    primal.add(int(key), 0, y)
            dual.tick()
            primal.next_example()
    assert n_mistakes > 20   # the comparison covered many updates
    assert dual.n_support == n_mistakes


def _train_snapshots(perceptron, rng, n_examples, make_item, label, candidates=None):
    """Train online on random items; after each example, record the current support and
    coefficients (the perceptron that was in effect for it), for brute-force predictions."""
    snapshots, support = [], []
    coef = []
    for t in range(n_examples):
        if candidates is None:
            x = make_item(rng)
            y = label(x)
            if y * perceptron.score(x, mode="last") <= 0:
                perceptron.update(x, y)
                support.append(x)
                coef.append(y)
            if rng.random() < 0.2:   # sometimes two updates in one example
                z = make_item(rng)
                d = float(rng.choice([-1.0, 1.0]))
                perceptron.update(z, d)
                support.append(z)
                coef.append(d)
        else:
            cands = [make_item(rng) for _ in range(candidates)]
            gold = int(numpy.argmax([label(c) for c in cands]))
            pred = int(numpy.argmax(perceptron.rank(cands, mode="last")))
            if pred != gold:
                for item, d in ((cands[gold], 1.0), (cands[pred], -1.0)):
                    perceptron.update(item, d)
                    support.append(item)
                    coef.append(d)
        perceptron.tick()
        snapshots.append(len(support))
    return support, coef, snapshots


def _explicit_scores(support, coef, x, degree, coef0):
    dim = 64
    k = numpy.array([_poly(_dense(s, dim), _dense(x, dim), degree, coef0, 1.0) for s in support])
    return numpy.cumsum(numpy.asarray(coef) * k) if len(support) else numpy.zeros(0)


@pytest.mark.parametrize("expand", [False, True])
def test_voted_and_averaged_predictions_equal_brute_force_over_every_prefix_perceptron(expand):
    rng = numpy.random.default_rng(11)
    teacher = rng.normal(size=64)
    perceptron = DualPerceptron(PolynomialKernel(2, 1.0, 1.0), expand=expand)
    make = lambda r: _random_item(r, 40, size=(2, 6))
    label = lambda x: 1.0 if teacher[x.astype(numpy.int64)].sum() > 0.3 else -1.0
    support, coef, snapshots = _train_snapshots(perceptron, rng, 120, make, label)
    assert len(support) > 10
    for _ in range(25):
        x = make(rng)
        prefix = numpy.concatenate([[0.0], _explicit_scores(support, coef, x, 2, 1.0)])
        per_example = prefix[snapshots]   # the score of the perceptron in effect at each example
        assert perceptron.score(x, mode="voted") == pytest.approx(numpy.sign(per_example).mean(), abs=1e-12)
        assert perceptron.score(x, mode="averaged") == pytest.approx(per_example.mean(), rel=1e-9, abs=1e-9)
        assert perceptron.score(x, mode="last") == pytest.approx(prefix[-1], rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("expand", [False, True])
def test_voted_ranking_equals_brute_force_argmax_votes_of_every_prefix_perceptron(expand):
    rng = numpy.random.default_rng(12)
    teacher = rng.normal(size=64)
    perceptron = DualPerceptron(PolynomialKernel(2, 1.0, 1.0), expand=expand)
    make = lambda r: _random_item(r, 30, size=(2, 5))
    label = lambda x: float(teacher[x.astype(numpy.int64)].sum())
    support, coef, snapshots = _train_snapshots(perceptron, rng, 80, make, label, candidates=4)
    assert len(support) > 10
    for _ in range(15):
        cands = [make(rng) for _ in range(int(rng.integers(2, 6)))]
        scores = numpy.array([numpy.concatenate([[0.0], _explicit_scores(support, coef, c, 2, 1.0)])
                              for c in cands])          # candidates x prefixes
        votes = numpy.zeros(len(cands))
        for n in snapshots:
            column = scores[:, n]
            if column.max() > column.min():    # a perceptron scoring all alike abstains
                votes[int(numpy.argmax(column))] += 1
        assert perceptron.rank(cands, mode="voted") == pytest.approx(votes / len(snapshots), abs=1e-12)
        assert perceptron.rank(cands, mode="averaged") == pytest.approx(
            scores[:, snapshots].mean(axis=1), rel=1e-9, abs=1e-9)


def test_prediction_setting_chooses_the_default_mode():
    rng = numpy.random.default_rng(5)
    perceptron = DualPerceptron(PolynomialKernel(), prediction="voted")
    for _ in range(30):
        perceptron.update(_random_item(rng), float(rng.choice([-1, 1])))
        perceptron.tick()
    x = _random_item(rng)
    assert perceptron.score(x) == perceptron.score(x, mode="voted")
    perceptron.prediction = "last"
    assert perceptron.score(x) == perceptron.score(x, mode="last")
    assert perceptron.score_batch([x, x])[1] == perceptron.score(x)


def _xor_data(rng, n, n_noise):
    """Items {a-key, b-key, noise keys}; label +1 iff a != b. Not linearly separable; separable
    with degree 2 by the conjunctions of the a and b keys."""
    items, labels = [], []
    for _ in range(n):
        a, b = int(rng.integers(2)), int(rng.integers(2))
        noise = rng.choice(numpy.arange(10, 30), size=n_noise, replace=False)
        items.append(numpy.concatenate([[1 + a, 3 + b], noise]).astype(numpy.uint64))
        labels.append(1.0 if a != b else -1.0)
    return items, labels


def _train_until_separated(perceptron, items, labels, max_epochs):
    mistakes, last_epoch = 0, None
    for _ in range(max_epochs):
        last_epoch = 0
        for x, y in zip(items, labels):
            if y * perceptron.score(x, mode="last") <= 0:
                perceptron.update(x, y)
                last_epoch += 1
            perceptron.tick()
        mistakes += last_epoch
        if last_epoch == 0:
            break
    return mistakes, last_epoch


def test_novikoff_mistake_bound_on_xor_data_separable_only_with_the_degree_2_kernel():
    rng = numpy.random.default_rng(21)
    n_noise = 2
    items, labels = _xor_data(rng, 200, n_noise)
    # In the expansion phi(x) = [1, sqrt(2) x_j, x_j x_k], u = sum over the four (a, b) combos of
    # label * (e_ab + e_ba) / sqrt(8) has y u.phi(x) = 2 / sqrt(8) for every item: gamma >= that.
    # R = max ||phi(x)|| = sqrt(K(x, x)) = |x| + 1.
    gamma_margin = 2 / numpy.sqrt(8)
    R = n_noise + 2 + 1
    bound = (R / gamma_margin) ** 2
    perceptron = DualPerceptron(PolynomialKernel(2, 1.0, 1.0))
    mistakes, last_epoch = _train_until_separated(perceptron, items, labels, 50)
    assert last_epoch == 0          # converged: a full epoch without mistakes
    assert 0 < mistakes <= bound
    # The linear kernel cannot separate the four XOR points: it never stops making mistakes.
    corners = [numpy.array([1 + a, 3 + b], dtype=numpy.uint64) for a in (0, 1) for b in (0, 1)]
    linear = DualPerceptron(PolynomialKernel(1, 1.0, 1.0))
    _, last_linear = _train_until_separated(linear, corners, [-1.0, 1.0, 1.0, -1.0], 30)
    assert last_linear > 0


# ---------------------------------------------------------------------------------------------
# The primal expansion, merging, the budget and the cache


@pytest.mark.parametrize("degree,coef0,gamma", [(1, 0.0, 1.0), (1, 2.0, 0.5), (2, 1.0, 1.0), (2, 0.0, 0.7), (2, 0.3, 1.7)])
def test_the_primal_expansion_scores_like_the_kernel_rows_through_merges_and_budget_drops(degree, coef0, gamma):
    rng = numpy.random.default_rng(31 + degree)
    rows = DualPerceptron(PolynomialKernel(degree, coef0, gamma), expand=False, budget=40)
    expanded = DualPerceptron(PolynomialKernel(degree, coef0, gamma), expand=True, budget=40)
    for t in range(400):
        x = _random_item(rng, 30, values=bool(t % 3), duplicates=True)
        for mode in ("last", "averaged"):
            assert expanded.score(x, mode=mode) == pytest.approx(rows.score(x, mode=mode), rel=1e-9, abs=1e-9)
        if rng.random() < 0.4:
            d = float(rng.normal())
            item_id = int(rng.integers(60))
            rows.update(x, d, item_id=item_id)
            expanded.update(x, d, item_id=item_id)
        rows.tick()
        expanded.tick()
    assert expanded.expansion.n_features > 0


def test_an_item_id_merges_repeated_updates_into_one_coefficient():
    rng = numpy.random.default_rng(4)
    items = [_random_item(rng) for _ in range(10)]
    merged = DualPerceptron(PolynomialKernel())
    separate = DualPerceptron(PolynomialKernel())
    for t in range(60):
        j = int(rng.integers(10))
        d = float(rng.choice([-1.0, 1.0]))
        merged.update(items[j], d, item_id=j)
        separate.update(items[j], d)
        merged.tick()
        separate.tick()
    assert merged.n_support <= 10 < separate.n_support
    for x in items:
        for mode in ("last", "averaged", "voted"):
            assert merged.score(x, mode=mode) == pytest.approx(separate.score(x, mode=mode), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("policy,expand", [("oldest", False), ("oldest", True), ("smallest", True)])
def test_budget_keeps_the_support_within_bounds_and_forgets_items_entirely(policy, expand):
    rng = numpy.random.default_rng(8)
    budget = 25
    perceptron = DualPerceptron(PolynomialKernel(2, 1.0, 1.0), budget=budget, budget_policy=policy,
                                expand=expand)
    added = []
    for t in range(700):
        x = _random_item(rng, 40)
        d = float(rng.choice([-1.0, 1.0, 2.0]))
        perceptron.update(x, d, item_id=1000 + t)
        added.append((x, d))
        if t % 3 == 0:   # merges into live items, so coefficients differ in size
            perceptron.update(x, d, item_id=1000 + t)
        assert perceptron.n_support <= budget
        perceptron.tick()
    x = _random_item(rng, 40)
    before = [perceptron.score(x, mode=m) for m in ("last", "averaged", "voted")]
    perceptron.compact()
    after = [perceptron.score(x, mode=m) for m in ("last", "averaged", "voted")]
    assert after == pytest.approx(before, rel=1e-9, abs=1e-12)
    assert perceptron.n_support == budget == perceptron.kernel.n_items
    # The current score is that of the live items alone.
    a, _ = perceptron.coefficients()
    row = perceptron.kernel.kernel_row(x)
    assert perceptron.score(x, mode="last") == pytest.approx(float(a @ row))
    if policy == "oldest":
        live = added[-budget:]
        expected = sum(d * (2 if (len(added) - budget + i) % 3 == 0 else 1) * perceptron.kernel(s, x)
                       for i, (s, d) in enumerate(live))
        assert perceptron.score(x, mode="last") == pytest.approx(expected)


def test_cached_kernel_rows_give_the_same_scores_within_the_memory_bound():
    rng = numpy.random.default_rng(9)
    teacher = rng.normal(size=81)
    pool = [_random_item(rng, 80, size=(5, 15)) for _ in range(120)]
    # The cache serves kernel rows, which the expansion does without: compare the two.
    cached = DualPerceptron(PolynomialKernel(), cache_mb=0.05, expand=False)
    plain = DualPerceptron(PolynomialKernel(), expand=True)
    for epoch in range(4):
        for j, x in enumerate(pool):
            y = 1.0 if teacher[x.astype(numpy.int64)].sum() > 0 else -1.0
            s = cached.score(x, item_id=j, mode="last")
            assert s == pytest.approx(plain.score(x, mode="last"), rel=1e-9, abs=1e-9)
            assert cached.score(x, item_id=j, mode="averaged") == pytest.approx(
                plain.score(x, mode="averaged"), rel=1e-9, abs=1e-9)
            if y * s <= 0:
                cached.update(x, y, item_id=j)
                plain.update(x, y, item_id=j)
            cached.tick()
            plain.tick()
            assert cached.cache_bytes <= cached.cache_limit
    assert cached.cache_hits > 0
    assert cached.n_cached_rows > 0
    for j, x in enumerate(pool[:20]):
        assert cached.score(x, item_id=j, mode="voted") == plain.score(x, mode="voted")


# ---------------------------------------------------------------------------------------------
# Subclassing


class DenseLinear(Kernel):
    """A Python-level kernel over dense lists (the prototyping path of the base class)."""

    def py_convert(self, item):
        return [float(v) for v in item]

    def py_pair(self, x, y):
        return float(numpy.dot(x, y))


register_kernel(DenseLinear)


def test_a_python_subclass_of_the_base_kernel_trains_like_the_builtin_linear_kernel():
    rng = numpy.random.default_rng(13)
    dim = 30
    teacher = rng.normal(size=dim + 1)
    dense = DualPerceptron(DenseLinear(), budget=15)
    sparse = DualPerceptron(PolynomialKernel(1, 0.0, 1.0), budget=15)
    for t in range(200):
        x = _random_item(rng, dim)
        v = _dense(x, dim + 1).tolist()
        y = 1.0 if teacher[x.astype(numpy.int64)].sum() > 0 else -1.0
        s = sparse.score(x, mode="last")
        assert dense.score(v, mode="last") == pytest.approx(s, abs=1e-9)
        if y * s <= 0:
            sparse.update(x, y)
            dense.update(v, y)
        sparse.tick()
        dense.tick()
    v = _dense(x, dim + 1).tolist()
    restored = pickle.loads(pickle.dumps(dense))
    assert isinstance(restored.kernel, DenseLinear)
    assert restored.score(v, mode="voted") == dense.score(v, mode="voted")


@pytest.mark.slow
def test_a_cython_subclass_in_another_module_can_cimport_and_override_the_hooks(tmp_path):
    import spacy_structperc
    include = str(Path(spacy_structperc.__file__).resolve().parent.parent)
    (tmp_path / "overlap_kernel.pyx").write_text(textwrap.dedent('''
        from libc.stdint cimport int64_t
        from spacy_structperc._core.kernel cimport Kernel
        from spacy_structperc._core.kernel import register_kernel

        cdef class OverlapKernel(Kernel):
            """K(x, y) = |set(x) & set(y)| through the C-level pair hook."""
            cdef object convert(self, object item):
                return frozenset(int(k) for k in item)
            cdef double pair(self, object x, object y) except? -1:
                return len(x & y)
            def support_state(self):
                return {"items": [sorted(s) for s in self._items]}

        register_kernel(OverlapKernel)
    '''))
    (tmp_path / "setup.py").write_text(textwrap.dedent(f'''
        from setuptools import setup, Extension
        from Cython.Build import cythonize
        setup(ext_modules=cythonize([Extension("overlap_kernel", ["overlap_kernel.pyx"])],
                                    include_path=[{include!r}], language_level=3))
    '''))
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    sys.path.insert(0, str(tmp_path))
    try:
        import overlap_kernel
    finally:
        sys.path.remove(str(tmp_path))
    perceptron = DualPerceptron(overlap_kernel.OverlapKernel())
    linear = DualPerceptron(PolynomialKernel(1, 0.0, 1.0))
    rng = numpy.random.default_rng(14)
    for _ in range(50):
        x = _random_item(rng, 20)
        d = float(rng.choice([-1.0, 1.0]))
        perceptron.update(x, d)
        linear.update(x, d)
        perceptron.tick()
        linear.tick()
    for _ in range(10):
        x = _random_item(rng, 20)
        for mode in ("last", "averaged", "voted"):
            assert perceptron.score(x, mode=mode) == pytest.approx(linear.score(x, mode=mode), abs=1e-9)
    restored = DualPerceptron(Kernel()).from_bytes(perceptron.to_bytes())
    assert restored.score(x) == perceptron.score(x)


# ---------------------------------------------------------------------------------------------
# Serialization


def _trained(rng, **kwargs):
    perceptron = DualPerceptron(PolynomialKernel(2, 0.5, 1.5), **kwargs)
    for t in range(300):
        x = _random_item(rng, 50, values=bool(t % 2))
        perceptron.update(x, float(rng.choice([-1.0, 1.0])), item_id=int(rng.integers(200)))
        perceptron.tick()
    return perceptron


def test_serialization_round_trip_gives_identical_scores_and_training_state():
    rng = numpy.random.default_rng(15)
    perceptron = _trained(rng, budget=80, budget_policy="smallest", prediction="voted", cache_mb=1)
    data = perceptron.to_bytes()
    restored = DualPerceptron(PolynomialKernel()).from_bytes(data)
    pickled = pickle.loads(pickle.dumps(perceptron))
    assert restored.to_bytes() == data
    assert (restored.prediction, restored.budget, restored.budget_policy) == ("voted", 80, "smallest")
    assert (restored.clock, restored.n_support, restored.n_events) == (perceptron.clock, perceptron.n_support,
                                                                       perceptron.n_events)
    queries = [_random_item(rng, 50) for _ in range(20)]
    for mode in ("last", "averaged", "voted"):
        expected = perceptron.score_batch(queries, mode=mode)
        # The expansion is rebuilt from the history, without the budget's subtractions: the same
        # sums up to rounding ("voted" reads kernel rows, which come back exactly).
        tolerance = dict(rel=1e-12, abs=1e-12) if mode != "voted" else dict(rel=0, abs=0)
        assert restored.score_batch(queries, mode=mode) == pytest.approx(expected, **tolerance)
        assert pickled.score_batch(queries, mode=mode) == pytest.approx(expected, **tolerance)
        assert restored.rank(queries, mode=mode) == pytest.approx(perceptron.rank(queries, mode=mode), **tolerance)
    # Training continues identically (item ids and the clock came back too).
    for p in (perceptron, restored):
        p.update(queries[0], 1.0, item_id=3)
        p.update(queries[1], -1.0, item_id=500)
        p.tick()
    assert restored.score_batch(queries) == pytest.approx(perceptron.score_batch(queries), rel=1e-12, abs=1e-12)
    exact = DualPerceptron(PolynomialKernel(), expand=False)
    for t in range(50):
        exact.update(_random_item(rng, 50, values=True), float(rng.normal()), item_id=t % 7)
        exact.tick()
    copy = DualPerceptron(Kernel()).from_bytes(exact.to_bytes())
    for mode in ("last", "averaged", "voted"):
        assert numpy.array_equal(copy.score_batch(queries, mode=mode), exact.score_batch(queries, mode=mode))


def test_damaged_bytes_raise_the_coded_error_and_never_load():
    rng = numpy.random.default_rng(16)
    data = _trained(rng).to_bytes()
    outer = srsly.msgpack_loads(data)
    fresh = lambda: DualPerceptron(PolynomialKernel())
    for bad in (b"", b"\x00garbage", data[: len(data) // 2], srsly.msgpack_dumps({"kind": "other"})):
        with pytest.raises(ValueError, match="S280"):
            fresh().from_bytes(bad)
    # One flipped bit anywhere in the body is caught by the checksum.
    body = bytearray(outer["body"])
    for pos in (10, len(body) // 2, len(body) - 3):
        damaged = bytearray(body)
        damaged[pos] ^= 0x04
        with pytest.raises(ValueError, match="S280"):
            fresh().from_bytes(srsly.msgpack_dumps(dict(outer, body=bytes(damaged))))
    with pytest.raises(ValueError, match="S281"):
        fresh().from_bytes(srsly.msgpack_dumps(dict(outer, format_version=99)))
    # A body whose arrays disagree is refused even with a matching checksum.
    import hashlib
    inner = srsly.msgpack_loads(outer["body"])
    for key, value in (("coef", inner["coef"][:-8] + struct.pack("<d", 0.123)), ("event_clock", inner["event_clock"][:-8]),
                       ("n_support", inner["n_support"] + 1)):
        forged = srsly.msgpack_dumps(dict(inner, **{key: value}))
        payload = dict(outer, body=forged, checksum=hashlib.blake2b(forged, digest_size=16).hexdigest())
        with pytest.raises(ValueError, match="S280"):
            fresh().from_bytes(srsly.msgpack_dumps(payload))
    unknown = srsly.msgpack_dumps(dict(inner, kernel=dict(inner["kernel"], **{"class": "NoSuchKernel"})))
    payload = dict(outer, body=unknown, checksum=hashlib.blake2b(unknown, digest_size=16).hexdigest())
    with pytest.raises(ValueError, match="S282"):
        fresh().from_bytes(srsly.msgpack_dumps(payload))
