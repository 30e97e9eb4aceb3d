"""structperc_tagger as a spaCy component: training, serialization, errors and registration.

Modelled on spaCy's spacy/tests/pipeline/test_tagger.py.
"""
import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from spacy_structperc import PerceptronModel, StructuredTagger
from spacy_structperc.model import FORMAT_VERSION, pack_model_msg

REPO_ROOT = Path(__file__).resolve().parents[2]

TRAIN_DATA = [
    ("I like green eggs", {"tags": ["N", "V", "J", "N"]}),
    ("Eat blue ham", {"tags": ["V", "J", "N"]}),
    ("They eat ham", {"tags": ["N", "V", "N"]}),
    ("green ham is blue", {"tags": ["J", "N", "V", "J"]}),
]
TEST_TEXTS = ["I like blue ham", "They eat green eggs", "Eat ham", "blue eggs is green", "ham"]

PARTIAL_DATA = [
    # partial annotation
    ("I like green eggs", {"tags": ["", "V", "J", ""]}),
    # misaligned partial annotation
    ("He hates green eggs", {"words": ["He", "hate", "s", "green", "eggs"], "tags": ["", "V", "S", "J", ""]}),
]

FIRST_ORDER_MODEL = {
    "@architectures": "spacy-structperc.AveragedPerceptron.v1",
    "features": {"@misc": "spacy-structperc.tagger_features.v1", "history": 1},
}

DECODERS = {
    "greedy-0": {"decoder": "greedy", "lookahead_depth": 0},
    "greedy-1": {"decoder": "greedy", "lookahead_depth": 1},
    "greedy-1-rtl": {"decoder": "greedy", "lookahead_depth": 1, "direction": "rtl"},
    "greedy-1-gap": {"decoder": "greedy", "lookahead_depth": 1, "lookahead_gap": 2.0},
    "viterbi-1": {"decoder": "viterbi", "order": 1, "model": FIRST_ORDER_MODEL},
    "viterbi-2": {"decoder": "viterbi", "order": 2},
    "beam-max-violation": {"decoder": "beam", "update": "max-violation", "beam_width": 4},
    "beam-early": {"decoder": "beam", "update": "early", "beam_width": 2},
    "beam-hybrid-rtl": {"decoder": "beam", "update": "hybrid", "beam_width": 2, "direction": "rtl"},
}


def make_nlp(config=None, lang="en"):
    nlp = spacy.blank(lang)
    tagger = nlp.add_pipe("structperc_tagger", config=config or {})
    return nlp, tagger


def examples_of(nlp, data=TRAIN_DATA):
    return [Example.from_dict(nlp.make_doc(text), ann) for text, ann in data]


def train(nlp, data=TRAIN_DATA, n_iter=15):
    examples = examples_of(nlp, data)
    nlp.initialize(get_examples=lambda: examples)
    losses = {}
    for _ in range(n_iter):
        losses = {}
        nlp.update(examples, losses=losses)
    return examples, losses


def tags_of(nlp, texts=TEST_TEXTS):
    return [[t.tag_ for t in doc] for doc in nlp.pipe(texts)]


@pytest.fixture(scope="module")
def trained():
    """A greedy tagger trained on TRAIN_DATA (shared, read-only)."""
    nlp, _ = make_nlp({"decoder": "greedy", "lookahead_depth": 1})
    train(nlp)
    return nlp


# Training ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_overfits_four_sentences_with_each_decoder(decoder):
    nlp, tagger = make_nlp(DECODERS[decoder])
    _, losses = train(nlp, n_iter=20)
    assert losses["structperc_tagger"] == 0
    for text, ann in TRAIN_DATA:
        assert [t.tag_ for t in nlp(text)] == ann["tags"], decoder
    assert nlp.evaluate(examples_of(nlp))["tag_acc"] == 1.0
    assert set(tagger.labels) == {"J", "N", "V"}


