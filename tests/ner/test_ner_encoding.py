"""structperc_ner's label encodings (scheme = "bio" | "bilou"): valid decoding, identical
doc.ents from either, missing gold kept missing, and the setting saved with the model."""
import json
import pickle

import numpy
import pytest
import spacy
from spacy.attrs import ENT_IOB, ENT_TYPE
from spacy.tokens import Doc

import spacy_structperc  # noqa: F401
from spacy_structperc.ner import encoding
from spacy_structperc.pipeline.sequence import decode_windows

from test_ner import TRAIN_DATA, WORDS_MODEL, ents_of, examples_of, train

LONG_TEXT = " ".join(t for t, _ in TRAIN_DATA) + " "


def make_nlp(**config):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "reset_every": 0, **config})
    return nlp


@pytest.fixture(scope="module")
def bilou():
    return train(make_nlp(scheme="bilou", n_latent=2), n_iter=12)


@pytest.fixture(scope="module")
def bio():
    return train(make_nlp(scheme="bio", n_latent=2), n_iter=12)


def bilou_valid(classes, n_types):
    """Whether a BILOU class sequence is in O | U-X | B-X I-X* L-X (and ends closed)."""
    open_type = None
    for c in classes:
        k, p = (None, "O") if c == 0 else ((c - 1) // 4, "BILU"[(c - 1) % 4])
        if open_type is None and p in "IL" or open_type is not None and (p not in "IL" or k != open_type):
            return False
        open_type = k if p in "BI" else None
        assert k is None or k < n_types
    return open_type is None


def test_encoding_tables():
    assert encoding.class_names(["PER"], "bilou") == ["O", "B-PER", "I-PER", "L-PER", "U-PER"]
    assert encoding.to_bio(2, "bilou").tolist() == [0, 1, 2, 2, 1, 3, 4, 4, 3]
    t = encoding.transitions(1, "bilou")   # rows: O B I L U start; columns: O B I L U
    assert t.tolist() == [[1, 1, 0, 0, 1], [0, 0, 1, 1, 0], [0, 0, 1, 1, 0],
                          [1, 1, 0, 0, 1], [1, 1, 0, 0, 1], [1, 1, 0, 0, 1]]


def test_gold_conversion_keeps_missing_tokens_missing():
    # BIO over types 0, 1 (B0=1 I0=2 B1=3 I1=4): U0 | B0 I0 L0 | O | B1 L1 | U1 U1 | U0 | end
    gold = numpy.array([1, 1, 2, 2, 0, 3, 4, 3, 3, 1])
    out, mask = encoding.from_bio(gold, 2, "bilou")
    assert out.tolist() == [4, 1, 2, 3, 0, 5, 7, 8, 8, 4] and mask is None
    # B before a missing token may be B or U, I before one I or L; the missing stay missing.
    out, mask = encoding.from_bio(numpy.array([1, -1, 2, 0, 3, 4, -1]), 2, "bilou")
    assert out.tolist() == [-1, -1, 3, 0, 5, -1, -1]
    assert numpy.flatnonzero(mask[0]).tolist() == [1, 4]
    assert numpy.flatnonzero(mask[5]).tolist() == [6, 7]
    assert all(mask[i].all() for i in (1, 2, 3, 4, 6))
    out, mask = encoding.from_bio(gold, 2, "bio")
    assert out.tolist() == gold.tolist() and mask is None


def test_bilou_memorises_the_toy_set_and_writes_the_gold_entities(bilou):
    ner = bilou.get_pipe("structperc_ner")
    assert ner.n_classes == 2 * (1 + 4 * 3)
    for text, ents in TRAIN_DATA:
        assert ents_of(bilou(text)) == ents


def test_bilou_decodes_only_valid_sequences_with_random_weights():
    nlp = make_nlp(scheme="bilou", n_latent=3)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    ner.model.weights.set_noise(5.0, 1)     # huge noise: arbitrary scores for every feature seen
    nlp.update(examples)
    n_types = len(ner.labels)
    ner._to_bio = numpy.arange(ner.n_labels, dtype=numpy.int32)   # see the BILOU classes themselves
    rng = numpy.random.default_rng(0)
    vocab_words = [w for t, _ in TRAIN_DATA for w in t.split()]
    docs = [Doc(nlp.vocab, words=[str(w) for w in rng.choice(vocab_words, size=int(rng.integers(1, 12)))])
            for _ in range(40)]
    # Long Docs decoded in windows: whole sentences (closed at each window's end), or margins.
    words = [str(w) for w in rng.choice(vocab_words, size=2500)]
    sents = Doc(nlp.vocab, words=words, sent_starts=[i % 50 == 0 for i in range(2500)])
    docs += [sents, Doc(nlp.vocab, words=words)]
    predicted = ner.predict(docs)
    ends = 0
    for doc, classes in zip(docs[:-2], predicted):
        assert bilou_valid(classes.tolist(), n_types), classes
        ends += classes[-1] != 0
    assert ends > 5          # the noise does put entities at the ends, closed there
    pieces = [(a, b) for a, b, _, _ in decode_windows(sents)]
    assert len(pieces) > 1
    for a, b in pieces:
        assert bilou_valid(predicted[-2][a:b].tolist(), n_types)
    # One Doc at a time (the path training decodes by) is closed too.
    for doc in docs[:10]:
        ner._bind(doc)
        assert bilou_valid(ner._decode().tolist(), n_types)


def test_bio_and_bilou_write_identically_formed_doc_ents(bio, bilou):
    texts = [t for t, _ in TRAIN_DATA] + ["Peter Jones and Mary visited Paris and New York City ."]
    for text in texts:
        a, b = bio(text), bilou(text)
        for doc in (a, b):
            assert all(e.label_ in ("LOC", "ORG", "PER") for e in doc.ents)
            assert doc.has_annotation("ENT_IOB")
            iob = doc.to_array(ENT_IOB).tolist()
            assert set(iob) <= {1, 2, 3}           # every token I, O or B, none missing
            assert [i for i, v in enumerate(iob) if v == 3] == [e.start for e in doc.ents]
    for text, ents in TRAIN_DATA:
        a, b = bio(text), bilou(text)
        assert ents_of(a) == ents_of(b) == ents
        assert a.to_array([ENT_IOB, ENT_TYPE]).tolist() == b.to_array([ENT_IOB, ENT_TYPE]).tolist()
    assert bio.get_pipe("structperc_ner").class_names == bilou.get_pipe("structperc_ner").class_names


def test_pipe_equals_call_and_save_load_and_pickle_keep_the_scheme(bilou, tmp_path):
    texts = [t for t, _ in TRAIN_DATA] * 2 + [LONG_TEXT * 40]
    expected = [ents_of(bilou(t)) for t in texts]
    assert [ents_of(d) for d in bilou.pipe(texts, batch_size=2)] == expected
    bilou.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert loaded.get_pipe("structperc_ner").cfg["scheme"] == "bilou"
    assert [ents_of(d) for d in loaded.pipe(texts)] == expected
    # The component's own bytes into a BIO component: the saved scheme wins.
    fresh = make_nlp(scheme="bio", n_latent=2)
    fresh.get_pipe("structperc_ner").from_bytes(bilou.get_pipe("structperc_ner").to_bytes())
    assert fresh.get_pipe("structperc_ner").cfg["scheme"] == "bilou"
    assert [ents_of(fresh(t)) for t in texts] == expected
    clone = pickle.loads(pickle.dumps(bilou))
    assert [ents_of(clone(t)) for t in texts] == expected


def test_a_cfg_saved_before_the_scheme_existed_is_a_bio_model(bio, tmp_path):
    path = tmp_path / "ner"
    bio.get_pipe("structperc_ner").to_disk(path)
    cfg = json.loads((path / "cfg").read_text())
    del cfg["scheme"], cfg["checksum"]
    (path / "cfg").write_text(json.dumps(cfg))
    target = make_nlp(scheme="bilou", n_latent=2)
    target.get_pipe("structperc_ner").from_disk(path)
    assert target.get_pipe("structperc_ner").cfg["scheme"] == "bio"
    assert [ents_of(target(t)) for t, _ in TRAIN_DATA] == [ents_of(bio(t)) for t, _ in TRAIN_DATA]


@pytest.mark.parametrize("scheme", ["BIO", "biluo", "iob", ""])
def test_unknown_scheme_is_a_coded_error(scheme):
    with pytest.raises(ValueError, match=r"\[S008\].*scheme"):
        make_nlp(scheme=scheme)


def test_bilou_learns_from_a_b_before_a_missing_token_only_that_it_starts_an_entity():
    # Boston is B-LOC, its next token's annotation missing: B-LOC or U-LOC, not missing.
    nlp = make_nlp(scheme="bilou")
    nlp.initialize(lambda: examples_of(nlp))
    ner = nlp.get_pipe("structperc_ner")
    ref = Doc(nlp.vocab, words=["Zorbatown", "qqq"], ents=["B-LOC", ""])
    eg = spacy.training.Example(Doc(nlp.vocab, words=["Zorbatown", "qqq"]), ref)
    for _ in range(3):
        losses = ner.update([eg], losses={})
    assert losses["structperc_ner_updates"] == 0          # learnt in the first pass
    doc = nlp(Doc(nlp.vocab, words=["Zorbatown", "qqq"]))
    assert doc.ents and doc.ents[0].start == 0 and doc.ents[0].label_ == "LOC"


# Document context (features.document = true: atoms.CONTEXT_ATOMS) ------------------------------

STORY = ("SMITH WINS IN PARIS . Smith won the race in Paris on Sunday . The winner , Smith , "
         "said paris was great . Jones of Acme Corp came second .")


def test_context_atoms_read_the_other_occurrences_in_the_same_doc_only():
    from spacy_structperc.atoms import _DCASE, _EDGE, AtomExtractor
    nlp = spacy.blank("en")
    doc = nlp(STORY)
    extractor = AtomExtractor(["dcase", "dprev", "dnext"])
    atoms = extractor(doc)
    case = {int(v): bits for bits, v in enumerate(_DCASE.tolist())}   # title 1, upper 2, lower 4
    at = {t.text + str(t.i): atoms[t.i] for t in doc}
    lower = nlp.vocab.strings.add
    # The cases of the other occurrences, but for those at the Doc's or a sentence's start.
    assert [case[int(at[w][0])] for w in ("SMITH0", "Smith5", "Smith17")] == [1, 1, 0]
    assert [case[int(at[w][0])] for w in ("PARIS3", "Paris10", "paris20")] == [5, 6, 3]
    assert [case[int(at[w][0])] for w in ("the7", "The14", "Jones24")] == [0, 4, 0]
    # The words around the first other occurrence (the second, for the first), for words
    # capitalised somewhere off a sentence start.
    assert at["PARIS3"][1:].tolist() == [lower("in"), lower("on")]
    assert at["Paris10"][1:].tolist() == at["paris20"][1:].tolist() == [lower("in"), lower(".")]
    assert at["SMITH0"][1:].tolist() == [lower("."), lower("won")]
    assert at["Smith5"][1:].tolist() == at["Smith17"][1:].tolist() == [_EDGE["dprev"], lower("wins")]
    assert not at["race8"].any() and not at["The14"][1:].any() and not at["Jones24"].any()
    # Each Doc alone: the same atoms in any batch, and none from another Doc.
    other = nlp("Paris Paris smith")
    batch = extractor.batch([doc, other, doc]).atoms
    assert numpy.array_equal(batch[:len(doc)], atoms) and numpy.array_equal(batch[-len(doc):], atoms)
    assert numpy.array_equal(batch[len(doc):len(doc) + 3], extractor(other))


def test_document_features_through_nlp_and_pipe_are_the_same():
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False,
                          "document": True, "latent": "core", "label_level": True}}
    nlp = train(make_nlp(scheme="bilou", model=model), n_iter=8)
    ner = nlp.get_pipe("structperc_ner")
    assert {"dcase", "dprev", "dnext"} <= set(ner.model.atom_names)
    texts = [STORY, LONG_TEXT * 3, "Boston", ""] + [t for t, _ in TRAIN_DATA]
    single = [ents_of(nlp(t)) for t in texts]
    assert [ents_of(d) for d in nlp.pipe(texts, batch_size=3)] == single
    assert [ents_of(d) for d in nlp.pipe(texts[::-1], batch_size=2)] == single[::-1]
    for text, ents in TRAIN_DATA:
        assert ents_of(nlp(text)) == ents
    # With sentence boundaries, a Doc is decoded a sentence at a time (as training binds it).
    words = LONG_TEXT.split() * 2
    starts = [i == 0 or words[i - 1] == "." for i in range(len(words))]
    docs = [Doc(nlp.vocab, words=words, sent_starts=starts) for _ in range(2)]
    windows = ner._prepare(docs).windows.tolist()
    sents = [(s.start, s.end) for s in docs[0].sents]
    assert len(sents) == 8
    assert windows == [[s, e, s, e] for s, e in sents] + [[len(words) + s, len(words) + e] * 2 for s, e in sents]
    assert [ents_of(d) for d in nlp.pipe(docs)] == [ents_of(nlp(Doc(nlp.vocab, words=words, sent_starts=starts)))] * 2


