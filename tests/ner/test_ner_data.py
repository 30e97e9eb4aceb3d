"""A short training run on real data (JNLPBA) must reach a known held-out entity F1."""
import pytest
import spacy

from spacy_structperc.readers import create_iob2_reader

N_TRAIN_SENTS = 3000
N_EPOCHS = 4
# Measured 0.6834 held-out ents_f (the last 1,000 sentences of Genia4ERtask1.iob2) with the
# factory-default structperc_ner (words only, n_latent 4), the first 3,000 training sentences
# in file order and 4 epochs with the epoch hook. Floor ~1.5 points below.
F1_FLOOR = 0.67


@pytest.fixture(scope="module")
def jnlpba(data_dir, require_corpus):
    path = data_dir / "jnlpba" / "train" / "Genia4ERtask1.iob2"
    require_corpus(path)
    return path


@pytest.mark.slow
def test_short_jnlpba_run_reaches_heldout_f1_floor(jnlpba):
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner")
    train = list(create_iob2_reader(jnlpba, part="train", limit=N_TRAIN_SENTS)(nlp))
    dev = list(create_iob2_reader(jnlpba, part="heldout")(nlp))
    assert len(train) == N_TRAIN_SENTS and len(dev) == 1000
    nlp.initialize(get_examples=lambda: train)
    epoch_losses = []
    for epoch in range(N_EPOCHS):
        ner.start_epoch(epoch)
        losses = {}
        for i in range(0, len(train), 64):
            nlp.update(train[i:i + 64], losses=losses)
        epoch_losses.append(losses["structperc_ner"])
    assert epoch_losses[-1] < epoch_losses[0]
    assert ner.n_resets == 1          # pass 4 started from the averaged weights
    scores = nlp.evaluate(dev)
    assert scores["ents_f"] >= F1_FLOOR, scores["ents_f"]
