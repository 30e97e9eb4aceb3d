"""Component contracts: requires/assigns, missing inputs, preset entities, score names, and the
spaCy methods a perceptron cannot have."""
import pickle
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.training.loggers import setup_table
from spacy.util import load_model_from_config
from thinc.api import Config

import spacy_structperc  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ner"))
from test_ner import TRAIN_DATA as NER_TRAIN, WORDS_MODEL  # noqa: E402

POS_MODEL = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": True}}
TAGGED = [
    (["I", "like", "green", "eggs"], ["PRP", "VBP", "JJ", "NNS"], ["PRON", "VERB", "ADJ", "NOUN"]),
    (["Eat", "blue", "ham"], ["VB", "JJ", "NN"], ["VERB", "ADJ", "NOUN"]),
    (["We", "eat", "eggs"], ["PRP", "VBP", "NNS"], ["PRON", "VERB", "NOUN"]),
]


def problems(nlp):
    return nlp.analyze_pipes()["problems"]


# requires / assigns --------------------------------------------------------------------------


def test_analyze_pipes_reports_the_chunker_missing_a_tagger():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_chunker", name="chunker")
    assert problems(nlp)["chunker"] == ["token.tag"]
    nlp.add_pipe("structperc_tagger", name="tagger", first=True)
    assert problems(nlp)["chunker"] == []
    assert "token.tag" in nlp.get_pipe_meta("tagger").assigns


def test_analyze_pipes_follows_the_ner_features():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner", name="words", config={"model": WORDS_MODEL})
    nlp.add_pipe("structperc_ner", name="tags", config={"model": POS_MODEL})
    assert problems(nlp) == {"words": [], "tags": ["token.tag"]}
    assert nlp.get_pipe_meta("words").requires == []
    assert nlp.get_pipe_meta("tags").requires == ["token.tag"]


def test_chunker_reading_words_only_requires_nothing():
    words_only = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
                  "features": {"@misc": "spacy-structperc.chunker_features.v1", "pos": False,
                               "clusters": False}}
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_chunker", name="chunker", config={"model": words_only})
    assert problems(nlp) == {"chunker": []}


def test_parser_requires_tags_and_a_config_built_pipeline_knows_it():
    config = Config().from_str("""
[nlp]
lang = "en"
pipeline = ["parser", "ner"]

[components]

[components.parser]
factory = "structperc_parser"

[components.ner]
factory = "structperc_ner"

[components.ner.model]
@architectures = "spacy-structperc.AveragedPerceptron.v1"

[components.ner.model.features]
@misc = "spacy-structperc.ner_features.v1"
pos = true
""")
    nlp = load_model_from_config(config, auto_fill=True)
    assert problems(nlp) == {"parser": ["token.tag"], "ner": ["token.tag"]}


def test_missing_tags_raise_s300_naming_the_pipe():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner", name="my_ner", config={"model": POS_MODEL})
    examples = [Example(Doc(nlp.vocab, words=t.split(), tags=["NNP"] * len(t.split())),
                        _gold(nlp.vocab, t, e)) for t, e in NER_TRAIN]
    nlp.initialize(lambda: examples)
    with pytest.raises(ValueError, match=r"\[S300\] Component 'my_ner' \(structperc_ner\) reads token.tag_"):
        nlp("Mary lives in Boston")
    # An empty Doc needs no tags.
    assert len(nlp("")) == 0


# Preset entities -----------------------------------------------------------------------------


def _gold(vocab, text, ents):
    doc = Doc(vocab, words=text.split())
    doc.set_ents([Span(doc, s, e, label) for s, e, label in ents], default="outside")
    return doc


@pytest.fixture(scope="module")
def ner_nlp():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner", name="ner", config={"model": WORDS_MODEL})
    examples = [Example(Doc(nlp.vocab, words=t.split()), _gold(nlp.vocab, t, e)) for t, e in NER_TRAIN]
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("ner")
    for epoch in range(20):
        ner.start_epoch(epoch)
        nlp.update(examples)
    return nlp


def ents_of(doc):
    return [(e.text, e.label_) for e in doc.ents]


def test_ner_keeps_entities_of_an_entity_ruler_before_it(ner_nlp):
    text = "John Smith works for Acme Corp in Boston ."
    assert ents_of(ner_nlp(text)) == [("John Smith", "PER"), ("Acme Corp", "ORG"), ("Boston", "LOC")]
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    # A type the NER does not know, one it does but on other tokens than it would choose, and
    # one overriding its own prediction's type.
    ruler.add_patterns([{"label": "JOB", "pattern": "works"},
                        {"label": "ORG", "pattern": "Smith works"},
                        {"label": "GPE", "pattern": "Boston"}])
    nlp.add_pipe("ner", source=ner_nlp)
    doc = nlp(text)
    ents = ents_of(doc)
    assert ("Smith works", "ORG") in ents
    assert ("Boston", "GPE") in ents
    assert ("Acme Corp", "ORG") in ents   # the NER still adds entities around them
    assert all(e.text != "John Smith" for e in doc.ents)
    assert doc[0].ent_type_ in ("", "PER") and doc[0].ent_iob_ in ("O", "B")
    # The token after a preset entity does not continue it.
    assert [e.text for e in doc.ents if e.start <= 2 < e.end] == ["Smith works"]
    # Unknown types are kept as they were.
    nlp2 = spacy.blank("en")
    nlp2.add_pipe("entity_ruler").add_patterns([{"label": "JOB", "pattern": "works"}])
    nlp2.add_pipe("ner", source=ner_nlp)
    ents2 = ents_of(nlp2(text))
    assert ("works", "JOB") in ents2 and ("Acme Corp", "ORG") in ents2


