"""Batched prediction: each component decodes a whole batch in one call (_core/batch.pyx), and
must give exactly what binding each window or sentence of each Doc alone and decoding it gives;
nlp.pipe must give the same whatever the batch size and however many threads run at once. The
atoms gathered from the word-type table must equal their Python definition (features.py)."""
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc, Span

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from threaded_nlp import annotations, random_texts, run_threads, train_pipeline  # noqa: E402
from test_batch import parse_reference, random_weights  # noqa: E402
from conftest import require_module  # noqa: E402

from spacy_structperc.atoms import (CLUSTER_ATOMS, DOC_ATOMS, LEXICAL_ATOMS, LEXICON_ATOMS,  # noqa: E402
                                       AtomExtractor, Lexicon, _cluster_atom, _h)
from spacy_structperc.parser import component as parser_module
from spacy_structperc.pipeline import sequence  # noqa: E402
from spacy_structperc.pipeline.sequence import decode_windows  # noqa: E402

LABELLERS = [
    ("structperc_tagger", {"decoder": "greedy", "lookahead_depth": 0}),
    ("structperc_tagger", {"decoder": "greedy", "lookahead_depth": 1}),
    ("structperc_tagger", {"decoder": "viterbi", "order": 2}),
    ("structperc_tagger", {"decoder": "beam", "beam_width": 3}),
    ("structperc_tagger", {"decoder": "viterbi", "order": 2, "direction": "rtl"}),
    ("structperc_chunker", {"decoder": "greedy"}),
    ("structperc_chunker", {"decoder": "viterbi", "order": 2, "direction": "rtl"}),
    ("structperc_chunker", {"decoder": "beam", "beam_width": 3, "direction": "rtl"}),
    ("structperc_ner", {}),
]
PARSERS = [{"decoder": "greedy", "lookahead_depth": 0}, {"decoder": "greedy", "lookahead_depth": 1},
           {"decoder": "beam", "beam_width": 4}]


@pytest.fixture(scope="module")
def nlp():
    return train_pipeline(n_train=40, epochs=2)


@pytest.fixture
def small_windows(monkeypatch):
    """Windows of 40 tokens (10 of margin), parser windows of 30: the test docs span several."""
    monkeypatch.setattr(sequence.decode_windows, "__defaults__", (40, 10))
    monkeypatch.setattr(parser_module, "PARSE_WINDOW", 30)


def make_docs(nlp, tagged=True):
    """Short, empty and long docs, with and without sentence boundaries, some with preset
    entities (one of a known type, one of a type the NER does not know)."""
    docs = []
    for i, words in enumerate(random_texts(14, seed=3, max_sents=30)):
        with_sents = i % 3 == 0
        starts = [w in ("I", "they", "we", "she", "the", "London") for w in words] if with_sents else None
        if starts:
            starts[0] = True
        docs.append(Doc(nlp.vocab, words=words, sent_starts=starts))
        if i % 4 == 1:
            docs.append(Doc(nlp.vocab, words=[]))
    docs[3].ents = [Span(docs[3], 1, 2, label="GPE"), Span(docs[3], 4, 6, label="DATE")]
    if tagged:
        tagger = nlp.get_pipe("structperc_tagger")
        docs = [tagger(doc) for doc in docs]
    assert max(len(d) for d in docs) > 100 and min(len(d) for d in docs) == 0
    return docs


def reference_labels(pipe, doc):
    """Each window of `doc` bound alone (set_sentence) and decoded by the decoder's own call."""
    out = numpy.zeros((len(doc),), dtype=numpy.int64)
    if not len(doc):
        return out
    atoms = pipe.model.atoms(doc, pipe.name)
    allowed = pipe._position_mask(doc, None)
    rtl = pipe.cfg.get("direction", "ltr") == "rtl"
    for a, b, ka, kb in decode_windows(doc):
        pipe._bind_arrays(atoms[a:b], allowed[a:b] if allowed is not None else None)
        got = pipe._decode()
        if rtl:
            got = got[::-1]
        out[ka:kb] = got[ka - a:kb - a]
    return out


