"""The tagger's scorer (spacy-structperc.tagger_scorer.v1): tag_acc and pos_acc as spaCy's tagger
scores them; a tagger with attr = "tag" that also writes universal POS (mapped from its tags or
predicted by its second pass, the `pos` setting) reports both."""
from typing import Any, Dict, Iterable

from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry


def tagger_score(examples: Iterable[Example], *, attr: str = "tag", pos_of_tag=None,
                 pos_candidates=None, **kwargs) -> Dict[str, Any]:
    """tag_acc or pos_acc, as spaCy's tagger scorer computes them; with attr = "tag" and
    universal POS learned at initialize (the component's cfg["pos_of_tag"], and with pos =
    "predict" cfg["pos_candidates"]), pos_acc of the POS it writes as well."""
    examples = list(examples)
    scores = Scorer.score_token_attr(examples, attr, **kwargs)
    if attr == "tag" and (pos_of_tag or pos_candidates):
        scores = {**scores, **Scorer.score_token_attr(examples, "pos", **kwargs)}
    return scores


@registry.scorers("spacy-structperc.tagger_scorer.v1")
def make_tagger_scorer():
    return tagger_score
