"""Every @Language.factory of spacy-structperc with its default config (entry-point targets)."""
from typing import Callable, Optional

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
    default_score_weights={"spans_chunks_f": 1.0, "spans_chunks_p": 0.0, "spans_chunks_r": 0.0},
)
def make_chunker(nlp: Language, name: str, model: PerceptronModel, spans_key: str, decoder: str,
                 lookahead_depth: int, order: int, beam_width: int, update: str, margin: float,
                 direction: str, scorer: Optional[Callable]) -> StructuredChunker:
    return StructuredChunker(nlp.vocab, model, name, spans_key=spans_key, decoder=decoder,
                             lookahead_depth=lookahead_depth, order=order, beam_width=beam_width,
                             update=update, margin=margin, direction=direction, scorer=scorer)


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
    return LatentEntityRecognizer(nlp.vocab, model, name, n_latent=n_latent, order=order,
                                  reset_every=reset_every, init_scale=init_scale, seed=seed,
                                  scorer=scorer)


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
        "scorer": {"@scorers": "spacy.parser_scorer.v1"},
    },
    default_score_weights={"dep_uas": 0.5, "dep_las": 0.5, "dep_las_per_type": None,
                           "sents_p": None, "sents_r": None, "sents_f": 0.0},
)
def make_parser(nlp: Language, name: str, model: ParserModel, decoder: str, lookahead_depth: int,
                label_candidates: int, beam_width: int, update: str, margin: float,
                min_label_freq: int, min_feature_freq: int, root_label: str,
                scorer: Optional[Callable]) -> StructuredParser:
    return StructuredParser(nlp.vocab, model, name, decoder=decoder, lookahead_depth=lookahead_depth,
                            label_candidates=label_candidates, beam_width=beam_width, update=update,
                            margin=margin, min_label_freq=min_label_freq,
                            min_feature_freq=min_feature_freq, root_label=root_label,
                            scorer=scorer)


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
    return ClauseIdentifier(nlp.vocab, model, name, spans_key=spans_key, label=label, chunks_key=chunks_key,
                            method=method, max_boundaries=max_boundaries, max_span=max_span, scorer=scorer)
