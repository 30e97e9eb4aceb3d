"""structperc_chunker: BIO-constrained decoding, training, serialization, displaCy and the CLI."""
import itertools
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
from spacy import displacy
from spacy.tokens import Doc, Span
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc._core import beam, lookahead, viterbi
from spacy_structperc.pipeline.base import dump_cfg, load_cfg
from spacy_structperc.pipeline.bio import classes_to_chunks

REPO_ROOT = Path(__file__).resolve().parents[2]

# (words, POS tags, chunks as (start, end, type))
TRAIN_DATA = [
    (["He", "reckons", "the", "current", "account", "deficit", "will", "narrow"],
     ["PRP", "VBZ", "DT", "JJ", "NN", "NN", "MD", "VB"],
     [(0, 1, "NP"), (1, 2, "VP"), (2, 6, "NP"), (6, 8, "VP")]),
    (["to", "only", "1.8", "billion", "in", "September", "."],
     ["TO", "RB", "CD", "CD", "IN", "NNP", "."],
     [(0, 1, "PP"), (1, 4, "NP"), (4, 5, "PP"), (5, 6, "NP")]),
    (["The", "dog", "saw", "a", "cat", "in", "the", "garden"],
     ["DT", "NN", "VBD", "DT", "NN", "IN", "DT", "NN"],
     [(0, 2, "NP"), (2, 3, "VP"), (3, 5, "NP"), (5, 6, "PP"), (6, 8, "NP")]),
    (["Cats", "sleep", "very", "soundly"],
     ["NNS", "VBP", "RB", "RB"],
     [(0, 1, "NP"), (1, 2, "VP"), (2, 4, "ADVP")]),
]

FIRST_ORDER_MODEL = {
    "@architectures": "spacy-structperc.AveragedPerceptron.v1",
    "features": {"@misc": "spacy-structperc.chunker_features.v1", "history": 1},
}
WORDS_ONLY_MODEL = {
    "@architectures": "spacy-structperc.AveragedPerceptron.v1",
    "features": {"@misc": "spacy-structperc.chunker_features.v1", "pos": False, "affixes": True},
}

DECODERS = {
    "greedy-0": {"decoder": "greedy", "lookahead_depth": 0},
    "greedy-1": {"decoder": "greedy", "lookahead_depth": 1},
    "greedy-2": {"decoder": "greedy", "lookahead_depth": 2},
    "greedy-1-rtl": {"decoder": "greedy", "lookahead_depth": 1, "direction": "rtl"},
    "viterbi-1": {"decoder": "viterbi", "order": 1, "model": FIRST_ORDER_MODEL},
    "viterbi-2": {"decoder": "viterbi", "order": 2},
    "beam-max-violation": {"decoder": "beam", "update": "max-violation", "beam_width": 4},
    "beam-early-rtl": {"decoder": "beam", "update": "early", "beam_width": 2, "direction": "rtl"},
}


def make_nlp(config=None):
    nlp = spacy.blank("en")
    chunker = nlp.add_pipe("structperc_chunker", config=config or {})
    return nlp, chunker


def gold_doc(vocab, words, tags, chunks, key="chunks"):
    doc = Doc(vocab, words=words, tags=tags)
    doc.spans[key] = [Span(doc, s, e, label) for s, e, label in chunks]
    return doc


def examples_of(nlp, data=TRAIN_DATA, key="chunks"):
    return [Example(Doc(nlp.vocab, words=w, tags=t), gold_doc(nlp.vocab, w, t, c, key)) for w, t, c in data]


def train(nlp, data=TRAIN_DATA, n_iter=15, key="chunks"):
    examples = examples_of(nlp, data, key)
    nlp.initialize(get_examples=lambda: examples)
    losses = {}
    for _ in range(n_iter):
        losses = {}
        nlp.update(examples, losses=losses)
    return examples, losses


def input_docs(vocab, data=TRAIN_DATA):
    return [Doc(vocab, words=w, tags=t) for w, t, _ in data]


def chunks_of(doc, key="chunks"):
    return [(s.start, s.end, s.label_) for s in doc.spans[key]]


def is_valid_bio(classes):
    prev = 0
    for c in classes:
        if c and c % 2 == 0 and prev not in (c - 1, c):
            return False
        prev = c
    return True


