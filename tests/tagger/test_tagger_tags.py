"""tagger_features.v1's `tags`: a universal POS tagger that reads the fine tags an earlier tagger
set, on both sides of each token (configs/pos.cfg, the English pipeline's "upos")."""
import random

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structperc.tagger.features import tagger_features

WORDS = ["a", "b", "c", "d"]
FINE = ["XA", "XB", "XC"]


def upos_of(fine):
    """The universal POS of each token, decided by the fine tag of the token on its right, which
    a left-to-right tagger can read only as an annotation already on the Doc."""
    return [("NOUN" if nxt == "XA" else "VERB") for nxt in fine[1:]] + ["ADJ"]


def random_docs(vocab, n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(2, 8)
        words = [rng.choice(WORDS) for _ in range(length)]
        fine = [rng.choice(FINE) for _ in range(length)]
        out.append((Doc(vocab, words=words, tags=fine), upos_of(fine)))
    return out


def make_upos(tags):
    nlp = spacy.blank("en")
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.tagger_features.v1", "tags": tags}}
    nlp.add_pipe("structperc_tagger", name="upos", config={"attr": "pos", "model": model})
    return nlp


def train(nlp, n_docs=300, epochs=5):
    examples = [Example.from_dict(doc, {"pos": pos}) for doc, pos in random_docs(nlp.vocab, n_docs, seed=0)]
    nlp.initialize(lambda: examples)
    for _ in range(epochs):
        nlp.update(examples)
    return nlp


def accuracy(nlp, seed=1):
    test = random_docs(nlp.vocab, 100, seed)
    docs = nlp.pipe([Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]) for d, _ in test])
    pairs = [(t.pos_, gold) for doc, (_, pos) in zip(docs, test) for t, gold in zip(doc, pos)]
    return sum(p == g for p, g in pairs) / len(pairs)


@pytest.fixture(scope="module")
def trained():
    return train(make_upos(tags=2))


def test_the_templates_read_the_fine_tags_on_each_side():
    def offsets(templates):
        return sorted({p[0] for t in templates for p in t["parts"] if p[1:] == ["tag"]})

    assert offsets(tagger_features(tags=0)) == []
    assert offsets(tagger_features(tags=1)) == [-1, 0, 1]
    assert offsets(tagger_features(tags=2)) == [-2, -1, 0, 1, 2]


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_a_bad_window_is_a_coded_error(value):
    with pytest.raises(ValueError, match=r"S012.*tags"):
        tagger_features(tags=value)


def test_the_tagger_learns_what_only_the_tag_on_the_right_tells(trained):
    assert accuracy(trained) == 1.0
    # Without the fine tags, the same tagger can only guess: the words say nothing.
    assert accuracy(train(make_upos(tags=0))) < 0.8


def test_pipe_equals_call_and_a_saved_tagger_predicts_the_same(trained):
    docs = [d for d, _ in random_docs(trained.vocab, 20, seed=2)]
    copies = [Doc(trained.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]) for d in docs]
    piped = [[t.pos_ for t in doc] for doc in trained.pipe(docs, batch_size=3)]
    called = [[t.pos_ for t in trained(doc)] for doc in copies]
    assert piped == called
    loaded = make_upos(tags=2)
    loaded.from_bytes(trained.to_bytes())
    again = [Doc(trained.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]) for d in docs]
    assert [[t.pos_ for t in loaded(doc)] for doc in again] == called


def test_a_doc_without_fine_tags_is_refused_naming_the_pipe(trained):
    with pytest.raises(ValueError, match=r"S300.*'upos'.*TAG"):
        trained(Doc(trained.vocab, words=["a", "b"]))