def test_ner_without_presets_is_unchanged_by_tokens_marked_outside(ner_nlp):
    text = "Mary lives in New York City ."
    doc = ner_nlp.make_doc(text)
    doc.set_ents([], default="outside")   # every token explicitly O: no constraint
    assert ents_of(ner_nlp.get_pipe("ner")(doc)) == [("Mary", "PER"), ("New York City", "LOC")]


# Score weights and names ---------------------------------------------------------------------


@pytest.mark.parametrize("attr,used,unused", [("tag", "tag_acc", "pos_acc"), ("pos", "pos_acc", "tag_acc")])
def test_tagger_score_weights_follow_attr(attr, used, unused):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger", config={"attr": attr})
    weights = nlp.config["training"]["score_weights"]
    assert weights[used] == 1.0 and weights.get(unused) is None
    # The same through a config, as `spacy init fill-config` and `spacy train` build it.
    config = Config().from_str(f"""
[nlp]
lang = "en"
pipeline = ["tagger"]

[components]

[components.tagger]
factory = "structperc_tagger"
attr = "{attr}"
""")
    filled = load_model_from_config(config, auto_fill=True).config
    assert filled["training"]["score_weights"][used] == 1.0
    assert filled["training"]["score_weights"].get(unused) is None


def test_tagger_with_tag_attr_also_writes_mapped_pos_and_scores_it():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger")
    examples = [Example.from_dict(nlp.make_doc(" ".join(w)), {"tags": t, "pos": p}) for w, t, p in TAGGED]
    nlp.initialize(lambda: examples)
    for _ in range(10):
        nlp.update(examples)
    doc = nlp("We like green ham")
    assert [t.tag_ for t in doc] == ["PRP", "VBP", "JJ", "NN"]
    assert [t.pos_ for t in doc] == ["PRON", "VERB", "ADJ", "NOUN"]
    scores = nlp.evaluate(examples)
    assert scores["tag_acc"] == 1.0 and scores["pos_acc"] == 1.0
    # The map travels with the component: pickled (nlp.pipe(n_process=2)) and saved.
    tagger = pickle.loads(pickle.dumps(nlp.get_pipe("tagger")))
    assert tagger.cfg["pos_of_tag"]["NNS"] == "NOUN"
    data = nlp.get_pipe("tagger").to_bytes()
    nlp3 = spacy.blank("en")
    nlp3.add_pipe("structperc_tagger", name="tagger").from_bytes(data)
    assert [t.pos_ for t in nlp3("We like green ham")] == ["PRON", "VERB", "ADJ", "NOUN"]


def test_tagger_without_pos_in_the_data_leaves_pos_unset():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger")
    examples = [Example.from_dict(nlp.make_doc(" ".join(w)), {"tags": t}) for w, t, _ in TAGGED]
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    doc = nlp("We like eggs")
    assert not doc.has_annotation("POS") and doc.has_annotation("TAG")


def test_chunker_score_columns_have_distinct_readable_names():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_chunker", name="chunker")
    weights = nlp.config["training"]["score_weights"]
    assert weights == {"chunks_f": 1.0, "chunks_p": 0.0, "chunks_r": 0.0}
    cols = [c for c, v in weights.items() if v is not None]
    header, _, _ = setup_table(cols=cols, widths=[6] * len(cols))
    assert header == ["CHUNKS_F", "CHUNKS_P", "CHUNKS_R"]
    nlp.add_pipe("structperc_chunker", name="sc", config={"spans_key": "sc"})
    assert nlp.config["training"]["score_weights"]["sc_f"] == 0.5


# What a perceptron has no use for ------------------------------------------------------------


@pytest.mark.parametrize("method", ["get_loss", "rehearse"])
def test_get_loss_and_rehearse_raise_a_coded_error(method, ner_nlp):
    ner = ner_nlp.get_pipe("ner")
    examples = [Example(Doc(ner_nlp.vocab, words=["Mary"]), _gold(ner_nlp.vocab, "Mary", [(0, 1, "PER")]))]
    with pytest.raises(NotImplementedError, match=rf"\[S301\] Component 'ner' \(structperc_ner\) has no {method}"):
        if method == "get_loss":
            ner.get_loss(examples, None)
        else:
            ner.rehearse(examples)
