"""The dependency-tree convolution kernel (_core/treekernel.pyx) against explicit fragment counts."""
import itertools
from collections import Counter

import numpy
import pytest
import srsly

from spacy_structperc._core.kernel import DualPerceptron
from spacy_structperc._core.treekernel import DependencyTreeKernel, DepTree


def random_tree(rng, n, n_labels):
    """Random heads (each node's head is an earlier node or -1; then shuffled) and labels."""
    heads = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    perm = rng.permutation(n)
    inv = numpy.argsort(perm)
    new_heads = [-1] * n
    for old, h in enumerate(heads):
        new_heads[inv[old]] = -1 if h < 0 else int(inv[h])
    labels = rng.integers(1, n_labels + 1, size=n).astype(numpy.uint64)
    return numpy.array(new_heads), labels


def fragments(heads, labels):
    """Every fragment of the tree (a node, optionally all its dependents, each expanded or not) as
    a canonical nested tuple, with its size; counted over all nodes."""
    n = len(heads)
    kids = [[d for d in range(n) if heads[d] == h] for h in range(n)]

    def rooted(a):
        out = [((int(labels[a]),), 1)]
        if kids[a]:
            options = [rooted(c) for c in kids[a]]
            for combo in itertools.product(*options):
                sig = tuple((int(labels[c]), c > a, f) for c, (f, _) in zip(kids[a], combo))
                out.append(((int(labels[a]), sig), 1 + sum(s for _, s in combo)))
        return out

    counts = Counter()
    sizes = {}
    for a in range(n):
        for f, s in rooted(a):
            counts[f] += 1
            sizes[f] = s
    return counts, sizes


@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_tree_kernel_equals_explicit_fragment_counting(lam):
    rng = numpy.random.default_rng(0)
    kernel = DependencyTreeKernel(lambda_=lam)
    for _ in range(60):
        t1 = random_tree(rng, int(rng.integers(1, 7)), 2)
        t2 = random_tree(rng, int(rng.integers(1, 7)), 2)
        c1, sizes = fragments(*t1)
        c2, _ = fragments(*t2)
        expected = sum(c1[f] * c2[f] * lam ** sizes[f] for f in c1 if f in c2)
        assert kernel((t1[0], t1[1], 0.0), (t2[0], t2[1], 0.0)) == pytest.approx(expected)


def test_base_score_is_a_linear_feature_of_the_kernel():
    kernel = DependencyTreeKernel(lambda_=1.0, base_weight=0.5)
    t = (numpy.array([-1, 0]), numpy.array([3, 4], dtype=numpy.uint64))
    plain = DependencyTreeKernel(lambda_=1.0)((*t, 0.0), (*t, 0.0))
    assert kernel((*t, 2.0), (*t, -3.0)) == pytest.approx(plain + 0.5 * 2.0 * -3.0)


def test_bad_trees_are_refused():
    with pytest.raises(ValueError):
        DepTree(numpy.array([1, 0]), numpy.array([1, 1], dtype=numpy.uint64))   # a cycle
    with pytest.raises(ValueError):
        DepTree(numpy.array([5]), numpy.array([1], dtype=numpy.uint64))


def test_dual_perceptron_with_the_tree_kernel_round_trips():
    rng = numpy.random.default_rng(1)
    dual = DualPerceptron(DependencyTreeKernel(lambda_=0.5, base_weight=1.0), prediction="averaged")
    trees = [(*random_tree(rng, 5, 3), float(rng.normal())) for _ in range(6)]
    dual.update(trees[0], 1.0)
    dual.update(trees[1], -1.0)
    dual.tick()
    dual.update(trees[2], 1.0)
    dual.tick()
    again = DualPerceptron(DependencyTreeKernel()).from_bytes(dual.to_bytes())
    assert numpy.array_equal(dual.score_batch(trees), again.score_batch(trees))
    assert again.kernel.lambda_ == 0.5
