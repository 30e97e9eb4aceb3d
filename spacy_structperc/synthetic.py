"""Synthetic data with latent dependencies, after sun2009 §4 ("Experiments on Synthetic Data").

An HMM over four latent states h1, h2 (label y1) and h3, h4 (label y2) emits the observations
x1 and x2. The labels are the projection of the latent states; the latent states are never
observed.

Transitions (Fig. 2 of the paper; P is the probability of the dependency, "the remaining prob.
mass 1-P is uniformly distributed to the remaining transitions"): every state has one
successor, taken with probability P, along the cycle

    h1 -> h2 -> h3 -> h4 -> h1        P(successor | h) = P, P(any other of the 4 | h) = (1-P)/3

so the labels run y1 y1 y2 y2 y1 y1 ..., the paper's example sequence "y1, y1, y2, y2, y1, ...".
The matrix is doubly stochastic, so its stationary distribution is uniform, and in the
stationary chain the labels carry no first-order information: P(y_t = y1 | y_{t-1} = y1) = 1/2
for every P (from h1 the next label is y1 with P + (1-P)/3, from h2 with 2(1-P)/3; the two are
equally likely). Only a model that knows which sub-state of y1 or y2 it is in (h1 or h2, h3 or
h4) can use the dependency; a model with edge features over labels cannot, which is the point
of the experiment. (An alternating cycle such as h1 -> h3 -> h2 -> h4 -> h1 would not do: its
labels run y1 y2 y1 y2 with P(y2 | y1) = P + (1-P)/3, which edges over labels learn.)

Emissions are nearly random: P(x1 | h) = 1/2 + emission_bias * s(h) with s = (+1, -1, -1, +1)
for (h1, h2, h3, h4), and P(x2 | h) = 1 - P(x1 | h). Each label then emits x1 with probability
exactly 1/2 (one + and one - sub-state), so node features over labels carry no information
either, while the four phases of the cycle emit distinguishable patterns (+--+, --++, -++-,
++--) that a latent model can accumulate along a sequence.

Start state: the paper does not give it. `start="h1"` (the default) starts every sequence in h1,
so the phase of the cycle is known at the sentence start and fades with the (1-P) jumps: a
latent first-order model can follow it, a first-order label model cannot (y1 -> y1 and
y1 -> y2 are both right half of the time). This is the setting in which the paper's gap (84.9%
against 57.3% label accuracy at P = 0.9) is reachable: with start="uniform" and weak emissions
even the Bayes-optimal decoder (posterior_labels) stays near chance (label accuracy 0.55 with
emission_bias = 0.05, 0.61 with 0.1, at P = 0.9 on 10-token sequences), whereas with
start="h1" it reaches 0.78 (0.58, 0.62, 0.78 at P = 0.5, 0.7, 0.9), while always predicting
y1 (about what a first-order label model is left with) scores 0.56 at P = 0.9. Short
sequences (about 10 tokens) keep the phase information strong; at 20 tokens the ceiling drops
to 0.69.

    sequences = generate(3000, 10, P=0.9, emission_bias=0.05, start="h1", seed=0)
    X, Y, H = to_arrays(sequences)              # int32 arrays (n_sequences, length) for the core
    examples = to_examples(nlp.vocab, sequences)  # words "x1"/"x2", labels in token.tag_

Indices: observations 0 = x1, 1 = x2; labels 0 = y1, 1 = y2; latent states 0..3 = h1..h4.
"""
import math
from numbers import Integral, Real
from typing import List, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.training import Example
from spacy.vocab import Vocab

from .errors import Errors

OBSERVATIONS = ("x1", "x2")
LABELS = ("y1", "y2")
LATENT = ("h1", "h2", "h3", "h4")
LABEL_OF_LATENT = numpy.array([0, 0, 1, 1], dtype=numpy.int32)
SUCCESSOR = numpy.array([1, 2, 3, 0], dtype=numpy.int32)  # h1->h2, h2->h3, h3->h4, h4->h1
EMISSION_SIGN = numpy.array([1.0, -1.0, -1.0, 1.0])
DEFAULT_EMISSION_BIAS = 0.05
LATENT_KEY = "structperc_latent"  # reference Doc user_data key of the latent state names

STARTS = LATENT + ("uniform",)

Sequence3 = Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]  # observations, labels, latent


def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(Errors.S040.format(setting=name, requirement=f"an integer >= {minimum}", value=value))


def _check_real(name: str, value, low: float, high: float) -> None:
    if (not isinstance(value, Real) or isinstance(value, bool) or math.isnan(value)
            or not low <= float(value) <= high):
        raise ValueError(Errors.S040.format(setting=name, requirement=f"a number in [{low}, {high}]",
                                            value=value))


def transition_matrix(P: float) -> numpy.ndarray:
    """T[i, j] = P(h_j | h_i): P for the successor of h_i, (1-P)/3 for each of the other three."""
    _check_real("P", P, 0.0, 1.0)
    T = numpy.full((4, 4), (1.0 - P) / 3.0)
    T[numpy.arange(4), SUCCESSOR] = P
    return T


def emission_matrix(emission_bias: float = DEFAULT_EMISSION_BIAS) -> numpy.ndarray:
    """E[h, x] = P(x | h): P(x1 | h) = 1/2 + emission_bias * (+1, -1, -1, +1)[h]."""
    _check_real("emission_bias", emission_bias, 0.0, 0.5)
    p_x1 = 0.5 + emission_bias * EMISSION_SIGN
    return numpy.stack([p_x1, 1.0 - p_x1], axis=1)


