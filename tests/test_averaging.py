"""Averaging copies of a pipeline trained with different seeds (spacy_structperc/averaging.py and
`python -m spacy_structperc average`): the averaged weights are the mean of the copies' averaged
weights over the union of their keys, the result saves and reloads to the same output, and
pipelines that are not copies of one config are refused with coded errors."""
import random

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc.__main__ import main
from spacy_structperc._core.weights import AveragedWeights
from spacy_structperc.averaging import average_pipelines, weighted_pipes

TRAIN = [
    (["I", "like", "green", "eggs"], ["PRP", "VBP", "JJ", "NNS"], [1, 1, 3, 1], ["nsubj", "ROOT", "amod", "obj"]),
    (["Eat", "blue", "ham", "."], ["VB", "JJ", "NN", "."], [0, 2, 0, 0], ["ROOT", "amod", "obj", "punct"]),
    (["They", "eat", "ham", "with", "eggs"], ["PRP", "VBP", "NN", "IN", "NNS"], [1, 1, 1, 4, 1],
     ["nsubj", "ROOT", "obj", "case", "obl"]),
    (["We", "saw", "a", "brown", "dog"], ["PRP", "VBD", "DT", "JJ", "NN"], [1, 1, 4, 4, 1],
     ["nsubj", "ROOT", "det", "amod", "obj"]),
]
TEST = [["They", "like", "blue", "eggs"], ["Eat", "green", "ham", "."], ["We", "eat", "a", "dog"]]


def train_copy(seed, epochs=6, parser_config=None):
    """A tagger + parser pipeline trained on TRAIN, the examples shuffled by `seed` each pass."""
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger",
                 config={"model": {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
                                   "features": {"@misc": "spacy-structperc.tagger_features.v1",
                                                "clusters": False, "lexicon": False}}})
    nlp.add_pipe("structperc_parser", name="parser",
                 config={"min_label_freq": 1, "min_feature_freq": 1, **(parser_config or {})})
    egs = [Example(Doc(nlp.vocab, words=w, tags=t),
                   Doc(nlp.vocab, words=w, tags=t, heads=h, deps=d)) for w, t, h, d in TRAIN]
    nlp.initialize(lambda: egs)
    rng = random.Random(seed)
    for _ in range(epochs):
        order = list(egs)
        rng.shuffle(order)
        for name in ("tagger", "parser"):
            nlp.get_pipe(name).update(order)
    return nlp


def dense(table):
    """key -> averaged weights, brute force over the table's rows."""
    keys, rows = table.sorted_rows(averaged=True, prune=False)
    W = table.gather(rows, averaged=True)
    return {int(k): W[i].astype(numpy.float64) for i, k in enumerate(keys)}


def outputs(nlp):
    docs = [nlp(Doc(nlp.vocab, words=words)) for words in TEST]
    return [[(t.tag_, t.head.i, t.dep_) for t in doc] for doc in docs]


def test_averaged_weights_are_the_mean_of_the_copies_over_the_union_of_keys():
    copies = [train_copy(seed) for seed in (0, 1, 2)]
    assert weighted_pipes(copies[0]) == ["tagger", "parser"]
    expected = {}
    for name in ("tagger", "parser"):
        tables = [dense(nlp.get_pipe(name).model.weights) for nlp in copies]
        assert tables[0].keys() != tables[1].keys() or any(
            not numpy.array_equal(tables[0][k], tables[1][k]) for k in tables[0])   # the copies differ
        union = set().union(*tables)
        n_classes = len(next(iter(tables[0].values())))
        expected[name] = {k: sum(t.get(k, numpy.zeros(n_classes)) for t in tables) / 3 for k in union}
    nlp = average_pipelines(copies)
    for name in ("tagger", "parser"):
        got = dense(nlp.get_pipe(name).model.weights)
        nonzero = {k for k, v in expected[name].items() if v.any()}
        assert nonzero <= set(got)
        for k in set(got) | nonzero:
            want = expected[name].get(k, 0.0)
            numpy.testing.assert_allclose(got[k], want, atol=1e-4, err_msg=f"{name} key {k}")


