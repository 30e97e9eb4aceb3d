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
    """A list of one candidate (no pair to learn from) is picked as it is, and does not keep the
    learners from the other lists: there the oracle (row 2, loss 0) is second in base order, so
    only a trained reranker picks it. choose() gives flat row numbers (list 2 is rows 1-2)."""
    lists = CandidateLists.build([[{"keys": [1, 2], "base": 3.0, "loss": 1.0}],
                                  [{"keys": [2], "base": 1.0, "loss": 1.0},
                                   {"keys": [1], "base": 0.5, "loss": 0.0}]])
    assert lists.oracle().tolist() == [0, 2]
    assert choose(lists, lists.base).tolist() == [0, 1]          # the base order alone
    for model in (PerceptronReranker(epochs=2).fit(lists), BoostingReranker(rounds=5, min_count=1).fit(lists)):
        assert model.choose(lists).tolist() == [0, 2], type(model).__name__


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


def _shifted_and_scaled(lists, seed):
    """The same lists with every list's base scores moved by its own constant and multiplied by
    its own positive factor (what another base model's score scale does to a list)."""
    rng = numpy.random.default_rng(seed)
    base = lists.base.copy()
    for i in range(lists.n_sentences):
        a, b = lists.offsets[i], lists.offsets[i + 1]
        base[a:b] = base[a:b] * rng.uniform(0.2, 20.0) + rng.normal(scale=100.0)
    return CandidateLists(lists.offsets, base, lists.loss, lists.key_ptr, lists.keys)


def test_list_normalized_base_ignores_each_lists_offset_and_scale():
    lists = synthetic_lists(10, noise=0.5)
    moved = _shifted_and_scaled(lists, 1)
    norm = lists.list_relative_base()
    assert numpy.allclose(norm, moved.list_relative_base())
    # ...which the global normalization does not: it is the point of the list one.
    assert not numpy.allclose(lists.relative_base(), moved.relative_base())
    # Per list: the best candidate is 0, the others are negative with mean -1.
    for i in range(lists.n_sentences):
        a, b = lists.offsets[i], lists.offsets[i + 1]
        x = norm[a:b]
        assert x.max() == 0.0
        if (x < 0).any():
            assert x[x < 0].mean() == pytest.approx(-1.0)
    # A list whose candidates all score alike gives 0 (no division by zero).
    flat = CandidateLists.build([[{"keys": [1], "base": 2.0, "loss": 0.0},
                                  {"keys": [2], "base": 2.0, "loss": 1.0}]])
    assert numpy.array_equal(flat.list_relative_base(), [0.0, 0.0])


@pytest.mark.parametrize("learner,settings", [
    ("perceptron", {"epochs": 3, "base_weights": [4.0]}), ("boosting", {"rounds": 20, "min_count": 1}),
    ("dual", {"kernel": "poly"})])
def test_list_normalized_rerankers_choose_alike_whatever_each_lists_base_scale(learner, settings):
    train, test = synthetic_lists(11, noise=0.5), synthetic_lists(12, noise=0.5)
    model = make_reranker(learner, base_norm="list", **settings).fit(train)
    again = make_reranker(learner, base_norm="list", **settings).fit(_shifted_and_scaled(train, 2))
    moved = _shifted_and_scaled(test, 3)
    assert numpy.array_equal(model.choose(test), model.choose(moved))
    assert numpy.array_equal(model.choose(test), again.choose(moved))
    data = srsly.msgpack_loads(srsly.msgpack_dumps(model.to_dict()))
    assert numpy.array_equal(model.scores(test), reranker_from_dict(data).scores(test))


def test_unknown_base_norm_is_a_coded_error():
    with pytest.raises(ValueError, match="S247"):
        make_reranker("perceptron", base_norm="zscore")
    with pytest.raises(ValueError, match="S247"):
        make_reranker("dual", kernel="poly", base_norm="")


def test_holdout_picks_the_base_weight_and_epoch_best_on_the_held_out_lists():
    """Without dev lists, every 4th list is held out: the chosen (weight, epochs) is the best of
    the grid on those lists, found again here by fitting each pair separately, and the final model
    is the perceptron trained on all lists with that pair."""
    lists = synthetic_lists(13, m=120, noise=2.0)
    grid, epochs = [None, 0.25, 1.0, 4.0, 16.0], 4
    model = PerceptronReranker(epochs=epochs, min_count=1, base_weights=grid, holdout=4).fit(lists)
    held = lists.subset([i for i in range(lists.n_sentences) if i % 4 == 3])
    rest = lists.subset([i for i in range(lists.n_sentences) if i % 4 != 3])
    losses = {}
    for w in grid:
        for e in range(1, epochs + 1):
            m = PerceptronReranker(epochs=e, min_count=1, base_weights=[w]).fit(rest)
            losses[(w, e)] = float(held.loss[m.choose(held)].sum())
    assert len(set(losses.values())) > 1      # the grid matters on this problem
    for w in grid:
        assert model.selection["losses"][str(w)] == min(losses[(w, e)] for e in range(1, epochs + 1))
    best = min(losses.values())
    chosen = (model.chosen_base_weight, model.chosen_epoch)
    assert losses[chosen] == best
    assert model.selection["base_weight"] == chosen[0]
    final = PerceptronReranker(epochs=chosen[1], min_count=1, base_weights=[chosen[0]]).fit(lists)
    assert numpy.array_equal(model.scores(lists), final.scores(lists))
    if chosen[0] is not None:
        assert model.w0 == chosen[0]


def test_holdout_is_skipped_with_dev_lists_or_one_weight():
    lists, dev = synthetic_lists(14, m=80, noise=1.0), synthetic_lists(15, m=40, noise=1.0)
    with_dev = PerceptronReranker(epochs=2, min_count=1, base_weights=[1.0, 8.0], holdout=4).fit(lists, dev)
    assert with_dev.selection == {"on": "dev"}
    assert set(with_dev.dev_losses) == {"1.0", "8.0"}
    one = PerceptronReranker(epochs=2, min_count=1, base_weights=[8.0], holdout=4).fit(lists)
    assert one.selection == {} and one.w0 == 8.0
