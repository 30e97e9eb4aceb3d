"""A reranker block with a second-order graph model (graph > 0, learner "none"): trained beside
the parser on each sentence's first graph_epochs visits, rescoring the k-best with the forward
(and reversed) scores, saved with the pipeline."""
import numpy
import pytest
from spacy.tokens import Doc

from spacy_structperc.reranking.graph import GraphScorer
from spacy_structperc.reranking.reverse import path_scores

from test_parser import TRAIN_DATA, examples, train

GRAPH_BLOCK = {"learner": "none", "k": 4, "reverse": 0.3, "union": True, "graph": 0.5}
VOCAB = ["I", "like", "eggs", "ham", "they", "eat", "with", "green", ".", "blue"]
TAGSET = ["PRP", "VBP", "NNS", "NN", "IN", "JJ", "."]


def _pipeline(block=GRAPH_BLOCK, epochs=12, data=TRAIN_DATA[:3]):
    return train({"decoder": "beam", "beam_width": 4, "reranker": block}, epochs, data)


@pytest.fixture(scope="module")
def with_graph():
    return _pipeline()


def _random_docs(nlp, seed, n_docs=15):
    rng = numpy.random.default_rng(seed)
    for _ in range(n_docs):
        n = int(rng.integers(2, 9))
        yield Doc(nlp.vocab, words=[VOCAB[i] for i in rng.integers(0, len(VOCAB), n)],
                  tags=[TAGSET[i] for i in rng.integers(0, len(TAGSET), n)])


def _parse(nlp, doc):
    return [(t.head.i, t.dep_) for t in nlp(doc)]


def test_the_graph_model_learns_the_training_trees_in_graph_epochs_visits(with_graph):
    nlp, parser = with_graph
    rr = parser._reranking
    assert sorted(rr.graph_seen.values()) == [5, 5, 5]   # the default graph_epochs, not 12
    for words, tags, heads, deps in TRAIN_DATA[:3]:
        doc = Doc(nlp.vocab, words=words, tags=tags)
        gold = numpy.array([-1 if heads[i] == i else heads[i] for i in range(len(words))])
        got, _ = rr.graph_model.decode(doc.to_array("LOWER"), doc.to_array("TAG"), numpy.array([0, len(doc)]))
        assert got.tolist() == gold.tolist()
        assert _parse(nlp, doc) == list(zip(heads, deps))


def test_visits_past_graph_epochs_leave_the_graph_weights_alone():
    nlp, parser = _pipeline({**GRAPH_BLOCK, "graph_epochs": 2}, epochs=2)
    rr = parser._reranking
    egs = examples(nlp, TRAIN_DATA[:3])
    words, tags, _, _ = TRAIN_DATA[0]
    doc = Doc(nlp.vocab, words=words, tags=tags)
    trees = [numpy.array([1, -1, 1, 2]), numpy.array([-1, 0, 1, 1]), numpy.array([2, 2, -1, 2])]
    before = rr.graph_model.score_span(doc.to_array("LOWER"), doc.to_array("TAG"), trees)
    parser.update(egs)
    after = rr.graph_model.score_span(doc.to_array("LOWER"), doc.to_array("TAG"), trees)
    assert numpy.array_equal(before, after)
    assert sorted(rr.graph_seen.values()) == [2, 2, 2]


def test_the_choice_is_the_best_weighted_sum_of_the_three_models_scores(with_graph):
    """Each column recomputed on its own: the forward beam's score (or the canonical path's for a
    tree only the reversed model found), the reversed model's, the graph model's."""
    nlp, parser = with_graph
    rr = parser._reranking
    n_graph_mattered = 0
    for doc in _random_docs(nlp, 3):
        atoms = parser.model.atoms(doc)
        words, tags = doc.to_array("LOWER"), doc.to_array("TAG")
        cands = parser._span_kbest(parser.system, atoms, True, 4, 4)
        trees, scores = rr.rescored(words, tags, atoms, True, cands, 4, 4)
        assert [t for t in trees[:len(cands)]] and all(
            numpy.array_equal(h, c[1]) for (h, _), c in zip(trees, cands))
        assert numpy.allclose(scores[:len(cands), 0], [c[0] for c in cands])
        added = trees[len(cands):]
        assert numpy.allclose(scores[len(cands):, 0], path_scores(parser.system, atoms, added, True))
        explicit = GraphScorer.score(rr.graph_model, words, tags, numpy.array([0, len(doc)]),
                                     numpy.zeros((len(trees),), dtype=numpy.int64),
                                     numpy.concatenate([h for h, _ in trees]).astype(numpy.int32))
        assert numpy.allclose(scores[:, 2], explicit)
        total = scores[:, 0] + 0.3 * scores[:, 1] + 0.5 * scores[:, 2]
        got = rr.choose(trees, scores)
        best = int(numpy.argmax(total))
        assert numpy.array_equal(got[0], trees[best][0]) and numpy.array_equal(got[1], trees[best][1])
        assert [(t.head.i, t.dep) for t in nlp(doc)] is not None
        without = int(numpy.argmax(scores[:, 0] + 0.3 * scores[:, 1]))
        n_graph_mattered += without != best
    assert n_graph_mattered > 0, "the graph score should change some choices"


