"""structperc_parser with a reranker block: jackknifed training lists, transparent reranking,
serialization with the reranker, bad blocks."""
import pickle
import zlib

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from test_parser import TEST_WORDS, TRAIN_DATA, examples, parse_of, tagged

BLOCK = {"learner": "perceptron", "k": 4, "folds": 2, "settings": {"epochs": 3}}


def make(block=BLOCK, decoder="beam"):
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("structperc_parser", config={
        "min_label_freq": 1, "min_feature_freq": 1, "decoder": decoder, "beam_width": 4,
        "reranker": block})
    return nlp, parser


def trained(block=BLOCK, epochs=6):
    nlp, parser = make(block)
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    for _ in range(epochs):
        parser.update(egs)
    return nlp, parser, egs


def test_jackknifing_never_shows_a_fold_model_its_own_fold():
    nlp, parser, egs = trained(epochs=2)
    folds = parser.reranker["folds"]
    keys = {zlib.crc32(eg.predicted.text.encode("utf8")) * 1000003 + len(eg.predicted): parser._reranking.fold_of(eg.predicted)
            for eg in egs}
    assert len(set(keys.values())) == folds, "the test data should fill every fold"
    for f in range(folds):
        seen = parser._reranking.fold_seen[f]
        assert all(keys[k] != f for k in seen)
        assert {k for k, g in keys.items() if g != f} == seen


def test_reranked_prediction_is_a_kbest_candidate_and_survives_save_and_reload(tmp_path):
    nlp, parser, _ = trained()
    docs = [nlp(tagged(nlp, words)) for words in TEST_WORDS]
    parser._reranking.fit_if_stale()
    assert parser._reranking.model is not None
    for doc in docs:
        # Compare the parser's own (projective) choice: writing it back may lift arcs of
        # pseudo-projective labels, which no candidate shows.
        fresh = tagged(nlp, [t.text for t in doc])
        (heads, _), = parser.predict([fresh])
        (_, _, lst), = parser.kbest(fresh, parser.reranker["k"])
        got = numpy.where(heads == numpy.arange(len(heads)), -1, heads)
        assert any(numpy.array_equal(got, h) for _, h, _ in lst)
    before = [parse_of(d) for d in docs]
    nlp2, parser2 = make()
    parser2.from_bytes(parser.to_bytes())
    assert parser2._reranking.model is not None
    assert [parse_of(nlp2(tagged(nlp2, w))) for w in TEST_WORDS] == before
    nlp.to_disk(tmp_path / "m")
    nlp3 = spacy.load(tmp_path / "m")
    assert [parse_of(nlp3(tagged(nlp3, w))) for w in TEST_WORDS] == before
    nlp4 = pickle.loads(pickle.dumps(nlp))
    assert [parse_of(nlp4(tagged(nlp4, w))) for w in TEST_WORDS] == before


def test_reranker_follows_the_dual_tree_kernel_too():
    nlp, parser, _ = trained({"learner": "dual", "kernel": "tree", "k": 4, "folds": 2}, epochs=3)
    doc = nlp(tagged(nlp, TEST_WORDS[0]))
    assert parser._reranking.model.kernel_name == "tree"
    nlp2, parser2 = make({"learner": "dual", "kernel": "tree", "k": 4, "folds": 2})
    parser2.from_bytes(parser.to_bytes())
    assert parse_of(nlp2(tagged(nlp2, TEST_WORDS[0]))) == parse_of(doc)


def test_empty_doc_and_one_word_doc_with_a_reranker():
    nlp, parser, _ = trained(epochs=2)
    assert len(nlp(Doc(nlp.vocab, words=[]))) == 0
    doc = nlp(tagged(nlp, ["Hello"]))
    assert doc[0].head.i == 0


@pytest.mark.parametrize("block,decoder,code", [
    ({"learner": "maxent"}, "beam", "S240"), ({"learner": "dual", "kernel": "rbf"}, "beam", "S242"),
    ({"k": 1}, "beam", "S244"), ({"folds": 1}, "beam", "S244"), ({"features": ["words"]}, "beam", "S244"),
    ({"learnr": "perceptron"}, "beam", "S244"), ({}, "greedy", "S245")])
def test_bad_reranker_blocks_are_coded_errors(block, decoder, code):
    with pytest.raises(ValueError, match=code):
        make(block, decoder)


def test_a_reranker_saved_with_other_features_is_refused():
    """A saved reranker records the feature definition it learned from (FEATURES_VERSION); one
    from another definition (the Python extractor's keys were version 1) is a coded error, not
    a reranker silently reading keys that mean other features."""
    import srsly

    from spacy_structperc.reranking.pipes import DIGEST_SIZE, MAGIC

    nlp, parser, _ = trained(epochs=2)
    data = srsly.msgpack_loads(parser.to_bytes())
    assert data["reranker"].startswith(MAGIC)
    model = srsly.msgpack_loads(data["reranker"][len(MAGIC) + DIGEST_SIZE:])
    assert model["features_version"] == 2
    model["features_version"] = 1
    data["reranker"] = srsly.msgpack_dumps(model)   # the first, unchecksummed form
    _, parser2 = make()
    with pytest.raises(ValueError, match="S246"):
        parser2.from_bytes(srsly.msgpack_dumps(data))


def test_k_larger_than_the_beam_widens_it_and_one_candidate_lists_rerank():
    """k above beam_width: the k-best search widens the beam to k (lists of up to k); a
    one-word sentence has a single candidate, which the reranker returns."""
    nlp, parser, _ = trained({**BLOCK, "k": 6}, epochs=2)
    assert parser.cfg["beam_width"] == 4
    (_, _, lst), = parser.kbest(tagged(nlp, TEST_WORDS[0]), 6)
    assert 4 < len(lst) <= 6
    (_, _, one), = parser.kbest(tagged(nlp, ["Hello"]), 6)
    assert len(one) == 1
    assert nlp(tagged(nlp, ["Hello"]))[0].head.i == 0


def test_reranker_in_a_pipeline_chooses_its_base_weight_on_held_out_training_lists():
    """With no dev lists inside training, the default perceptron picks the base score's weight
    on every 4th jackknifed list (pipes.LEARNER_DEFAULTS); a block's settings override it."""
    from spacy_structperc.reranking.pipes import BASE_WEIGHT_GRID, block_settings

    # Three copies of the training sentences, told apart by their last word: 12 lists.
    data = [(words[:-1] + [words[-1] + "x" * j], tags, heads, deps)
            for j in range(3) for words, tags, heads, deps in TRAIN_DATA]
    nlp, parser = make()
    egs = examples(nlp, data)
    nlp.initialize(lambda: egs)
    for _ in range(2):
        parser.update(egs)
    parser._reranking.fit_if_stale()
    model = parser._reranking.model
    assert sum(s.n_sentences for s in parser._reranking.store.values()) >= 8
    assert model.selection["on"] == "every 4th training list"
    assert set(model.selection["losses"]) == {str(w) for w in BASE_WEIGHT_GRID}
    assert model.chosen_base_weight == model.selection["base_weight"]
    assert model.base_norm == "list" and model.epochs == 3      # the block's epochs win
    assert block_settings({"learner": "perceptron", "kernel": "poly",
                           "settings": {"holdout": 0, "base_norm": "global"}})["holdout"] == 0
    assert "holdout" not in block_settings({"learner": "boosting", "kernel": "poly", "settings": {}})
    nlp2, parser2 = make()
    parser2.from_bytes(parser.to_bytes())
    assert parser2._reranking.model.base_norm == "list"
    assert parser2._reranking.model.w0 == model.w0
