"""structperc_parser as a spaCy component: training, sentences, serialization, bad input, CLI.

Modelled on spaCy's spacy/tests/parser/test_parse.py and our test_tagger.py.
"""
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
from spacy import displacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from spacy_structperc import StructuredParser

REPO_ROOT = Path(__file__).resolve().parents[2]

# words, tags, heads, deps. The last tree is non-projective (the arc from "saw" to "yesterday"
# crosses the arc from "dog" to "which").
TRAIN_DATA = [
    (["I", "like", "green", "eggs"], ["PRP", "VBP", "JJ", "NNS"], [1, 1, 3, 1], ["nsubj", "ROOT", "amod", "obj"]),
    (["Eat", "blue", "ham", "."], ["VB", "JJ", "NN", "."], [0, 2, 0, 0], ["ROOT", "amod", "obj", "punct"]),
    (["They", "eat", "ham", "with", "eggs"], ["PRP", "VBP", "NN", "IN", "NNS"], [1, 1, 1, 4, 1],
     ["nsubj", "ROOT", "obj", "case", "obl"]),
    (["A", "dog", "barked", "yesterday", "which", "was", "brown"],
     ["DT", "NN", "VBD", "NN", "WDT", "VBD", "JJ"], [1, 2, 2, 2, 6, 6, 1],
     ["det", "nsubj", "ROOT", "obl", "nsubj", "cop", "acl"]),
]
TEST_WORDS = [["They", "like", "blue", "eggs"], ["Eat", "green", "ham", "."], ["I", "eat", "eggs", "with", "ham"]]

DECODERS = {
    "greedy-0": {"lookahead_depth": 0},
    "greedy-2": {"lookahead_depth": 2},
    "greedy-1-all-labels": {"lookahead_depth": 1, "label_candidates": 0},
    "beam-max-violation": {"decoder": "beam", "beam_width": 4, "update": "max-violation"},
    "beam-early": {"decoder": "beam", "beam_width": 4, "update": "early"},
    "beam-standard": {"decoder": "beam", "beam_width": 4, "update": "standard"},
}


def reference(vocab, words, tags, heads, deps):
    return Doc(vocab, words=words, tags=tags, heads=heads, deps=deps)


def examples(nlp, data=TRAIN_DATA):
    out = []
    for words, tags, heads, deps in data:
        predicted = Doc(nlp.vocab, words=words, tags=tags)
        out.append(Example(predicted, reference(nlp.vocab, words, tags, heads, deps)))
    return out


def make_nlp(config=None):
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("structperc_parser", config={"min_label_freq": 1, "min_feature_freq": 1,
                                                          **(config or {})})
    return nlp, parser


def train(config=None, epochs=30, data=TRAIN_DATA):
    nlp, parser = make_nlp(config)
    egs = examples(nlp, data)
    nlp.initialize(lambda: egs)
    for _ in range(epochs):
        parser.update(egs)
    return nlp, parser


def tagged(nlp, words, tags=None):
    if tags is None:
        tags = ["NN"] * len(words)
    return Doc(nlp.vocab, words=words, tags=tags)


def parse_of(doc):
    return [(t.head.i, t.dep_) for t in doc]


def assert_tree(doc):
    """One head per token, no cycles, one root per sentence, no decorated labels."""
    for sent in doc.sents:
        roots = [t for t in sent if t.head.i == t.i]
        assert len(roots) == 1, [(t.text, t.head.i) for t in sent]
        for t in sent:
            assert sent.start <= t.head.i < sent.end
            assert "||" not in t.dep_ and t.dep_
            seen, j = set(), t
            while j.head.i != j.i:
                assert j.i not in seen
                seen.add(j.i)
                j = j.head


@pytest.fixture(scope="module")
def trained():
    return train()[0]


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_overfits_four_sentences_with_each_decoder(decoder):
    nlp, parser = train(DECODERS[decoder], epochs=40)
    for words, tags, heads, deps in TRAIN_DATA:
        doc = nlp(tagged(nlp, words, tags))
        assert [t.head.i for t in doc] == heads, decoder
        assert [t.dep_ for t in doc] == deps, decoder