def reference_parse(parser, doc):
    """Each sentence (or window of a Doc without sentences) bound alone and decoded."""
    atoms = parser.model.atoms(doc, parser.name)
    spans, allow_break = parser._spans(doc) if len(doc) else ([], False)
    rows = numpy.array([(start, end, int(allow_break)) for start, end in spans], dtype=numpy.int64)
    decoder, param = parser._decoder_setting()
    return parse_reference(parser.system, decoder, param, atoms, rows.reshape((-1, 3)),
                           parser_module.PARSE_WINDOW, unattached=len(parser.cfg["labels"]))


def _configured(pipe, config):
    saved = dict(pipe.cfg)
    pipe.cfg.update(config)
    pipe._labels_changed()   # the direction changes the system's constraints
    return saved


def _restore(pipe, saved):
    pipe.cfg.clear()
    pipe.cfg.update(saved)
    pipe._labels_changed()


@pytest.fixture(scope="module")
def random_nlp():
    """A pipeline whose chunker has random weights on every feature the test docs can fire, so
    its decisions (B, I or O anywhere) exercise every constraint."""
    nlp = train_pipeline(n_train=10, epochs=1)
    chunker = nlp.get_pipe("structperc_chunker")
    random_weights(chunker.model.templates, chunker.model.weights,
                   [chunker.model.atoms(doc) for doc in make_docs(nlp)], chunker.n_classes,
                   numpy.random.default_rng(0), scale=10.0)
    return nlp


@pytest.mark.parametrize("factory,config", LABELLERS, ids=lambda x: str(x))
def test_labellers_decode_a_batch_as_each_window_alone(nlp, random_nlp, small_windows, factory, config):
    if factory == "structperc_chunker":
        nlp = random_nlp
    pipe = nlp.get_pipe(factory)
    saved = _configured(pipe, config)
    try:
        docs = make_docs(nlp)
        got = pipe.predict(docs)
        assert len(got) == len(docs)
        for doc, classes in zip(docs, got):
            assert classes.tolist() == reference_labels(pipe, doc).tolist()
    finally:
        _restore(pipe, saved)


@pytest.mark.parametrize("config", PARSERS, ids=str)
def test_parser_decodes_a_batch_as_each_sentence_or_window_alone(nlp, small_windows, config):
    pipe = nlp.get_pipe("structperc_parser")
    saved = _configured(pipe, config)
    try:
        docs = make_docs(nlp)
        got = pipe.predict(docs)
        for doc, (heads, classes) in zip(docs, got):
            want_heads, want_classes = reference_parse(pipe, doc)
            assert heads.tolist() == want_heads.tolist()
            assert classes.tolist() == want_classes.tolist()
    finally:
        _restore(pipe, saved)


def test_nlp_pipe_gives_the_single_doc_results_at_every_batch_size(nlp, small_windows):
    expected = [annotations(nlp(doc)) for doc in make_docs(nlp, tagged=False)]
    for batch_size in (1, 3, 1000):
        got = [annotations(d) for d in nlp.pipe(make_docs(nlp, tagged=False), batch_size=batch_size)]
        assert got == expected, batch_size
    # Something was found: the comparison is not between empty annotations.
    assert any(ents for _, _, _, ents, _, _ in expected) and any(chunks for *_, chunks, _ in expected)


def check_threads_agree_with_one_thread(nlp, sizes):
    """Three threads, each running nlp.pipe at every batch size of `sizes`, give the one-thread
    annotations."""
    expected = [annotations(d) for d in nlp.pipe(make_docs(nlp, tagged=False), batch_size=1000)]
    results = run_threads(lambda k: [annotations(d) for d in nlp.pipe(make_docs(nlp, tagged=False),
                                                                      batch_size=sizes[k])],
                          len(sizes), 3)
    for per_thread in results:
        assert per_thread == [expected] * len(sizes)


