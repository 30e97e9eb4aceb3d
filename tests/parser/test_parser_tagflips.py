"""Tag variants in the reranked parser (block tag_flips > 0): each span is parsed again with one
of its least certain tokens (smallest margin in the tagger's alternatives) given its runner-up
tag, and the best tree over all variants wins, each variant's trees paying tag_weight x the
flipped token's margin."""
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_structperc.docarrays import TAG_ALTERNATIVES

from test_parser import TRAIN_DATA, train
from test_parser_graph import GRAPH_BLOCK, TAGSET, VOCAB

FLIPS = {**GRAPH_BLOCK, "tag_flips": 2, "tag_weight": 0.5}


@pytest.fixture(scope="module")
def trained():
    return train({"decoder": "beam", "beam_width": 4, "reranker": FLIPS}, 12, TRAIN_DATA[:3])[0]


def _doc(nlp, rng, alternatives=True):
    n = int(rng.integers(2, 9))
    tags = [TAGSET[i] for i in rng.integers(0, len(TAGSET), n)]
    doc = Doc(nlp.vocab, words=[VOCAB[i] for i in rng.integers(0, len(VOCAB), n)], tags=tags)
    if alternatives:
        second = [TAGSET[i] for i in rng.integers(0, len(TAGSET), n)]
        doc.user_data[TAG_ALTERNATIVES] = {
            "tags": [nlp.vocab.strings[t] for t in tags],
            "second": [0 if s == t else nlp.vocab.strings[s] for s, t in zip(second, tags)],
            "margin": rng.uniform(0, 20, n).round(2).tolist()}
    return doc


def _docs(nlp, seed=0, n=40, alternatives=True):
    rng = numpy.random.default_rng(seed)
    return [_doc(nlp, rng, alternatives) for _ in range(n)]


def _parse(nlp, doc):
    doc = nlp.get_pipe("structperc_parser")(_copy_doc(doc))
    return [(t.head.i, t.dep_) for t in doc], [t.tag_ for t in doc]


def _copy_doc(doc):
    out = Doc(doc.vocab, words=[t.text for t in doc], tags=[t.tag_ for t in doc])
    out.user_data.update(doc.user_data)
    return out


def _best_total(parser, doc):
    """The best weighted rescored total of a doc's trees and that tree, its tags as they are."""
    rr = parser._reranking
    k = rr.block["k"]
    width = max(k, parser.cfg["beam_width"])
    atoms = parser.model.atoms(doc)
    cands = parser._span_kbest(parser.system, atoms, True, k, width)
    trees, scores = rr.rescored(doc.to_array("LOWER"), doc.to_array("TAG"), atoms, True, cands, k, width)
    with numpy.errstate(invalid="ignore"):
        total = scores @ rr.rescoring_weights()
    total = numpy.where(numpy.isnan(total), -numpy.inf, total)
    return total.max()


def test_the_choice_is_the_best_variant_net_of_its_cost(trained):
    """Brute force: each variant as a Doc of its own (the flipped tag written in), parsed with
    the same block without flips; the output is the variant whose best total minus its cost is
    highest, and the doc keeps its own tags."""
    nlp = trained
    parser = nlp.get_pipe("structperc_parser")
    plain = pickle.loads(pickle.dumps(nlp))
    plain.get_pipe("structperc_parser").configure_reranker(tag_flips=0)
    plain_parser = plain.get_pipe("structperc_parser")
    flipped_won = 0
    for doc in _docs(nlp):
        entry = doc.user_data[TAG_ALTERNATIVES]
        margins = numpy.array(entry["margin"])
        order = numpy.argsort(margins, kind="stable")[:FLIPS["tag_flips"]]
        variants = [([t.tag_ for t in doc], 0.0)]
        for j in order:
            if entry["second"][j]:
                tags = [t.tag_ for t in doc]
                tags[j] = nlp.vocab.strings[entry["second"][j]]
                variants.append((tags, margins[j]))
        totals = []
        for tags, cost in variants:
            vdoc = Doc(plain.vocab, words=[t.text for t in doc], tags=tags)
            totals.append(_best_total(plain_parser, vdoc) - FLIPS["tag_weight"] * cost)
        best = int(numpy.argmax(totals))   # ties: the first, as rescored_choice
        want = _parse(plain, Doc(plain.vocab, words=[t.text for t in doc], tags=variants[best][0]))[0]
        got, tags = _parse(nlp, doc)
        assert got == want
        assert tags == [t.tag_ for t in doc]
        flipped_won += best > 0
    assert flipped_won > 0   # the variants mattered for some docs


