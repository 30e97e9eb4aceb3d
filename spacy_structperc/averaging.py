"""One pipeline from several copies of a config trained with different seeds: each structured-
perceptron component's averaged weights are averaged across the copies.

This is one round of parameter mixing (McDonald, Hall and Mann 2010) in which every copy saw all
the data: the copies differ only in the order of the examples and in what exploration drew, and
their mean cancels part of what each learned from its own order. A key missing from a copy
counts as zero there, as an absent row scores. Everything but the weights (labels, templates,
tables, settings) is the first copy's, and must be the same in every copy (coded errors S420-S425).
"""
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from ._core.mixing import mix_weights
from ._core.weights import AveragedWeights
from .errors import Errors


def weighted_pipes(nlp) -> List[str]:
    """The names of the components whose weights can be averaged: those whose model is one
    AveragedWeights table (`model.weights`). Left out: models of several tables that expose one
    as a read-only `weights` (the clause identifier's functions), and parsers with a reranker,
    which each copy trained on its own parser's k-best lists."""
    out = []
    for name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if not isinstance(getattr(model, "weights", None), AveragedWeights):
            continue
        if isinstance(getattr(type(model), "weights", None), property) or getattr(pipe, "reranker", None):
            continue
        out.append(name)
    return out


def _check_alike(nlps: Sequence, names: Sequence[str]) -> None:
    first = nlps[0]
    for i, nlp in enumerate(nlps[1:], 1):
        if nlp.pipe_names != first.pipe_names:
            raise ValueError(Errors.S421.format(i=i, names=nlp.pipe_names, first=first.pipe_names))
        for name in names:
            a, b = first.get_pipe(name), nlp.get_pipe(name)
            if tuple(a.labels) != tuple(b.labels):
                raise ValueError(Errors.S422.format(name=name, i=i))
            ca, cb = first.config["components"][name], nlp.config["components"][name]
            differ = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
            if differ:
                raise ValueError(Errors.S423.format(name=name, i=i, keys=differ))


def average_pipelines(nlps: Sequence, components: Optional[Sequence[str]] = None,
                      prune_below: Optional[Dict[str, float]] = None):
    """Average the weights of `components` (default: every component with perceptron weights)
    of the pipelines `nlps` into the first of them, and return it. `prune_below` sets, per
    component, the threshold its weights are saved with (rows all within it are left out), in
    the model and in the pipeline's config."""
    nlps = list(nlps)
    if len(nlps) < 2:
        raise ValueError(Errors.S420.format(n=len(nlps)))
    first = nlps[0]
    available = weighted_pipes(first)
    names = list(available if components is None else components)
    for name in names:
        if name not in available:
            raise ValueError(Errors.S424.format(name=name, available=available))
    for name, value in (prune_below or {}).items():
        if name not in names:
            raise ValueError(Errors.S424.format(name=name, available=names))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(Errors.S425.format(name=name, value=value))
    _check_alike(nlps, names)
    for name in names:
        pipe = first.get_pipe(name)
        # The mix's settings (tie width, noise) are the first table's.
        pipe.model.weights = mix_weights([nlp.get_pipe(name).model.weights for nlp in nlps])
        pipe._labels_changed()
        if prune_below and name in prune_below:
            pipe.model.prune_below = float(prune_below[name])
            first.get_pipe_config(name)["model"]["prune_below"] = float(prune_below[name])
    return first


def average_pipeline_dirs(output: Union[str, Path], inputs: Sequence[Union[str, Path]],
                          components: Optional[Sequence[str]] = None,
                          prune_below: Optional[Dict[str, float]] = None) -> List[str]:
    """Load the pipelines in `inputs`, average them (average_pipelines) and save the result to
    `output`; returns the names of the averaged components."""
    import spacy

    nlp = average_pipelines([spacy.load(path) for path in inputs], components, prune_below)
    nlp.to_disk(output)
    return list(components) if components is not None else weighted_pipes(nlp)


__all__ = ["weighted_pipes", "average_pipelines", "average_pipeline_dirs"]
