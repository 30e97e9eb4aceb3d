"""The structperc_parser factory: its default config and what each setting means (see build_pipe)."""
from typing import Callable, Optional

from spacy.language import Language
from thinc.api import Config

from ..pipeline.base import build_pipe
from . import features as _features  # noqa: F401  (registers parser_features.v1)
from .component import StructuredParser
from .model import ParserModel


DEFAULT_PARSER_MODEL = Config().from_str("""
[model]
@architectures = "spacy-structperc.ParserPerceptron.v1"
n_buckets = 2097152

[model.features]
@misc = "spacy-structperc.parser_features.v1"
word = "lower"
third_order = true
valency = true
distance = true
queue = 3
clusters = false
""")["model"]


@Language.factory(
    "structperc_parser",
    assigns=["token.dep", "token.head", "token.is_sent_start", "doc.sents"],
    requires=["token.tag"],
    default_config={
        "model": DEFAULT_PARSER_MODEL,
        "decoder": "greedy",
        "lookahead_depth": 0,
        "label_candidates": 1,
        "beam_width": 8,
        "predict_beam_width": None,
        "update": "max-violation",
        "margin": 0.0,
        "min_label_freq": 10,
        "min_feature_freq": 2,
        "root_label": "ROOT",
        "reranker": None,
        "transition_system": "arc-standard",
        "oracle": "static",
        "explore": 0.0,
        "explore_after": 0,
        "word_dropout": 0.0,
        "break_bias": 0.0,
        "scorer": {"@scorers": "spacy.parser_scorer.v1"},
    },
    default_score_weights={"dep_uas": 0.5, "dep_las": 0.5, "dep_las_per_type": None,
                           "sents_p": None, "sents_r": None, "sents_f": 0.0},
)
def make_parser(nlp: Language, name: str, model: ParserModel, decoder: str, lookahead_depth: int,
                label_candidates: int, beam_width: int, update: str, margin: float,
                min_label_freq: int, min_feature_freq: int, root_label: str,
                scorer: Optional[Callable], reranker: Optional[dict] = None,
                transition_system: str = "arc-standard", oracle: str = "static",
                explore: float = 0.0, explore_after: int = 0,
                word_dropout: float = 0.0, break_bias: float = 0.0,
                predict_beam_width: Optional[int] = None) -> StructuredParser:
    """A labelled arc-standard dependency parser writing heads, labels and sentence boundaries.

    Boundaries already on the Doc are kept (each sentence is parsed on its own); otherwise the
    parser ends sentences itself with its BREAK action.

    model: spacy-structperc.ParserPerceptron.v1 with parser_features.v1 (Zhang & Nivre 2011;
        reads token.tag_, so a tagger goes first).
    decoder: "greedy" (with optional lookahead; tsuruoka2011) or "beam" (huang2012).
    lookahead_depth: greedy only: actions searched ahead before committing (0 = none).
    label_candidates: the best k labels of each arc direction the search branches over
        (0 = all labels).
    beam_width: beam only: hypotheses kept.
    predict_beam_width: beam only: hypotheses kept when parsing (not in training, nor for the
        reranker's k-best lists); null = beam_width. A model trained with a wide beam parses
        about as well with a narrower one, and faster (configs/parser_beam.cfg).
    update: beam only: "standard", "early", "max-violation", "latest" or "hybrid".
    margin: greedy only: the margin by which the gold action must win in training (>= 0).
    min_label_freq: labels seen fewer times in training are backed off (a decorated label to
        its base label, others to "dep").
    min_feature_freq: updates touch only features seen this often along the gold derivations.
    root_label: the label of sentence roots.
    transition_system: "arc-standard" (tsuruoka2011's, Nivre 2004) or "arc-hybrid" (Kuhlmann et
        al. 2011: LEFT-ARC attaches s0 to the next word; give the features arc_hybrid = true).
    oracle: "static" (learn along the gold derivation) or "dynamic" (greedy only: training
        with exploration, Goldberg and Nivre 2013; for arc-standard, Goldberg, Sartorio and
        Satta 2014: any action that loses no reachable gold arc is correct, and the parser
        learns to continue after its mistakes).
    explore: with the dynamic oracle, the probability of following the parser's own action
        rather than a correct one while training.
    explore_after: passes over the data before exploring (the dynamic oracle alone before
        that); needs the epoch hook (spacy-structperc.epoch_hook.v1 in [training.before_update]).
    word_dropout: in training only, the share of tokens whose word is hidden from the features,
        drawn anew for every example: the parser learns to attach a word from its tag and cluster,
        as it must for a word it never saw. 0 = off.
    break_bias: added to the score of ending a sentence (BREAK) wherever the parser may end one,
        when it parses (not in training): above 0 it ends sentences more readily. It matters only
        for Docs without sentence boundaries, which the parser splits itself.
    scorer: dep_uas, dep_las, dep_las_per_type and sents_p/r/f (spacy.parser_scorer.v1).
    reranker: optional k-best reranking block (learner, k, kernel, folds, features; collins2001;
        or learner "none" with reverse > 0 and union: a right-to-left model's rescoring, and
        graph > 0 with graph_epochs: a second-order graph model's; tag_flips and tag_weight:
        tag variants from a tagger with alternatives), see docs/parser.md (reranking);
        null parses with the base model alone.
    """
    return build_pipe(StructuredParser, **locals())
