"""A short training run on real data (CoNLL-2000) must reach a known held-out chunk F1."""
import pytest
import spacy

from spacy_structperc.readers import create_conll2000_reader

N_TRAIN_SENTS = 1000
N_EPOCHS = 2
# Measured 0.8985 held-out spans_chunks_f (the last 1,000 sentences of train.txt, gold POS) with
# the default chunker (greedy, Brown clusters), the first 1,000 training sentences in file order
# and 2 epochs: deterministic (the same figure on two runs), and 0.8899 without the clusters.
# The floor must fail if the default loses them, and the clusters are worth less than a point
# here, so it cannot sit 1.5 points below like the other floors: it sits halfway, 0.45 points
# below the measured figure and 0.41 above the run without clusters. (The earlier setup, 2,000
# sentences and 3 epochs, measured 0.9136 against 0.9099 without clusters: a 0.37-point margin;
# the clusters help most with little training, 0.81-0.86 points at 1,000 sentences, 1-2 epochs.)
# A change that moves the figure by half a point fails here: re-measure, and keep the floor
# between the two runs.
F1_FLOOR = 0.894


@pytest.fixture(scope="module")
def conll2000(data_dir, require_corpus):
    path = data_dir / "conll2000"
    require_corpus(path / "train.txt")
    return path


@pytest.mark.slow
def test_short_conll2000_run_reaches_heldout_f1_floor(conll2000):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_chunker")
    train = list(create_conll2000_reader(conll2000 / "train.txt", part="train", limit=N_TRAIN_SENTS)(nlp))
    dev = list(create_conll2000_reader(conll2000 / "train.txt", part="heldout")(nlp))
    assert len(train) == N_TRAIN_SENTS and len(dev) == 1000
    nlp.initialize(get_examples=lambda: train)
    epoch_losses = []
    for _ in range(N_EPOCHS):
        losses = {}
        for i in range(0, len(train), 64):
            nlp.update(train[i:i + 64], losses=losses)
        epoch_losses.append(losses["structperc_chunker"])
    assert epoch_losses[-1] < epoch_losses[0]
    scores = nlp.evaluate(dev)
    print("conll2000 held-out F1", scores["spans_chunks_f"])
    assert scores["spans_chunks_f"] >= F1_FLOOR, scores["spans_chunks_f"]
