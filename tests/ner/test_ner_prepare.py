"""structperc_ner's batch preparation with document features: the windows of a whole batch
found at once are those of each Doc alone (the stage atoms of many types: test_ner_two_stage.py)."""
import numpy
import spacy
from spacy.tokens import Doc

import spacy_structperc  # noqa: F401
from spacy_structperc import docarrays
from spacy_structperc.pipeline.sequence import MARGIN, WINDOW, batch_windows

from test_ner import examples_of

DOCUMENT_MODEL = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
                  "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False, "document": True}}


def doc_windows(doc):
    """The windows of one Doc alone, as rows of a batch of it: a row per sentence (as doc.sents
    gives them) with sentence boundaries, else batch_windows'."""
    if not len(doc):
        return []
    if doc.has_annotation("SENT_START"):
        return [[s.start, s.end, s.start, s.end] for s in doc.sents]
    return batch_windows([doc], numpy.array([0, len(doc)], dtype=numpy.int64)).tolist()


def mixed_batch(vocab):
    words = "Mr Smith went to Paris . He met Jones there .".split()
    starts = [i == 0 or words[i - 1] == "." for i in range(len(words))]
    long = words * ((WINDOW + 2 * MARGIN) // len(words) + 30)
    hooked = Doc(vocab, words=words)
    hooked.user_hooks["sents"] = lambda doc: [doc[0:4], doc[4:len(doc)]]
    return [Doc(vocab, words=words, sent_starts=starts), Doc(vocab, words=words), Doc(vocab, words=[]),
            Doc(vocab, words=long), Doc(vocab, words=["Paris"]), hooked,
            Doc(vocab, words=long, sent_starts=[i == 0 or long[i - 1] == "." for i in range(len(long))]),
            Doc(vocab, words=words[:3]), Doc(vocab, words=long[:WINDOW + 2 * MARGIN + 1])]


def test_the_windows_of_a_batch_are_those_of_each_doc_alone():
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner", config={"model": DOCUMENT_MODEL, "reset_every": 0, "scheme": "bilou"})
    nlp.initialize(lambda: examples_of(nlp))
    assert ner._by_sentence
    docs = mixed_batch(nlp.vocab)
    assert [docarrays.has_sent_starts([d])[0] for d in docs] == [True, False, True, False, True, True, True, False,
                                                                 False]
    for batch in (docs, docs[::-1], docs[3:4], docs[5:6], [docs[2]], []):
        prepared = ner._prepare(batch)
        offsets = prepared.atoms.offsets.tolist()
        expected = [[a + x for x in row] for doc, a in zip(batch, offsets) for row in doc_windows(doc)]
        assert prepared.windows.dtype == numpy.int64 and prepared.windows.shape == (len(expected), 4)
        assert prepared.windows.tolist() == expected
    # The hook's sentences, and margins for a long Doc without boundaries.
    assert doc_windows(docs[5]) == [[0, 4, 0, 4], [4, 11, 4, 11]]
    assert len(doc_windows(docs[3])) > 1