def test_nonprojective_tree_is_learned_and_restored_without_decorations(trained):
    parser = trained.get_pipe("structperc_parser")
    assert any("||" in l for l in parser.label_data)   # the lifted arc was learned as x||y
    assert not any("||" in l for l in parser.labels)
    words, tags, heads, deps = TRAIN_DATA[3]
    doc = trained(tagged(trained, words, tags))
    assert [t.head.i for t in doc] == heads
    assert [t.dep_ for t in doc] == deps


def test_every_predicted_parse_is_a_tree(trained):
    rng = numpy.random.default_rng(0)
    vocab = ["I", "like", "eggs", "ham", "they", "eat", "with", "green", ".", "which", "was"]
    tags = ["PRP", "VBP", "NNS", "NN", "IN", "JJ", ".", "WDT"]
    for _ in range(30):
        n = int(rng.integers(1, 30))
        doc = tagged(trained, [vocab[i] for i in rng.integers(0, len(vocab), n)],
                     [tags[i] for i in rng.integers(0, len(tags), n)])
        assert_tree(trained(doc))


def test_existing_sentence_boundaries_are_respected(trained):
    words = ["I", "like", "eggs", "They", "eat", "ham", "with", "eggs"]
    doc = Doc(trained.vocab, words=words, tags=["PRP", "VBP", "NNS", "PRP", "VBP", "NN", "IN", "NNS"],
              sent_starts=[True, False, False, True, False, False, False, False])
    doc = trained(doc)
    assert [s.start for s in doc.sents] == [0, 3]
    assert_tree(doc)


def test_sentences_are_set_from_the_trees_when_missing():
    data = [(w + w2, t + t2, h + [x + len(w) for x in h2], d + d2)
            for (w, t, h, d), (w2, t2, h2, d2) in zip(TRAIN_DATA[:3], TRAIN_DATA[1:4])]
    nlp, parser = train(epochs=40, data=data)
    words, tags, heads, deps = data[0]
    doc = nlp(tagged(nlp, words, tags))
    assert doc.has_annotation("SENT_START")
    assert [s.start for s in doc.sents] == [0, 4]
    assert [t.head.i for t in doc] == heads
    assert_tree(doc)


@pytest.mark.parametrize("decoder", ["greedy-0", "greedy-1-all-labels", "beam-max-violation"])
def test_break_bias_sets_how_readily_sentences_end(tmp_path, decoder):
    data = [(w + w2, t + t2, h + [x + len(w) for x in h2], d + d2)
            for (w, t, h, d), (w2, t2, h2, d2) in zip(TRAIN_DATA[:3], TRAIN_DATA[1:4])]
    nlp, parser = train(DECODERS[decoder], epochs=40, data=data)
    words, tags, heads, deps = data[0]

    def starts(bias, **kwargs):
        parser.cfg["break_bias"] = bias
        parser._decoding.invalidate()
        return [s.start for s in nlp(Doc(nlp.vocab, words=words, tags=tags, **kwargs)).sents]

    assert starts(0.0) == [0, 4]
    # BREAK is valid wherever one word is on the stack: a huge bias ends a sentence there every
    # time, so each word is a sentence; a hugely negative one never ends one.
    assert starts(1e9) == list(range(len(words)))
    assert starts(-1e9) == [0]
    # Boundaries already on the Doc are kept whatever the bias.
    given = [True, False, True] + [False] * (len(words) - 3)
    assert starts(1e9, sent_starts=given) == [0, 2]
    # It is a setting of the pipe: saved and loaded with it.
    parser.cfg["break_bias"] = -1e9
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert [s.start for s in loaded(Doc(loaded.vocab, words=words, tags=tags)).sents] == [0]