def test_losses_count_wrong_tokens_and_updates():
    nlp, _ = make_nlp({"decoder": "viterbi", "order": 2})
    examples = examples_of(nlp)
    nlp.initialize(get_examples=lambda: examples)
    losses = {}
    nlp.update(examples[:1], losses=losses)
    # Zero weights: Viterbi gives every token the first label, "J": 3 of "N V J N" are wrong.
    assert losses["structperc_tagger"] == 3
    assert losses["structperc_tagger_updates"] == 1
    for _ in range(5):
        nlp.update(examples[:1], losses=losses)
    # Losses accumulate in the dict; after the first update fewer than 4 tokens per pass are wrong.
    assert 3 < losses["structperc_tagger"] < 3 + 5 * 4
    assert losses["structperc_tagger_updates"] <= 6


def test_standard_beam_update_reports_invalid_updates():
    nlp, _ = make_nlp({"decoder": "beam", "update": "standard", "beam_width": 1})
    _, losses = train(nlp, n_iter=2)
    assert "structperc_tagger_invalid_updates" in losses


def test_evaluating_during_training_does_not_change_training():
    # Evaluation predicts with the averaged weights in between updates (spacy train does this
    # every eval_frequency steps); the model must come out as if it had not happened.
    a, _ = make_nlp()
    b, _ = make_nlp()
    examples_a, _ = train(a, n_iter=1)
    examples_b, _ = train(b, n_iter=1)
    for _ in range(8):
        a.update(examples_a)
        a.evaluate(examples_a)
        b.update(examples_b)
    assert a.get_pipe("structperc_tagger").to_bytes() == b.get_pipe("structperc_tagger").to_bytes()
    assert a.evaluate(examples_a)["tag_acc"] == b.evaluate(examples_b)["tag_acc"] == 1.0


def test_empty_doc_is_tagged_and_trained_on():
    nlp, tagger = make_nlp()
    train(nlp)
    doc = nlp("")
    assert len(doc) == 0
    assert list(nlp.pipe(["", "I like ham", ""]))[1][0].tag_ != ""
    empty = Example.from_dict(nlp.make_doc(""), {"tags": []})
    losses = {}
    nlp.update([empty, empty], losses=losses)
    assert losses["structperc_tagger"] == 0


@pytest.mark.parametrize("decoder", ["greedy-1", "viterbi-2", "beam-max-violation"])
def test_long_doc_of_5000_tokens(decoder):
    nlp, tagger = make_nlp(DECODERS[decoder])
    train(nlp, n_iter=5)
    words = (" ".join(text for text, _ in TRAIN_DATA) + " ").split() * 500
    doc = Doc(nlp.vocab, words=words[:5000])
    assert len(doc) == 5000
    doc = nlp(doc)
    assert all(t.tag_ in tagger.labels for t in doc)
    # Training on it works as well.
    gold = [tag for _, ann in TRAIN_DATA for tag in ann["tags"]] * 500
    eg = Example.from_dict(Doc(nlp.vocab, words=words[:5000]), {"tags": gold[:5000]})
    nlp.update([eg])


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_partial_annotation_trains_and_counts_only_annotated_tokens(decoder):
    nlp, tagger = make_nlp(DECODERS[decoder])
    tagger.initialize(lambda: examples_of(nlp), nlp=nlp, labels=["J", "N", "V", "S"])
    partial = examples_of(nlp, PARTIAL_DATA)
    for _ in range(5):
        losses = {}
        nlp.update(partial, losses=losses)
        # 5 annotated tokens in all; the unannotated ones can never count as errors.
        assert 0 <= losses["structperc_tagger"] <= 5
    doc = nlp("I like green eggs")
    assert [t.tag_ for t in doc][1:3] == ["V", "J"]