def test_no_flips_without_the_taggers_entry_or_where_a_tag_changed(trained):
    nlp = trained
    plain = pickle.loads(pickle.dumps(nlp))
    plain.get_pipe("structperc_parser").configure_reranker(tag_flips=0)
    for with_entry, doc in zip([False] * 20 + [True] * 20, _docs(nlp, 1, 20, False) + _docs(nlp, 2, 20)):
        if with_entry:   # the tagger's tags no longer the doc's: the entry is stale everywhere
            entry = doc.user_data[TAG_ALTERNATIVES]
            entry["tags"] = [nlp.vocab.strings["XX"]] * len(doc)
        assert _parse(nlp, doc) == _parse(plain, doc)


def test_an_infinite_tag_weight_is_no_flips(trained):
    nlp = pickle.loads(pickle.dumps(trained))
    docs = _docs(nlp, 3)
    nlp.get_pipe("structperc_parser").configure_reranker(tag_weight=1e12)
    heavy = [_parse(nlp, d) for d in docs]
    nlp.get_pipe("structperc_parser").configure_reranker(tag_flips=0)
    assert heavy == [_parse(nlp, d) for d in docs]


def test_tag_flips_settings_are_saved_and_prediction_is_thread_safe(trained, tmp_path):
    docs = _docs(trained, 4)
    one = [_parse(trained, d) for d in docs]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda d: _parse(trained, d), docs * 3)) == one * 3
    trained.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    assert loaded.get_pipe("structperc_parser").reranker["tag_flips"] == FLIPS["tag_flips"]
    again = []
    for d in docs:
        doc = Doc(loaded.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d])
        doc.user_data.update(d.user_data)
        again.append(_parse(loaded, doc))
    assert again == one


def test_a_tagger_with_alternatives_feeds_the_parser_on_raw_text(trained):
    """The whole path: structperc_tagger with alternatives, then the parser with tag_flips."""
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("structperc_tagger", config={"alternatives": True})
    from spacy.training import Example
    egs = [Example.from_dict(nlp.make_doc(" ".join(w)), {"words": w, "tags": t})
           for w, t, _, _ in TRAIN_DATA[:3]]
    nlp.initialize(lambda: egs)
    for _ in range(5):
        nlp.update(egs)
    nlp.add_pipe("structperc_parser", source=trained)
    doc = nlp("I like green ham . they eat eggs")
    assert TAG_ALTERNATIVES in doc.user_data
    assert all(t.head.i >= 0 for t in doc) and len(list(doc.sents)) >= 1
    assert tagger.cfg["alternatives"]


@pytest.mark.parametrize("block", [
    {"learner": "perceptron", "tag_flips": 2}, {"learner": "none", "graph": 1.0, "tag_flips": -1},
    {"learner": "none", "graph": 1.0, "tag_flips": 1.5}, {"learner": "none", "graph": 1.0, "tag_weight": -1.0}])
def test_bad_tag_flips_blocks_are_coded_errors(block):
    with pytest.raises(ValueError, match="S244"):
        spacy.blank("en").add_pipe("structperc_parser", config={"decoder": "beam", "reranker": block})


def test_a_block_saved_before_tag_flips_existed_loads_with_the_defaults(trained):
    """A pipeline saved with a block that lacks tag_flips and tag_weight (an older version)
    loads with their defaults and parses as before: no tag variants."""
    from spacy_structperc.pipeline.base import dump_cfg, load_cfg
    import srsly

    parser = trained.get_pipe("structperc_parser")
    msg = srsly.msgpack_loads(parser.to_bytes())
    cfg = load_cfg(msg["cfg"], parser.name)
    for setting in ("tag_flips", "tag_weight"):
        del cfg["reranker"][setting]
    msg["cfg"] = dump_cfg(cfg).encode("utf8")
    old = pickle.loads(pickle.dumps(trained))
    old.get_pipe("structperc_parser").from_bytes(srsly.msgpack_dumps(msg))
    block = old.get_pipe("structperc_parser").reranker
    assert block["tag_flips"] == 0 and block["tag_weight"] == 8.0
    plain = pickle.loads(pickle.dumps(trained))
    plain.get_pipe("structperc_parser").configure_reranker(tag_flips=0)
    docs = _docs(trained, 5, 15)
    assert [_parse(old, d) for d in docs] == [_parse(plain, d) for d in docs]