@pytest.fixture(scope="module")
def trained():
    nlp, _ = make_nlp({"decoder": "greedy", "lookahead_depth": 1})
    train(nlp)
    return nlp


# Training ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_overfits_four_sentences_with_each_decoder(decoder):
    nlp, chunker = make_nlp(DECODERS[decoder])
    _, losses = train(nlp, n_iter=20)
    assert losses["structperc_chunker"] == 0
    for doc, (_, _, chunks) in zip(nlp.pipe(input_docs(nlp.vocab)), TRAIN_DATA):
        assert chunks_of(doc) == chunks, decoder
    scores = nlp.evaluate(examples_of(nlp))
    assert scores["spans_chunks_f"] == 1.0
    assert set(scores["spans_chunks_per_type"]) == {"ADVP", "NP", "PP", "VP"}
    assert chunker.labels == ("ADVP", "NP", "PP", "VP")
    assert chunker.n_classes == 9


def test_words_only_features_need_no_pos():
    nlp, _ = make_nlp({"model": WORDS_ONLY_MODEL})
    data = [(w, [""] * len(w), c) for w, _, c in TRAIN_DATA]
    examples = [Example(Doc(nlp.vocab, words=w), gold_doc(nlp.vocab, w, None, c)) for w, _, c in data]
    nlp.initialize(lambda: examples)
    for _ in range(15):
        nlp.update(examples)
    assert chunks_of(nlp("The dog saw a cat in the garden")) == TRAIN_DATA[2][2]


def test_doc_without_pos_raises_naming_the_pipe_and_the_fix(trained):
    with pytest.raises(ValueError, match=r"\[S300\] Component 'structperc_chunker'.*TAG.*structperc_tagger"):
        trained("The dog saw a cat")
    with pytest.raises(ValueError, match=r"\[S300\]"):
        list(trained.pipe(["The dog saw a cat"]))


def test_custom_spans_key_and_span_group_output():
    nlp, chunker = make_nlp({"spans_key": "sc"})
    train(nlp, key="sc")
    doc = nlp(input_docs(nlp.vocab)[2])
    assert "chunks" not in doc.spans
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [
        ("The dog", "NP"), ("saw", "VP"), ("a cat", "NP"), ("in", "PP"), ("the garden", "NP")]
    scores = nlp.evaluate(examples_of(nlp, key="sc"))
    assert scores["spans_sc_f"] == 1.0


def test_unannotated_example_makes_no_update(trained):
    nlp, chunker = make_nlp()
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    before = chunker.to_bytes()
    words, tags, _ = TRAIN_DATA[0]
    unannotated = Example(Doc(nlp.vocab, words=words, tags=tags), Doc(nlp.vocab, words=words, tags=tags))
    losses = nlp.update([unannotated])
    assert losses["structperc_chunker"] == 0
    assert chunker.to_bytes() == before


def test_misaligned_tokenization_trains_on_aligned_spans():
    nlp, chunker = make_nlp()
    examples = examples_of(nlp)
    words, tags, chunks = TRAIN_DATA[3]
    # The predicted side splits "Cats" in two; the gold NP maps onto both pieces.
    predicted = Doc(nlp.vocab, words=["Cat", "s"] + words[1:], tags=["NN", "NNS"] + tags[1:])
    examples.append(Example(predicted, gold_doc(nlp.vocab, words, tags, chunks)))
    nlp.initialize(lambda: examples)
    for _ in range(20):
        nlp.update(examples)
    doc = nlp(Doc(nlp.vocab, words=["Cat", "s"] + words[1:], tags=["NN", "NNS"] + tags[1:]))
    assert chunks_of(doc)[0] == (0, 2, "NP")


def test_unknown_gold_type_raises_naming_it():
    nlp, chunker = make_nlp()
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    words, tags, _ = TRAIN_DATA[0]
    bad = Example(Doc(nlp.vocab, words=words, tags=tags), gold_doc(nlp.vocab, words, tags, [(0, 1, "LST")]))
    with pytest.raises(ValueError, match=r"S004.*'LST'"):
        nlp.update([bad])