def test_break_bias_leaves_training_alone():
    data = [(w + w2, t + t2, h + [x + len(w) for x in h2], d + d2)
            for (w, t, h, d), (w2, t2, h2, d2) in zip(TRAIN_DATA[:3], TRAIN_DATA[1:4])]
    _, plain = train(epochs=5, data=data)
    _, biased = train({"break_bias": 1e9}, epochs=5, data=data)
    assert plain.model.to_bytes() == biased.model.to_bytes()


def test_predict_beam_width_narrows_the_beam_when_parsing_only(tmp_path):
    beam = dict(DECODERS["beam-max-violation"])
    _, plain = train(beam, epochs=3)
    nlp, parser = train({**beam, "predict_beam_width": 1}, epochs=3)
    # Training reads beam_width alone.
    assert parser.model.to_bytes() == plain.model.to_bytes()
    rng = numpy.random.default_rng(0)
    vocab_words = sorted({w for words, *_ in TRAIN_DATA for w in words})
    tagset = sorted({t for _, tags, *_ in TRAIN_DATA for t in tags})
    docs = [([str(w) for w in rng.choice(vocab_words, n)], [str(t) for t in rng.choice(tagset, n)])
            for n in rng.integers(3, 9, size=60)]

    def parses(beam_width, predict_beam_width):
        parser.cfg["beam_width"], parser.cfg["predict_beam_width"] = beam_width, predict_beam_width
        return [[(t.head.i, t.dep_) for t in nlp(Doc(nlp.vocab, words=w, tags=t))] for w, t in docs]

    one, four = parses(1, None), parses(4, None)
    assert one != four          # the two widths disagree somewhere, so the test can tell them apart
    assert parses(4, 1) == one
    assert parses(1, 4) == four
    # Saved and loaded with the pipe.
    parser.cfg["beam_width"], parser.cfg["predict_beam_width"] = 4, 1
    nlp.to_disk(tmp_path / "nlp")
    nlp = spacy.load(tmp_path / "nlp")
    parser = nlp.get_pipe("structperc_parser")
    assert (parser.cfg["beam_width"], parser.cfg["predict_beam_width"]) == (4, 1)
    # (The saved weights are float16, so the loaded model is compared with itself.)
    as_loaded = [[(t.head.i, t.dep_) for t in nlp(Doc(nlp.vocab, words=w, tags=t))] for w, t in docs]
    assert as_loaded == parses(1, None)


def test_losses_count_wrong_decisions_and_updates():
    nlp, parser = make_nlp()
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    losses = parser.update(egs)
    assert losses["structperc_parser"] > 0
    assert losses["structperc_parser_updates"] == losses["structperc_parser"]   # margin 0
    for _ in range(40):
        losses = parser.update(egs)
    assert losses["structperc_parser"] == 0


def test_standard_beam_update_reports_invalid_updates():
    nlp, parser = make_nlp({"decoder": "beam", "update": "standard", "beam_width": 2})
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    losses = parser.update(egs)
    assert "structperc_parser_invalid_updates" in losses


def test_score_uses_spacys_parser_scorer(trained):
    egs = [Example(trained(tagged(trained, w, t)), reference(trained.vocab, w, t, h, d))
           for w, t, h, d in TRAIN_DATA]
    scores = trained.get_pipe("structperc_parser").score(egs)
    assert scores["dep_uas"] == 1.0 and scores["dep_las"] == 1.0
    assert "dep_las_per_type" in scores and scores["sents_f"] == 1.0


def test_pipe_equals_call(trained):
    docs = [tagged(trained, w) for w in TEST_WORDS]
    piped = [parse_of(d) for d in trained.pipe([tagged(trained, w) for w in TEST_WORDS], batch_size=2)]
    assert piped == [parse_of(trained(d)) for d in docs]