def test_a_pipeline_averaged_with_itself_predicts_as_before(tmp_path):
    nlp = train_copy(0)
    nlp.to_disk(tmp_path / "a")
    before = outputs(spacy.load(tmp_path / "a"))
    averaged = average_pipelines([spacy.load(tmp_path / "a"), spacy.load(tmp_path / "a")])
    assert outputs(averaged) == before


def test_the_command_saves_an_average_that_reloads_to_the_same_output(tmp_path):
    for seed in (0, 1):
        train_copy(seed, parser_config={"model": {"@architectures": "spacy-structperc.ParserPerceptron.v1",
                                                  "features": {"@misc": "spacy-structperc.parser_features.v1"},
                                                  "prune_below": 0.0}}).to_disk(tmp_path / f"seed{seed}")
    in_memory = average_pipelines([spacy.load(tmp_path / "seed0"), spacy.load(tmp_path / "seed1")])
    assert main(["average", str(tmp_path / "avg"), str(tmp_path / "seed0"), str(tmp_path / "seed1")]) == 0
    loaded = spacy.load(tmp_path / "avg")
    assert outputs(loaded) == outputs(in_memory)
    # --prune-below: the saved parser keeps only rows with a weight beyond the threshold, and says so.
    assert main(["average", str(tmp_path / "pruned"), str(tmp_path / "seed0"), str(tmp_path / "seed1"),
                 "--components", "parser", "--prune-below", "parser=0.5"]) == 0
    pruned = spacy.load(tmp_path / "pruned")
    assert pruned.config["components"]["parser"]["model"]["prune_below"] == 0.5
    kept = dense(pruned.get_pipe("parser").model.weights)
    full = dense(loaded.get_pipe("parser").model.weights)
    assert 0 < len(kept) < len(full)
    assert all(numpy.abs(v).max() > 0.5 - 1e-3 for v in kept.values())
    # The tagger was not averaged: it is seed 0's.
    assert dense(pruned.get_pipe("tagger").model.weights).keys() == \
        dense(spacy.load(tmp_path / "seed0").get_pipe("tagger").model.weights).keys()


def test_pipelines_that_are_not_copies_of_one_config_are_refused():
    a = train_copy(0)
    with pytest.raises(ValueError, match="S420"):
        average_pipelines([a])
    other_labels = train_copy(1)
    other_labels.get_pipe("parser").add_label("xcomp")
    with pytest.raises(ValueError, match="S422"):
        average_pipelines([a, other_labels])
    with pytest.raises(ValueError, match="S423"):
        average_pipelines([a, train_copy(1, parser_config={"margin": 10.0})])
    fewer = train_copy(1)
    fewer.remove_pipe("tagger")
    with pytest.raises(ValueError, match="S421"):
        average_pipelines([a, fewer])
    with pytest.raises(ValueError, match="S424"):
        average_pipelines([a, train_copy(1)], components=["ner"])
    with pytest.raises(ValueError, match="S425"):
        average_pipelines([a, train_copy(1)], prune_below={"parser": -1.0})


class _SeveralTables:
    """A model of several tables that shows one as a read-only `weights`, as the clause
    identifier's does."""

    def __init__(self):
        self.tables = {"start": AveragedWeights(1, 16), "end": AveragedWeights(1, 16)}

    @property
    def weights(self):
        return self.tables["start"]


class _SeveralTablesPipe:
    def __init__(self):
        self.model = _SeveralTables()

    def __call__(self, doc):
        return doc


@Language.factory("test_averaging_several_tables")
def _make_several_tables(nlp, name):
    return _SeveralTablesPipe()


def test_components_without_one_table_of_their_own_are_left_alone():
    copies = [train_copy(seed) for seed in (0, 1)]
    for nlp in copies:
        nlp.add_pipe("test_averaging_several_tables", name="clauses")
    assert weighted_pipes(copies[0]) == ["tagger", "parser"]
    start = copies[0].get_pipe("clauses").model.tables["start"]
    nlp = average_pipelines(copies)
    assert nlp.get_pipe("clauses").model.tables["start"] is start
    with pytest.raises(ValueError, match="S424"):
        average_pipelines(copies, components=["clauses"])
