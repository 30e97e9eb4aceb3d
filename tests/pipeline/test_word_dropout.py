"""word_dropout (structperc_parser, structperc_ner): a share of the training tokens' words hidden
from the features, so a model learns to do without them as it must for words it never saw."""
import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st

import spacy_structperc  # noqa: F401
from spacy_structperc.atoms import WORD_ATOMS, hide_words
from spacy_structperc.ner import component as ner_component

from tests.ner.test_ner_two_stage import trained_nlp as trained_ner, docs_of, ents_of
from tests.parser.test_parser import TEST_WORDS, parse_of, tagged, train as train_parser
from tests.tagger.test_tagger import make_nlp as make_tagger, tags_of, train as train_tagger

NAMES = ["bias", "lower", "shape", "orth", "tag"]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), p=st.floats(0.0, 0.99), seed=st.integers(0, 2**32 - 1))
def test_hide_words_hides_whole_words_and_nothing_else(n, p, seed):
    rng = numpy.random.default_rng(seed)
    atoms = rng.integers(1, 2**63, size=(n, len(NAMES)), dtype=numpy.uint64)
    before = atoms.copy()
    out = hide_words(atoms, NAMES, p, seed)
    assert (atoms == before).all()   # the input is left as it was
    assert out.shape == atoms.shape
    words = [i for i, name in enumerate(NAMES) if name in WORD_ATOMS]
    others = [i for i in range(len(NAMES)) if i not in words]
    assert (out[:, others] == atoms[:, others]).all()
    hidden = (out[:, words] == 0)
    # A token loses all of its word atoms or none; the rest keep their values.
    assert (hidden.all(axis=1) | ~hidden.any(axis=1)).all()
    assert (out[:, words][~hidden] == atoms[:, words][~hidden]).all()
    # The same seed hides the same tokens.
    assert (hide_words(atoms, NAMES, p, seed) == out).all()
    if p == 0:
        assert out is atoms


def test_hide_words_hides_about_the_share_asked_for():
    atoms = numpy.ones((20000, len(NAMES)), dtype=numpy.uint64)
    for p in (0.1, 0.5):
        share = (hide_words(atoms, NAMES, p, 7)[:, NAMES.index("lower")] == 0).mean()
        assert abs(share - p) < 0.02, (p, share)
    # Different seeds hide different tokens.
    assert not (hide_words(atoms, NAMES, 0.5, 1) == hide_words(atoms, NAMES, 0.5, 2)).all()


@pytest.mark.parametrize("factory", ["structperc_tagger", "structperc_parser", "structperc_ner"])
@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5])
def test_bad_word_dropout_is_a_coded_error_naming_the_pipe(factory, value):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=r"S012.*word_dropout.*'mine'"):
        nlp.add_pipe(factory, name="mine", config={"word_dropout": value})


def test_parser_word_dropout_is_reproducible_changes_training_and_is_saved(tmp_path):
    _, parser0 = train_parser({"word_dropout": 0.0}, epochs=6)
    nlp1, parser1 = train_parser({"word_dropout": 0.5}, epochs=6)
    _, parser2 = train_parser({"word_dropout": 0.5}, epochs=6)
    assert parser1.model.to_bytes() == parser2.model.to_bytes()
    assert parser1.model.to_bytes() != parser0.model.to_bytes()
    # Prediction hides nothing: the setting is read only in training.
    docs = [tagged(nlp1, w) for w in TEST_WORDS]
    parses = [parse_of(d) for d in nlp1.pipe(docs)]
    parser1.cfg["word_dropout"] = 0.0
    assert [parse_of(d) for d in nlp1.pipe([tagged(nlp1, w) for w in TEST_WORDS])] == parses
    parser1.cfg["word_dropout"] = 0.5
    nlp1.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    assert loaded.get_pipe("structperc_parser").cfg["word_dropout"] == 0.5
    assert [parse_of(d) for d in loaded.pipe([tagged(loaded, w) for w in TEST_WORDS])] == parses


def test_tagger_word_dropout_is_reproducible_changes_training_and_is_saved(tmp_path):
    models = []
    for p in (0.5, 0.5, 0.0):
        nlp, tagger = make_tagger({"word_dropout": p})
        train_tagger(nlp, n_iter=4)
        models.append((nlp, tagger))
    (nlp1, tagger1), (_, tagger2), (_, tagger0) = models
    assert tagger1.model.to_bytes() == tagger2.model.to_bytes()
    assert tagger1.model.to_bytes() != tagger0.model.to_bytes()
    tags = tags_of(nlp1)
    tagger1.cfg["word_dropout"] = 0.0   # read only in training
    assert tags_of(nlp1) == tags
    tagger1.cfg["word_dropout"] = 0.5
    nlp1.to_disk(tmp_path / "t")
    loaded = spacy.load(tmp_path / "t")
    assert loaded.get_pipe("structperc_tagger").cfg["word_dropout"] == 0.5
    assert tags_of(loaded) == tags


def test_ner_word_dropout_is_reproducible_and_changes_training():
    a = trained_ner(n_iter=4, word_dropout=0.5)
    b = trained_ner(n_iter=4, word_dropout=0.5)
    c = trained_ner(n_iter=4)
    assert a.get_pipe("structperc_ner").model.to_bytes() == b.get_pipe("structperc_ner").model.to_bytes()
    assert a.get_pipe("structperc_ner").model.to_bytes() != c.get_pipe("structperc_ner").model.to_bytes()
    assert [ents_of(d) for d in a.pipe(docs_of(a))] == [ents_of(d) for d in b.pipe(docs_of(b))]


def test_ner_second_stage_reads_the_words_even_where_they_are_hidden(monkeypatch):
    # The first stage's labels are aggregated over each word's other occurrences: which tokens
    # are the same word must come from the words, not from the hidden copy the features read.
    seen = []
    real = ner_component.stage_atoms

    def recording(words, *args, **kwargs):
        seen.append(numpy.array(words))
        return real(words, *args, **kwargs)

    monkeypatch.setattr(ner_component, "stage_atoms", recording)
    trained_ner(n_iter=2, word_dropout=0.9)
    assert seen and all((w != 0).all() for w in seen)