def test_partial_annotation_loss_ignores_unannotated_tokens_exactly():
    # Viterbi decodes once before its update; with zero weights every token is "J" (label 0).
    nlp, tagger = make_nlp({"decoder": "viterbi", "order": 2})
    tagger.initialize(lambda: examples_of(nlp), nlp=nlp, labels=["J", "N", "V"])
    losses = {}
    nlp.update(examples_of(nlp, [("I like green eggs", {"tags": ["", "V", "J", ""]})]), losses=losses)
    assert losses["structperc_tagger"] == 1
    losses = {}
    nlp2, tagger2 = make_nlp({"decoder": "viterbi", "order": 2})
    tagger2.initialize(lambda: examples_of(nlp2), nlp=nlp2, labels=["J", "N", "V"])
    nlp2.update(examples_of(nlp2, [("I like green eggs", {"tags": ["N", "V", "J", "N"]})]), losses=losses)
    assert losses["structperc_tagger"] == 3


@pytest.mark.parametrize("decoder", ["greedy-1", "viterbi-2", "beam-early"])
def test_unannotated_example_makes_no_update(decoder):
    nlp, tagger = make_nlp(DECODERS[decoder])
    train(nlp, n_iter=2)
    before = tagger.model.weights.state_arrays()
    losses = {}
    nlp.update(examples_of(nlp, [("I like green eggs", {"tags": ["", "", "", ""]})]), losses=losses)
    after = tagger.model.weights.state_arrays()
    assert losses["structperc_tagger"] == 0
    assert before[0].tobytes() == after[0].tobytes() and before[1].tobytes() == after[1].tobytes()


@pytest.mark.parametrize("data", [TRAIN_DATA[:1], PARTIAL_DATA[1:]], ids=["aligned", "misaligned"])
def test_unseen_gold_label_raises_naming_it(data):
    nlp, tagger = make_nlp()
    tagger.initialize(lambda: examples_of(nlp), nlp=nlp, labels=["N", "V"])
    with pytest.raises(ValueError, match=r"S004.*'J'"):
        nlp.update(examples_of(nlp, data))


def test_labels_must_be_strings():
    nlp, tagger = make_nlp()
    assert tagger.add_label("A") == 1
    with pytest.raises(ValueError, match=r"S003.*9"):
        tagger.add_label(9)
    assert tagger.add_label("A") == 0
    assert tagger.labels == ("A",)
    nlp2, tagger2 = make_nlp()
    with pytest.raises(ValueError, match="S003"):
        tagger2.initialize(lambda: examples_of(nlp2), nlp=nlp2, labels=["N", b"V"])


def test_initialize_keeps_labels_added_before():
    # As in spaCy's test_tagger_initialize_tag_map: initialize() without gold tags does not
    # clobber labels added with add_label.
    nlp, tagger = make_nlp()
    tagger.add_label("A")
    nlp.initialize()
    assert tagger.labels == ("A",)


def test_add_label_after_initialize_grows_the_model():
    nlp, tagger = make_nlp()
    train(nlp, n_iter=5)
    before = tags_of(nlp)
    tagger.add_label("X")
    assert tagger.model.weights.n_classes == 4
    assert tags_of(nlp) == before
    eg = Example.from_dict(nlp.make_doc("zzz"), {"tags": ["X"]})
    for _ in range(10):
        losses = nlp.update([eg], losses={})
    assert losses["structperc_tagger"] == 0      # the current weights learnt the new label
    for _ in range(200):
        nlp.update([eg])                         # ... and with time the average does too
    assert nlp("zzz")[0].tag_ == "X"


def test_use_before_initialize_raises_naming_nlp_initialize():
    nlp, tagger = make_nlp()
    with pytest.raises(ValueError, match=r"S001.*nlp\.initialize"):
        nlp("I like ham")
    with pytest.raises(ValueError, match=r"nlp\.initialize"):
        nlp.update(examples_of(nlp))
    tagger.add_label("N")     # labels alone are not weights
    with pytest.raises(ValueError, match=r"nlp\.initialize"):
        nlp("I like ham")