def test_predictions_as_a_batch_or_a_plain_list_write_the_same(trained):
    # predict returns a ParseBatch (the batch's arrays kept whole); set_annotations takes it,
    # or any list of (heads, classes) pairs, and a batch for other Docs is checked as a list.
    parser = trained.get_pipe("structperc_parser")
    words = TEST_WORDS + [["A"], [], TRAIN_DATA[3][0]]
    batch = parser.predict([tagged(trained, w) for w in words])
    assert type(batch).__name__ == "ParseBatch" and len(batch) == len(words)
    by_batch, by_list = [tagged(trained, w) for w in words], [tagged(trained, w) for w in words]
    parser.set_annotations(by_batch, batch)
    parser.set_annotations(by_list, [(h.copy(), c.copy()) for h, c in batch])
    assert [parse_of(d) for d in by_batch] == [parse_of(d) for d in by_list]
    assert [parse_of(d) for d in by_batch] == [parse_of(trained(tagged(trained, w))) for w in words]
    with pytest.raises(ValueError, match="S30"):
        parser.set_annotations([tagged(trained, w) for w in words[1:]], batch)


@pytest.mark.slow
def test_pipe_with_two_processes_equals_single_process(trained):
    words = TEST_WORDS * 3
    single = [parse_of(d) for d in trained.pipe([tagged(trained, w) for w in words])]
    multi = [parse_of(d) for d in trained.pipe([tagged(trained, w) for w in words], n_process=2, batch_size=2)]
    assert multi == single


def test_to_bytes_from_bytes_and_disk_round_trip(trained, tmp_path):
    expected = [parse_of(trained(tagged(trained, w))) for w in TEST_WORDS]
    nlp2, parser2 = make_nlp()
    parser2.from_bytes(trained.get_pipe("structperc_parser").to_bytes())
    assert [parse_of(nlp2(tagged(nlp2, w))) for w in TEST_WORDS] == expected
    trained.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert [parse_of(loaded(tagged(loaded, w))) for w in TEST_WORDS] == expected
    assert loaded.get_pipe("structperc_parser").labels == trained.get_pipe("structperc_parser").labels
    # The file is written in slices straight from the training state, and is to_bytes exactly;
    # the loaded weights are the averages alone.
    model_bytes = trained.get_pipe("structperc_parser").model.to_bytes()
    assert (tmp_path / "nlp" / "structperc_parser" / "model").read_bytes() == model_bytes
    assert not loaded.get_pipe("structperc_parser").model.weights.has_accumulators


def test_round_trip_before_initialize():
    nlp, parser = make_nlp()
    nlp2, parser2 = make_nlp()
    parser2.from_bytes(parser.to_bytes())
    assert not parser2.model.is_initialized


def test_pickle_round_trip(trained):
    parser = trained.get_pipe("structperc_parser")
    clone = pickle.loads(pickle.dumps(parser))
    for w in TEST_WORDS:
        a, b = tagged(trained, w), tagged(trained, w)
        parser(a)
        clone(b)
        assert parse_of(a) == parse_of(b)


def test_displacy_renders_the_dependency_view(trained):
    doc = trained(tagged(trained, *TRAIN_DATA[0][:2]))
    svg = displacy.render(doc, style="dep", jupyter=False)
    assert svg.count('class="displacy-arc"') == len(doc) - 1   # one arc per non-root token
    assert "nsubj" in svg and "amod" in svg


def test_init_labels_round_trip(trained):
    parser = trained.get_pipe("structperc_parser")
    nlp, fresh = make_nlp()
    egs = examples(nlp)
    nlp.initialize(lambda: egs, )
    nlp2, parser2 = make_nlp()
    nlp2.get_pipe("structperc_parser").initialize(lambda: egs, nlp=nlp2, labels=parser.label_data)
    assert parser2.label_data == parser.label_data


def test_rare_labels_are_backed_off():
    nlp, parser = make_nlp({"min_label_freq": 2})
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    # nsubj (3x) and obj (2x) stay; the once-seen labels are backed off to 'dep'.
    assert {"nsubj", "obj", "dep"} <= set(parser.labels)
    assert "cop" not in parser.labels and not any("||" in l for l in parser.label_data)


