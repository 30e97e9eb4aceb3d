"""docarrays: a batch of Docs read and written in one call must give exactly what Doc.to_array,
Doc.has_annotation("SENT_START") and Doc.from_array per Doc give, on the compiled path and on the
Python one (forced), and a trained pipeline must annotate identically on both."""
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.attrs import (DEP, ENT_IOB, ENT_KB_ID, ENT_TYPE, HEAD, IDX, IS_ALPHA, IS_PUNCT, LEMMA, LOWER,
                         MORPH, NORM, ORTH, POS, SENT_START, SHAPE, SPACY, TAG)
from spacy.tokens import Doc, Span

from spacy_structperc import docarrays

sys.path.insert(0, str(Path(__file__).resolve().parent / "reliability"))
from threaded_nlp import annotations, random_texts, train_pipeline  # noqa: E402

READ_ATTRS = [ORTH, LOWER, NORM, SHAPE, IS_ALPHA, IS_PUNCT, SPACY, IDX, LEMMA, TAG, POS, HEAD, DEP,
              SENT_START, ENT_IOB, ENT_TYPE, ENT_KB_ID, MORPH]
CHECK_ATTRS = [HEAD, DEP, SENT_START, TAG, POS, ENT_IOB, ENT_TYPE, ENT_KB_ID]


@pytest.fixture(params=["compiled", "python"])
def path(request):
    """Each test runs on both paths; the compiled one must be in use in this build."""
    if request.param == "compiled":
        assert docarrays.FAST_PATH, f"the compiled path is not in use: {docarrays.WHY_PYTHON}"
        yield request.param
    else:
        with docarrays.python_path():
            yield request.param


def test_the_compiled_path_is_used_and_was_built_for_this_spacy():
    from spacy_structperc import _docarrays
    assert docarrays.FAST_PATH, docarrays.WHY_PYTHON
    assert _docarrays.BUILT_FOR_SPACY.split(".")[:2] == spacy.about.__version__.split(".")[:2]
    with docarrays.python_path():
        assert not docarrays.FAST_PATH
    assert docarrays.FAST_PATH


def test_the_python_path_is_chosen_for_another_spacy(monkeypatch):
    from spacy_structperc import _docarrays
    monkeypatch.setattr(_docarrays, "BUILT_FOR_SPACY", "2.3.9")
    module, why = docarrays._load()
    assert module is None and "2.3.9" in why
    monkeypatch.setattr(_docarrays, "BUILT_FOR_SPACY", "")
    assert docarrays._load()[0] is None
    monkeypatch.setenv("STRUCTPERC_DOCARRAYS", "python")
    monkeypatch.setattr(_docarrays, "BUILT_FOR_SPACY", spacy.about.__version__)
    assert docarrays._load() == (None, "STRUCTPERC_DOCARRAYS=python")
    monkeypatch.delenv("STRUCTPERC_DOCARRAYS")
    assert docarrays._load()[0] is _docarrays


def hand_docs(vocab):
    """Empty, one-token and longer Docs; with and without sentence starts (set, unset, -1), a
    "sents" user hook, tags, a parse and entities."""
    docs = [Doc(vocab, words=[]),
            Doc(vocab, words=["Hello"]),
            Doc(vocab, words=["A", "b", "C", "d", "."], spaces=[True, False, True, True, False]),
            Doc(vocab, words=["x", "y", "z"], sent_starts=[True, False, True]),
            Doc(vocab, words=["p", "q", "r", "s"], sent_starts=[True, False, None, None]),
            Doc(vocab, words=["I", "saw", "her"], tags=["PRP", "VBD", "PRP"], pos=["PRON", "VERB", "PRON"],
                heads=[1, 1, 1], deps=["nsubj", "ROOT", "obj"]),
            Doc(vocab, words=["New", "York", "is", "big"], ents=["B-GPE", "I-GPE", "O", "O"]),
            Doc(vocab, words=[]),
            Doc(vocab, words=["u", "v"]),
            Doc(vocab, words=["one"], sent_starts=[True])]
    docs[8].user_hooks["sents"] = lambda doc: iter([doc[0:1], doc[1:2]])
    docs[2][0].set_morph("Number=Sing")   # a MORPH value to read
    docs[6].ents = [Span(docs[6], 0, 2, label="GPE", kb_id="Q60")]
    return docs