def test_empty_training_set_raises():
    nlp, tagger = make_nlp()
    with pytest.raises(ValueError, match="S005"):
        nlp.initialize(get_examples=lambda: iter([]))
    # An empty list is refused by spaCy's own get_examples validation before the component sees it.
    with pytest.raises((TypeError, ValueError)):
        nlp.initialize(get_examples=lambda: [])


def test_training_data_without_tags_raises():
    nlp, tagger = make_nlp()
    examples = [Example.from_dict(nlp.make_doc("no tags here"), {})]
    with pytest.raises(ValueError, match="S002"):
        nlp.initialize(get_examples=lambda: examples)


def test_lookahead_gap_bounds_the_search_between_depth_0_and_full_lookahead(trained):
    # The same weights decoded: gap 0 searches nowhere (depth 0), a gap wider than any score
    # difference everywhere (plain lookahead); whatever the gap, nlp() and nlp.pipe agree.
    tagger = trained.get_pipe("structperc_tagger")
    texts = TEST_TEXTS + [" ".join(TEST_TEXTS)]
    try:
        tagger.cfg["lookahead_gap"] = None
        full = tags_of(trained, texts)
        tagger.cfg["lookahead_depth"] = 0
        greedy = tags_of(trained, texts)
        tagger.cfg["lookahead_depth"] = 1
        tagger.cfg["lookahead_gap"] = 0.0
        assert tags_of(trained, texts) == greedy
        tagger.cfg["lookahead_gap"] = 1e9
        assert tags_of(trained, texts) == full
        tagger.cfg["lookahead_gap"] = 1.0
        assert [[t.tag_ for t in trained(text)] for text in texts] == tags_of(trained, texts)
    finally:
        tagger.cfg["lookahead_depth"] = 1
        tagger.cfg["lookahead_gap"] = None


def test_invalid_settings_raise_coded_errors():
    with pytest.raises(ValueError, match="S008"):
        make_nlp({"decoder": "crf"})
    with pytest.raises(ValueError, match="S008"):
        make_nlp({"update": "sometimes"})
    with pytest.raises(ValueError, match="S012"):
        make_nlp({"beam_width": 0})
    with pytest.raises(ValueError, match="S012"):
        make_nlp({"margin": -1.0})
    for gap in (-1.0, -0.5):
        with pytest.raises(ValueError, match="S012.*lookahead_gap"):
            make_nlp({"lookahead_depth": 1, "lookahead_gap": gap})
    # Default features read two previous tags; a first-order Viterbi cannot use them.
    with pytest.raises(ValueError, match="S011"):
        make_nlp({"decoder": "viterbi", "order": 1})


def test_unknown_feature_atom_raises():
    features = [{"name": "x", "parts": [[0, "no_such_atom"]]}]
    with pytest.raises(ValueError, match=r"S013.*no_such_atom"):
        make_nlp({"model": {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "features": features}})


# attr = "pos" and document atoms -----------------------------------------------------------------

POS_DATA = [
    ("I like green eggs", {"pos": ["PRON", "VERB", "ADJ", "NOUN"]}),
    ("Eat blue ham", {"pos": ["VERB", "ADJ", "NOUN"]}),
]


def test_attr_pos_writes_pos_and_not_tag():
    nlp, tagger = make_nlp({"attr": "pos"})
    train(nlp, POS_DATA, n_iter=10)
    doc = nlp("I like green eggs")
    assert [t.pos_ for t in doc] == ["PRON", "VERB", "ADJ", "NOUN"]
    assert all(t.tag_ == "" for t in doc)
    assert nlp.evaluate(examples_of(nlp, POS_DATA))["pos_acc"] == 1.0


