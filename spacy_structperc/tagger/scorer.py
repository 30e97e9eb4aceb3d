"""The tagger's scorer (spacy-structperc.tagger_scorer.v1): tag_acc and pos_acc as spaCy's tagger
scores them, with pos_acc of the mapped POS when the tagger maps tags to universal POS."""
from typing import Any, Dict, Iterable

from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry


def tagger_score(examples: Iterable[Example], *, attr: str = "tag", pos_of_tag=None,
                 **kwargs) -> Dict[str, Any]:
    """tag_acc or pos_acc, as spaCy's tagger scorer computes them; with attr = "tag" and a
    tag -> POS map (the component's cfg["pos_of_tag"]), pos_acc of the mapped POS as well."""
    examples = list(examples)
    scores = Scorer.score_token_attr(examples, attr, **kwargs)
    if attr == "tag" and pos_of_tag:
        scores = {**scores, **Scorer.score_token_attr(examples, "pos", **kwargs)}
    return scores


@registry.scorers("spacy-structperc.tagger_scorer.v1")
def make_tagger_scorer():
    return tagger_score
