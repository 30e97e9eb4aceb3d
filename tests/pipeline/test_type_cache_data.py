"""The word-type cache on real data: a loaded tagger (UD EWT) and latent NER (JNLPBA) predict with
the cache what they predict without it, on at least 99.9% of tokens, with accuracy within 0.1.

The cache sums the rows of the templates that read one offset once per word type, so scores
differ from the per-template sums in float rounding only; the contract is this agreement."""
import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from conllu_data import read_conllu
from spacy_structperc._core import tagging
from spacy_structperc.readers import create_iob2_reader

MIN_AGREEMENT = 0.999
MAX_ACCURACY_CHANGE = 0.001


def _train(nlp, train, epochs, pipe_name):
    nlp.initialize(get_examples=lambda: train)
    for epoch in range(epochs):
        if hasattr(nlp.get_pipe(pipe_name), "start_epoch"):
            nlp.get_pipe(pipe_name).start_epoch(epoch)
        for i in range(0, len(train), 64):
            nlp.update(train[i:i + 64])


def _predict_both_ways(nlp_dir, examples, pipe_name, read):
    """The loaded pipeline's predictions (per token, via `read`) without and with the cache,
    and the cache's entry count after the run with it."""
    out = {}
    previous = tagging.type_cache()
    try:
        for on in (False, True):
            tagging.set_type_cache(on)
            nlp = spacy.load(nlp_dir)          # a fresh thread system per run
            docs = [Doc(nlp.vocab, words=[t.text for t in eg.reference]) for eg in examples]
            out[on] = [read(doc) for doc in nlp.pipe(docs, batch_size=256)]
            entries = nlp.get_pipe(pipe_name).system.type_cache_entries
            assert (entries > 0) == on
    finally:
        tagging.set_type_cache(previous)
    return out


def _agreement(out):
    a = numpy.concatenate([numpy.asarray(x, dtype=object) for x in out[False]])
    b = numpy.concatenate([numpy.asarray(x, dtype=object) for x in out[True]])
    return float((a == b).mean())


@pytest.mark.slow
def test_loaded_tagger_agrees_with_and_without_the_type_cache(data_dir, tmp_path):
    ewt = data_dir / "ud_en_ewt"
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger")
    words = lambda d: Doc(nlp.vocab, words=[t.text for t in d])
    train = [Example(words(d), d) for d in read_conllu(ewt / "en_ewt-ud-train.conllu", 2000)]
    dev = [Example(words(d), d) for d in read_conllu(ewt / "en_ewt-ud-dev.conllu")]
    _train(nlp, train, 2, "structperc_tagger")
    nlp.to_disk(tmp_path / "tagger")
    out = _predict_both_ways(tmp_path / "tagger", dev, "structperc_tagger", lambda d: [t.tag_ for t in d])
    gold = numpy.concatenate([[t.tag_ for t in eg.reference] for eg in dev])
    acc = {on: float((numpy.concatenate(out[on]) == gold).mean()) for on in out}
    assert acc[False] > 0.85, acc                    # a real model, not a degenerate one
    assert _agreement(out) >= MIN_AGREEMENT
    assert abs(acc[True] - acc[False]) <= MAX_ACCURACY_CHANGE, acc


@pytest.mark.slow
def test_loaded_latent_ner_agrees_with_and_without_the_type_cache(data_dir, require_corpus, tmp_path):
    path = data_dir / "jnlpba" / "train" / "Genia4ERtask1.iob2"
    require_corpus(path)
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner")
    train = list(create_iob2_reader(path, part="train", limit=1500)(nlp))
    dev = list(create_iob2_reader(path, part="heldout")(nlp))
    _train(nlp, train, 2, "structperc_ner")
    nlp.to_disk(tmp_path / "ner")
    out = _predict_both_ways(tmp_path / "ner", dev, "structperc_ner",
                             lambda d: [t.ent_iob_ + t.ent_type_ for t in d])
    assert sum(tag != "O" for doc in out[False] for tag in doc) > 1000   # it finds entities
    assert _agreement(out) >= MIN_AGREEMENT