def test_threads_with_different_batch_sizes_agree_with_one_thread(nlp, small_windows):
    check_threads_agree_with_one_thread(nlp, (1, 5, 1000))


# Atoms: the C gather against the Python definition ---------------------------------------------

def _extractor():
    clusters = {}
    for i, word in enumerate(["the", "dog", "London", "eggs", "of", "said", "run"]):
        from spacy.strings import hash_string
        clusters[hash_string(word)] = 0b1000 + 3 * i + 1
    tables = {"index": {"noun": ["dog", "egg", "run"], "verb": ["run", "say"], "adj": ["green"], "adv": []},
              "exc": {"noun": [], "verb": ["said"], "adj": [], "adv": []},
              "rules": {"noun": [["s", ""]], "verb": [["s", ""], ["ing", ""]], "adj": [], "adv": []}}
    names = sorted(LEXICAL_ATOMS) + sorted(CLUSTER_ATOMS) + list(LEXICON_ATOMS) + sorted(DOC_ATOMS)
    return AtomExtractor(names, clusters=clusters, lexicon=Lexicon(tables))


def python_atoms(extractor, doc):
    """Token by token, each atom from its definition in features.py."""
    rows = []
    for token in doc:
        text, row = token.text, []
        readings = extractor.lexicon.analyze(text)
        for name in extractor.atom_names:
            if name in LEXICAL_ATOMS:
                row.append(LEXICAL_ATOMS[name](text))
            elif name in CLUSTER_ATOMS:
                row.append(_cluster_atom(name, CLUSTER_ATOMS[name], extractor.cluster_of(text)))
            elif name == "lex":
                row.append(_h("lex", "|".join(f"{p}{r}" for p, r in sorted(readings.items())) or "none"))
            elif name in LEXICON_ATOMS:
                row.append(_h(name, readings.get(name[4:])))
            else:
                row.append(token.tag if name == "tag" else token.pos)
        rows.append(row)
    return numpy.array(rows, dtype=numpy.uint64).reshape((len(doc), len(extractor.atom_names)))


def _check_batches(extractor, docs):
    want = [python_atoms(extractor, doc) for doc in docs]
    for _ in range(2):   # the first call fills the table, the second reads it
        got = extractor.batch(docs)
        assert got.offsets.tolist() == numpy.cumsum([0] + [len(d) for d in docs]).tolist()
        for k, doc in enumerate(docs):
            assert got.doc_atoms(k).tolist() == want[k].tolist()
            assert extractor(doc).tolist() == want[k].tolist()


@pytest.mark.slow
def test_atom_batches_equal_the_python_definition_on_ewt_words(data_dir):
    import spacy
    from conllu_data import read_conllu
    nlp = spacy.blank("en")
    docs = []
    for gold in read_conllu(data_dir / "ud_en_ewt" / "en_ewt-ud-dev.conllu", limit=600):
        doc = Doc(nlp.vocab, words=[t.text for t in gold], tags=[t.tag_ for t in gold],
                  pos=[t.pos_ for t in gold])
        docs.append(doc)
    extractor = _extractor()
    _check_batches(extractor, docs[:300])
    _check_batches(extractor, docs)   # half new words, half known
    assert len(extractor._table) > 2000


def test_atom_batches_equal_the_python_definition_on_random_strings():
    hypothesis = require_module("hypothesis")
    st = hypothesis.strategies
    import spacy
    nlp = spacy.blank("en")
    extractor = _extractor()
    word = st.text(min_size=1, max_size=12).filter(lambda w: not w.isspace())

    @hypothesis.given(st.lists(st.lists(word, max_size=8), min_size=1, max_size=5))
    def check(texts):
        docs = [Doc(nlp.vocab, words=words, tags=["NN"] * len(words), pos=["NOUN"] * len(words))
                for words in texts]
        _check_batches(extractor, docs)

    check()


