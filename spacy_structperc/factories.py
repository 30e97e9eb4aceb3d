"""Every @Language.factory of spacy-structperc with its default config (entry-point targets).

Each setting is written where it is declared (default_config), typed in the factory's signature
(spaCy validates a config against it) and documented in the factory's docstring. The factory
hands its arguments to the component as they are (`_build`), so no setting is spelled out a
further time in a hand-written call.
"""
from typing import Any, Callable, Optional, Type, TypeVar

from spacy.language import Language
from thinc.api import Config

from . import registry as _registry  # noqa: F401  (registers architectures, features, scorers)
from .model import PerceptronModel
from .parser_model import ParserModel
from .pipeline.chunker import StructuredChunker
from .pipeline.ner import LatentEntityRecognizer
from .pipeline.parser import StructuredParser
from .pipeline.tagger import StructuredTagger
from .clauses import registry as _clause_registry  # noqa: F401  (clause model, features, readers)
from .clauses.component import ClauseIdentifier
from .clauses.model import ClauseModel
from .pipeline.base import PerceptronPipe

P = TypeVar("P", bound=PerceptronPipe)


def _build(cls: Type[P], nlp: Language, name: str, model: Any, **settings: Any) -> P:
    """The component `cls` with the factory's model and settings (every argument of the factory
    but nlp, which gives the vocab, and the component learns its Language for its pipe meta)."""
    pipe = cls(nlp.vocab, model, name, **settings)
    pipe._bind_language(nlp)
    return pipe


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
    requires=[],
    # For attr = "tag"; with attr = "pos" the component records pos_acc (and assigns token.pos
    # only) for itself: see PerceptronPipe.pipe_meta_overrides.
    default_score_weights={"tag_acc": 1.0, "pos_acc": None},
)
def make_tagger(nlp: Language, name: str, model: PerceptronModel, decoder: str, lookahead_depth: int,
                order: int, beam_width: int, update: str, margin: float, direction: str, attr: str,
                tag_dict_min_count: int, scorer: Optional[Callable]) -> StructuredTagger:
    """A part-of-speech tagger trained as an averaged structured perceptron.

    model: spacy-structperc.AveragedPerceptron.v1 with a feature set (tagger_features.v1).
    decoder: "greedy" (left to right, with optional lookahead; tsuruoka2011), "viterbi" (exact,
        first or second order; Collins 2002) or "beam" (violation-fixing updates; huang2012).
    lookahead_depth: greedy only: actions searched ahead before committing to a label (0 = none).
    order: viterbi only: previous labels scored, 1 or 2 (at least the features' history).
    beam_width: beam only: hypotheses kept.
    update: beam only: "standard", "early", "max-violation", "latest" or "hybrid".
    margin: greedy only: the margin by which the gold label must win in training (>= 0).
    direction: "ltr" or "rtl" (tag right to left).
    attr: "tag" writes token.tag_ (and token.pos_ when the training data maps tags to universal
        POS); "pos" writes token.pos_ and accepts Universal POS labels only.
    tag_dict_min_count: words seen this often in training may only take the tags seen with them
        (Ratnaparkhi 1996); 0 turns the tag dictionary off.
    scorer: tag_acc (and pos_acc) or pos_acc, following attr.
    """
    return _build(StructuredTagger, **locals())


DEFAULT_CHUNKER_MODEL = Config().from_str("""
[model]
@architectures = "spacy-structperc.AveragedPerceptron.v1"
n_buckets = 1048576

[model.features]
@misc = "spacy-structperc.chunker_features.v1"
pos = true
history = 2
history_features = true
clusters = true
""")["model"]


