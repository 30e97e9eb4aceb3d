"""Every @Language.factory of spacy-structperc with its default config (entry-point targets)."""
from typing import Callable, Optional

from spacy.language import Language
from thinc.api import Config

from . import registry as _registry  # noqa: F401  (registers architectures, features, scorers)
from .model import PerceptronModel
from .pipeline.tagger import StructuredTagger

DEFAULT_TAGGER_MODEL = Config().from_str("""
[model]
@architectures = "spacy-structperc.AveragedPerceptron.v1"
n_buckets = 1048576

[model.features]
@misc = "spacy-structperc.tagger_features.v1"
history = 2
history_words = true
""")["model"]


@Language.factory(
    "structperc_tagger",
    assigns=["token.tag", "token.pos"],
    default_config={
        "model": DEFAULT_TAGGER_MODEL,
        "decoder": "greedy",
        "lookahead_depth": 0,
        "order": 2,
        "beam_width": 4,
        "update": "max-violation",
        "margin": 40.0,
        "direction": "ltr",
        "attr": "tag",
        "tag_dict_min_count": 0,
        "scorer": {"@scorers": "spacy-structperc.tagger_scorer.v1"},
    },
    default_score_weights={"tag_acc": 0.5, "pos_acc": 0.5},
)
def make_tagger(nlp: Language, name: str, model: PerceptronModel, decoder: str, lookahead_depth: int,
                order: int, beam_width: int, update: str, margin: float, direction: str, attr: str,
                tag_dict_min_count: int, scorer: Optional[Callable]) -> StructuredTagger:
    return StructuredTagger(nlp.vocab, model, name, decoder=decoder, lookahead_depth=lookahead_depth,
                            order=order, beam_width=beam_width, update=update, margin=margin,
                            direction=direction, attr=attr,
                            tag_dict_min_count=tag_dict_min_count, scorer=scorer)
