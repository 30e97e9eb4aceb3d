"""The structperc_tagger factory: its default config and what each setting means (see build_pipe)."""
from typing import Callable, Optional

from spacy.language import Language
from thinc.api import Config

from ..model import PerceptronModel
from ..pipeline.base import build_pipe
from . import features as _features  # noqa: F401  (registers tagger_features.v1)
from . import scorer as _scorer  # noqa: F401  (registers tagger_scorer.v1)
from .component import StructuredTagger


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
        "lookahead_gap": None,
        "order": 2,
        "beam_width": 4,
        "update": "max-violation",
        "margin": 40.0,
        "direction": "ltr",
        "attr": "tag",
        "pos": "predict",
        "tag_dict_min_count": 0,
        "alternatives": False,
        "word_dropout": 0.0,
        "scorer": {"@scorers": "spacy-structperc.tagger_scorer.v1"},
    },
    requires=[],
    # For attr = "tag"; with attr = "pos" the component records pos_acc (and assigns token.pos
    # only) for itself: see PerceptronPipe.pipe_meta_overrides.
    default_score_weights={"tag_acc": 1.0, "pos_acc": None},
)
def make_tagger(nlp: Language, name: str, model: PerceptronModel, decoder: str, lookahead_depth: int,
                order: int, beam_width: int, update: str, margin: float, direction: str, attr: str,
                pos: str, tag_dict_min_count: int, alternatives: bool, scorer: Optional[Callable],
                word_dropout: float = 0.0, lookahead_gap: Optional[float] = None) -> StructuredTagger:
    """A part-of-speech tagger trained as an averaged structured perceptron.

    model: spacy-structperc.AveragedPerceptron.v1 with a feature set (tagger_features.v1).
    decoder: "greedy" (left to right, with optional lookahead; tsuruoka2011), "viterbi" (exact,
        first or second order; Collins 2002) or "beam" (violation-fixing updates; huang2012).
    lookahead_depth: greedy only: actions searched ahead before committing to a label (0 = none).
    lookahead_gap: with lookahead, search ahead only among the labels that score within this
        of the best (where only the best does, it is taken, as with depth 0); null = every label
        everywhere. Decoding only: training searches every position.
    order: viterbi only: previous labels scored, 1 or 2 (at least the features' history).
    beam_width: beam only: hypotheses kept.
    update: beam only: "standard", "early", "max-violation", "latest" or "hybrid".
    margin: greedy only: the margin by which the gold label must win in training (>= 0).
    direction: "ltr" or "rtl" (tag right to left).
    attr: "tag" writes token.tag_ (and token.pos_ when the training data maps tags to universal
        POS); "pos" writes token.pos_ and accepts Universal POS labels only.
    pos: attr = "tag" only: how token.pos_ is set. "map": each fine tag's most frequent universal
        POS in the training data. "predict": a tag seen with several universal POS (IN: ADP or
        SCONJ, VBZ: AUX or VERB, ...) has it predicted among those by a second pass over the
        predicted tags and the words around them (tagger/pos.py); the others are mapped.
    tag_dict_min_count: words seen this often in training may only take the tags seen with them
        (Ratnaparkhi 1996); 0 turns the tag dictionary off.
    alternatives: attr = "tag" only: also record each token's runner-up tag and its score margin
        in doc.user_data (StructuredTagger.alternatives), for a parser's reranker with tag_flips.
    word_dropout: in training only, the share of tokens whose word is hidden from the features,
        drawn anew for every example: the tagger learns to tag a word from its affixes, shape,
        clusters and neighbours, as it must for a word it never saw. 0 = off.
    scorer: tag_acc (and pos_acc) or pos_acc, following attr.
    """
    return build_pipe(StructuredTagger, **locals())
