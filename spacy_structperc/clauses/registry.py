"""Registered functions of the clause identifier: its model architecture and word features.

The CoNLL-2001 and UD clause readers register in conll2001.py and ud.py, the scorer in scorer.py.
"""
from typing import List

from spacy.util import registry

from . import conll2001 as _conll2001  # noqa: F401  (registers the CoNLL-2001 reader)
from . import scorer as _scorer  # noqa: F401  (registers the clause scorer)
from . import ud as _ud  # noqa: F401  (registers the UD clause reader)
from .features import clause_templates
from .model import ClauseModel


@registry.architectures("spacy-structperc.ClauseRanker.v1")
def build_clause_ranker(features: List[dict], n_buckets: int = 1 << 18, context: int = 3,
                        form: str = "primal", degree: int = 2, coef0: float = 1.0,
                        gamma: float = 1.0) -> ClauseModel:
    """Start filter, end filter and phrase scorer (carreras2003 §3).

    features: word templates for the filters (spacy-structperc.clause_features.v1).
    context: L_p, the words around a phrase's start and end its features read (3 in the paper).
    form: "primal" (averaged perceptron, the default) or "dual" (voted kernel perceptron with a
    polynomial kernel (gamma * x.y + coef0) ** degree; carreras2003 used degree 2).
    """
    return ClauseModel(features, n_buckets, context, form, degree, coef0, gamma)


@registry.misc("spacy-structperc.clause_features.v1")
def clause_features(window: int = 3, conjunctions: bool = True) -> List[dict]:
    """Words, POS and chunk tags in [-window, +window] around a word (L_w = 3 in the paper), and
    with conjunctions a few tag / chunk / word bigrams (useful in primal form)."""
    return clause_templates(window, conjunctions)