def ewt_docs(data_dir, limit=400):
    from conllu_data import read_conllu
    return read_conllu(data_dir / "ud_en_ewt" / "en_ewt-ud-test.conllu", limit=limit)


def reference_read(docs, attrs):
    columns = [doc.to_array(attrs).reshape((len(doc), len(attrs))) for doc in docs]
    return numpy.concatenate(columns) if columns else numpy.zeros((0, len(attrs)), dtype=numpy.uint64)


def check_read(docs):
    for attrs in (READ_ATTRS, [ORTH, TAG], [SENT_START], [HEAD], ["orth", "Lower", "ENT_KB_ID"]):
        ids = docarrays.attr_ids(attrs)
        got = docarrays.read(docs, attrs)
        assert got.dtype == numpy.uint64 and got.shape == (sum(map(len, docs)), len(ids))
        numpy.testing.assert_array_equal(got, reference_read(docs, ids))
    assert docarrays.read(docs, []).shape == (sum(map(len, docs)), 0)
    assert docarrays.read([], [ORTH, TAG]).shape == (0, 2)
    expected = numpy.array([doc.has_annotation("SENT_START") for doc in docs], dtype=bool)
    numpy.testing.assert_array_equal(docarrays.has_sent_starts(docs), expected)
    numpy.testing.assert_array_equal(docarrays.has_user_hook(docs, "sents"),
                                     [("sents" in doc.user_hooks) for doc in docs])


def test_read_equals_to_array_on_hand_built_docs(path):
    docs = hand_docs(spacy.blank("en").vocab)
    check_read(docs)
    # The rule has_annotation follows: empty, one token and a user hook count as annotated.
    assert docarrays.has_sent_starts([docs[k] for k in (0, 1, 2, 3, 4, 8)]).tolist() == \
        [True, True, False, True, True, True]
    assert docarrays.read([docs[4]], [SENT_START])[:, 0].tolist() == [1, 2 ** 64 - 1, 0, 0]


def test_read_equals_to_array_on_ewt(path, data_dir):
    docs = ewt_docs(data_dir)
    assert sum(map(len, docs)) > 4000
    check_read(docs)
    check_read(docs[:1])


def token_structure(docs):
    return [[(t.left_edge.i, t.right_edge.i, t.n_lefts, t.n_rights, [c.i for c in t.children])
             for t in doc] for doc in docs]


def check_write(docs, offsets, attrs, values):
    """write on `docs` must leave them as from_array per Doc leaves copies of them."""
    expected = [doc.copy() for doc in docs]
    for doc, copied in zip(docs, expected):
        copied.user_hooks.update(doc.user_hooks)
    bounds = numpy.asarray(offsets).tolist()
    for doc, a, b in zip(expected, bounds, bounds[1:]):
        if a < b:
            doc.from_array(attrs, values[a:b])
    docarrays.write(docs, offsets, attrs, values)
    numpy.testing.assert_array_equal(reference_read(docs, CHECK_ATTRS), reference_read(expected, CHECK_ATTRS))
    assert token_structure(docs) == token_structure(expected)
    assert [doc.has_annotation("DEP") for doc in docs] == [doc.has_annotation("DEP") for doc in expected]
    assert [[(s.start, s.end) for s in doc.sents] for doc in docs if doc.has_annotation("SENT_START")] == \
        [[(s.start, s.end) for s in doc.sents] for doc in expected if doc.has_annotation("SENT_START")]


def random_parse(docs, rng, label_ids, with_deps=True):
    """Relative heads of random trees (one root per Doc, heads within the Doc) and labels."""
    rows = []
    for doc in docs:
        n = len(doc)
        for i in range(n):
            head = i if i == 0 else int(rng.integers(0, i))   # attached leftwards: a tree
            rel = (head - i) & (2 ** 64 - 1)
            rows.append((rel, int(rng.choice(label_ids)) if with_deps else 0))
    return numpy.array(rows, dtype=numpy.uint64).reshape((-1, 2))


def offsets_of(docs):
    offsets = numpy.zeros((len(docs) + 1,), dtype=numpy.int64)
    offsets[1:] = numpy.cumsum([len(d) for d in docs])
    return offsets