def test_loaded_pipeline_threads_agree_with_one_thread_through_the_type_cache(nlp, small_windows, tmp_path):
    # A loaded model scores through each thread's own word-type cache, whose entries do not
    # depend on what that thread decoded before: every thread and batch size gives one answer.
    import spacy
    from spacy_structperc._core import tagging
    assert tagging.type_cache()
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    check_threads_agree_with_one_thread(loaded, (1, 7, 1000))
    assert loaded.get_pipe("structperc_tagger").system.type_cache_entries > 0


def test_predict_calls_keep_a_loaded_models_weights_version(nlp, tmp_path):
    # The word-type cache lives as long as the weights' version: predict calls must not bump it.
    import spacy
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    list(loaded.pipe(make_docs(loaded, tagged=False), batch_size=5))
    versions = [pipe.model.weights.version for _, pipe in loaded.pipeline]
    entries = loaded.get_pipe("structperc_tagger").system.type_cache_entries
    list(loaded.pipe(make_docs(loaded, tagged=False), batch_size=5))
    assert [pipe.model.weights.version for _, pipe in loaded.pipeline] == versions
    assert loaded.get_pipe("structperc_tagger").system.type_cache_entries == entries > 0


# Bulk writing (set_annotations from the batch's arrays) against the Span-per-span write ----------

def _random_batch_classes(pipe, docs, rng):
    """Random class ids for `docs` (any of O, B-X, I-X anywhere, so I after O or after another
    type occurs), as predict returns them: a BatchClasses carrying the attributes read."""
    from spacy_structperc.pipeline.sequence import BatchClasses

    atoms = pipe.model.atoms.batch(docs, pipe.name, pipe.read_attrs)
    n_bio = 1 + 2 * len(pipe.labels)
    classes = rng.integers(0, n_bio, size=len(atoms.atoms)).astype(numpy.int32)
    classes[rng.random(len(classes)) < 0.4] = 0
    return BatchClasses(classes, atoms.offsets, atoms.extra)


def _ner_reference(ner, docs, batch_classes):
    """What the NER wrote before the bulk write: a Span per entity, `doc.ents = preset + found`."""
    from spacy_structperc.pipeline.bio import chunks_by_doc

    for doc, chunks in zip(docs, chunks_by_doc(list(batch_classes))):
        hashes = ner._label_hashes_for([doc])
        preset = list(doc.ents)
        found = [Span(doc, s, e, label=hashes[k]) for s, e, k in chunks]
        if preset:
            taken = numpy.zeros((len(doc),), dtype=bool)
            for ent in preset:
                taken[ent.start:ent.end] = True
            found = preset + [span for span in found if not taken[span.start:span.end].any()]
        doc.ents = found


def _ner_docs(nlp, vocab=None):
    """make_docs' Docs (one with preset entities, empty ones), a token with a KB id outside any
    entity and one entity with a KB id and an entity id, tokens marked O and missing."""
    docs = make_docs(nlp)
    if vocab is not None:
        docs = [Doc(vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]) for d in docs]
    docs[0][2].ent_kb_id_ = "Q1"              # no entity: its KB id stays
    docs[5].ents = [Span(docs[5], 2, 4, label="PER", kb_id="Q2", span_id="id7")]
    docs[7].set_ents([], default="outside")    # all O: free, as missing
    return docs


def _ent_arrays(docs):
    from spacy.attrs import ENT_ID, ENT_IOB, ENT_KB_ID, ENT_TYPE

    return [(d.to_array([ENT_IOB, ENT_TYPE, ENT_KB_ID, ENT_ID]).tolist(),
             [(e.start, e.end, e.label_, e.kb_id_, e.id_) for e in d.ents]) for d in docs]