def test_attr_pos_rejects_non_upos_labels():
    nlp, tagger = make_nlp({"attr": "pos"})
    with pytest.raises(ValueError, match=r"S010.*'NN'"):
        tagger.add_label("NN")
    assert tagger.add_label("NOUN") == 1
    with pytest.raises(ValueError, match=r"S010.*'VB'"):
        tagger.initialize(lambda: examples_of(nlp, POS_DATA), nlp=nlp, labels=["NOUN", "VB"])


TAG_FEATURES = [
    {"name": "bias", "parts": [[0, "bias"]]},
    {"name": "tag0", "parts": [[0, "tag"]]},
    {"name": "w0", "parts": [[0, "lower"]]},
    {"name": "t-1", "parts": [["hist", 1]]},
]


def test_doc_lacking_a_needed_attribute_raises_naming_it():
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "features": TAG_FEATURES}
    nlp, tagger = make_nlp({"attr": "pos", "model": model})
    words = ["I", "like", "ham"]
    eg = Example.from_dict(Doc(nlp.vocab, words=words, tags=["PRP", "VBP", "NN"]),
                           {"pos": ["PRON", "VERB", "NOUN"]})
    nlp.initialize(get_examples=lambda: [eg])
    for _ in range(5):
        nlp.update([eg])
    # With the upstream tags present, the tag atom is read and tagging works.
    doc = nlp(Doc(nlp.vocab, words=words, tags=["PRP", "VBP", "NN"]))
    assert [t.pos_ for t in doc] == ["PRON", "VERB", "NOUN"]
    with pytest.raises(ValueError, match=r"S300.*TAG"):
        nlp("I like ham")


def test_doc_atoms_with_model_built_directly():
    model = PerceptronModel(TAG_FEATURES, n_buckets=1024)
    nlp = spacy.blank("en")
    tagger = StructuredTagger(nlp.vocab, model, "direct", decoder="viterbi", order=1)
    eg = Example.from_dict(Doc(nlp.vocab, words=["a", "b"], tags=["X", "Y"]), {"tags": ["X", "Y"]})
    tagger.initialize(lambda: [eg], nlp=nlp)
    with pytest.raises(ValueError, match=r"S300.*'direct'"):
        tagger(Doc(nlp.vocab, words=["a", "b"]))


# Serialization ------------------------------------------------------------------------------------

def _same_pipeline(nlp):
    config = dict(nlp.get_pipe_config("structperc_tagger"))
    config.pop("factory")
    other = spacy.blank("en")
    other.add_pipe("structperc_tagger", config=config)
    return other


@pytest.mark.parametrize("decoder", ["greedy-1", "viterbi-1", "beam-max-violation"])
def test_to_bytes_from_bytes_round_trip(decoder):
    nlp, tagger = make_nlp(DECODERS[decoder])
    train(nlp, n_iter=5)
    expected = tags_of(nlp)
    other = _same_pipeline(nlp)
    other.from_bytes(nlp.to_bytes())
    assert other.get_pipe("structperc_tagger").labels == tagger.labels
    assert tags_of(other) == expected
    # Component level too, and bytes are stable through a round trip.
    fresh = _same_pipeline(nlp).get_pipe("structperc_tagger")
    fresh.from_bytes(tagger.to_bytes())
    assert fresh.to_bytes() == tagger.to_bytes()


def test_to_disk_from_disk_round_trip(tmp_path):
    nlp, tagger = make_nlp({"decoder": "viterbi", "order": 2})
    train(nlp, n_iter=5)
    expected = tags_of(nlp)
    nlp.to_disk(tmp_path / "nlp")
    assert tags_of(spacy.load(tmp_path / "nlp")) == expected
    tagger.to_disk(tmp_path / "tagger")
    fresh = _same_pipeline(nlp)
    fresh.get_pipe("structperc_tagger").from_disk(tmp_path / "tagger")
    assert tags_of(fresh) == expected