def test_write_heads_and_deps_equals_from_array(path, data_dir):
    rng = numpy.random.default_rng(0)
    for docs in (hand_docs(spacy.blank("en").vocab), ewt_docs(data_dir, limit=300)):
        vocab = docs[0].vocab
        labels = [vocab.strings.add(s) for s in ("nsubj", "obj", "ROOT", "det")]
        offsets = offsets_of(docs)
        check_write(docs, offsets, [HEAD, DEP], random_parse(docs, rng, labels))
        # Heads without any label: from_array sets no children then.
        check_write(docs, offsets, [HEAD, DEP], random_parse(docs, rng, labels, with_deps=False))
        check_write(docs, offsets, [DEP, HEAD], random_parse(docs, rng, labels)[:, ::-1].copy())
        check_write(docs, offsets, ["HEAD"], random_parse(docs, rng, labels)[:, :1].copy())


def test_write_tags_pos_and_entities_equals_from_array(path, data_dir):
    rng = numpy.random.default_rng(1)
    for docs in (hand_docs(spacy.blank("en").vocab), ewt_docs(data_dir, limit=300)):
        vocab = docs[0].vocab
        n = sum(map(len, docs))
        offsets = offsets_of(docs)
        tags = numpy.array([vocab.strings.add(t) for t in ("NN", "VB", "DT", "")], dtype=numpy.uint64)
        pos = numpy.array([spacy.parts_of_speech.IDS[p] for p in ("NOUN", "VERB", "DET", "")], dtype=numpy.uint64)
        k = rng.integers(0, 4, size=n)
        check_write(docs, offsets, [TAG, POS], numpy.stack([tags[k], pos[k]], axis=1))
        check_write(docs, offsets, [TAG], tags[rng.integers(0, 4, size=n)])   # 1-d values, one attr
        iob = rng.integers(0, 4, size=n).astype(numpy.uint64)
        types = numpy.where(iob == 2, 0, vocab.strings.add("ORG")).astype(numpy.uint64)
        kb = numpy.where(iob == 2, 0, vocab.strings.add("Q1")).astype(numpy.uint64)
        check_write(docs, offsets, [ENT_IOB, ENT_TYPE, ENT_KB_ID], numpy.stack([iob, types, kb], axis=1))
        check_write(docs, offsets, [SENT_START], rng.integers(0, 2, size=(n, 1)).astype(numpy.uint64))


def snapshot(docs):
    return reference_read(docs, CHECK_ATTRS).copy(), token_structure(docs)


@pytest.mark.parametrize("bad", ["head_after", "head_before", "iob", "length", "offsets"])
def test_a_bad_value_raises_and_leaves_every_doc_of_the_batch_unchanged(path, data_dir, bad):
    docs = ewt_docs(data_dir, limit=50)
    vocab = docs[0].vocab
    offsets = offsets_of(docs)
    values = random_parse(docs, numpy.random.default_rng(2), [vocab.strings.add("dep")])
    attrs = [HEAD, DEP]
    last = len(docs) - 1   # the error is in the last Doc: none before it may be written
    assert len(docs[last]) > 2
    row = int(offsets[last]) + 1
    code = "S304"
    if bad == "head_after":
        values[row, 0] = len(docs[last])
    elif bad == "head_before":
        values[row, 0] = numpy.uint64(2 ** 64 - 3)   # relative -3 from token 1
    elif bad == "iob":
        attrs, code = [ENT_IOB], "S305"
        values = numpy.full((len(values), 1), 2, dtype=numpy.uint64)
        values[row, 0] = 4
    elif bad == "length":
        offsets = offsets.copy()
        offsets[last] += 1
        code = "S306"
    else:
        offsets = offsets[:-1]
        code = "S307"
    before = snapshot(docs)
    with pytest.raises(ValueError, match=code) as err:
        docarrays.write(docs, offsets, attrs, values)
    if code in ("S304", "S305"):
        assert f"Doc {last} of the batch" in str(err.value) and "token 1 " in str(err.value)
    after = snapshot(docs)
    numpy.testing.assert_array_equal(after[0], before[0])
    assert after[1] == before[1]


def test_write_refuses_morph_non_uint64_values_and_repeated_attrs(path):
    docs = [Doc(spacy.blank("en").vocab, words=["a", "b"])]
    offsets = numpy.array([0, 2])
    for attrs, values in (([MORPH], numpy.zeros((2, 1), dtype=numpy.uint64)),
                          ([TAG], numpy.zeros((2, 1), dtype=numpy.int64)),
                          ([TAG, TAG], numpy.zeros((2, 2), dtype=numpy.uint64)),
                          ([TAG, POS], numpy.zeros((2, 1), dtype=numpy.uint64)),
                          ([], numpy.zeros((2, 0), dtype=numpy.uint64))):
        with pytest.raises(ValueError, match="S307"):
            docarrays.write(docs, offsets, attrs, values)


