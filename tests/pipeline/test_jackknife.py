"""python -m spacy_structperc jackknife and the documents corpus's predicted_tags: every training
Doc tagged by a tagger trained without it, and those tags on the predicted side of its Example."""
import random

import pytest
import spacy
import spacy.cli.train
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from spacy_structperc.__main__ import main
from spacy_structperc.documents import create_documents_corpus
from spacy_structperc.jackknife import TAGS_KEY, fold_of, jackknife_tags

CONFIG = """
[paths]
train = null
dev = null

[nlp]
lang = "en"
pipeline = ["tagger"]

[components]

[components.tagger]
factory = "structperc_tagger"

[components.tagger.model]
@architectures = "spacy-structperc.AveragedPerceptron.v1"

[components.tagger.model.features]
@misc = "spacy-structperc.tagger_features_small.v1"

[corpora]

[corpora.train]
@readers = "spacy.Corpus.v1"
path = ${paths.train}

[corpora.dev]
@readers = "spacy.Corpus.v1"
path = ${paths.dev}

[training]
max_epochs = 4
patience = 0
eval_frequency = 1000

[training.score_weights]
tag_acc = 1.0
"""


def make_docs(n, seed=0):
    """Docs of words that each occur in one Doc only, whose tag only the word tells: a tagger
    that saw a Doc knows its tags, one that did not can only guess."""
    rng = random.Random(seed)
    vocab = Vocab()
    docs = []
    for i in range(n):
        words = [f"w{i}x{j}" for j in range(4)]
        docs.append(Doc(vocab, words=words, tags=[rng.choice("AB") for _ in words]))
    return docs


@pytest.fixture(scope="module")
def jackknifed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jackknife")
    from spacy.cli.init_config import fill_config

    (tmp / "base.cfg").write_text(CONFIG)
    fill_config(tmp / "tagger.cfg", tmp / "base.cfg", silent=True)   # spacy train reads full configs
    docs = make_docs(40)
    DocBin(docs=docs).to_disk(tmp / "train.spacy")
    DocBin(docs=docs[:5]).to_disk(tmp / "dev.spacy")
    seen = []   # the texts each fold's tagger trained on, in fold order
    real_train = spacy.cli.train.train

    def recording_train(config_path, output_path=None, **kwargs):
        path = kwargs["overrides"]["paths.train"]
        seen.append({d.text for d in DocBin().from_disk(path).get_docs(Vocab())})
        return real_train(config_path, output_path, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(spacy.cli.train, "train", recording_train)
    try:
        summary = jackknife_tags(tmp / "tagger.cfg", tmp / "train.spacy", tmp / "out.spacy", folds=4,
                                 overrides={"paths.dev": str(tmp / "dev.spacy")})
    finally:
        mp.undo()
    out = list(DocBin().from_disk(tmp / "out.spacy").get_docs(Vocab()))
    return tmp, docs, out, seen, summary


def test_no_doc_is_tagged_by_a_tagger_that_trained_on_it(jackknifed):
    _, docs, _, seen, summary = jackknifed
    assert summary["folds"] == 4 and len(seen) == 4
    for i, doc in enumerate(docs):
        k = fold_of(i, 4)
        assert doc.text not in seen[k]
        assert all(doc.text in seen[j] for j in range(4) if j != k)


def test_the_output_keeps_the_gold_and_adds_a_tag_per_token(jackknifed):
    _, docs, out, _, summary = jackknifed
    assert [d.text for d in out] == [d.text for d in docs]
    assert [[t.tag_ for t in d] for d in out] == [[t.tag_ for t in d] for d in docs]
    assert all(len(d.user_data[TAGS_KEY]) == len(d) for d in out)
    assert all(set(d.user_data[TAGS_KEY]) <= {"A", "B"} for d in out)
    # Words seen in no other Doc: the held-out taggers guess, so the tags are far from the gold,
    # where a tagger trained on every Doc would have learnt them.
    right = sum(t.tag_ == p for d in out for t, p in zip(d, d.user_data[TAGS_KEY]))
    assert summary["accuracy"] == pytest.approx(right / sum(len(d) for d in out))
    assert summary["accuracy"] < 0.8


def test_the_reader_puts_the_stored_tags_on_the_predicted_docs(jackknifed):
    tmp, _, out, _, _ = jackknifed
    nlp = spacy.blank("en")
    examples = list(create_documents_corpus(tmp / "out.spacy", predicted_tags=True)(nlp))
    assert [[t.tag_ for t in eg.predicted] for eg in examples] == [list(d.user_data[TAGS_KEY]) for d in out]
    assert [[t.tag_ for t in eg.reference] for eg in examples] == [[t.tag_ for t in d] for d in out]
    # Without predicted_tags the predicted Docs have the words only, as before.
    plain = list(create_documents_corpus(tmp / "out.spacy")(nlp))
    assert not any(eg.predicted.has_annotation("TAG") for eg in plain)


def test_a_file_without_stored_tags_and_a_merging_reader_are_refused(jackknifed):
    tmp, _, _, _, _ = jackknifed
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=r"S430.*Doc 0"):
        list(create_documents_corpus(tmp / "train.spacy", predicted_tags=True)(nlp))
    with pytest.raises(ValueError, match=r"S433"):
        create_documents_corpus(tmp / "out.spacy", predicted_tags=True, sentences_per_doc=10)


@pytest.mark.parametrize("folds", [1, 0, 41, True])
def test_folds_out_of_range_are_refused_before_any_training(jackknifed, folds, monkeypatch):
    tmp, _, _, _, _ = jackknifed
    monkeypatch.setattr(spacy.cli.train, "train", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match=r"S431"):
        jackknife_tags(tmp / "tagger.cfg", tmp / "train.spacy", tmp / "x.spacy", folds=folds)


def test_a_missing_component_is_named(jackknifed):
    tmp, _, _, _, _ = jackknifed
    with pytest.raises(ValueError, match=r"S432.*'upos'"):
        jackknife_tags(tmp / "tagger.cfg", tmp / "train.spacy", tmp / "x.spacy", folds=2,
                       component="upos", overrides={"paths.dev": str(tmp / "dev.spacy"), "training.max_epochs": 1})


def test_the_command_line_writes_the_file(jackknifed, capsys):
    tmp, docs, _, _, _ = jackknifed
    assert main(["jackknife", str(tmp / "tagger.cfg"), str(tmp / "train.spacy"), str(tmp / "cli.spacy"),
                 "--folds", "2", "--paths.dev", str(tmp / "dev.spacy"), "--training.max_epochs", "1"]) == 0
    assert "Tagged 40 Docs (160 tokens) over 2 folds" in capsys.readouterr().out
    out = list(DocBin().from_disk(tmp / "cli.spacy").get_docs(Vocab()))
    assert len(out) == len(docs) and all(TAGS_KEY in d.user_data for d in out)
