"""Registered functions: the model architecture, feature-template sets and scorers.

The chunk scorer and the CoNLL-2000 corpus reader are registered in scorers.py and readers.py.

Plain Python, referenced by entry points (pyproject.toml), so `spacy.load` finds them without
importing spacy_structperc first. Names are versioned; old versions stay registered.
"""
from typing import Any, Callable, Dict, Iterable, List

from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry

from . import documents as _documents  # noqa: F401  (registers the documents corpus)
from . import readers as _readers  # noqa: F401  (registers the CoNLL-2000 reader)
from . import scorers as _scorers  # noqa: F401  (registers the chunk scorer)
from .features import chunker_templates, ner_templates, tagger_templates
from .model import PerceptronModel
from .parser_model import ParserModel, parser_templates

# The model size settings' defaults, chosen on UD English EWT dev (benchmarks/results/size_tuning.json).
PRECISION = "float16"
PRUNE_BELOW = 0.0


@registry.architectures("spacy-structperc.AveragedPerceptron.v1")
def build_averaged_perceptron(features: List[dict], n_buckets: int = 1 << 20, precision: str = PRECISION,
                              prune_below: float = PRUNE_BELOW) -> PerceptronModel:
    """Hashed conjunction features -> dense rows of averaged class weights.

    features: a template set (e.g. spacy-structperc.tagger_features.v1).
    n_buckets: initial size of the feature hash table; it grows as features are added.
    precision: how the weights are saved and read after loading: "float32", "float16", or
    "int8" (with a float32 scale per row). Training is always in float32.
    prune_below: rows whose averaged weights are all at most this in absolute value are left out
    of the saved model (0: only rows of zeros).
    """
    return PerceptronModel(features, n_buckets, precision, prune_below)


@registry.misc("spacy-structperc.tagger_features.v1")
def tagger_features(history: int = 2, history_words: bool = True, window: int = 2,
                    suffixes: int = 5, prefixes: int = 4, clusters: bool = False,
                    lexicon: bool = False) -> List[dict]:
    """Word, affix, shape, word-cluster and label-history templates for POS tagging.

    clusters: add Brown-cluster features (from spacy-lookups-data at initialization; stored in
    the model afterwards).
    lexicon: add features from spaCy's English lemmatizer tables (WordNet index, exceptions and
    suffix rules): which parts of speech a word could be, and by which inflection.
    """
    return tagger_templates(history, history_words, window, suffixes, prefixes, clusters, lexicon)


@registry.misc("spacy-structperc.tagger_features_small.v1")
def tagger_features_small(history: int = 1) -> List[dict]:
    """A compact template set (current word, suffix 3, previous label): fast, and tiny models."""
    return tagger_templates(history, history_words=False, window=0, suffixes=3, prefixes=0)


@registry.misc("spacy-structperc.chunker_features.v1")
def chunker_features(pos: bool = True, history: int = 2, history_features: bool = True,
                     window: int = 2, affixes: bool = False, clusters: bool = True,
                     edges: bool = False) -> List[dict]:
    """Word, POS and chunk-tag-history templates for chunking (Sha & Pereira 2003).

    pos: read token.tag_ (set upstream or by the corpus reader); false chunks from words only.
    history: previous chunk tags read (1 = bigram, decodable by first-order Viterbi; 2 = trigram).
    affixes: add suffix and word-shape features (useful with pos = false).
    clusters: add Brown-cluster features of w-1..w+1 (from spacy-lookups-data at
    initialization; stored in the model afterwards); false for the templates of tsuruoka2011.
    edges: add the previous chunk tag conjoined with the neighbouring words and POS tags
    (label-bigram features; worth their cost with the beam and Viterbi decoders).
    """
    return chunker_templates(pos, history, history_features, window, affixes, clusters, edges)


