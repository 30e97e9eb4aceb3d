"""The structperc_clauses factory: its default config and what each setting means (see build_pipe)."""
from typing import Callable, Optional

from spacy.language import Language
from thinc.api import Config

from ..pipeline.base import build_pipe
from . import features as _features  # noqa: F401  (registers clause_features.v1)
from .component import ClauseIdentifier
from .model import ClauseModel


DEFAULT_CLAUSES_MODEL = Config().from_str("""
[model]
@architectures = "spacy-structperc.ClauseRanker.v1"
n_buckets = 262144
context = 3
form = "primal"
degree = 2

[model.features]
@misc = "spacy-structperc.clause_features.v1"
window = 3
conjunctions = true
""")["model"]


# Clause identification (carreras2003): start/end filters and a phrase scorer trained with the
# FR-Perceptron; reads token.tag_ and, when present, the chunks in doc.spans[chunks_key].
@Language.factory(
    "structperc_clauses",
    assigns=["doc.spans"],
    requires=["token.tag"],
    default_config={
        "model": DEFAULT_CLAUSES_MODEL,
        "spans_key": "clauses",
        "label": "S",
        "chunks_key": "chunks",
        "method": "fr",
        "max_boundaries": 100,
        "max_span": 0,
        "scorer": {"@scorers": "spacy-structperc.clause_scorer.v1"},
    },
    default_score_weights={"spans_clauses_f": 1.0, "spans_clauses_p": 0.0, "spans_clauses_r": 0.0},
)
def make_clauses(nlp: Language, name: str, model: ClauseModel, spans_key: str, label: str, chunks_key: str,
                 method: str, max_boundaries: int, max_span: int, scorer: Optional[Callable]) -> ClauseIdentifier:
    """A clause identifier (the FR-Perceptron of carreras2003) writing nested clauses to doc.spans.

    model: spacy-structperc.ClauseRanker.v1: the start filter, end filter and phrase scorer over
        clause_features.v1 (words, token.tag_, chunks); form = "primal" (averaged perceptrons,
        the default) or "dual" (voted polynomial-kernel perceptrons of `degree`).
    spans_key: the doc.spans group written (and read as gold).
    label: the label of every clause span (the component's one label).
    chunks_key: the doc.spans group of chunks read as features, when the Doc has it.
    method: training feedback: "fr" (the FR-Perceptron, carreras2003 §3.1), "co" or "cb"
        (online and batch classification baselines, Table 1).
    max_boundaries: the filters keep at most this many starts and ends per sentence (>= 1).
    max_span: the longest clause in tokens (0 = no limit).
    scorer: spans_{spans_key}_p/r/f (spacy-structperc.clause_scorer.v1).
    """
    return build_pipe(ClauseIdentifier, **locals())