def test_round_trip_before_initialize(tmp_path):
    nlp, tagger = make_nlp()
    tagger.add_label("A")
    other = _same_pipeline(nlp)
    other.from_bytes(nlp.to_bytes())
    assert other.get_pipe("structperc_tagger").labels == ("A",)
    assert not other.get_pipe("structperc_tagger").model.is_initialized
    with pytest.raises(ValueError, match="S001"):
        other("I like ham")
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("structperc_tagger").labels == ("A",)
    with pytest.raises(ValueError, match="S001"):
        loaded("I like ham")
    # ... and it can still be initialized and trained after loading.
    train(loaded)
    assert [t.tag_ for t in loaded("I like green eggs")] == ["N", "V", "J", "N"]


def test_trained_after_round_trip_of_uninitialized_equals_direct():
    a, _ = make_nlp()
    b = _same_pipeline(a)
    b.from_bytes(a.to_bytes())
    train(a)
    train(b)
    assert a.get_pipe("structperc_tagger").to_bytes() == b.get_pipe("structperc_tagger").to_bytes()


def test_pipe_equals_call(trained):
    assert tags_of(trained) == [[t.tag_ for t in trained(text)] for text in TEST_TEXTS]
    assert tags_of(trained) == [[t.tag_ for t in doc] for doc in trained.pipe(TEST_TEXTS, batch_size=2)]


@pytest.mark.slow
def test_pipe_with_two_processes_equals_single_process(trained):
    texts = TEST_TEXTS * 4
    single = [[t.tag_ for t in doc] for doc in trained.pipe(texts)]
    multi = [[t.tag_ for t in doc] for doc in trained.pipe(texts, n_process=2, batch_size=3)]
    assert multi == single


def test_pickle_round_trip(trained):
    expected = tags_of(trained)
    copy = pickle.loads(pickle.dumps(trained))
    assert tags_of(copy) == expected
    tagger = trained.get_pipe("structperc_tagger")
    t2 = pickle.loads(pickle.dumps(tagger))
    assert t2.labels == tagger.labels and t2.cfg == tagger.cfg
    docs = [trained.make_doc(text) for text in TEST_TEXTS]
    assert [c.tolist() for c in t2.predict(docs)] == [c.tolist() for c in tagger.predict(docs)]


def test_pickle_mid_training_keeps_the_running_average():
    a, tagger = make_nlp()
    examples, _ = train(a, n_iter=3)
    b = pickle.loads(pickle.dumps(a))
    for _ in range(3):
        a.update(examples)
        b.update(examples)
    assert a.get_pipe("structperc_tagger").to_bytes() == b.get_pipe("structperc_tagger").to_bytes()


def test_identical_training_runs_give_identical_bytes():
    a, _ = make_nlp({"decoder": "beam"})
    b, _ = make_nlp({"decoder": "beam"})
    train(a, n_iter=5)
    train(b, n_iter=5)
    assert a.get_pipe("structperc_tagger").to_bytes() == b.get_pipe("structperc_tagger").to_bytes()
    assert a.to_bytes() == b.to_bytes()


def _model_msg(tagger):
    return srsly.msgpack_loads(srsly.msgpack_loads(tagger.to_bytes())["model"])


def _with_model(tagger, model_bytes):
    msg = srsly.msgpack_loads(tagger.to_bytes())
    msg["model"] = model_bytes
    return srsly.msgpack_dumps(msg)


