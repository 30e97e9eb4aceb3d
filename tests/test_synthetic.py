"""The sun2009 §4 synthetic latent data: its statistics match its parameters."""
import math

import numpy
import pytest
import spacy

from spacy_structperc.synthetic import (LABEL_OF_LATENT, SUCCESSOR, emission_matrix, generate,
                                        posterior_labels, to_arrays, to_docs, to_examples,
                                        transition_matrix)


def _transition_counts(sequences):
    counts = numpy.zeros((4, 4))
    for _, _, h in sequences:
        numpy.add.at(counts, (h[:-1], h[1:]), 1)
    return counts


@pytest.mark.parametrize("P", [0.5, 0.9])
def test_transition_frequencies_match_P(P):
    sequences = generate(1000, 50, P, seed=1)
    counts = _transition_counts(sequences)
    freq = counts / counts.sum(axis=1, keepdims=True)
    for i in range(4):
        for j in range(4):
            expected = P if j == SUCCESSOR[i] else (1 - P) / 3
            assert abs(freq[i, j] - expected) < 0.015, (i, j, freq[i, j], expected)
    assert list(SUCCESSOR) == [1, 2, 3, 0]  # h1 -> h2 -> h3 -> h4 -> h1
    assert numpy.allclose(transition_matrix(P).sum(axis=1), 1.0)


def test_emission_frequencies_match_the_bias():
    bias = 0.2
    sequences = generate(1000, 50, 0.7, emission_bias=bias, seed=2)
    X, Y, H = to_arrays(sequences)
    for h, sign in enumerate([1, -1, -1, 1]):
        p_x1 = (X[H == h] == 0).mean()
        assert abs(p_x1 - (0.5 + sign * bias)) < 0.015, (h, p_x1)
    # each label emits x1 half of the time: node features over labels carry nothing
    for y in (0, 1):
        assert abs((X[Y == y] == 0).mean() - 0.5) < 0.015
    assert numpy.allclose(emission_matrix(bias)[:, 0], [0.7, 0.3, 0.3, 0.7])
    noise = to_arrays(generate(500, 40, 0.9, emission_bias=0.0, seed=3))[0]
    assert abs((noise == 0).mean() - 0.5) < 0.015


def test_labels_are_the_projection_of_the_latent_states_and_uninformative_alone():
    sequences = generate(1000, 40, 0.9, start="uniform", seed=4)
    for x, y, h in sequences:
        assert numpy.array_equal(y, LABEL_OF_LATENT[h]) and set(numpy.unique(x)) <= {0, 1}
    X, Y, H = to_arrays(sequences)
    assert abs((Y[:, 1:][Y[:, :-1] == 0] == 0).mean() - 0.5) < 0.015  # P(y1 | y1) = 1/2
    assert abs((H[:, 0] == 0).mean() - 0.25) < 0.05
    assert (to_arrays(generate(200, 5, 0.9, seed=4))[2][:, 0] == 0).all()  # start="h1"
    assert (to_arrays(generate(200, 5, 0.9, start="h3", seed=4))[2][:, 0] == 2).all()


def test_same_seed_same_data_other_seed_other_data():
    a, b, c = (generate(50, 20, 0.8, seed=s) for s in (7, 7, 8))
    assert all(numpy.array_equal(u, v) for s, t in zip(a, b) for u, v in zip(s, t))
    assert not all(numpy.array_equal(s[2], t[2]) for s, t in zip(a, c))
    assert all(arr.dtype == numpy.int32 and arr.shape == (20,) for s in a for arr in s)


@pytest.mark.parametrize("kwargs,setting", [
    (dict(P=1.5), "P"), (dict(P=-0.1), "P"), (dict(P=math.nan), "P"), (dict(P="0.9"), "P"),
    (dict(emission_bias=0.6), "emission_bias"), (dict(emission_bias=-0.01), "emission_bias"),
    (dict(n_sequences=-1), "n_sequences"), (dict(n_sequences=2.0), "n_sequences"),
    (dict(length=0), "length"), (dict(seed=-1), "seed"), (dict(seed=True), "seed"),
    (dict(start="h5"), "start"),
])
def test_invalid_parameters_are_coded_errors(kwargs, setting):
    args = dict(n_sequences=3, length=4, P=0.9)
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"S040.*{setting}"):
        generate(**args)


def test_arrays_docs_and_examples():
    sequences = generate(4, 6, 0.9, seed=5)
    X, Y, H = to_arrays(sequences)
    assert X.shape == Y.shape == H.shape == (4, 6) and X.dtype == numpy.int32
    assert to_arrays([])[0].shape == (0, 0)
    with pytest.raises(ValueError, match="S041"):
        to_arrays(sequences[:1] + generate(1, 7, 0.9, seed=5))
    nlp = spacy.blank("en")
    docs = to_docs(nlp.vocab, sequences)
    assert [t.text for t in docs[0]] == [["x1", "x2"][x] for x in X[0]]
    assert [t.tag_ for t in docs[0]] == [["y1", "y2"][y] for y in Y[0]]
    assert docs[0].user_data["structperc_latent"] == [f"h{h + 1}" for h in H[0]]
    assert docs[0].ents == ()
    eg = to_examples(nlp.vocab, sequences)[1]
    assert [t.text for t in eg.predicted] == [t.text for t in eg.reference]
    assert [t.tag_ for t in eg.predicted] == [""] * 6
    assert [t.tag_ for t in eg.reference] == [["y1", "y2"][y] for y in Y[1]]


def test_bayes_optimal_decoder_leaves_room_for_the_latent_model():
    """At P = 0.9 the true HMM labels 15+ points more tokens right than always saying y1 (what a
    first-order label model is left with); at P = 0.25 the latent states are independent."""
    sequences = generate(600, 10, 0.9, seed=6)
    X, Y, _ = to_arrays(sequences)
    oracle = numpy.stack([posterior_labels(x, 0.9) for x in X])
    assert (oracle == Y).mean() > (Y == 0).mean() + 0.15
    flat = generate(600, 10, 0.25, emission_bias=0.0, start="uniform", seed=6)
    X, Y, _ = to_arrays(flat)
    guesses = numpy.stack([posterior_labels(x, 0.25, emission_bias=0.0, start="uniform") for x in X])
    assert abs((guesses == Y).mean() - 0.5) < 0.03