@pytest.mark.parametrize("as_list", [False, True])
@pytest.mark.parametrize("foreign_vocab", [False, True])
def test_ner_bulk_write_equals_the_span_write(nlp, as_list, foreign_vocab):
    from spacy.vocab import Vocab

    ner = nlp.get_pipe("structperc_ner")
    rng = numpy.random.default_rng(1)
    kept_outside = 0
    for trial in range(4):
        vocab = Vocab() if foreign_vocab else None
        docs, reference = _ner_docs(nlp, vocab), _ner_docs(nlp, vocab)
        preds = _random_batch_classes(ner, docs, rng)
        _ner_reference(ner, reference, preds)
        ner.set_annotations(docs, [numpy.array(c) for c in preds] if as_list else preds)
        assert _ent_arrays(docs) == _ent_arrays(reference)
        assert sum(len(d.ents) for d in docs) > 20
        token = docs[0][2]
        if token.ent_iob_ == "O":
            assert token.ent_kb_id_ == "Q1"
            kept_outside += 1
        assert [(e.start, e.end, e.kb_id_, e.id_) for e in docs[5].ents if e.label_ == "PER"][:1] == [(2, 4, "Q2", "id7")]
    assert kept_outside


@pytest.mark.parametrize("as_list", [False, True])
def test_chunker_write_equals_the_span_write(nlp, as_list):
    from spacy_structperc.pipeline.bio import chunks_by_doc

    chunker = nlp.get_pipe("structperc_chunker")
    key = chunker.cfg["spans_key"]
    docs, reference = make_docs(nlp), make_docs(nlp)
    preds = _random_batch_classes(chunker, docs, numpy.random.default_rng(2))
    for doc, chunks in zip(reference, chunks_by_doc(list(preds))):
        doc.spans[key] = [Span(doc, s, e, label=chunker.labels[k]) for s, e, k in chunks]
    chunker.set_annotations(docs, [numpy.array(c) for c in preds] if as_list else preds)

    def spans(d):
        return [(s.start, s.end, s.start_char, s.end_char, s.label_, s.text) for s in d.spans[key]]

    assert [spans(d) for d in docs] == [spans(d) for d in reference]
    assert sum(len(d.spans[key]) for d in docs) > 20


@pytest.mark.parametrize("factory", ["structperc_tagger", "structperc_chunker", "structperc_ner"])
def test_predictions_of_other_docs_raise_a_coded_error(nlp, factory):
    pipe = nlp.get_pipe(factory)
    docs = [d for d in make_docs(nlp) if len(d)][:4]
    preds = pipe.predict(docs)
    for wrong in (docs[1:] + docs[:1], docs[:-1]):
        with pytest.raises(ValueError, match=r"\[S303\]"):
            pipe.set_annotations(wrong, preds)
        with pytest.raises(ValueError, match=r"\[S303\]"):
            pipe.set_annotations(wrong, list(preds))
    # The same Docs again (annotated since): a BatchClasses is still theirs.
    pipe.set_annotations(docs, preds)


def test_a_batch_with_one_untagged_doc_raises_s300_through_pipe(nlp):
    docs = make_docs(nlp)
    k = next(i for i in range(4, len(docs)) if len(docs[i]))
    docs[k] = Doc(nlp.vocab, words=[t.text for t in docs[k]])    # no tags
    chunker = nlp.get_pipe("structperc_chunker")
    assert "tag" in chunker.model.atom_names
    with pytest.raises(ValueError, match=r"\[S300\] Component 'structperc_chunker'.*token\.tag_"):
        list(chunker.pipe(docs, batch_size=100))
    with pytest.raises(ValueError, match=r"\[S300\] Component 'structperc_chunker'.*token\.tag_"):
        chunker(docs[k])
    # The error handler gets the batch, and the other batches go on.
    seen = []
    chunker.set_error_handler(lambda name, pipe, batch, e: seen.append((name, len(batch), "S300" in str(e))))
    try:
        out = list(chunker.pipe(docs, batch_size=3))
    finally:
        chunker.set_error_handler(spacy.util.raise_error)
    assert seen == [("structperc_chunker", 3, True)] and len(out) == len(docs) - 3
