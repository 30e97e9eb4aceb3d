"""The chunker's k-best BIO sequences (SequenceLabeller.kbest), the candidates of a chunk reranker."""
import numpy
import pytest
from spacy.tokens import Doc

from test_chunker import TRAIN_DATA, input_docs, make_nlp, train


@pytest.mark.parametrize("direction", ["ltr", "rtl"])
def test_chunker_kbest_is_distinct_sorted_valid_and_starts_with_the_prediction(direction):
    nlp, chunker = make_nlp({"decoder": "beam", "beam_width": 4, "direction": direction})
    train(nlp, n_iter=5)
    trans = chunker._transitions()
    for doc in input_docs(nlp.vocab):
        got = chunker.kbest(doc, 6)
        assert 1 <= len(got) <= 6
        scores = [s for s, _ in got]
        assert scores == sorted(scores, reverse=True)
        assert len({p.tobytes() for _, p in got}) == len(got)
        assert numpy.array_equal(got[0][1], chunker.predict([doc])[0])
        for _, path in got:   # every candidate is a valid BIO sequence
            prev = trans.shape[0] - 1
            for c in path.tolist():
                assert trans[prev, c]
                prev = c


def test_chunker_kbest_of_an_empty_doc_is_one_empty_sequence():
    nlp, chunker = make_nlp({"decoder": "beam", "beam_width": 2})
    train(nlp, n_iter=1)
    got = chunker.kbest(Doc(nlp.vocab, words=[]), 3)
    assert len(got) == 1 and len(got[0][1]) == 0