def start_distribution(start: str = "h1") -> numpy.ndarray:
    """P(h) at the first token: all mass on one state ("h1".."h4") or uniform ("uniform")."""
    if start not in STARTS:
        raise ValueError(Errors.S040.format(setting="start", requirement=f"one of {list(STARTS)}", value=start))
    if start == "uniform":
        return numpy.full(4, 0.25)
    pi = numpy.zeros(4)
    pi[LATENT.index(start)] = 1.0
    return pi


def generate(n_sequences: int, length: int, P: float, *, emission_bias: float = DEFAULT_EMISSION_BIAS,
             start: str = "h1", seed: int = 0) -> List[Sequence3]:
    """`n_sequences` sequences of `length` tokens, each (observations, labels, latent_states) as
    int32 arrays (see the module docstring for the HMM). The same arguments give the same data.

    P: probability of the successor transition, in [0, 1] (the paper varies it from 0.5 to 0.9;
    P = 0.25 makes the latent states independent). emission_bias: in [0, 0.5]; 0 makes the
    observations pure noise. start: "h1" (default) .. "h4" or "uniform", the distribution of
    the first latent state. seed: an integer >= 0 for numpy's default generator.
    """
    _check_int("n_sequences", n_sequences, 0)
    _check_int("length", length, 1)
    _check_int("seed", seed, 0)
    T = transition_matrix(P)
    E = emission_matrix(emission_bias)
    pi = start_distribution(start)
    rng = numpy.random.default_rng(int(seed))
    cum = numpy.cumsum(T, axis=1)
    cum[:, -1] = 1.0
    latent = numpy.empty((n_sequences, length), dtype=numpy.int32)
    latent[:, 0] = (rng.random(n_sequences)[:, None] >= numpy.cumsum(pi)[None, :3]).sum(axis=1)
    for t in range(1, length):
        u = rng.random(n_sequences)
        latent[:, t] = (u[:, None] >= cum[latent[:, t - 1]]).sum(axis=1)
    observations = (rng.random((n_sequences, length)) >= E[latent, 0]).astype(numpy.int32)
    labels = LABEL_OF_LATENT[latent]
    return [(observations[i].copy(), labels[i].copy(), latent[i].copy()) for i in range(n_sequences)]


def to_arrays(sequences: Sequence[Sequence3]) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Stack equal-length sequences into int32 arrays X, Y, H of shape (n_sequences, length)."""
    lengths = sorted({len(s[0]) for s in sequences})
    if len(lengths) > 1:
        raise ValueError(Errors.S041.format(lengths=lengths))
    if not sequences:
        empty = numpy.zeros((0, 0), dtype=numpy.int32)
        return empty, empty.copy(), empty.copy()
    words, labels, latent = (numpy.stack([s[k] for s in sequences]).astype(numpy.int32) for k in range(3))
    return words, labels, latent


def to_docs(vocab: Vocab, sequences: Sequence[Sequence3]) -> List[Doc]:
    """Gold Docs: words "x1"/"x2", the labels "y1"/"y2" in token.tag_ (per-token classes, no
    entities) and the latent state names in doc.user_data["structperc_latent"]."""
    docs = []
    for observations, labels, latent in sequences:
        doc = Doc(vocab, words=[OBSERVATIONS[x] for x in observations], tags=[LABELS[y] for y in labels])
        doc.user_data[LATENT_KEY] = [LATENT[h] for h in latent]
        docs.append(doc)
    return docs


def to_examples(vocab: Vocab, sequences: Sequence[Sequence3]) -> List[Example]:
    """Examples whose predicted Doc has the words only and whose reference is to_docs()'s Doc."""
    return [Example(Doc(vocab, words=[t.text for t in gold]), gold) for gold in to_docs(vocab, sequences)]


def posterior_labels(observations: numpy.ndarray, P: float, *,
                     emission_bias: float = DEFAULT_EMISSION_BIAS, start: str = "h1") -> numpy.ndarray:
    """The most probable label of each token under the true HMM (forward-backward, marginals
    summed over each label's latent states): the Bayes-optimal label accuracy, a ceiling for
    any model trained on this data."""
    T = transition_matrix(P)
    E = emission_matrix(emission_bias)
    obs = numpy.asarray(observations, dtype=numpy.intp)
    n = len(obs)
    if n == 0:
        return numpy.zeros((0,), dtype=numpy.int32)
    alpha = numpy.empty((n, 4))
    beta = numpy.ones((n, 4))
    a = start_distribution(start) * E[:, obs[0]]
    alpha[0] = a / a.sum()
    for t in range(1, n):
        a = (alpha[t - 1] @ T) * E[:, obs[t]]
        alpha[t] = a / a.sum()
    for t in range(n - 2, -1, -1):
        b = T @ (E[:, obs[t + 1]] * beta[t + 1])
        beta[t] = b / b.sum()
    post = alpha * beta
    by_label = numpy.stack([post[:, LABEL_OF_LATENT == k].sum(axis=1) for k in range(len(LABELS))], axis=1)
    return by_label.argmax(axis=1).astype(numpy.int32)
