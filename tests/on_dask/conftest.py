"""Dask fixtures: a LocalCluster of two single-threaded worker processes, always closed."""
import random
from pathlib import Path

import pytest

from conftest import require_module

distributed = require_module("distributed", extra="dask")   # also in [test]: fails under CI if missing

REPO = Path(__file__).resolve().parents[2]

DET = ["the", "a", "this", "every"]
ADJ = ["big", "small", "red", "old", "quick", "green"]
NOUN = ["dog", "cat", "house", "idea", "car", "tree", "bird", "river"]
VERB = ["sees", "likes", "finds", "takes", "wants"]
ADV = ["quickly", "often", "never"]


def toy_sentences(n, seed):
    """Tagged toy sentences (DT JJ NN VBZ ...): a corpus every tagger learns in a few epochs."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words, tags = [], []

        def np_():
            words.append(rng.choice(DET)); tags.append("DT")
            if rng.random() < 0.5:
                words.append(rng.choice(ADJ)); tags.append("JJ")
            words.append(rng.choice(NOUN)); tags.append("NN")
        np_()
        if rng.random() < 0.3:
            words.append(rng.choice(ADV)); tags.append("RB")
        words.append(rng.choice(VERB)); tags.append("VBZ")
        np_()
        out.append((words, tags))
    return out


def write_docbin(path, sentences):
    import spacy
    from spacy.tokens import Doc, DocBin

    vocab = spacy.blank("en").vocab
    db = DocBin()
    for words, tags in sentences:
        db.add(Doc(vocab, words=words, tags=tags))
    db.to_disk(path)
    return path


@pytest.fixture
def toy_corpus(tmp_path):
    train = write_docbin(tmp_path / "train.spacy", toy_sentences(240, 1))
    dev = write_docbin(tmp_path / "dev.spacy", toy_sentences(60, 2))
    return train, dev


def write_toy_config(folder, n_buckets=1 << 14, max_epochs=None):
    """configs/tagger.cfg with small features (and max_epochs, if given) in folder/toy.cfg, so a
    run takes seconds."""
    from spacy import util

    config = util.load_config(REPO / "configs" / "tagger.cfg", interpolate=False)
    config["components"]["tagger"]["model"]["n_buckets"] = n_buckets
    config["components"]["tagger"]["model"]["features"] = {"@misc": "spacy-structperc.tagger_features_small.v1"}
    if max_epochs is not None:
        config["training"]["max_epochs"] = max_epochs
    config["paths"]["tagger_labels"] = str(folder / "no-labels.json")
    config.to_disk(folder / "toy.cfg")
    return folder / "toy.cfg"


@pytest.fixture
def toy_config(tmp_path):
    """configs/tagger.cfg with small features and few epochs, so a run takes seconds."""
    return write_toy_config(tmp_path, max_epochs=3)


@pytest.fixture
def cluster():
    """Two worker processes, one thread each; closed (and their processes ended) after the test."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local:
        with distributed.Client(local) as client:
            yield client
