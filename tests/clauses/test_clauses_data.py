"""A short run of structperc_clauses on ptb_clauses (gold tags, verb groups from the tags)."""
import random

import pytest
import spacy
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc.clauses.conll2001 import conll2001_docs, input_copy
from tests.conftest import resolve_data_dir

# Measured: 3 epochs on the first 1,500 training sentences (shuffled with a seeded Random, so
# the run is deterministic: 0.78125 on two runs), dev F1 0.7813 (primal, FR). Floor 1.5 points
# below, as for the other components' short runs: it catches a broken search, feature or
# feedback rule (without the conjunction templates the run scores 0.7614, which the old floor
# of 0.72 let pass).
F1_FLOOR = 0.766


@pytest.mark.slow
def test_short_run_on_ptb_clauses_reaches_the_floor(require_corpus):
    root = resolve_data_dir() / "ptb_clauses"
    require_corpus(root / "train.txt")
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("structperc_clauses")
    train = conll2001_docs(nlp.vocab, root / "train.txt", limit=1500)
    dev = conll2001_docs(nlp.vocab, root / "dev.txt")
    examples = [Example(input_copy(nlp.vocab, g), g) for g in train]
    nlp.initialize(lambda: examples)
    rng = random.Random(0)
    for _ in range(3):
        rng.shuffle(examples)
        for i in range(0, len(examples), 100):
            nlp.update(examples[i:i + 100])
    scores = nlp.evaluate([Example(input_copy(nlp.vocab, g), g) for g in dev])
    print("ptb_clauses dev F1", scores["spans_clauses_f"])
    assert scores["spans_clauses_f"] >= F1_FLOOR, scores["spans_clauses_f"]