def test_both_paths_raise_the_same_error_first(data_dir):
    """Doc 1 has a bad ENT_IOB, Doc 2 a bad head: both paths name Doc 1's ENT_IOB."""
    docs = ewt_docs(data_dir, limit=4)
    offsets = offsets_of(docs)
    values = numpy.zeros((int(offsets[-1]), 2), dtype=numpy.uint64)
    values[:, 1] = 2
    values[offsets[1] + 2, 1] = 7
    values[offsets[2] + 1, 0] = 1000
    messages = []
    for force in (False, True):
        with pytest.raises(ValueError) as err:
            if force:
                with docarrays.python_path():
                    docarrays.write(docs, offsets, [HEAD, ENT_IOB], values)
            else:
                docarrays.write(docs, offsets, [HEAD, ENT_IOB], values)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "S305" in messages[0] and "Doc 1 " in messages[0]


def pipeline_docs(nlp):
    """Short, empty and long Docs, some with sentence starts, a user hook and preset entities."""
    docs = []
    for i, words in enumerate(random_texts(16, seed=5, max_sents=8)):
        starts = None
        if i % 3 == 0:
            starts = [w in ("I", "they", "we", "the") for w in words]
            starts[0] = True
        docs.append(Doc(nlp.vocab, words=words, sent_starts=starts))
        if i % 5 == 1:
            docs.append(Doc(nlp.vocab, words=[]))
    docs.append(Doc(nlp.vocab, words=["London"]))
    docs[4].ents = [Span(docs[4], 1, 2, label="GPE")]
    docs[6].user_hooks["sents"] = lambda doc: iter([doc[0:3], doc[3:]])
    return docs


@pytest.fixture(scope="module")
def trained_nlp():
    return train_pipeline(n_train=40, epochs=2)


def test_a_trained_pipeline_annotates_identically_on_both_paths(trained_nlp, data_dir):
    assert docarrays.FAST_PATH, docarrays.WHY_PYTHON
    nlp = trained_nlp
    ewt = [Doc(nlp.vocab, words=[t.text for t in g]) for g in ewt_docs(data_dir, limit=200)]
    results = []
    for force in (False, True):
        docs = pipeline_docs(nlp) + [Doc(nlp.vocab, words=[t.text for t in d]) for d in ewt]
        if force:
            with docarrays.python_path():
                out = list(nlp.pipe(docs, batch_size=17))
        else:
            out = list(nlp.pipe(docs, batch_size=17))
        results.append(([annotations(d) for d in out], reference_read(out, CHECK_ATTRS), token_structure(out)))
    assert results[0][0] == results[1][0]
    numpy.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2] == results[1][2]
    assert any(d for d in results[0][0] if d[1])   # something was parsed


def test_the_compiled_write_refuses_rows_that_would_write_outside_a_doc():
    # docarrays.write checks a batch before the compiled write; called directly, the compiled
    # write still refuses, before writing anything, what would touch memory outside a Doc.
    from spacy_structperc import _docarrays
    vocab = spacy.blank("en").vocab
    docs = [Doc(vocab, words=["a", "b"]), Doc(vocab, words=["c", "d", "e"])]
    dep = vocab.strings.add("dep")
    good = numpy.array([[1, dep], [0, dep], [0, dep], [-1, dep], [-2, dep]], dtype=numpy.int64).view(numpy.uint64)
    offsets = numpy.array([0, 2, 5], dtype=numpy.int64)
    for values, offs in ((good.copy(), numpy.array([0, 3, 5], dtype=numpy.int64)),
                         (good.copy(), numpy.array([0, 2], dtype=numpy.int64))):
        with pytest.raises(ValueError, match="S307"):
            _docarrays.write(docs, offs, [HEAD, DEP], numpy.ascontiguousarray(values))
    outside = good.copy()
    outside[4, 0] = numpy.uint64(5)   # the last token's head 5 tokens on: outside its Doc
    with pytest.raises(ValueError, match="S307"):
        _docarrays.write(docs, offsets, [HEAD, DEP], outside)
    assert all(not d.has_annotation("DEP") for d in docs)
    _docarrays.write(docs, offsets, [HEAD, DEP], good)
    assert [t.head.i for t in docs[1]] == [0, 0, 0] and docs[0][0].head.i == 1
