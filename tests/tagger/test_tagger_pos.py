"""structperc_tagger's universal POS with attr = "tag": mapped from the tags (pos = "map") or
predicted by its second pass (pos = "predict", the default; tagger/pos.py)."""
import pickle

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structperc import StructuredTagger
from spacy_structperc.tagger.pos import TEMPLATES, PosPass

# Words, fine tags, universal POS. IN, VBP and DT are each seen with two universal POS, which
# only the context tells apart (before + PRP: SCONJ, before + DT: ADP; have + VBN: AUX; that at
# the end: PRON); NN with three (each seen at least twice: pos.MIN_COUNT).
DATA = [
    ("we left before it rained", "PRP VBD IN PRP VBD", "PRON VERB SCONJ PRON VERB"),
    ("we left before the rain", "PRP VBD IN DT NN", "PRON VERB ADP DET NOUN"),
    ("they left before we came", "PRP VBD IN PRP VBD", "PRON VERB SCONJ PRON VERB"),
    ("they came before the dog", "PRP VBD IN DT NN", "PRON VERB ADP DET NOUN"),
    ("they have left", "PRP VBP VBN", "PRON AUX VERB"),
    ("we have dogs", "PRP VBP NNS", "PRON VERB NOUN"),
    ("we have come", "PRP VBP VBN", "PRON AUX VERB"),
    ("they have rain", "PRP VBP NN", "PRON VERB NOUN"),
    ("i like that", "PRP VBP DT", "PRON VERB PRON"),
    ("we like that", "PRP VBP DT", "PRON VERB PRON"),
    ("i like that dog", "PRP VBP DT NN", "PRON VERB DET NOUN"),
    ("something came", "NN VBD", "PRON VERB"),
    ("xyz came", "NN VBD", "X VERB"),
    ("something left", "NN VBD", "PRON VERB"),
    ("xyz left", "NN VBD", "X VERB"),
]
# Short Docs ending in a word whose POS depends on the next tag, so a batch whose Docs read
# each other's tags would differ from one Doc at a time.
TEXTS = ["i like that", "dog came", "we left before", "it rained", "they have", "left", "i like that dog"]


def examples_of(nlp, data=DATA):
    return [Example.from_dict(Doc(nlp.vocab, words=w.split()), {"tags": t.split(), "pos": p.split()})
            for w, t, p in data]


def trained(pos="predict", n_iter=12):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger", config={"pos": pos})
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    for _ in range(n_iter):
        nlp.update(examples)
    return nlp


def annotations(nlp, texts=TEXTS, batch=True):
    docs = [Doc(nlp.vocab, words=t.split()) for t in texts]
    docs = list(nlp.pipe(docs, batch_size=64)) if batch else [nlp(d) for d in docs]
    return [[(t.tag_, t.pos_) for t in doc] for doc in docs]


@pytest.fixture(scope="module")
def nlp_predict():
    return trained("predict")


def test_predicted_pos_is_always_a_pos_seen_with_the_predicted_tag(nlp_predict):
    tagger = nlp_predict.get_pipe("tagger")
    cands = tagger.cfg["pos_candidates"]
    assert cands["IN"] == ["ADP", "SCONJ"] and cands["NN"][0] == "NOUN" and len(cands["NN"]) == 3
    assert "VBD" not in cands   # one POS only: mapped
    texts = TEXTS + [w for w, _, _ in DATA] + ["before that dog we have left something"]
    n_ambiguous = 0
    for doc in annotations(nlp_predict, texts):
        for tag, pos in doc:
            allowed = cands.get(tag, [tagger.cfg["pos_of_tag"][tag]])
            assert pos in allowed, (tag, pos)
            n_ambiguous += tag in cands
    assert n_ambiguous > 10


def test_second_pass_learns_what_the_map_cannot(nlp_predict):
    examples = examples_of(nlp_predict)
    scores = nlp_predict.evaluate(examples)
    assert scores["tag_acc"] == 1.0 and scores["pos_acc"] == 1.0   # the scorer reports both
    mapped = trained("map").evaluate(examples_of(nlp_predict))
    assert mapped["tag_acc"] == 1.0 and mapped["pos_acc"] < 0.9
    assert "pos_candidates" not in trained("map").get_pipe("tagger").cfg or \
        not trained("map").get_pipe("tagger").cfg["pos_candidates"]


def test_pipe_equals_call(nlp_predict):
    assert annotations(nlp_predict, batch=True) == annotations(nlp_predict, batch=False)
    # The Docs' boundaries matter: the last word of "i like that" is PRON on its own.
    assert annotations(nlp_predict, ["i like that"], batch=True)[0][-1] == ("DT", "PRON")


def test_save_load_and_pickle_give_identical_output(nlp_predict, tmp_path):
    before = annotations(nlp_predict)
    nlp_predict.to_disk(tmp_path / "model")
    assert annotations(spacy.load(tmp_path / "model")) == before
    nlp2 = spacy.blank("en")
    nlp2.add_pipe("structperc_tagger", name="tagger").from_bytes(nlp_predict.get_pipe("tagger").to_bytes())
    assert annotations(nlp2) == before
    tagger = pickle.loads(pickle.dumps(nlp_predict.get_pipe("tagger")))
    docs = [Doc(nlp_predict.vocab, words=t.split()) for t in TEXTS]
    assert [[(t.tag_, t.pos_) for t in tagger(d)] for d in docs] == before


@pytest.mark.parametrize("value", ["joint", "", "MAP"])
def test_bad_pos_setting_is_a_coded_error(value):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=r"S019"):
        nlp.add_pipe("structperc_tagger", config={"pos": value})
    tagger = nlp.add_pipe("structperc_tagger")
    with pytest.raises(ValueError, match=r"S019"):   # past spaCy's config validation
        StructuredTagger(nlp.vocab, tagger.model, "t", pos=None)


def test_pos_pass_without_ambiguous_tags_is_off():
    assert not PosPass(["NN", "VB"], {}, TEMPLATES, ["lower"])
    assert PosPass(["NN", "IN"], {"IN": ["ADP", "SCONJ"]}, TEMPLATES, ["lower"])


def test_templates_are_saved_with_the_tagger(nlp_predict):
    """A pass trained with other templates keeps reading its own: they are in its cfg."""
    tagger = nlp_predict.get_pipe("tagger")
    assert [tuple(p) for p in tagger.cfg["pos_templates"]] == list(TEMPLATES)
    data = tagger.to_bytes()
    nlp2 = spacy.blank("en")
    loaded = nlp2.add_pipe("structperc_tagger", name="tagger").from_bytes(data)
    assert loaded.cfg["pos_templates"] == tagger.cfg["pos_templates"]
