"""Clause scoring: precision, recall and F1 of exact spans in doc.spans[spans_key].

A predicted clause is correct when a gold clause has the same start, end and label (the CoNLL-2001
measure). Nested clauses count one each; a span listed twice counts once.
"""
from typing import Any, Dict, Iterable

from spacy.training import Example
from spacy.util import registry

from ..scorers import score_chunks


def score_clauses(examples: Iterable[Example], *, spans_key: str = "clauses", **kwargs) -> Dict[str, Any]:
    """spans_{key}_p/r/f (and _per_type): exact-span counts over doc.spans[spans_key].

    Examples whose reference has no `spans_key` group are unannotated and skipped; predicted
    spans are mapped onto the reference tokens when the tokenizations differ.
    """
    return score_chunks(examples, spans_key=spans_key)


@registry.scorers("spacy-structperc.clause_scorer.v1")
def make_clause_scorer():
    return score_clauses