def test_add_label_after_initialize_grows_the_model():
    nlp, chunker = make_nlp()
    train(nlp, n_iter=3)
    assert chunker.model.weights.n_classes == 9
    assert chunker.add_label("SBAR") == 1
    assert chunker.add_label("SBAR") == 0
    assert chunker.model.weights.n_classes == 11 == chunker.n_classes
    words, tags, _ = TRAIN_DATA[0]
    eg = Example(Doc(nlp.vocab, words=words, tags=tags), gold_doc(nlp.vocab, words, tags, [(0, 8, "SBAR")]))
    for _ in range(60):   # enough for the running average to forget the earlier analysis
        nlp.update([eg])
    assert chunks_of(nlp(Doc(nlp.vocab, words=words, tags=tags))) == [(0, 8, "SBAR")]


def test_initialize_with_labels_and_errors():
    nlp, chunker = make_nlp()
    with pytest.raises(ValueError, match="S001"):
        nlp(input_docs(nlp.vocab)[0])
    with pytest.raises(ValueError, match="S005"):
        nlp.initialize(lambda: iter([]))
    nlp2, chunker2 = make_nlp()
    chunker2.initialize(lambda: examples_of(nlp2), nlp=nlp2, labels=["NP", "VP", "PP", "ADVP", "SBAR"])
    assert chunker2.labels == ("NP", "VP", "PP", "ADVP", "SBAR") and chunker2.model.weights.n_classes == 11
    nlp3, chunker3 = make_nlp()
    words, tags, _ = TRAIN_DATA[0]
    with pytest.raises(ValueError, match="S002"):
        nlp3.initialize(lambda: [Example(Doc(nlp3.vocab, words=words, tags=tags),
                                         Doc(nlp3.vocab, words=words, tags=tags))])
    with pytest.raises(ValueError, match="S012"):
        make_nlp({"spans_key": ""})
    with pytest.raises(ValueError, match="S011"):
        make_nlp({"decoder": "viterbi", "order": 1})   # trigram chunk-tag features need order 2


def test_empty_and_very_long_docs():
    for decoder in ("greedy-1", "viterbi-2", "beam-max-violation"):
        nlp, _ = make_nlp(DECODERS[decoder])
        examples, _ = train(nlp, n_iter=3)
        empty = Doc(nlp.vocab, words=[])
        assert list(nlp(empty).spans["chunks"]) == []
        nlp.update([Example(Doc(nlp.vocab, words=[]), Doc(nlp.vocab, words=[]))])
        words = sum((w for w, _, _ in TRAIN_DATA), []) * 200
        tags = sum((t for _, t, _ in TRAIN_DATA), []) * 200
        doc = nlp(Doc(nlp.vocab, words=words, tags=tags))
        assert len(doc) > 5000 and len(doc.spans["chunks"]) > 1000
        spans = list(doc.spans["chunks"])
        assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))


# BIO validity and exhaustive search -----------------------------------------------------------------

def _randomize(chunker, doc, rng, n_paths=30):
    """Random weights on the features a bound sentence can reach along random label paths."""
    system = chunker.system
    chunker._bind(doc)
    weights = chunker.model.weights
    m = chunker.n_classes
    seen = set()
    for _ in range(n_paths):
        state = system.initial_state()
        for _ in range(len(doc)):
            for key in system.state_features(state).tolist():
                if key not in seen:
                    seen.add(key)
                    for c in range(m):
                        weights.add(key, c, float(rng.normal()))
            state = system.step(state, int(rng.integers(m)))


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_decoded_sequences_are_always_valid_bio(decoder):
    nlp, chunker = make_nlp(DECODERS[decoder])
    chunker.initialize(lambda: examples_of(nlp), nlp=nlp, labels=["NP", "VP", "PP", "ADVP", "SBAR"])
    rng = numpy.random.default_rng(0)
    docs = input_docs(nlp.vocab)
    for trial in range(6):
        doc = docs[trial % len(docs)]
        _randomize(chunker, doc, rng)
        chunker.model.weights.set_use_averages(False)
        chunker._bind(doc)
        classes = chunker._decode()
        if chunker.cfg["direction"] == "rtl":
            classes = classes[::-1]
            assert classes[0] % 2 == 1 or classes[0] == 0
        assert is_valid_bio(classes.tolist()), (decoder, classes.tolist())
        assert all(s < e for s, e, _ in classes_to_chunks(classes))


