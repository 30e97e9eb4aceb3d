"""Training states of perceptron components as plain arrays, and their mixing.

A state is `{"keys", "W", "U", "clock"}` (numpy arrays and an int): what `AveragedWeights`
needs to continue training with its average intact. It travels between the driver and the
workers as arrays (Dask sends numpy buffers as they are), never as a pickled model; the
component itself travels as its `to_bytes()`.
"""
from typing import Dict, Iterable, List, Sequence, Tuple

from .._core.weights import AveragedWeights, WeightsMixer, mixing_coefficients
from ..errors import Errors

State = Dict[str, object]


def mixable_pipes(nlp, frozen: Sequence[str] = ()) -> List[Tuple[str, object]]:
    """The components whose weights are mixed: every trainable one that is not frozen. Each must
    be a structured-perceptron component (S341): thinc models have no mixing here."""
    out = []
    for name, pipe in nlp.pipeline:
        if name in frozen or not getattr(pipe, "is_trainable", False):
            continue
        weights = getattr(getattr(pipe, "model", None), "weights", None)
        if not isinstance(weights, AveragedWeights):
            raise ValueError(Errors.S341.format(name=name, kind=type(pipe).__name__))
        out.append((name, pipe))
    if not out:
        raise ValueError(Errors.S342.format(pipeline=nlp.pipe_names, frozen=list(frozen)))
    return out


def pipe_state(pipe) -> State:
    keys, W, U, clock = pipe.model.weights.state_arrays()
    return {"keys": keys, "W": W, "U": U, "clock": int(clock)}


def load_pipe_state(pipe, state: State) -> None:
    """Replace the pipe's training state (its settings: tie width, noise, stay)."""
    pipe.model.weights.load_arrays(state["keys"], state["W"], state["U"], state["clock"])
    pipe._labels_changed()


def mix_pipe_states(pipe, states: Iterable[Tuple[State, float]]) -> None:
    """Fold (state, coefficient) pairs one at a time into a mix, and make it the pipe's weights.

    Only one incoming state is held at a time besides the accumulator, so `states` may be a
    generator that fetches each shard's result when it is needed.
    """
    old = pipe.model.weights
    mixer = WeightsMixer(old.n_classes, old.n_buckets)
    for state, coef in states:
        mixer.add_arrays(state["keys"], state["W"], state["U"], state["clock"], coef)
        del state
    mixed = mixer.result()
    mixed.set_tie_width(old.tie_width)
    mixed.set_noise(old.noise_scale, old.noise_seed)
    pipe.model.weights = mixed
    pipe._labels_changed()


__all__ = ["mixable_pipes", "pipe_state", "load_pipe_state", "mix_pipe_states", "mixing_coefficients"]
