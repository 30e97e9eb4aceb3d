"""structperc_ner's two-stage prediction aggregation (Ratinov and Roth 2009 §5)."""
import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, Span
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc.ner import aggregation
from spacy_structperc.ner.aggregation import stage_atoms

WORDS_MODEL = {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "precision": "float32",
               "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False}}
# Documents of several sentences: the second stage sees the other occurrences of a word.
TRAIN_DOCS = [
    [("Jordan scored twice .", [(0, 1, "PER")]), ("Jordan was happy .", [(0, 1, "PER")])],
    [("Jordan borders Israel .", [(0, 1, "LOC"), (2, 3, "LOC")]), ("Troops left Jordan .", [(2, 3, "LOC")])],
    [("Acme Corp hired Peter Jones .", [(0, 2, "ORG"), (3, 5, "PER")]),
     ("Jones said Acme Corp grew .", [(0, 1, "PER"), (2, 4, "ORG")])],
]
TEXTS = [[s for s, _ in doc] for doc in TRAIN_DOCS] + [["Jones met Jordan .", "Jordan smiled ."],
                                                       ["Israel and Jordan talked .", "Acme Corp agreed ."]]


def doc_of(vocab, sentences, with_ents=False):
    words, starts, ents = [], [], []
    for text, spans in sentences:
        offset = len(words)
        toks = text.split()
        words.extend(toks)
        starts.extend([True] + [False] * (len(toks) - 1))
        ents.extend((offset + s, offset + e, label) for s, e, label in spans)
    doc = Doc(vocab, words=words, sent_starts=starts)
    if with_ents:
        doc.set_ents([Span(doc, s, e, label) for s, e, label in ents], default="outside")
    return doc


def trained_nlp(n_iter=15, **config):
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "reset_every": 0, "two_stage": True,
                                                 "n_latent": 2, **config})
    examples = [Example(doc_of(nlp.vocab, d), doc_of(nlp.vocab, d, True)) for d in TRAIN_DOCS]
    nlp.initialize(lambda: examples)
    for epoch in range(n_iter):
        ner.start_epoch(epoch)
        nlp.update(examples, losses={})
    return nlp


def ents_of(doc):
    return [(e.start, e.end, e.label_) for e in doc.ents]


def docs_of(nlp):
    return [doc_of(nlp.vocab, [(s, []) for s in sentences]) for sentences in TEXTS]


@st.composite
def batches(draw):
    lengths = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    n = sum(lengths)
    words = numpy.array(draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)), dtype=numpy.uint64)
    classes = numpy.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), dtype=numpy.int64)
    offsets = numpy.concatenate([[0], numpy.cumsum(lengths)]).astype(numpy.int64)
    return words, classes, offsets


@settings(max_examples=200, deadline=None)
@given(batches())
def test_stage_atoms_equal_a_brute_force_scan_of_the_doc(batch):
    words, classes, offsets = batch
    agg, aggp = stage_atoms(words, classes, offsets, ["agg", "aggp"])
    kind = [0 if c == 0 else (c - 1) // 2 + 1 for c in classes.tolist()]
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        for i in range(a, b):
            others = {kind[j] for j in range(a, b) if j != i and words[j] == words[i]}
            earlier = {kind[j] for j in range(a, i) if words[j] == words[i]}
            mask = lambda s: sum(1 << v for v in s)
            assert int(agg[i]) == (aggregation._value("agg", mask(others)) if others else 0)
            assert int(aggp[i]) == (aggregation._value("aggp", mask(earlier)) if earlier else 0)


@pytest.fixture(scope="module")
def trained():
    return trained_nlp()


def test_the_second_stage_reads_the_first_stages_labels_of_other_occurrences(trained, monkeypatch):
    ner = trained.get_pipe("structperc_ner")
    assert ner.two_stage and set(ner.model.atoms.stage_columns) == {"agg", "aggp"}
    calls = []
    decode = ner._decode_prepared

    def spy(prepared):
        out = decode(prepared)
        calls.append((prepared.atoms.atoms.copy(), out.classes.copy(), prepared.atoms.offsets))
        return out

    monkeypatch.setattr(ner, "_decode_prepared", spy)
    docs = docs_of(trained)
    result = ner.predict(docs)
    assert len(calls) == 2
    (atoms1, first, offsets), (atoms2, second, _) = calls
    columns = ner.model.atoms.stage_columns
    words = atoms1[:, ner.model.atom_names.index("lower")]
    expected = stage_atoms(words, first, offsets, list(columns))
    for (name, j), column in zip(columns.items(), expected):
        assert not atoms1[:, j].any()
        assert numpy.array_equal(atoms2[:, j], column) and column.any()
    assert numpy.array_equal(result.classes, second)
    monkeypatch.undo()
    assert ents_of(trained(docs[0])) == [(0, 1, "PER"), (4, 5, "PER")]


def test_two_stage_output_is_identical_through_call_pipe_and_processes(trained):
    single = [ents_of(trained(doc)) for doc in docs_of(trained)]
    assert any(single)
    for batch_size in (1, 2, 5):
        assert [ents_of(d) for d in trained.pipe(docs_of(trained), batch_size=batch_size)] == single
    multi = [ents_of(d) for d in trained.pipe(docs_of(trained) * 2, n_process=2, batch_size=2)]
    assert multi == single * 2


def test_the_stage_atoms_of_a_doc_do_not_depend_on_its_batch(trained):
    ner = trained.get_pipe("structperc_ner")
    docs = docs_of(trained)
    alone = [ner.predict([doc])[0] for doc in docs]
    together = ner.predict(docs)
    assert all(numpy.array_equal(a, b) for a, b in zip(alone, together))


def test_a_saved_two_stage_model_reloads_to_identical_output(trained, tmp_path):
    expected = [ents_of(d) for d in trained.pipe(docs_of(trained))]
    trained.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("structperc_ner").two_stage
    assert [ents_of(d) for d in loaded.pipe(docs_of(loaded))] == expected