def test_a_graph_model_alone_rescores_the_forward_list():
    nlp, parser = _pipeline({"learner": "none", "k": 4, "graph": 1.0}, epochs=6)
    rr = parser._reranking
    assert rr.reverse_model is None and rr.graph_model is not None
    for doc in _random_docs(nlp, 5, 5):
        atoms = parser.model.atoms(doc)
        cands = parser._span_kbest(parser.system, atoms, True, 4, 4)
        trees, scores = rr.rescored(doc.to_array("LOWER"), doc.to_array("TAG"), atoms, True, cands, 4, 4)
        assert len(trees) == len(cands) and not scores[:, 1].any()
        assert len(_parse(nlp, doc)) == len(doc)


def test_the_graph_model_survives_save_load_and_pickle(with_graph, tmp_path):
    import pickle

    import spacy

    nlp, parser = with_graph
    docs = list(_random_docs(nlp, 7, 10))
    before = [_parse(nlp, d) for d in docs]
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    assert loaded.get_pipe("structperc_parser")._reranking.graph_model is not None
    assert [_parse(loaded, Doc(loaded.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]))
            for d in docs] == before
    assert [_parse(pickle.loads(pickle.dumps(nlp)), d) for d in docs] == before
    assert loaded.get_pipe("structperc_parser").to_bytes() == loaded.get_pipe("structperc_parser").to_bytes()


def test_the_graph_model_is_saved_with_the_parsers_size_settings(tmp_path):
    """prune_below (and precision) of the parser's model apply to the graph model's rows too."""
    import spacy

    sizes, scores = {}, {}
    for prune in (0.0, 1e9):
        nlp, parser = _pipeline(epochs=3)
        parser.model.prune_below = prune
        nlp.to_disk(tmp_path / str(prune))
        sizes[prune] = (tmp_path / str(prune) / "structperc_parser" / "reranker").stat().st_size
        loaded = spacy.load(tmp_path / str(prune)).get_pipe("structperc_parser")._reranking.graph_model
        doc = Doc(nlp.vocab, words=TRAIN_DATA[0][0], tags=TRAIN_DATA[0][1])
        scores[prune] = loaded.score_span(doc.to_array("LOWER"), doc.to_array("TAG"), [numpy.array([1, -1, 1, 2])])
    assert scores[0.0].any() and not scores[1e9].any()
    assert sizes[1e9] < sizes[0.0]


def test_a_damaged_graph_model_is_refused_and_the_component_kept(with_graph):
    import hashlib

    import srsly

    from spacy_structperc.reranking.pipes import DIGEST_SIZE, STATE_MAGIC

    nlp, parser = with_graph
    data = srsly.msgpack_loads(parser.to_bytes())
    state = srsly.msgpack_loads(data["reranker"][len(STATE_MAGIC) + DIGEST_SIZE:])
    graph = bytearray(state["graph"])
    graph[-60] ^= 0xFF   # inside the weights; the state's own checksum made valid again below
    state["graph"] = bytes(graph)
    payload = srsly.msgpack_dumps(state)
    data["reranker"] = STATE_MAGIC + hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload
    nlp2, parser2 = _pipeline(epochs=1)
    before = parser2.to_bytes()
    with pytest.raises(ValueError, match=r"\[S1?2?[0-9]+\].*graph model"):
        parser2.from_bytes(srsly.msgpack_dumps(data))
    assert parser2.to_bytes() == before
    state["graph"] = b"not msgpack"
    payload = srsly.msgpack_dumps(state)
    data["reranker"] = STATE_MAGIC + hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload
    with pytest.raises(ValueError, match=r"\[S006\].*graph model is damaged"):
        parser2.from_bytes(srsly.msgpack_dumps(data))
    assert parser2.to_bytes() == before


def test_partial_gold_trees_are_left_out_of_the_graph_training():
    words, tags, heads, deps = TRAIN_DATA[0]
    partial = (words, tags, [heads[0], None, heads[2], heads[3]], [deps[0], "", deps[2], deps[3]])
    nlp, parser = _pipeline(epochs=2, data=[partial])
    rr = parser._reranking
    doc = Doc(nlp.vocab, words=words, tags=tags)
    scores = rr.graph_model.score_span(doc.to_array("LOWER"), doc.to_array("TAG"),
                                       [numpy.array([1, -1, 1, 2]), numpy.array([-1, 0, 0, 0])])
    assert not scores.any(), "a partial tree must not train the graph model"
    assert len(nlp(Doc(nlp.vocab, words=words, tags=tags))) == 4


def test_prediction_from_threads_equals_one_thread(with_graph):
    from concurrent.futures import ThreadPoolExecutor

    nlp, _ = with_graph
    docs = list(_random_docs(nlp, 11, 40))
    one = [_parse(nlp, d) for d in docs]
    with ThreadPoolExecutor(8) as pool:
        many = list(pool.map(lambda d: _parse(nlp, d), docs * 3))
    assert many == one * 3


@pytest.mark.parametrize("block", [
    {"learner": "perceptron", "graph": 0.5}, {"learner": "none", "graph": -1},
    {"learner": "none", "graph": "much"}, {"learner": "none", "graph": True},
    {"learner": "none", "graph": 0.5, "graph_epochs": 0}, {"learner": "none", "graph": 0.5, "graph_epochs": 2.5},
    {"learner": "none", "graph": 0.5, "union": True}, {"learner": "perceptron", "union": True}])
def test_bad_graph_blocks_are_coded_errors(block):
    import spacy

    with pytest.raises(ValueError, match="S244"):
        spacy.blank("en").add_pipe("structperc_parser", config={"decoder": "beam", "reranker": block})