def test_min_feature_freq_keeps_updates_to_features_of_repeated_gold_configurations():
    rows = {}
    for min_freq in (1, 2):
        nlp, parser = train({"min_feature_freq": min_freq}, epochs=3)
        rows[min_freq] = parser.model.weights.n_rows
        if min_freq == 2:
            allowed = set(parser.model.allowed_keys.tolist())
            keys, _ = parser.model.weights.to_arrays(averaged=False, prune=False)
            assert set(keys.tolist()) <= allowed
    assert 0 < rows[2] < rows[1]


# Bad input ----------------------------------------------------------------------------------------

def test_cyclic_gold_tree_raises_coded_error():
    nlp, parser = make_nlp()
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    bad = Example(Doc(nlp.vocab, words=["a", "b", "c"], tags=["NN"] * 3),
                  reference(nlp.vocab, ["a", "b", "c"], ["NN"] * 3, [1, 2, 0], ["nsubj", "obj", "amod"]))
    with pytest.raises(ValueError, match="S100"):
        parser.update([bad])
    with pytest.raises(ValueError, match="S100"):
        make_nlp()[0].initialize(lambda: [bad])


def test_unseen_gold_label_backs_off_to_dep_or_raises():
    nlp, parser = make_nlp()
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    odd = Example(Doc(nlp.vocab, words=["a", "b"], tags=["NN"] * 2),
                  reference(nlp.vocab, ["a", "b"], ["NN"] * 2, [1, 1], ["weird", "ROOT"]))
    with pytest.raises(ValueError, match="S101"):
        parser.update([odd])
    parser.add_label("dep")
    parser.update([odd])   # now backed off to 'dep'


def test_root_label_in_label_list_raises():
    nlp, parser = make_nlp()
    with pytest.raises(ValueError, match="S102"):
        parser.initialize(lambda: examples(nlp), nlp=nlp, labels=["nsubj", "ROOT"])


def test_multiple_gold_roots_in_one_doc_are_sentences():
    nlp, parser = make_nlp()
    egs = examples(nlp)
    two = Example(Doc(nlp.vocab, words=["I", "eat", "They", "like"], tags=["PRP", "VBP", "PRP", "VBP"]),
                  reference(nlp.vocab, ["I", "eat", "They", "like"], ["PRP", "VBP", "PRP", "VBP"],
                            [1, 1, 3, 3], ["nsubj", "ROOT", "nsubj", "ROOT"]))
    nlp.initialize(lambda: egs + [two])
    for _ in range(30):
        parser.update(egs + [two])
    doc = nlp(tagged(nlp, ["I", "eat", "They", "like"], ["PRP", "VBP", "PRP", "VBP"]))
    assert [t.head.i for t in doc] == [1, 1, 3, 3]
    # With fixed boundaries that join both roots, training still runs and parses are trees.
    joined = Doc(nlp.vocab, words=["I", "eat", "They", "like"], tags=["PRP", "VBP", "PRP", "VBP"],
                 sent_starts=[True, False, False, False])
    parser.update([Example(joined, two.reference)])
    assert_tree(nlp(joined))


def test_gold_heads_across_predicted_sentence_boundaries_are_missing():
    nlp, parser = make_nlp()
    egs = examples(nlp)
    nlp.initialize(lambda: egs)
    words, tags, heads, deps = TRAIN_DATA[2]
    split = Doc(nlp.vocab, words=words, tags=tags, sent_starts=[True, False, True, False, False])
    losses = parser.update([Example(split, reference(nlp.vocab, words, tags, heads, deps))])
    assert losses["structperc_parser"] >= 0
    assert_tree(nlp(Doc(nlp.vocab, words=words, tags=tags, sent_starts=[True, False, True, False, False])))


def test_training_without_predicted_tags_reads_the_gold_tags():
    nlp, parser = make_nlp()
    egs = [Example(Doc(nlp.vocab, words=eg.reference.text.split()), eg.reference)
           for eg in examples(nlp)]
    assert not egs[0].predicted.has_annotation("TAG")
    nlp.initialize(lambda: egs)
    for _ in range(40):
        parser.update(egs)
    words, tags, heads, deps = TRAIN_DATA[0]
    assert [t.head.i for t in nlp(tagged(nlp, words, tags))] == heads


