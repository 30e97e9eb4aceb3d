"""configure_reranker: a trained parser's reranker under other prediction settings (k, union,
the reversed and graph models' weights), with what was trained kept, and coded errors for what
cannot change after training."""
import pickle

import pytest
import spacy
import srsly
from spacy.tokens import Doc

from spacy_structperc.pipeline.base import dump_cfg, load_cfg

from test_parser import TRAIN_DATA, train
from test_parser_graph import GRAPH_BLOCK, _parse, _random_docs

# Differs from GRAPH_BLOCK (k 4, reverse 0.3, union, graph 0.5) in every prediction setting;
# k = 6 is wider than the beam (4), so the beam is widened.
OTHER = {"k": 6, "union": False, "reverse": 1.5, "graph": 0.0}


@pytest.fixture(scope="module")
def trained():
    return train({"decoder": "beam", "beam_width": 4, "reranker": GRAPH_BLOCK}, 12, TRAIN_DATA[:3])[0]


def _copy(nlp):
    return pickle.loads(pickle.dumps(nlp))


def _docs(nlp):
    return list(_random_docs(nlp, 21, 60))


def _parses(nlp, docs):
    return [_parse(nlp, Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d])) for d in docs]


def _with_saved_block(nlp, settings):
    """A copy of the parser loaded from bytes whose saved cfg has the block with `settings`: the
    construction path, independent of configure_reranker."""
    parser = nlp.get_pipe("structperc_parser")
    msg = srsly.msgpack_loads(parser.to_bytes())
    cfg = load_cfg(msg["cfg"], parser.name)
    cfg["reranker"] = {**cfg["reranker"], **settings}
    msg["cfg"] = dump_cfg(cfg).encode("utf8")
    other = _copy(nlp)
    other.get_pipe("structperc_parser").from_bytes(srsly.msgpack_dumps(msg))
    return other


def test_configured_output_is_that_of_a_parser_saved_with_the_new_block(trained):
    docs = _docs(trained)
    nlp = _with_saved_block(trained, {})   # the saved weights, as on the other side (pickle keeps float32)
    before = _parses(nlp, docs)
    nlp.get_pipe("structperc_parser").configure_reranker(**OTHER)
    after = _parses(nlp, docs)
    assert after != before   # the settings matter for these docs
    assert after == _parses(_with_saved_block(trained, OTHER), docs)
    assert {k: nlp.get_pipe("structperc_parser").reranker[k] for k in OTHER} == OTHER


@pytest.mark.parametrize("setting", sorted(OTHER))
def test_each_setting_is_taken(trained, setting):
    docs = _docs(trained)
    nlp = _with_saved_block(trained, {})   # the saved weights, as on the other side (pickle keeps float32)
    nlp.get_pipe("structperc_parser").configure_reranker(**{setting: OTHER[setting]})
    assert _parses(nlp, docs) == _parses(_with_saved_block(trained, {setting: OTHER[setting]}), docs)


def test_a_weight_set_to_zero_keeps_its_model_saved_and_can_be_restored(trained, tmp_path):
    docs = _docs(trained)
    before = _parses(trained, docs)
    nlp = _copy(trained)
    parser = nlp.get_pipe("structperc_parser")
    parser.configure_reranker(graph=0.0)
    assert _parses(nlp, docs) != before
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    again = loaded.get_pipe("structperc_parser")
    assert again.reranker["graph"] == 0.0 and again._reranking.graph_model is not None
    again.configure_reranker(graph=GRAPH_BLOCK["graph"])
    assert _parses(loaded, docs) == before


def test_the_configured_block_is_saved_and_pickled(trained, tmp_path):
    docs = _docs(trained)
    nlp = _copy(trained)
    nlp.get_pipe("structperc_parser").configure_reranker(k=5, reverse=0.1)
    want = _parses(nlp, docs)
    assert _parses(_copy(nlp), docs) == want   # pickled
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    assert loaded.get_pipe("structperc_parser").reranker["k"] == 5
    assert _parses(loaded, docs) == want


@pytest.mark.parametrize("settings,code", [
    ({"learner": "perceptron"}, "S252"), ({"folds": 3}, "S252"), ({"graph_epochs": 2}, "S252"),
    ({"features": ["arcs"]}, "S252"), ({"beam_width": 8}, "S252"),
    ({"k": 1}, "S244"), ({"reverse": 0.0, "union": True}, "S244"), ({"graph": -1.0}, "S244"),
    ({"reverse": 0.0, "graph": 0.0, "union": False}, "S244")])
def test_what_cannot_change_is_a_coded_error_and_nothing_changes(trained, settings, code):
    docs = _docs(trained)
    nlp = _copy(trained)
    parser = nlp.get_pipe("structperc_parser")
    block = dict(parser.reranker)
    before = _parses(nlp, docs)
    with pytest.raises(ValueError, match=code):
        parser.configure_reranker(**settings)
    assert parser.reranker == block
    assert _parses(nlp, docs) == before


def test_a_model_never_trained_cannot_be_weighted_in():
    nlp, parser = train({"decoder": "beam", "beam_width": 4,
                         "reranker": {"learner": "none", "k": 4, "graph": 1.0}}, 4, TRAIN_DATA[:3])
    with pytest.raises(ValueError, match="S253"):
        parser.configure_reranker(reverse=0.3)
    assert parser.reranker["reverse"] == 0.0 and parser._reranking.reverse_model is None
    parser.configure_reranker(k=5, graph=2.0)   # the graph model was trained
    assert len(_parse(nlp, Doc(nlp.vocab, words=["I", "like", "ham"], tags=["PRP", "VBP", "NN"]))) == 3


def test_a_parser_without_a_reranker_block_has_nothing_to_configure():
    nlp, parser = train({"decoder": "beam", "beam_width": 4}, 2, TRAIN_DATA[:2])
    with pytest.raises(ValueError, match="S251"):
        parser.configure_reranker(k=8)
