"""The structperc_chunker factory: its default config and what each setting means (see build_pipe)."""
from typing import Callable, Optional

from spacy.language import Language
from thinc.api import Config

from .. import scorers as _scorers  # noqa: F401  (registers chunk_scorer.v1)
from ..model import PerceptronModel
from ..pipeline.base import build_pipe
from . import features as _features  # noqa: F401  (registers chunker_features.v1)
from .component import StructuredChunker


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
        "lookahead_gap": None,
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
                 direction: str, scorer: Optional[Callable],
                 lookahead_gap: Optional[float] = None) -> StructuredChunker:
    """A text chunker (CoNLL-2000: NP, VP, PP, ...) as BIO tagging; chunks go to doc.spans.

    model: spacy-structperc.AveragedPerceptron.v1 with chunker_features.v1 (words, POS tags read
        from token.tag_, Brown clusters); with features.pos = false it reads words only.
    spans_key: the doc.spans group written (and read as gold); scores are {spans_key}_p/r/f.
    decoder: "greedy" (with optional lookahead; tsuruoka2011), "viterbi" or "beam" (huang2012).
        Only valid BIO sequences are searched.
    lookahead_depth: greedy only: actions searched ahead before committing (0 = none).
    lookahead_gap: with lookahead, search ahead only among the tags that score within this of
        the best (where only the best does, it is taken, as with depth 0); null = every tag
        everywhere. Decoding only: training searches every position.
    order: viterbi only: previous chunk tags scored, 1 or 2.
    beam_width: beam only: hypotheses kept.
    update: beam only: "standard", "early", "max-violation", "latest" or "hybrid".
    margin: greedy only: the margin by which the gold tag must win in training (>= 0).
    direction: "ltr" or "rtl".
    scorer: conlleval's chunk precision, recall and F1 (spacy-structperc.chunk_scorer.v1).
    """
    return build_pipe(StructuredChunker, **locals())