def _greedy_lookahead_reference(system, n, m, depth):
    """tsuruoka2011 Fig. 2 by exhaustive enumeration over the (BIO-constrained) action scores."""
    state = system.initial_state()
    out = []
    for t in range(n):
        length = min(depth + 1, n - t)
        best_a, best_v = None, -math.inf
        for first in range(m):
            value = -math.inf
            for rest in itertools.product(range(m), repeat=length - 1):
                s, total = state, 0.0
                for a in (first,) + rest:
                    score = float(system.action_scores(s)[a])
                    if score == -math.inf:
                        total = -math.inf
                        break
                    total += score
                    s = system.step(s, a)
                value = max(value, total)
            if value > best_v:
                best_a, best_v = first, value
        out.append(best_a)
        state = system.step(state, best_a)
    return out


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_lookahead_chunking_equals_exhaustive_search(depth):
    nlp, chunker = make_nlp({"lookahead_depth": depth})
    chunker.initialize(lambda: examples_of(nlp), nlp=nlp, labels=["NP", "VP"])
    rng = numpy.random.default_rng(depth)
    words, tags, _ = TRAIN_DATA[2]
    doc = Doc(nlp.vocab, words=words[:5], tags=tags[:5])
    m, n = chunker.n_classes, len(doc)
    for _ in range(3):
        _randomize(chunker, doc, rng)
        chunker.model.weights.set_use_averages(False)
        chunker._bind(doc)
        system = chunker.system
        expected = _greedy_lookahead_reference(system, n, m, depth)
        assert lookahead.decode(system, depth).tolist() == expected
        assert is_valid_bio(expected)
        # Looking ahead over the whole sentence finds the best valid BIO sequence, as Viterbi does.
        full = lookahead.decode(system, n - 1).tolist()
        valid = [seq for seq in itertools.product(range(m), repeat=n) if is_valid_bio(seq)]
        best = max(valid, key=lambda seq: system.score_path(list(seq)))
        assert full == list(best) == viterbi.viterbi(system, 2)[0].tolist()
        assert beam.decode(system, m * m).tolist() == list(best)


# Serialization ------------------------------------------------------------------------------------

def _same_pipeline(nlp):
    config = dict(nlp.get_pipe_config("structperc_chunker"))
    config.pop("factory")
    other = spacy.blank("en")
    other.add_pipe("structperc_chunker", config=config)
    return other


def _predict(nlp):
    return [chunks_of(doc) for doc in nlp.pipe(input_docs(nlp.vocab))]


@pytest.mark.parametrize("decoder", ["greedy-1", "viterbi-2", "beam-max-violation"])
def test_overfit_save_and_reload(decoder, tmp_path):
    nlp, chunker = make_nlp(DECODERS[decoder])
    train(nlp, n_iter=20)
    expected = _predict(nlp)
    assert expected == [c for _, _, c in TRAIN_DATA]
    other = _same_pipeline(nlp)
    other.from_bytes(nlp.to_bytes())
    assert other.get_pipe("structperc_chunker").labels == chunker.labels
    assert _predict(other) == expected
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert _predict(loaded) == expected
    fresh = _same_pipeline(nlp).get_pipe("structperc_chunker")
    fresh.from_bytes(chunker.to_bytes())
    assert fresh.to_bytes() == chunker.to_bytes()


def test_round_trip_before_initialize_then_train():
    nlp, chunker = make_nlp()
    chunker.add_label("NP")
    other = _same_pipeline(nlp)
    other.from_bytes(nlp.to_bytes())
    assert other.get_pipe("structperc_chunker").labels == ("NP",)
    with pytest.raises(ValueError, match="S001"):
        other(input_docs(other.vocab)[0])
    train(other)
    assert _predict(other) == [c for _, _, c in TRAIN_DATA]


def test_weights_of_the_wrong_width_raise(trained):
    chunker = trained.get_pipe("structperc_chunker")
    msg = srsly.msgpack_loads(chunker.to_bytes())
    cfg = load_cfg(msg["cfg"], "structperc_chunker")
    cfg["labels"] = cfg["labels"][:-1]
    msg["cfg"] = dump_cfg(cfg)   # a valid checksum over the wrong labels
    with pytest.raises(ValueError, match="S006"):
        _same_pipeline(trained).get_pipe("structperc_chunker").from_bytes(srsly.msgpack_dumps(msg))


