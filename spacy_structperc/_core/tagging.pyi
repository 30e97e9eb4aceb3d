"""Type stubs for tagging.pyx: sequence labelling as a transition system (one label per token)."""
from typing import Optional

import numpy
from numpy.typing import ArrayLike

from .templates import TemplateSet
from .transition import TransitionSystem
from .weights import AveragedWeights

class TagSystem(TransitionSystem):
    """Left-to-right labelling of a bound sentence; the action is the label."""

    templates: TemplateSet
    n_tokens: int
    def __init__(self, templates: TemplateSet, weights: AveragedWeights,
                 allowed_transitions: Optional[ArrayLike] = ...) -> None: ...
    def set_allowed_transitions(self, allowed_transitions: Optional[ArrayLike]) -> None: ...
    def set_sentence(self, atoms: ArrayLike, gold: Optional[ArrayLike] = ...,
                     allowed: Optional[ArrayLike] = ...) -> None: ...
    def set_position_mask(self, allowed: Optional[ArrayLike]) -> None: ...
    def _bound_atoms(self) -> numpy.ndarray: ...
    def _bound_allowed(self) -> Optional[numpy.ndarray]: ...
    @property
    def gold_labels(self) -> numpy.ndarray: ...