def _corruptions(trained):
    tagger = trained.get_pipe("structperc_tagger")
    good = _model_msg(tagger)
    newer = dict(good, format_version=good["format_version"] + 1)
    truncated = dict(good, keys=good["keys"][:-3])
    wrong_rows = dict(good, n_rows=good["n_rows"] + 1)
    bad_templates = dict(good, templates=[{"name": "t", "parts": [["hist", 9]]}])
    no_version = {k: v for k, v in good.items() if k != "format_version"}
    wrong_columns = dict(good, n_classes=good["n_classes"] + 1,
                         weights=good["weights"] + b"\0" * 4 * good["n_rows"])
    negative_classes = dict(good, n_classes=-1, n_rows=0, keys=b"", weights=b"")
    return {
        "foreign-msgpack": (_with_model(tagger, srsly.msgpack_dumps({"foo": [1, 2, 3]})), "S006"),
        "not-msgpack-model": (_with_model(tagger, b"\xc1\xc1\xc1"), "S006"),
        # Re-signed (a valid checksum over wrong contents): the checks behind the checksum.
        "newer-format": (_with_model(tagger, pack_model_msg(newer)), "S007"),
        "no-version": (_with_model(tagger, pack_model_msg(no_version)), "S006"),
        "truncated": (_with_model(tagger, pack_model_msg(truncated)), "S006"),
        "wrong-rows": (_with_model(tagger, pack_model_msg(wrong_rows)), "S006"),
        "bad-templates": (_with_model(tagger, pack_model_msg(bad_templates)), "S006"),
        "wrong-columns": (_with_model(tagger, pack_model_msg(wrong_columns)), "S006"),
        "negative-classes": (_with_model(tagger, pack_model_msg(negative_classes)), "S006"),
    }


@pytest.mark.parametrize("case", ["foreign-msgpack", "not-msgpack-model", "newer-format", "no-version",
                                  "truncated", "wrong-rows", "bad-templates", "wrong-columns",
                                  "negative-classes"])
def test_corrupt_model_bytes_raise_coded_value_error(trained, case):
    data, code = _corruptions(trained)[case]
    fresh = _same_pipeline(trained).get_pipe("structperc_tagger")
    with pytest.raises(ValueError, match=code):
        fresh.from_bytes(data)


def test_corrupt_component_bytes_raise_coded_value_error(trained):
    fresh = _same_pipeline(trained).get_pipe("structperc_tagger")
    bad_cfg = srsly.msgpack_dumps({"cfg": b"{not json"})
    for data, code in ((b"\x93\xff\x00 not msgpack at all", "S006"), (b"", "S006"), (bad_cfg, "S311")):
        with pytest.raises(ValueError, match=code):
            fresh.from_bytes(data)


def test_newer_format_version_message_names_both_versions(trained):
    tagger = trained.get_pipe("structperc_tagger")
    good = _model_msg(tagger)
    data = pack_model_msg(dict(good, format_version=99))
    with pytest.raises(ValueError, match=rf"S007.*99.*{FORMAT_VERSION}"):
        PerceptronModel([{"name": "b", "parts": [[0, "bias"]]}]).from_bytes(data, "x")


def test_corrupt_model_file_on_disk_raises(trained, tmp_path):
    trained.to_disk(tmp_path / "nlp")
    (tmp_path / "nlp" / "structperc_tagger" / "model").write_bytes(b"\x00\x01\x02 broken")
    with pytest.raises(ValueError, match="S006"):
        spacy.load(tmp_path / "nlp")


# Fresh interpreters ---------------------------------------------------------------------------------