# Default: greedy decoding with the margin perceptron (tsuruoka2011) over words, POS and Brown
# clusters (CoNLL-2000 held-out F1 0.9439, against 0.9431 without clusters). Beam search
# (decoder = "beam", beam_width = 3) or lookahead are a little more accurate and slower.
@Language.factory(
    "structperc_chunker",
    assigns=["doc.spans"],
    # The default features read POS tags; with pos = false the component records that it
    # requires nothing (see PerceptronPipe.pipe_meta_overrides).
    requires=["token.tag"],
    default_config={
        "model": DEFAULT_CHUNKER_MODEL,
        "spans_key": "chunks",
        "decoder": "greedy",
        "lookahead_depth": 0,
        "order": 2,
        "beam_width": 3,
        "update": "max-violation",
        "margin": 40.0,
        "direction": "ltr",
        "scorer": {"@scorers": "spacy-structperc.chunk_scorer.v1"},
    },
    # Named after spans_key ("chunks_f" for "chunks"), short enough for the `spacy train` table.
    default_score_weights={"chunks_f": 1.0, "chunks_p": 0.0, "chunks_r": 0.0},
)
def make_chunker(nlp: Language, name: str, model: PerceptronModel, spans_key: str, decoder: str,
                 lookahead_depth: int, order: int, beam_width: int, update: str, margin: float,
                 direction: str, scorer: Optional[Callable]) -> StructuredChunker:
    """A text chunker (CoNLL-2000: NP, VP, PP, ...) as BIO tagging; chunks go to doc.spans.

    model: spacy-structperc.AveragedPerceptron.v1 with chunker_features.v1 (words, POS tags read
        from token.tag_, Brown clusters); with features.pos = false it reads words only.
    spans_key: the doc.spans group written (and read as gold); scores are {spans_key}_p/r/f.
    decoder: "greedy" (with optional lookahead; tsuruoka2011), "viterbi" or "beam" (huang2012).
        Only valid BIO sequences are searched.
    lookahead_depth: greedy only: actions searched ahead before committing (0 = none).
    order: viterbi only: previous chunk tags scored, 1 or 2.
    beam_width: beam only: hypotheses kept.
    update: beam only: "standard", "early", "max-violation", "latest" or "hybrid".
    margin: greedy only: the margin by which the gold tag must win in training (>= 0).
    direction: "ltr" or "rtl".
    scorer: conlleval's chunk precision, recall and F1 (spacy-structperc.chunk_scorer.v1).
    """
    return _build(StructuredChunker, **locals())


DEFAULT_NER_MODEL = Config().from_str("""
[model]
@architectures = "spacy-structperc.AveragedPerceptron.v1"
n_buckets = 1048576

[model.features]
@misc = "spacy-structperc.ner_features.v1"
pos = false
history = 1
""")["model"]


@Language.factory(
    "structperc_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    # The default features read words only; with features.pos = true the component records
    # that it requires token.tag (see PerceptronPipe.pipe_meta_overrides).
    requires=[],
    default_config={
        "model": DEFAULT_NER_MODEL,
        "n_latent": 4,
        "order": 1,
        "reset_every": 4,
        "init_scale": 0.01,
        "seed": 0,
        "scorer": {"@scorers": "spacy.ner_scorer.v1"},
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_ner(nlp: Language, name: str, model: PerceptronModel, n_latent: int, order: int,
             reset_every: int, init_scale: float, seed: int,
             scorer: Optional[Callable]) -> LatentEntityRecognizer:
    """A named-entity recognizer: the latent-variable perceptron of sun2009, writing doc.ents.

    Entities already on the Doc (an entity_ruler placed before it) are kept as constraints, as
    spaCy's ner keeps them: the component adds entities around them.

    model: spacy-structperc.AveragedPerceptron.v1 with ner_features.v1 (words, shapes, affixes;
        POS tags from token.tag_ with features.pos = true; Brown clusters with clusters = true).
    n_latent: hidden sub-states per BIO class; 1 is the plain structured perceptron.
    order: 1 (sub-state bigrams) or 2 (trigrams; needs features.history = 2).
    reset_every: replace the weights by their average at the start of every k-th pass
        (modified parameter averaging; needs the spacy-structperc.epoch_hook.v1 callback); 0 = off.
    init_scale: the scale of the seeded noise new weight rows start at (breaks the sub-states' ties).
    seed: the seed of that noise.
    scorer: ents_p/r/f and ents_per_type (spacy.ner_scorer.v1).
    """
    return _build(LatentEntityRecognizer, **locals())


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
        "update": "max-violation",
        "margin": 0.0,
        "min_label_freq": 10,
        "min_feature_freq": 2,
        "root_label": "ROOT",
        "reranker": None,
        "scorer": {"@scorers": "spacy.parser_scorer.v1"},
    },
    default_score_weights={"dep_uas": 0.5, "dep_las": 0.5, "dep_las_per_type": None,
                           "sents_p": None, "sents_r": None, "sents_f": 0.0},
)
def make_parser(nlp: Language, name: str, model: ParserModel, decoder: str, lookahead_depth: int,
                label_candidates: int, beam_width: int, update: str, margin: float,
                min_label_freq: int, min_feature_freq: int, root_label: str,
                scorer: Optional[Callable], reranker: Optional[dict] = None) -> StructuredParser:
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
    update: beam only: "standard", "early", "max-violation", "latest" or "hybrid".
    margin: greedy only: the margin by which the gold action must win in training (>= 0).
    min_label_freq: labels seen fewer times in training are backed off (a decorated label to
        its base label, others to "dep").
    min_feature_freq: updates touch only features seen this often along the gold derivations.
    root_label: the label of sentence roots.
    scorer: dep_uas, dep_las, dep_las_per_type and sents_p/r/f (spacy.parser_scorer.v1).
    reranker: optional k-best reranking block (learner, k, kernel, folds, features; collins2001),
        see the README's reranking section; null parses with the base model alone.
    """
    return _build(StructuredParser, **locals())


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
    return _build(ClauseIdentifier, **locals())
