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


def chunk_lists(nlp, chunker, k):
    """The chunker's k-best lists of the training sentences as reranker input: chunk-level
    global features (C) and the loss (wrong + missed chunks)."""
    from spacy_structperc.pipeline.bio import classes_to_chunks
    from spacy_structperc.reranking import CandidateLists, ChunkFeatures

    feats = ChunkFeatures()
    sentences = []
    for doc, (_, _, chunks) in zip(input_docs(nlp.vocab), TRAIN_DATA):
        want = {(s, e, label) for s, e, label in chunks}
        got = chunker.kbest(doc, k)
        ptr, keys = feats.batch(doc.to_array("LOWER"), doc.to_array("TAG"),
                                numpy.stack([p for _, p in got]))
        cands = []
        for i, (score, path) in enumerate(got):
            have = {(s, e, chunker.labels[t]) for s, e, t in classes_to_chunks(path)}
            cands.append({"base": score, "keys": keys[ptr[i]:ptr[i + 1]],
                          "loss": float(len(have - want) + len(want - have))})
        sentences.append(cands)
    return CandidateLists.build(sentences)


def test_a_perceptron_over_chunk_features_reranks_the_chunkers_kbest():
    """Chunk-level features separate a half-trained chunker's k-best lists: the ranking
    perceptron's choices lose less than the 1-best on the lists it learned from."""
    from spacy_structperc.reranking import PerceptronReranker

    nlp, chunker = make_nlp({"decoder": "beam", "beam_width": 6})
    train(nlp, n_iter=1)
    lists = chunk_lists(nlp, chunker, 6)
    first = lists.loss[lists.first()].sum()
    assert first > lists.loss[lists.oracle()].sum(), "the test needs lists the 1-best gets wrong"
    model = PerceptronReranker(epochs=20, min_count=1).fit(lists)
    chosen = model.choose(lists)
    assert all(lists.offsets[i] <= r < lists.offsets[i + 1] for i, r in enumerate(chosen))
    assert lists.loss[chosen].sum() < first
