"""The documents corpus (several sentences per Doc, gold tokens) and the parser learning where
sentences end from it."""
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.util import registry

import spacy_structperc  # noqa: F401
from spacy_structperc.documents import DOCUMENTS_CORPUS, merge_sentences

SENTENCES = [
    (["I", "like", "green", "eggs", "."], ["PRP", "VBP", "JJ", "NNS", "."], [1, 1, 3, 1, 1],
     ["nsubj", "ROOT", "amod", "obj", "punct"]),
    (["Eat", "blue", "ham", "."], ["VB", "JJ", "NN", "."], [0, 2, 0, 0], ["ROOT", "amod", "obj", "punct"]),
    (["They", "eat", "ham", "."], ["PRP", "VBP", "NN", "."], [1, 1, 1, 1], ["nsubj", "ROOT", "obj", "punct"]),
    (["We", "like", "eggs", "."], ["PRP", "VBP", "NNS", "."], [1, 1, 1, 1], ["nsubj", "ROOT", "obj", "punct"]),
]


def sentence_docbin(tmp_path, vocab, order):
    db = DocBin()
    for i in order:
        words, tags, heads, deps = SENTENCES[i]
        db.add(Doc(vocab, words=words, tags=tags, heads=heads, deps=deps))
    path = tmp_path / "train.spacy"
    db.to_disk(path)
    return path


def test_merged_documents_keep_sentences_and_predicted_docs_have_none(tmp_path):
    nlp = spacy.blank("en")
    path = sentence_docbin(tmp_path, nlp.vocab, [0, 1, 2, 3, 0])
    corpus = registry.readers.get(DOCUMENTS_CORPUS)(path, sentences_per_doc=2)
    examples = list(corpus(nlp))
    assert [len(list(eg.reference.sents)) for eg in examples] == [2, 2, 1]
    first = examples[0]
    assert [s.start for s in first.reference.sents] == [0, 5]
    assert [t.text for t in first.predicted] == [t.text for t in first.reference]
    assert not first.predicted.has_annotation("SENT_START") and not first.predicted.has_annotation("TAG")
    assert first.reference.text.strip() == "I like green eggs . Eat blue ham ."
    assert list(merge_sentences(iter([]), 3)) == []
    # Re-tokenized from the text, as spacy.Corpus.v1 does with gold_preproc = false.
    raw = list(registry.readers.get(DOCUMENTS_CORPUS)(path, sentences_per_doc=2, gold_preproc=False)(nlp))
    assert raw[0].predicted.text == raw[0].reference.text
    assert len(list(registry.readers.get(DOCUMENTS_CORPUS)(path, sentences_per_doc=2, limit=1)(nlp))) == 1


def test_reader_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="S034"):
        registry.readers.get(DOCUMENTS_CORPUS)(tmp_path / "missing.spacy")
    with pytest.raises(ValueError, match="S036"):
        registry.readers.get(DOCUMENTS_CORPUS)(tmp_path, sentences_per_doc=-1)


def train_tagger_parser(tmp_path, sentences_per_doc):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger")
    nlp.add_pipe("structperc_parser", name="parser", config={"min_label_freq": 1, "min_feature_freq": 1})
    path = sentence_docbin(tmp_path, nlp.vocab, [0, 1, 2, 3, 1, 0, 3, 2, 0, 2, 1, 3])
    corpus = registry.readers.get(DOCUMENTS_CORPUS)(path, sentences_per_doc=sentences_per_doc)
    examples = list(corpus(nlp))
    nlp.initialize(lambda: examples)
    for _ in range(30):
        nlp.update(examples)
    return nlp


def test_parser_trained_on_documents_ends_sentences_in_raw_text(tmp_path):
    text = "They like green eggs . Eat blue ham ."
    nlp = train_tagger_parser(tmp_path, 2)
    doc = nlp(text)
    assert [s.text for s in doc.sents] == ["They like green eggs .", "Eat blue ham ."]
    # One sentence per Doc never shows the parser a sentence end inside a Doc.
    one = train_tagger_parser(tmp_path, 1)
    assert len(list(one(text).sents)) == 1
    # Boundaries already on the Doc are kept.
    preset = nlp.make_doc(text)
    for i, token in enumerate(preset):
        token.is_sent_start = i in (0, 3)
    assert [s.start for s in nlp(preset).sents] == [0, 3]