def test_pipe_equals_call(trained):
    docs = input_docs(trained.vocab)
    expected = [chunks_of(trained(d)) for d in input_docs(trained.vocab)]
    assert [chunks_of(d) for d in trained.pipe(docs, batch_size=2)] == expected


def test_pickle_round_trip(trained):
    copy = pickle.loads(pickle.dumps(trained))
    assert _predict(copy) == _predict(trained)
    chunker = trained.get_pipe("structperc_chunker")
    c2 = pickle.loads(pickle.dumps(chunker))
    assert c2.labels == chunker.labels and c2.cfg == chunker.cfg
    docs = input_docs(trained.vocab)
    assert [c.tolist() for c in c2.predict(docs)] == [c.tolist() for c in chunker.predict(docs)]


@pytest.mark.slow
def test_pipe_with_two_processes_equals_single_process(trained):
    texts = [" ".join(w) for w, _, _ in TRAIN_DATA]
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_chunker", config={"model": WORDS_ONLY_MODEL})
    examples = [Example(nlp.make_doc(t), gold_doc(nlp.vocab, w, None, c)) for t, (w, _, c) in zip(texts, TRAIN_DATA)]
    nlp.initialize(lambda: examples)
    for _ in range(10):
        nlp.update(examples)
    single = [chunks_of(d) for d in nlp.pipe(texts * 3)]
    assert [chunks_of(d) for d in nlp.pipe(texts * 3, n_process=2, batch_size=2)] == single


def test_displacy_renders_the_chunks(trained):
    doc = trained(input_docs(trained.vocab)[2])
    html = displacy.render(doc, style="span", options={"spans_key": "chunks"}, jupyter=False)
    assert "garden" in html and "NP" in html and "PP" in html and "VP" in html


# spacy train through the CLI ----------------------------------------------------------------------

TINY_CONLL = "".join(
    "".join(f"{w} {t} {c}\n" for w, t, c in zip(words, tags, _iob)) + "\n"
    for words, tags, chunks in TRAIN_DATA
    for _iob in [[next((("B-" if i == s else "I-") + label for s, e, label in chunks if s <= i < e), "O")
                  for i in range(len(words))]]
)


@pytest.mark.slow
def test_spacy_train_cli_with_the_conll2000_reader(tmp_path):
    (tmp_path / "train.txt").write_text(TINY_CONLL)
    cfg = (REPO_ROOT / "configs" / "chunker.cfg").read_text()
    (tmp_path / "config.cfg").write_text(cfg)
    cmd = [sys.executable, "-m", "spacy", "train", str(tmp_path / "config.cfg"), "--output", str(tmp_path / "out"),
           "--paths.train", str(tmp_path / "train.txt"), "--paths.dev", str(tmp_path / "train.txt"),
           "--corpora.train.part", "all", "--corpora.dev.part", "all",
           "--training.max_epochs", "20", "--training.eval_frequency", "10",
           ]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    best = tmp_path / "out" / "model-best"
    meta = srsly.read_json(best / "meta.json")
    assert meta["performance"]["chunks_f"] == 1.0
    loaded = spacy.load(best)
    assert chunks_of(loaded(input_docs(loaded.vocab)[2])) == TRAIN_DATA[2][2]


# Brown clusters and label-bigram (edges) features ------------------------------------------------

CLUSTER_ATOMS = {"c4", "c6", "c10", "c20", "cluster"}


def _template_names(**features):
    from spacy_structperc.chunker.features import chunker_features
    return [t["name"] for t in chunker_features(**features)]


