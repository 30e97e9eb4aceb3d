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
def batches(draw, max_class=6):
    lengths = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    n = sum(lengths)
    words = numpy.array(draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)), dtype=numpy.uint64)
    classes = numpy.array(draw(st.lists(st.integers(0, max_class), min_size=n, max_size=n)), dtype=numpy.int64)
    offsets = numpy.concatenate([[0], numpy.cumsum(lengths)]).astype(numpy.int64)
    return words, classes, offsets


def assert_stage_atoms_equal_a_brute_force_scan(words, classes, offsets):
    agg, aggp = stage_atoms(words, classes, offsets, ["agg", "aggp"])
    kind = [0 if c == 0 else (c - 1) // 2 + 1 for c in classes.tolist()]
    mask = lambda s: sum(1 << v for v in s)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        for i in range(a, b):
            others = {kind[j] for j in range(a, b) if j != i and words[j] == words[i]}
            earlier = {kind[j] for j in range(a, i) if words[j] == words[i]}
            assert int(agg[i]) == (aggregation._value("agg", mask(others)) if others else 0)
            assert int(aggp[i]) == (aggregation._value("aggp", mask(earlier)) if earlier else 0)


@settings(max_examples=200, deadline=None)
@given(batches())
def test_stage_atoms_equal_a_brute_force_scan_of_the_doc(batch):
    assert_stage_atoms_equal_a_brute_force_scan(*batch)


@settings(max_examples=200, deadline=None)
@given(batches(max_class=40))
def test_stage_atoms_of_many_types_equal_a_brute_force_scan(batch):
    """Up to 20 types: masks past the dense table's range too."""
    assert_stage_atoms_equal_a_brute_force_scan(*batch)


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
    monkeypatch.undo()
    # The second stage decodes every window again: the same classes as predict's.
    prepared = ner._prepare(docs)
    staged = prepared._replace(atoms=prepared.atoms._replace(atoms=atoms2))
    assert numpy.array_equal(result.classes, ner._decode_prepared(staged).classes)
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


@settings(max_examples=100, deadline=None)
@given(batches())
def test_with_entities_only_a_word_found_only_as_O_elsewhere_has_no_stage_atom(batch):
    words, classes, offsets = batch
    every = stage_atoms(words, classes, offsets, ["agg", "aggp"])
    entities = stage_atoms(words, classes, offsets, ["agg", "aggp"], entities_only=True)
    for name, a, e in zip(("agg", "aggp"), every, entities):
        o_only = a == aggregation._value(name, 1)   # the set {O}
        assert not e[o_only].any()
        assert numpy.array_equal(e[~o_only], a[~o_only])


@pytest.mark.parametrize("aggregate", ["all", "entities"])
def test_windows_without_a_stage_atom_keep_the_first_stages_labels(aggregate, monkeypatch):
    """predict decodes again only the windows with a stage atom; that equals decoding every
    window again, and a batch whose windows have none is decoded once."""
    nlp = trained_nlp(aggregate=aggregate)
    ner = nlp.get_pipe("structperc_ner")
    assert ner.cfg["aggregate"] == aggregate
    # Sentences alone and whole texts, with and without repeated names.
    docs = docs_of(nlp) + [doc_of(nlp.vocab, [(s, [])]) for sentences in TEXTS for s in sentences]
    ner.begin_predict()   # the averaged weights, as predict uses
    prepared = ner._prepare(docs)
    first = ner._decode_prepared(prepared)
    atoms = ner._stage_columns(prepared.atoms.atoms, first.classes, first.offsets)
    full = ner._decode_prepared(prepared._replace(atoms=prepared.atoms._replace(atoms=atoms)))
    calls = []
    decode = ner._decode_prepared
    monkeypatch.setattr(ner, "_decode_prepared", lambda p: calls.append(len(p.windows)) or decode(p))
    assert numpy.array_equal(ner.predict(docs).classes, full.classes)
    assert len(calls) == 2 and calls[1] < calls[0]
    calls.clear()
    plain = [doc_of(nlp.vocab, [("Troops left .", [])])]
    ner.predict(plain)
    assert calls == [1]


def test_aggregate_is_checked_and_old_models_aggregate_every_label(trained, tmp_path):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="S008"):
        nlp.add_pipe("structperc_ner", config={"aggregate": "some"})
    ner = trained.get_pipe("structperc_ner")
    data = ner.to_bytes()
    del ner.cfg["aggregate"]   # as a model saved before the setting
    old = ner.to_bytes()
    ner.cfg["aggregate"] = "all"
    fresh = spacy.blank("en").add_pipe("structperc_ner", config={"aggregate": "entities", "two_stage": True,
                                                                 "model": WORDS_MODEL})
    fresh.from_bytes(old)
    assert fresh.cfg["aggregate"] == "all"
    fresh.from_bytes(data)
    assert fresh.cfg["aggregate"] == "all"


def test_two_stage_with_more_types_than_a_set_holds_is_refused():
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "two_stage": True, "n_latent": 1})
    for t in range(aggregation.MAX_STAGE_TYPES + 1):
        ner.add_label(f"T{t}")
    nlp.initialize()
    doc = nlp.make_doc("Jordan met Jordan .")
    with pytest.raises(ValueError, match=r"\[S406\].*structperc_ner.*63 entity types"):
        nlp(doc)
    assert not doc.ents