def _run_python(code, cwd):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_saved_pipeline_loads_in_fresh_interpreter_via_entry_points(trained, tmp_path):
    trained.to_disk(tmp_path / "nlp")
    out = _run_python(f"""
        import json, sys
        import spacy
        assert "spacy_structperc" not in sys.modules
        nlp = spacy.load({str(tmp_path / 'nlp')!r})
        print(json.dumps([[t.tag_ for t in doc] for doc in nlp.pipe({TEST_TEXTS!r})]))
    """, cwd=tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == tags_of(trained)


def _entry_points():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return {group: dict(names) for group, names in project["entry-points"].items()}


REGISTRIES = {"spacy_factories": "factories", "spacy_architectures": "architectures",
              "spacy_misc": "misc", "spacy_scorers": "scorers"}


@pytest.mark.slow
def test_every_registered_name_resolves_in_fresh_interpreter(tmp_path):
    entry_points = _entry_points()
    names = {group: sorted(eps) for group, eps in entry_points.items() if group in REGISTRIES}
    assert names.get("spacy_factories") and names.get("spacy_architectures")
    out = _run_python(f"""
        import json, sys
        import spacy
        from spacy.util import registry
        assert "spacy_structperc" not in sys.modules
        names = {names!r}
        registries = {REGISTRIES!r}
        resolved, pipes = {{}}, {{}}
        for group, group_names in names.items():
            for name in group_names:
                if group == "spacy_factories":
                    # spaCy loads these entry points when a pipe of that factory is added.
                    pipes[name] = type(spacy.blank("en").add_pipe(name)).__name__
                    continue
                func = getattr(registry, registries[group]).get(name)
                resolved[name] = func.__module__ + ":" + func.__name__
        nlp = spacy.blank("en")
        tagger = nlp.add_pipe("structperc_tagger")
        print(json.dumps({{"resolved": resolved, "pipes": pipes, "pipe": type(tagger).__name__}}))
    """, cwd=tmp_path)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["pipe"] == "StructuredTagger"
    assert set(result["pipes"]) == set(names["spacy_factories"])
    for group, eps in entry_points.items():
        if group not in REGISTRIES or group == "spacy_factories":
            continue
        for name, target in eps.items():
            assert result["resolved"][name] == target, (group, name)


def test_every_name_the_package_registers_has_an_entry_point():
    import spacy_structperc  # noqa: F401
    from spacy.util import registry
    entry_points = _entry_points()
    for group, reg_name in REGISTRIES.items():
        reg = getattr(registry, reg_name)
        ours = {name for name, func in reg.get_all().items()
                if getattr(func, "__module__", "").startswith("spacy_structperc")}
        if group == "spacy_factories":
            ours = {name for name in Language.factories if name.startswith("structperc")}
        if group in ("spacy_factories", "spacy_architectures", "spacy_misc"):
            assert ours, group
        assert ours <= set(entry_points.get(group, {})), (group, ours - set(entry_points.get(group, {})))


@pytest.mark.slow
def test_spacy_train_cli_on_tiny_corpus(tmp_path):
    nlp = spacy.blank("en")
    db = DocBin()
    for text, ann in TRAIN_DATA:
        db.add(Example.from_dict(nlp.make_doc(text), ann).reference)
    db.to_disk(tmp_path / "train.spacy")
    db.to_disk(tmp_path / "dev.spacy")
    base = textwrap.dedent("""
        [paths]
        train = null
        dev = null

        [nlp]
        lang = "en"
        pipeline = ["structperc_tagger"]

        [components]

        [components.structperc_tagger]
        factory = "structperc_tagger"
        decoder = "greedy"
        lookahead_depth = 1

        [corpora]

        [corpora.train]
        @readers = "spacy.Corpus.v1"
        path = ${paths.train}

        [corpora.dev]
        @readers = "spacy.Corpus.v1"
        path = ${paths.dev}

        [training]
        max_epochs = 15
        max_steps = 0
        patience = 0
        eval_frequency = 4
    """)
    (tmp_path / "base.cfg").write_text(base)
    commands = [
        ["init", "fill-config", str(tmp_path / "base.cfg"), str(tmp_path / "config.cfg")],
        ["train", str(tmp_path / "config.cfg"), "--output", str(tmp_path / "out"),
         "--paths.train", str(tmp_path / "train.spacy"), "--paths.dev", str(tmp_path / "dev.spacy")],
    ]
    for cmd in commands:
        result = subprocess.run([sys.executable, "-m", "spacy", *cmd], cwd=tmp_path, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    best = tmp_path / "out" / "model-best"
    assert (best / "structperc_tagger" / "model").exists()
    loaded = spacy.load(best)
    assert [t.tag_ for t in loaded("I like green eggs")] == ["N", "V", "J", "N"]
    meta = srsly.read_json(best / "meta.json")
    assert meta["performance"]["tag_acc"] == 1.0