def test_chunker_features_clusters_and_edges_options():
    from spacy_structperc.atoms import atoms_of
    from spacy_structperc.chunker.features import chunker_features

    plain = chunker_features(clusters=False)
    assert not CLUSTER_ATOMS & set(atoms_of(plain))
    assert CLUSTER_ATOMS <= set(atoms_of(chunker_features()))   # on by default, as in the factory
    with_clusters = chunker_features(clusters=True)
    assert CLUSTER_ATOMS <= set(atoms_of(with_clusters))
    positions = {p[0] for t in with_clusters for p in t["parts"] if p[1] in CLUSTER_ATOMS}
    assert positions == {-1, 0, 1}
    assert "t-1,c6" in _template_names(clusters=True)
    assert "t-1,c6" not in _template_names(clusters=True, history_features=False)
    # Every template of the plain set is kept, so the option only adds.
    assert [t["name"] for t in plain] == [n for n in _template_names(clusters=True) if n in {t["name"] for t in plain}]

    edges = [t for t in chunker_features(edges=True, clusters=False) if t["name"] not in {s["name"] for s in plain}]
    assert {t["name"] for t in edges} == {"t-1,w-1", "t-1,w+1", "t-1,p-1", "t-1,p+1", "t-1,p-1,p0",
                                          "t-1,p0,p+1", "t-1,p-1,p0,p+1"}
    assert all(t["parts"][0] == ["hist", 1] for t in edges)
    assert {t["name"] for t in edges} - set(_template_names(edges=True, pos=False)) == \
        {"t-1,p-1", "t-1,p+1", "t-1,p-1,p0", "t-1,p0,p+1", "t-1,p-1,p0,p+1"}
    assert not [n for n in _template_names(edges=True, history=0) if n.startswith("t-")]


def test_factory_default_is_greedy_with_clusters():
    # The default decoder: greedy history-based decoding with the margin perceptron.
    nlp, chunker = make_nlp()
    assert (chunker.cfg["decoder"], chunker.cfg["lookahead_depth"], chunker.cfg["margin"]) == ("greedy", 0, 40.0)
    assert CLUSTER_ATOMS <= set(chunker.model.atom_names)
    assert nlp.config["components"]["structperc_chunker"]["model"]["features"]["clusters"] is True
    # configs/chunker.cfg says the same.
    cfg = spacy.util.load_config(REPO_ROOT / "configs" / "chunker.cfg")["components"]["chunker"]
    assert (cfg["decoder"], cfg["lookahead_depth"], cfg["model"]["features"]["clusters"]) == ("greedy", 0, True)
    # The earlier default stays reachable.
    _, old = make_nlp({"model": {"features": {"clusters": False}}})
    assert not CLUSTER_ATOMS & set(old.model.atom_names)


def _cluster_columns(chunker, words):
    doc = Doc(chunker.vocab, words=words, tags=["NN"] * len(words))
    atoms = chunker.model.atoms(doc)
    cols = [chunker.model.atom_names.index(n) for n in sorted(CLUSTER_ATOMS)]
    return atoms[:, cols]


def test_clusters_are_read_at_initialize_and_saved_with_the_model(monkeypatch):
    from spacy_structperc import model as model_module

    nlp, chunker = make_nlp()
    assert not chunker.model.clusters
    train(nlp, n_iter=20)
    assert len(chunker.model.clusters) > 100_000
    expected = _predict(nlp)
    assert expected == [c for _, _, c in TRAIN_DATA]
    # Words with a Brown cluster get cluster atoms (capitalized too); a made-up word gets none.
    values = _cluster_columns(chunker, ["company", "Company", "xqzvbnw"])
    assert values[0].all() and values[1].all() and not values[2].any()

    # A reloaded chunker needs no lookups package: the clusters come from its bytes.
    def no_lookups(lang):
        raise AssertionError("clusters must be read from the saved model")
    monkeypatch.setattr(model_module, "_nonzero_clusters", no_lookups)
    other = _same_pipeline(nlp)
    other.from_bytes(nlp.to_bytes())
    reloaded = other.get_pipe("structperc_chunker")
    assert reloaded.model.clusters == chunker.model.clusters
    assert (_cluster_columns(reloaded, ["company", "xqzvbnw"]) == values[[0, 2]]).all()
    assert _predict(other) == expected


def test_a_doc_of_another_vocab_gets_its_chunks(trained):
    """A Span's label must be in its Doc's StringStore: chunking a Doc made with another Vocab
    used to fail with spaCy's E084; the labels are added to that Doc's strings."""
    from spacy.vocab import Vocab

    expected = [chunks_of(d) for d in trained.pipe(input_docs(trained.vocab))]
    other = Vocab()
    docs = list(trained.get_pipe("structperc_chunker").pipe(input_docs(other)))
    assert [chunks_of(d) for d in docs] == expected
    assert all(d.vocab is other for d in docs)