def test_document_features_train_a_doc_of_sentences_one_sentence_at_a_time():
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False, "document": True}}
    nlp = make_nlp(scheme="bilou", model=model)
    nlp.initialize(lambda: examples_of(nlp))
    words = "Zorbatown is big . Qwertyville is nice . It is .".split()
    starts = [True, False, False, False, True, False, False, False, True, False, False]
    ents = ["B-LOC", "O", "O", "O", "B-LOC", "O", "O", "O", "O", "O", "O"]
    eg = spacy.training.Example(Doc(nlp.vocab, words=words, sent_starts=starts),
                                Doc(nlp.vocab, words=words, sent_starts=starts, ents=ents))
    losses = nlp.get_pipe("structperc_ner").update([eg], losses={})
    assert losses["structperc_ner_updates"] == 2       # two sentences wrong, one right


def test_conll2003_reader_documents_joins_each_documents_sentences(tmp_path):
    from spacy_structperc.readers import create_conll2003_reader
    text = ("-DOCSTART- -X- O O\n\nSmith NNP I-NP I-PER\nwins VBZ I-VP O\n\nParis NNP I-NP I-LOC\n. . O O\n\n"
            "-DOCSTART- -X- O O\n\nAcme NNP I-NP I-ORG\nCorp NNP I-NP I-ORG\n\n")
    path = tmp_path / "tiny.conll"
    path.write_text(text, encoding="utf8")
    nlp = spacy.blank("en")
    sentences = list(create_conll2003_reader(path)(nlp))
    documents = list(create_conll2003_reader(path, documents=True)(nlp))
    assert len(sentences) == 3 and len(documents) == 2
    first = documents[0]
    assert [t.text for t in first.reference] == ["Smith", "wins", "Paris", "."]
    assert [t.is_sent_start for t in first.predicted] == [True, False, True, False]
    assert [t.tag_ for t in first.predicted] == ["NNP", "VBZ", "NNP", "."] and not first.predicted.ents
    assert ents_of(first.reference) == [(0, 1, "PER"), (2, 3, "LOC")]
    assert ents_of(documents[1].reference) == [(0, 2, "ORG")]
