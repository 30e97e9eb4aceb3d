"""Rerankers over candidate lists (spacy_structperc/reranking/learners.py): collins2001 §5's guarantees."""
import numpy
import pytest
import srsly

from spacy_structperc.reranking import (BoostingReranker, CandidateLists, DualReranker,
                                        PerceptronReranker, choose, make_reranker,
                                        reranker_from_dict)


def synthetic_lists(seed, m=60, k=5, n_feats=30, noise=0.0, integer_base=False):
    """Lists whose loss is a hidden linear function of the features (plus noise): separable when
    noise is 0. Base scores are loosely correlated with quality."""
    rng = numpy.random.default_rng(seed)
    true_w = rng.normal(size=n_feats)
    sents = []
    for _ in range(m):
        cands = []
        for _ in range(int(rng.integers(1, k + 1))):
            keys = rng.choice(n_feats, size=int(rng.integers(1, 6)), replace=True)
            quality = true_w[keys].sum() + noise * rng.normal()
            base = float(round(quality + rng.normal())) if integer_base else float(quality + rng.normal())
            cands.append({"keys": (keys + 1).astype(numpy.uint64), "base": base,
                          "loss": float(numpy.round(-quality, 3))})
        cands.sort(key=lambda c: -c["base"])
        sents.append(cands)
    return CandidateLists.build(sents)


def test_boosting_exponential_loss_falls_every_round():
    lists = synthetic_lists(0, noise=0.5)
    model = BoostingReranker(rounds=60, min_count=1).fit(lists)
    Z = numpy.array(model.loss_curve)
    assert len(Z) > 10
    assert (numpy.diff(Z) < 0).all()


def test_boosting_incremental_r_matches_recomputed_exp_loss():
    """Z kept incrementally equals the exponential loss recomputed from the final weights."""
    lists = synthetic_lists(1, noise=0.5)
    model = BoostingReranker(rounds=30, min_count=1).fit(lists)
    base = lists.relative_base() * model.scale
    scores = model.scores(lists)
    oracle = lists.oracle()
    Z = 0.0
    for i in range(lists.n_sentences):
        a, b = lists.offsets[i], lists.offsets[i + 1]
        g = oracle[i]
        for z in range(a, b):
            if lists.loss[z] > lists.loss[g]:
                Z += numpy.exp(-(scores[g] - scores[z])) / (b - a - 1)
    assert Z == pytest.approx(model.loss_curve[-1], rel=1e-6)


def test_perceptron_separates_separable_lists():
    lists = synthetic_lists(2)
    model = PerceptronReranker(epochs=30).fit(lists)
    picked = model.choose(lists)
    assert (lists.loss[picked] == lists.loss[lists.oracle()]).mean() > 0.95
    assert model.curve[-1]["mistakes"] <= model.curve[0]["mistakes"]


def test_dual_linear_ranks_exactly_as_the_primal_perceptron():
    train = synthetic_lists(3, noise=1.0, integer_base=True)
    test = synthetic_lists(4, noise=1.0, integer_base=True)
    primal = PerceptronReranker(epochs=3, min_count=1, seed=7).fit(train)
    dual = DualReranker(kernel="linear", epochs=3, seed=7).fit(train)
    assert [c["mistakes"] for c in primal.curve] == [c["mistakes"] for c in dual.curve]
    assert numpy.array_equal(primal.choose(test), dual.choose(test))
    assert numpy.array_equal(primal.choose(train), dual.choose(train))


@pytest.mark.parametrize("learner,settings", [
    ("perceptron", {"epochs": 2}), ("boosting", {"rounds": 20, "min_count": 1}),
    ("dual", {"kernel": "poly"}), ("dual", {"kernel": "linear"})])
def test_rerankers_round_trip_through_msgpack(learner, settings):
    train, test = synthetic_lists(5, noise=0.5), synthetic_lists(6, noise=0.5)
    model = make_reranker(learner, **settings).fit(train)
    data = srsly.msgpack_loads(srsly.msgpack_dumps(model.to_dict()))
    again = reranker_from_dict(data)
    assert numpy.array_equal(model.scores(test), again.scores(test))


def test_unknown_learner_and_kernel_are_coded_errors():
    with pytest.raises(ValueError, match="S240"):
        make_reranker("maxent")
    with pytest.raises(ValueError, match="S242"):
        make_reranker("dual", kernel="rbf")


def test_tree_kernel_needs_trees():
    with pytest.raises(ValueError, match="S243"):
        DualReranker(kernel="tree").fit(synthetic_lists(0))


def test_one_candidate_lists_choose_their_only_candidate():
    lists = CandidateLists.build([[{"keys": [1, 2], "base": 3.0, "loss": 1.0}],
                                  [{"keys": [1], "base": 1.0, "loss": 0.0},
                                   {"keys": [2], "base": 0.5, "loss": 1.0}]])
    for model in (PerceptronReranker(epochs=2).fit(lists), BoostingReranker(rounds=5, min_count=1).fit(lists)):
        picked = model.choose(lists)
        assert picked[0] == 0 and picked[1] in (1, 2)


def test_head_subset_and_concat_keep_candidates_whole():
    lists = synthetic_lists(9)
    top2 = lists.head(2)
    assert (numpy.diff(top2.offsets) == numpy.minimum(numpy.diff(lists.offsets), 2)).all()
    for i in range(lists.n_sentences):
        a, b = top2.offsets[i], top2.offsets[i + 1]
        for r, j in enumerate(range(a, b)):
            assert numpy.array_equal(top2.keys_of(j), lists.keys_of(lists.offsets[i] + r))
    both = CandidateLists.concat([lists.subset(range(10)), lists.subset(range(10, lists.n_sentences))])
    for name in ("offsets", "base", "loss", "key_ptr", "keys"):
        assert numpy.array_equal(getattr(both, name), getattr(lists, name))


@pytest.mark.parametrize("distinct", [False, True])
def test_key_table_scores_equal_the_column_sums(distinct):
    """The hash-table scoring of prediction (KeyWeights) gives the sums of the feature-column
    matrices the learners train on: repeats counted (perceptron) or each key once (indicators)."""
    from spacy_structperc.reranking.learners import (_column_matrix, _indicators,
                                                     _linear_scores)
    train, test = synthetic_lists(8, noise=0.5), synthetic_lists(9, noise=0.5, k=8)
    model = PerceptronReranker(epochs=2, min_count=2).fit(train)
    model.w = numpy.random.default_rng(0).normal(size=len(model.index))
    if distinct:
        ptr, cols, _ = _indicators(model.index, test)
    else:
        ptr, cols = _column_matrix(model.index, test)
    expected = _linear_scores(model.w, ptr, cols)
    assert numpy.allclose(model._key_scores(test, distinct), expected)
