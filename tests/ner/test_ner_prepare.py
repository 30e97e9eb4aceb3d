"""structperc_ner's batch preparation with document features: the windows of a whole batch
found at once are those of each Doc alone, and the stage atoms' value tables of many types."""
import numpy
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

import spacy_structperc  # noqa: F401
from spacy_structperc import docarrays
from spacy_structperc.ner import aggregation
from spacy_structperc.ner.aggregation import stage_atoms
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


@st.composite
def batches(draw):
    lengths = draw(st.lists(st.integers(0, 10), min_size=1, max_size=4))
    n = sum(lengths)
    words = numpy.array(draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)), dtype=numpy.uint64)
    # Up to 20 types: masks past the dense table's range too.
    classes = numpy.array(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), dtype=numpy.int64)
    offsets = numpy.concatenate([[0], numpy.cumsum(lengths)]).astype(numpy.int64)
    return words, classes, offsets


@settings(max_examples=200, deadline=None)
@given(batches())
def test_stage_atoms_of_many_types_equal_a_brute_force_scan(batch):
    words, classes, offsets = batch
    agg, aggp = stage_atoms(words, classes, offsets, ["agg", "aggp"])
    kind = [0 if c == 0 else (c - 1) // 2 + 1 for c in classes.tolist()]
    mask = lambda s: sum(1 << v for v in s)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        for i in range(a, b):
            others = {kind[j] for j in range(a, b) if j != i and words[j] == words[i]}
            earlier = {kind[j] for j in range(a, i) if words[j] == words[i]}
            assert int(agg[i]) == (aggregation._value("agg", mask(others)) if others else 0)
            assert int(aggp[i]) == (aggregation._value("aggp", mask(earlier)) if earlier else 0)