def test_docs_without_tags_raise_naming_the_attribute(trained):
    with pytest.raises(ValueError, match=r"S300.*TAG"):
        trained(Doc(trained.vocab, words=["I", "like", "eggs"]))


def test_empty_docs_are_parsed_and_trained_on(trained):
    doc = trained(Doc(trained.vocab, words=[]))
    assert len(doc) == 0
    parser = trained.get_pipe("structperc_parser")
    empty = Example(Doc(trained.vocab, words=[]), Doc(trained.vocab, words=[]))
    parser.update([empty])


def test_long_doc_without_boundaries_parses_to_trees(trained):
    rng = numpy.random.default_rng(1)
    words = [w for w, *_ in TRAIN_DATA for w in w][:]
    n = 2000
    doc = tagged(trained, [words[i] for i in rng.integers(0, len(words), n)],
                 [["PRP", "VBP", "NN", "JJ", "."][i] for i in rng.integers(0, 5, n)])
    start = time.time()
    doc = trained(doc)
    assert time.time() - start < 30
    assert_tree(doc)


def test_use_before_initialize_raises():
    nlp, parser = make_nlp()
    with pytest.raises(ValueError, match="S001"):
        nlp(tagged(nlp, ["a"]))


def test_invalid_settings_raise_coded_errors():
    for config in ({"decoder": "viterbi"}, {"update": "sometimes"}, {"lookahead_depth": -1},
                   {"beam_width": 0}, {"label_candidates": -2}, {"margin": -1.0},
                   {"predict_beam_width": 0}, {"predict_beam_width": -3}):
        with pytest.raises(ValueError, match=r"S00[8]|S012"):
            make_nlp(config)
    # A config cannot hold an infinite number (spaCy refuses it), but the class can be given one.
    nlp, parser = make_nlp()
    for bias in (float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match=r"S012.*break_bias"):
            StructuredParser(nlp.vocab, parser.model, break_bias=bias)
    for width in (True, 2.0, 0):
        with pytest.raises(ValueError, match=r"S012.*predict_beam_width"):
            StructuredParser(nlp.vocab, parser.model, predict_beam_width=width)


# The CLI ------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("config", ["parser.cfg", "parser_beam.cfg", "parser_bidirectional.cfg"])
def test_spacy_train_cli_on_tiny_corpus(tmp_path, config):
    nlp = spacy.blank("en")
    db = DocBin()
    for words, tags, heads, deps in TRAIN_DATA:
        db.add(reference(nlp.vocab, words, tags, heads, deps))
    db.to_disk(tmp_path / "train.spacy")
    db.to_disk(tmp_path / "dev.spacy")
    cmd = ["train", str(REPO_ROOT / "configs" / config), "--output", str(tmp_path / "out"),
           "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "dev.spacy"),
           "--training.max_epochs", "40", "--training.eval_frequency", "10",
           "--components.parser.min_label_freq", "1", "--components.parser.min_feature_freq", "1",
           "--components.tagger.model.features.clusters", "false",
           "--components.tagger.model.features.lexicon", "false",
           # parser.cfg saves only rows with an averaged weight beyond 1.0 (prune_below); after
           # a few updates on four sentences most rows lie within it, and the saved parser
           # would not be the one scored in training. Every row is kept here.
           "--components.parser.model.prune_below", "0"]
    result = subprocess.run([sys.executable, "-m", "spacy", *cmd], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    best = tmp_path / "out" / "model-best"
    loaded = spacy.load(best)
    assert loaded.pipe_names == ["tagger", "parser"]
    doc = loaded("I like green eggs")
    assert [t.head.i for t in doc] == TRAIN_DATA[0][2]
    meta = srsly.read_json(best / "meta.json")
    assert meta["performance"]["dep_uas"] == 1.0