@registry.misc("spacy-structperc.ner_features.v1")
def ner_features(pos: bool = True, window: int = 2, affixes: int = 4, clusters: bool = False,
                 history: int = 1, latent: str = "all", label_level: bool = False,
                 context: bool = False) -> List[dict]:
    """Word, POS, orthography, affix and latent-state templates for NER (sun2009 Table 1).

    pos: read token.tag_; false works from words alone. history: 1 = latent-state bigrams
    (first order, the paper's odr=1), 2 = trigrams (odr=2; set the component's order = 2).
    clusters: add Brown-cluster features from spacy-lookups-data (saved with the model).
    latent: node templates conjoined with the latent state: "all" (sun2009), "core" or "none".
    label_level: add label-level copies of every node template, shared by a label's states.
    context: add neighbours' affixes and more word bigrams.
    """
    return ner_templates(pos, window, affixes, clusters, history, latent, label_level, context)


@registry.callbacks("spacy-structperc.epoch_hook.v1")
def create_epoch_hook() -> Callable[[Any, Dict[str, Any]], None]:
    """A [training.before_update] callback that tells every component with a `start_epoch`
    method which epoch training is in (structperc_ner's modified parameter averaging needs it)."""
    def before_update(nlp, args: Dict[str, Any]) -> None:
        for _, pipe in nlp.pipeline:
            start_epoch = getattr(pipe, "start_epoch", None)
            if start_epoch is not None:
                start_epoch(args["epoch"])
    return before_update


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


@registry.architectures("spacy-structperc.ParserPerceptron.v1")
def build_parser_perceptron(features: List[dict], n_buckets: int = 1 << 21, precision: str = PRECISION,
                            prune_below: float = PRUNE_BELOW) -> ParserModel:
    """Averaged perceptron weights over parser-state templates (see parser_features.v1).
    precision and prune_below: as for spacy-structperc.AveragedPerceptron.v1."""
    return ParserModel(features, n_buckets, precision, prune_below)


@registry.misc("spacy-structperc.rerank_features.v1")
def rerank_features(arcs: bool = True, grandparent: bool = True, siblings: bool = True,
                    children: bool = True, coordination: bool = True, paths: bool = True,
                    spans: bool = True, valency: bool = True) -> List[str]:
    """The global tree-feature groups of a parser's reranker, as first defined (without edges
    and lexical): for the `features` setting of the parser's `reranker` block. The groups are
    documented in spacy_structperc/_core/rerank_features.pyx."""
    on = dict(arcs=arcs, grandparent=grandparent, siblings=siblings, children=children,
              coordination=coordination, paths=paths, spans=spans, valency=valency)
    return [g for g, v in on.items() if v]


@registry.misc("spacy-structperc.rerank_features.v2")
def rerank_features_v2(arcs: bool = True, grandparent: bool = True, siblings: bool = True,
                       children: bool = True, coordination: bool = True, paths: bool = True,
                       spans: bool = True, valency: bool = True, edges: bool = True,
                       lexical: bool = True, consensus: bool = True) -> List[str]:
    """The global tree-feature groups of a parser's reranker (spacy_structperc/_core/
    rerank_features.pyx documents them): v1's, the subtrees' edges and neighbours (edges),
    bilexical grandparent and sibling features (lexical), and each arc's agreement with the
    rest of the k-best list (consensus, spacy_structperc/reranking/features.py)."""
    on = dict(arcs=arcs, grandparent=grandparent, siblings=siblings, children=children,
              coordination=coordination, paths=paths, spans=spans, valency=valency, edges=edges,
              lexical=lexical, consensus=consensus)
    return [g for g, v in on.items() if v]


@registry.misc("spacy-structperc.parser_features.v1")
def parser_features(word: str = "lower", third_order: bool = True, valency: bool = True,
                    distance: bool = True, queue: int = 3, clusters: bool = False) -> List[dict]:
    """Zhang & Nivre (2011) templates for arc-standard parsing: words and tags of s0-s2 and
    q0-q2, children of s0 and s1 with their labels, distance and valency. Tags are read from
    token.tag_, so an upstream tagger (or gold tags) must set them.

    word: the word atom (lower or orth). third_order: second-leftmost/rightmost children.
    queue: queue words read (2 or 3). clusters: Brown-cluster features (spacy-lookups-data).
    """
    return parser_templates(word, third_order, valency, distance, queue, clusters)
