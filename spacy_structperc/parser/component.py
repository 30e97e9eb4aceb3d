"""structperc_parser: a labelled arc-standard dependency parser trained as a structured perceptron.

Two decoders over one model: greedy decisions with depth-D lookahead and the margin perceptron
update (tsuruoka2011 Fig. 3; the default, at depth 0: on UD English EWT deeper lookahead is no
more accurate with these features, and slower), and beam search with early / max-violation / standard
/ latest / hybrid updates (huang2012). The transition system is `_core/arcstandard.pyx`.

Sentences. If a Doc already has sentence boundaries (a senter or sentencizer ran first, or the
reader set them), each sentence is parsed on its own and gets exactly one root. Otherwise the
whole Doc is parsed at once and the parser may end a sentence (BREAK) whenever its stack holds one
finished tree: the sentences are then read off the trees, as spaCy's parser does.

Non-projective trees are learned through pseudo-projective transformation (see nonproj.py); the
labels users see (`labels`, `token.dep_`) are never decorated. Behaviour on imperfect training
data: gold heads that cross a sentence boundary of the predicted Doc, or point at tokens that do
not align, are treated as missing (the oracle stops there and the rest of that sentence is
followed, not learned); a sentence with several gold roots but fixed boundaries is learned up to
the point where its roots would have to be joined; cycles raise S100.

Tags. The features read `token.tag_`. At prediction time a Doc without tags raises S009. In
training, an Example whose predicted Doc has no tags but the gold tokens is read with the
reference's tags, so a parser trained alone on a corpus with gold tags works; put a tagger before
it (and in `[training] annotating_components`) to train on predicted tags, as configs/parser.cfg
does.
"""
import math
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
import srsly
from spacy.attrs import DEP, HEAD, SENT_START
from spacy.tokens import Doc
from spacy.training import Example
from spacy.vocab import Vocab

from .. import docarrays
from .._core import batch, beam, lookahead
from .._core.arcstandard import SYSTEMS, ArcStandardSystem
from ..errors import Errors
from ..atoms import AtomBatch, check_word_dropout, hide_words
from ..reranking.features import GROUPS, GROUPS_V1
from ..reranking.learners import KERNELS, LEARNERS
from ..reranking.pipes import ParserReranker
from ..reranking.reverse import reverse_tree
from .model import ParserModel
from ..pipeline.base import PerceptronPipe, load_cfg
from .nonproj import deprojectivize, is_decorated, projective_gold, undecorated
from ..pipeline.sequence import _choice

DECODERS = ("greedy", "beam")
ORACLES = ("static", "dynamic")
PARSE_WINDOW = 1000   # tokens bound at once in a Doc without sentence boundaries
BACKOFF_LABEL = "dep"
# features: the eight groups of rerank_features.v1 did best on held-out jackknifed EWT lists
# (benchmarks/bench_reranking.py); edges, lexical and consensus are there to be chosen.
# reverse: the weight of a right-to-left model's score (0: none; with learner "none" only, as the
# learners' jackknifed lists have no reversed scores yet), union: the reversed model's own k best
# join the list. On UD EWT (benchmarks/results/reranking.json, "bidirectional" rows) dev chose
# weights 0.2-0.4 (configs/parser_bidirectional.cfg: k 16, weight 0.2, graph 1.0, no union).
# graph: the weight of a second-order graph model's score (McDonald and Pereira 2006; 0: none;
# with learner "none" only, like reverse), trained beside the parser on each training sentence's
# first graph_epochs visits (5: a graph model's held-out UAS stops rising there, and on EWT dev
# 10 epochs rescored worse than 5).
# tag_flips: with learner "none", each span is parsed again with each of its tag_flips least
# certain tokens given its runner-up tag (from a structperc_tagger with alternatives = true),
# those trees paying tag_weight x the token's margin; 0: none. On UD EWT dev (bench_reranking
# --only tagflips, k 32 with the union) 3 flips at weight 8 did best.
RERANKER_DEFAULTS = {"learner": "perceptron", "k": 8, "kernel": "poly", "folds": 4,
                     "features": list(GROUPS_V1), "settings": {}, "reverse": 0.0, "union": False,
                     "graph": 0.0, "graph_epochs": 5, "tag_flips": 0, "tag_weight": 8.0}
# The settings of a reranker block that configure_reranker may change after training.
PREDICTION_SETTINGS = ("k", "union", "reverse", "graph", "tag_flips", "tag_weight")


def _reranker_block(name: str, decoder: str, block: Optional[dict]) -> Optional[dict]:
    """The reranker block with its defaults filled in, validated (S240, S242, S244, S245)."""
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ValueError(Errors.S244.format(name=name, setting="reranker", value=block,
                                            requirement="a block (dict) or null"))
    unknown = sorted(set(block) - set(RERANKER_DEFAULTS))
    if unknown:
        raise ValueError(Errors.S244.format(name=name, setting="reranker", value=unknown,
                                            requirement=f"made of the settings {sorted(RERANKER_DEFAULTS)}"))
    out = {**RERANKER_DEFAULTS, **block}
    out["features"] = list(out["features"])
    out["settings"] = dict(out["settings"] or {})
    if out["learner"] not in LEARNERS and out["learner"] != "none":
        raise ValueError(Errors.S240.format(learner=out["learner"], options=list(LEARNERS) + ["none"]))
    for setting in ("reverse", "graph", "tag_weight"):
        weight = out[setting]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < float("inf"):
            raise ValueError(Errors.S244.format(name=name, setting=setting, value=weight,
                                                requirement="a number >= 0"))
        out[setting] = float(weight)
    if not isinstance(out["union"], bool):
        raise ValueError(Errors.S244.format(name=name, setting="union", value=out["union"],
                                            requirement="true or false"))
    if out["union"] and out["reverse"] <= 0:
        raise ValueError(Errors.S244.format(name=name, setting="union", value=True,
                                            requirement="false without a reversed model (reverse > 0), "
                                                        "whose k best the union adds"))
    if (out["learner"] == "none") != (out["reverse"] > 0 or out["graph"] > 0):
        raise ValueError(Errors.S244.format(
            name=name, setting="learner", value=out["learner"],
            requirement="'none' exactly when reverse or graph > 0 (the other models' scores are not "
                        "yet in the learners' training lists; without them, 'none' has nothing to rerank with)"))
    if out["kernel"] not in KERNELS:
        raise ValueError(Errors.S242.format(kernel=out["kernel"], options=list(KERNELS)))
    if out["tag_flips"] and out["learner"] != "none":
        raise ValueError(Errors.S244.format(name=name, setting="tag_flips", value=out["tag_flips"],
                                            requirement="0 with a learner (tag variants are chosen among by "
                                                        "the rescoring models' scores, learner 'none')"))
    for setting, low in (("k", 2), ("folds", 2), ("graph_epochs", 1), ("tag_flips", 0)):
        v = out[setting]
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(Errors.S244.format(name=name, setting=setting, value=v,
                                                requirement=f"an integer >= {low}"))
    bad = [g for g in out["features"] if g not in GROUPS]
    if bad:
        raise ValueError(Errors.S244.format(name=name, setting="features", value=bad,
                                            requirement=f"feature groups among {list(GROUPS)}"))
    if decoder != "beam":
        raise ValueError(Errors.S245.format(name=name, decoder=decoder))
    return out



class _MissingAnnotation(Exception):
    """A reference Doc lacks an annotation a feature atom reads (see _gold_features)."""


class ParseBatch(List[Tuple[numpy.ndarray, numpy.ndarray]]):
    """What `predict` returns: (heads, label classes) per Doc (see predict), with the whole
    batch's `heads` and `classes` concatenated and the Docs' `offsets` into them, so
    set_annotations writes them without joining the Docs' arrays again. Each Doc's pair is a view
    of those. A plain list of pairs is accepted by set_annotations too."""

    def __init__(self, heads: numpy.ndarray, classes: numpy.ndarray, offsets: numpy.ndarray):
        bounds = offsets.tolist()
        super().__init__((heads[a:b], classes[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))
        self.heads, self.classes, self.offsets = heads, classes, offsets
        self.lengths = numpy.diff(offsets).tolist()

    def matches(self, docs: Sequence[Doc]) -> bool:
        """Whether these were predicted for Docs of the lengths of `docs`."""
        return list(map(len, docs)) == self.lengths


class StructuredParser(PerceptronPipe):
    """Assigns `token.head`, `token.dep_` and sentence boundaries with a structured perceptron.

    The settings (decoder, lookahead_depth, label_candidates, beam_width, predict_beam_width,
    update, margin, min_label_freq, min_feature_freq, root_label) are documented on the factory,
    `spacy_structperc.parser.factory.make_parser`.
    """

    factory_name = "structperc_parser"
    model: ParserModel

    def __init__(self, vocab: Vocab, model: ParserModel, name: str = "parser", *,
                 decoder: str = "greedy", lookahead_depth: int = 0, label_candidates: int = 1,
                 beam_width: int = 8, update: str = "max-violation", margin: float = 0.0,
                 min_label_freq: int = 10, min_feature_freq: int = 2, root_label: str = "ROOT",
                 scorer=None, reranker: Optional[dict] = None,
                 transition_system: str = "arc-standard", oracle: str = "static",
                 explore: float = 0.0, explore_after: int = 0, word_dropout: float = 0.0,
                 break_bias: float = 0.0, predict_beam_width: Optional[int] = None):
        _choice(name, "decoder", decoder, DECODERS)
        _choice(name, "transition_system", transition_system, SYSTEMS)
        _choice(name, "oracle", oracle, ORACLES)
        if oracle == "dynamic" and decoder != "greedy":
            raise ValueError(Errors.S012.format(
                setting="oracle", name=name, value=oracle,
                requirement=f"'static' with decoder {decoder!r} ('dynamic' needs 'greedy')"))
        if not (isinstance(explore, (int, float)) and not isinstance(explore, bool) and 0.0 <= explore <= 1.0):
            raise ValueError(Errors.S012.format(setting="explore", name=name, value=explore,
                                                requirement="a probability between 0 and 1"))
        check_word_dropout(name, word_dropout)
        _choice(name, "update", update, beam.UPDATE_METHODS)
        for setting, value, low in (("lookahead_depth", lookahead_depth, 0), ("beam_width", beam_width, 1),
                                    ("label_candidates", label_candidates, 0),
                                    ("min_label_freq", min_label_freq, 0),
                                    ("min_feature_freq", min_feature_freq, 0),
                                    ("explore_after", explore_after, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=value,
                                                    requirement=f"an integer >= {low}"))
        if predict_beam_width is not None and (not isinstance(predict_beam_width, int)
                                               or isinstance(predict_beam_width, bool) or predict_beam_width < 1):
            raise ValueError(Errors.S012.format(setting="predict_beam_width", name=name, value=predict_beam_width,
                                                requirement="null or an integer >= 1"))
        if not margin >= 0:
            raise ValueError(Errors.S012.format(setting="margin", name=name, value=margin, requirement=">= 0"))
        if not (isinstance(break_bias, (int, float)) and not isinstance(break_bias, bool)
                and math.isfinite(break_bias)):
            raise ValueError(Errors.S012.format(setting="break_bias", name=name, value=break_bias,
                                                requirement="a finite number"))
        if not isinstance(root_label, str) or not root_label:
            raise ValueError(Errors.S012.format(setting="root_label", name=name, value=root_label,
                                                requirement="a non-empty string"))
        reranker = _reranker_block(name, decoder, reranker)
        super().__init__(vocab, model, name, scorer=scorer, decoder=decoder,
                         lookahead_depth=lookahead_depth, label_candidates=label_candidates,
                         beam_width=beam_width, update=update, margin=float(margin),
                         min_label_freq=min_label_freq, min_feature_freq=min_feature_freq,
                         root_label=root_label, reranker=reranker,
                         transition_system=transition_system, oracle=oracle, explore=float(explore),
                         explore_after=explore_after, word_dropout=float(word_dropout),
                         break_bias=float(break_bias), predict_beam_width=predict_beam_width)
        self._epoch = 0
        self._reset_reranker()
        self._labels_changed()

    # Labels ------------------------------------------------------------------------------------
    # cfg["labels"] holds the arc labels the transition system knows, decorated ones included
    # (x||y, from projectivization); `labels` shows users the undecorated ones only.

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(sorted({undecorated(l) for l in self.cfg["labels"]}))

    @property
    def move_labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def n_classes(self) -> int:
        return 2 + 2 * len(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.cfg["labels"])

    def _check_label(self, label: str) -> None:
        if label == self.cfg["root_label"]:
            raise ValueError(Errors.S102.format(name=self.name, label=label))

    def _require_initialized(self) -> None:
        if not self.model.is_initialized or not self.cfg["labels"]:
            raise ValueError(Errors.S001.format(name=self.name))

    def _labels_changed(self) -> None:
        super()._labels_changed()
        self._class_of = {l: i for i, l in enumerate(self.cfg["labels"])}
        self._label_values = numpy.array([self.vocab.strings.add(l) for l in self.cfg["labels"]]
                                          + [self.vocab.strings.add(self.cfg["root_label"])],
                                          dtype=numpy.uint64)
        self._decorated = numpy.array([is_decorated(l) for l in self.cfg["labels"]] + [False], dtype=bool)

    def _label_id(self, label: str) -> int:
        """The class of a gold label, backing off decorated labels to their base label and
        unknown ones to 'dep'."""
        lut = self._class_of
        if label in lut:
            return lut[label]
        if is_decorated(label) and undecorated(label) in lut:
            return lut[undecorated(label)]
        if BACKOFF_LABEL in lut:
            return lut[BACKOFF_LABEL]
        raise ValueError(Errors.S101.format(label=label, name=self.name))

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Take the arc labels from `labels` (spacy init labels) or from the projectivized training
        trees; labels seen fewer than `min_label_freq` times are backed off (a decorated label to
        its base label, others to 'dep')."""
        root = self.cfg["root_label"]
        if labels is None:
            counts = self._count_labels(get_examples)
            min_freq = self.cfg["min_label_freq"]
            base_counts: Counter = Counter()
            for label, c in counts.items():
                base_counts[undecorated(label)] += c
            kept = []
            for label, c in counts.items():
                if c >= min_freq:
                    kept.append(label)
                elif is_decorated(label) and base_counts[undecorated(label)] >= min_freq:
                    kept.append(undecorated(label))
                else:
                    kept.append(BACKOFF_LABEL)
            labels = sorted(set(kept))
        self._init_labels(get_examples, labels, lambda eg: (), "dep", nlp)
        # The filter is part of the training state, so it lives in the model: saved and pickled
        # with the weights, continued training on a copy learns what the original would.
        self.model.allowed_keys = None
        if self.cfg["min_feature_freq"] > 1:
            self.model.allowed_keys = self._gold_features(get_examples, self.cfg["min_feature_freq"])
        if self._reranking is not None:
            self._reranking.initialize(get_examples)
        self._decoding.invalidate()

    def _gold_features(self, get_examples, min_freq: int, system: Optional[ArcStandardSystem] = None,
                       reverse: bool = False) -> numpy.ndarray:
        """Feature keys seen at least `min_freq` times along the oracle derivations of the
        training trees, read with the reference's tags (the tagger may not be trained yet).
        A training Doc whose reference lacks an annotation the features read (a tree without
        tags, say) is left out of the count: its tags are missing, not empty, and training
        reads the tags an upstream tagger predicts. With `reverse`, of the reversed trees under
        `system` (a reversed model's; trees with a missing head are left out, as its training
        leaves them out)."""
        system = self.system if system is None else system
        # Counted a slice of examples at a time and merged into the running counts, so the
        # count holds each distinct key once (~6M keys on EWT) rather than every occurrence.
        keys, counts = self._count([])
        pending = []
        for eg in get_examples():
            if not len(eg.reference) or not self.same_tokens(eg):
                continue
            heads, deps = projective_gold(eg, self.name)
            gold_heads, gold_labels = self._gold(eg, 0, len(eg.reference), heads, deps)
            try:
                atoms = self.model.atoms.batch([eg.reference], self.name, (), _MissingAnnotation).atoms
            except _MissingAnnotation:
                continue
            if reverse:
                if (gold_heads == -2).any():
                    continue
                atoms = numpy.ascontiguousarray(atoms[::-1])
                gold_heads, gold_labels = reverse_tree((gold_heads, gold_labels))
            system.set_sentence(atoms, gold_heads, gold_labels, True)
            pending.append(system.oracle_keys())
            if len(pending) >= 100:
                keys, counts = self._merge(keys, counts, *self._count(pending))
                pending = []
        keys, counts = self._merge(keys, counts, *self._count(pending))
        return keys[counts >= min_freq]

    @staticmethod
    def _count(arrays):
        if not arrays:
            return numpy.zeros((0,), dtype=numpy.uint64), numpy.zeros((0,), dtype=numpy.int64)
        return numpy.unique(numpy.concatenate(arrays), return_counts=True)

    @staticmethod
    def _merge(keys, counts, more_keys, more_counts):
        """Two (sorted distinct keys, counts) as one."""
        keys, inverse = numpy.unique(numpy.concatenate([keys, more_keys]), return_inverse=True)
        totals = numpy.bincount(inverse, weights=numpy.concatenate([counts, more_counts]), minlength=len(keys))
        return keys, totals.astype(numpy.int64)

    def _count_labels(self, get_examples) -> Counter:
        counts: Counter = Counter()
        for eg in get_examples():
            heads, deps = projective_gold(eg, self.name)
            for i, (h, d) in enumerate(zip(heads, deps)):
                if d and h is not None and h != i:
                    counts[d] += 1
        counts.pop(self.cfg["root_label"], None)
        return counts

    # The transition system ---------------------------------------------------------------------

    @property
    def system(self) -> ArcStandardSystem:
        """This thread's transition system over the current weights (see
        PerceptronPipe._thread_system)."""
        return self._thread_system(self._build_system)

    def _build_system(self) -> ArcStandardSystem:
        system = ArcStandardSystem(self.model.templates, self.model.weights, len(self.cfg["labels"]),
                                   self.cfg["label_candidates"], self.transition_system)
        system.set_allowed_keys(self.model.allowed_keys)
        # Pipelines saved before the setting existed have none: 0, as they were trained.
        system.break_bias = self.cfg.get("break_bias", 0.0)
        return system

    def start_epoch(self, epoch: int) -> None:
        """Tell the parser which training pass (0-based) is under way, for `explore_after`; the
        epoch hook (spacy-structperc.epoch_hook.v1 in [training.before_update]) calls it."""
        self._epoch = epoch

    @property
    def transition_system(self) -> str:
        # Pipelines saved before the setting existed are arc-standard.
        return self.cfg.get("transition_system", "arc-standard")

    @staticmethod
    def _spans(doc: Doc) -> Tuple[List[Tuple[int, int]], bool]:
        """The spans to parse, and whether the parser may split them into sentences."""
        if doc.has_annotation("SENT_START"):
            return [(s.start, s.end) for s in doc.sents], False
        return [(0, len(doc))], True

    def _decoder_setting(self) -> Tuple[str, int]:
        """The decoder ("greedy" or "beam") and its parameter (lookahead depth, beam width)."""
        if self.cfg["decoder"] == "beam":
            return "beam", self.cfg.get("predict_beam_width") or self.cfg["beam_width"]
        return "greedy", self.cfg["lookahead_depth"]

    def predict(self, docs: Iterable[Doc]) -> List[Tuple[numpy.ndarray, numpy.ndarray]]:
        """(heads, label classes) per doc: heads are token indices (a root is its own head) and a
        root's class is the last one (the root label).

        The whole batch is parsed in one call with the GIL released (`_core/batch.pyx`): each
        sentence of a Doc with boundaries on its own, a Doc without them PARSE_WINDOW tokens at
        a time, keeping the sentences the parser itself ends (BREAK) before each window's end.
        A state holds nine ints per bound token and the beam and lookahead copy states at every
        step, so binding a whole long Doc made its time grow quadratically; the sentence a
        window cuts is parsed again whole in the next one (a window without any BREAK, a
        sentence longer than PARSE_WINDOW, is kept whole: the parser's sentence is cut there)."""
        self.begin_predict()
        docs = list(docs)
        if self.reranker is None:
            return self._decode_prepared(self._prepare(docs))
        root_class = len(self.cfg["labels"])
        out = []
        for doc in docs:
            n = len(doc)
            heads = numpy.arange(n, dtype=numpy.int64)
            classes = numpy.full((n,), root_class, dtype=numpy.int64)
            if n:
                atoms = self.model.atoms(doc, self.name)
                spans, allow_break = self._spans(doc)
                chosen = self._rerank_doc(doc, atoms, spans, allow_break)
                for s, (start, end) in enumerate(spans):
                    h, c = chosen[s]
                    attached = h >= 0
                    heads[start:end][attached] = h[attached] + start
                    classes[start:end][attached] = c[attached]
            out.append((heads, classes))
        return out

    def _prepare(self, docs: Sequence[Doc]) -> Tuple[AtomBatch, numpy.ndarray]:
        """The atoms and spans of a batch (the first stage of predict): spans are (start, end,
        allow_break) rows of the batch, see `_spans`."""
        # SENT_START is read with the atoms, in the same docarrays.read call.
        atoms = self.model.atoms.batch(docs, self.name, (SENT_START,))
        offsets = atoms.offsets
        n_rows = len(atoms.atoms)
        # Rows that start a sentence of a Doc with boundaries (doc.sents: its first token and
        # wherever sent_start is 1, or where a "sents" user hook says), and the Docs the parser
        # splits itself (those without boundaries).
        lengths = numpy.diff(offsets)
        nonempty = lengths > 0
        bounded = docarrays.has_sent_starts(docs) & nonempty
        hooked = bounded & docarrays.has_user_hook(docs, "sents")
        from_tokens = bounded & ~hooked
        starts = (atoms.extra[:, 0] == 1) & numpy.repeat(from_tokens, lengths)
        starts[offsets[:-1][from_tokens]] = True
        bounds = offsets.tolist()
        for k in numpy.flatnonzero(hooked).tolist():
            starts[[bounds[k] + s.start for s in docs[k].sents]] = True
        free = numpy.flatnonzero(nonempty & ~bounded).tolist()
        first = numpy.flatnonzero(starts)
        doc_end = offsets[numpy.searchsorted(offsets, first, side="right")]
        ends = numpy.minimum(numpy.append(first[1:], n_rows), doc_end)
        fixed = numpy.stack([first, ends, numpy.zeros_like(first)], axis=1)
        free_rows = numpy.array([[bounds[k], bounds[k + 1], 1] for k in free], dtype=numpy.int64)
        rows = numpy.concatenate([fixed, free_rows.reshape((-1, 3))])
        return atoms, numpy.ascontiguousarray(rows, dtype=numpy.int64)

    def _decode_prepared(self, prepared: Tuple[AtomBatch, numpy.ndarray]) -> List[Tuple[numpy.ndarray, numpy.ndarray]]:
        """Parse a prepared batch (the second stage of predict): (heads, classes) per doc."""
        atoms, spans = prepared
        n = len(atoms.atoms)
        heads = numpy.arange(n, dtype=numpy.int64)
        classes = numpy.full((n,), len(self.cfg["labels"]), dtype=numpy.int64)
        decoder, param = self._decoder_setting()
        batch.parse(self.system, decoder, param, atoms.atoms, spans, PARSE_WINDOW, heads, classes)
        return ParseBatch(heads - numpy.repeat(atoms.offsets[:-1], numpy.diff(atoms.offsets)), classes,
                          atoms.offsets)

    def kbest(self, doc: Doc, k: int, width: Optional[int] = None):
        """The k best distinct parses of each span of `doc` (see `_spans`) by beam search of
        width max(k, beam_width) (or `width`): a list of (start, end, candidates), each
        candidate (score, heads, classes) with heads relative to the span (-1 for a root) and
        classes as in `predict`. The first candidate is the beam's 1-best. An empty doc has no
        spans."""
        self.begin_predict()
        system = self.system
        width = max(k, self.cfg["beam_width"]) if width is None else width
        out = []
        if not len(doc):
            return out
        atoms = self.model.atoms(doc)
        spans, allow_break = self._spans(doc)
        root_class = len(self.cfg["labels"])
        tree_key = lambda path: b"".join(x.tobytes() for x in system.run(path))
        for start, end in spans:
            out.append((start, end, self._span_kbest(system, atoms[start:end], allow_break, k, width)))
        return out

    def _span_kbest(self, system: ArcStandardSystem, atoms, allow_break: bool, k: int, width: int):
        system.set_sentence(atoms, allow_break=allow_break)
        root_class = len(self.cfg["labels"])
        tree_key = lambda path: b"".join(x.tobytes() for x in system.run(path))
        cands = []
        for score, path in beam.kbest(system, width, k, key=tree_key):
            h, l = system.run(path)
            classes = numpy.where(h >= 0, l, root_class).astype(numpy.int64)
            cands.append((float(score), h.astype(numpy.int64), classes))
        return cands

    # Reranking ---------------------------------------------------------------------------------
    # With a `reranker` block the parser holds a ParserReranker (spacy_structperc/reranking/pipes.py):
    # the jackknifed fold models, the training lists, the fitted learner and the reranked choice.

    @property
    def reranker(self) -> Optional[dict]:
        return self.cfg.get("reranker")

    def _reset_reranker(self) -> None:
        self._reranking = ParserReranker(self, self.reranker) if self.reranker else None

    def configure_reranker(self, **settings) -> None:
        """Change the reranker block's prediction settings, keeping what was trained: `k` (the
        list size; the beam is widened to k), `union`, the weights `reverse` and `graph` (0
        leaves a model out; a model the parser was trained without cannot be weighted in, S253),
        and the tag variants' `tag_flips` and `tag_weight`.
        Training settings (learner, folds, features, ...) are S252. The new block is validated
        as at construction (S244) and is saved with the pipeline. Loaded pipelines take their
        saved block, whatever `spacy.load`'s config says, so this is how a trained pipeline is
        switched, e.g. `nlp.get_pipe("parser").configure_reranker(k=32, union=True)`. Call it
        before serving: it is not meant to race with prediction in other threads."""
        block = self.reranker
        if not block or self._reranking is None:
            raise ValueError(Errors.S251.format(name=self.name))
        for setting in settings:
            if setting not in PREDICTION_SETTINGS:
                raise ValueError(Errors.S252.format(name=self.name, setting=setting,
                                                    allowed=", ".join(PREDICTION_SETTINGS)))
        new = _reranker_block(self.name, self.cfg["decoder"], {**block, **settings})
        self._reranking = self._reranking.with_block(new)
        self.cfg["reranker"] = new

    def _collect_candidates(self, eg: Example, doc_for_features: Doc, atoms, spans, allow_break,
                            heads, deps) -> None:
        self._reranking.collect(eg, doc_for_features, atoms, spans, allow_break, heads, deps)

    def _rerank_doc(self, doc: Doc, atoms, spans, allow_break):
        return self._reranking.rerank(doc, atoms, spans, allow_break)

    def _reranker_bytes(self) -> bytes:
        return self._reranking.to_bytes() if self._reranking is not None else b""

    def _load_reranker_bytes(self, data: bytes) -> None:
        if self._reranking is not None:
            self._reranking.from_bytes(data)

    # A parser without a reranker block writes no reranker entry or file (it wrote empty bytes,
    # which is what damage leaves, and which it ignores on loading as it always did).

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        data = srsly.msgpack_loads(super().to_bytes(exclude=exclude))
        if "reranker" not in exclude and self._reranking is not None:
            data["reranker"] = self._reranker_bytes()
        return srsly.msgpack_dumps(data)

    # The reranker is read and checked (ParserReranker.stage: its checksum, its feature version,
    # the reversed model's own checks) before the base parser takes its parts, and taken after
    # them, so a damaged or missing reranker leaves the whole component as it was.

    def _staged_reranker(self, cfg_bytes: Optional[bytes], data: Optional[bytes], what: str):
        """The staged reranker the saved parts hold (None: none fitted), or _KEEP when nothing
        of the reranker is to be loaded; S249 when the saved cfg has a reranker block and the
        saved data no reranker."""
        block = load_cfg(cfg_bytes, self.name).get("reranker") if cfg_bytes is not None else self.reranker
        if not block:
            return None
        if data is None:
            raise ValueError(Errors.S249.format(name=self.name, what=what))
        return ParserReranker(self, _reranker_block(self.name, "beam", block)).stage(data, what)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()):
        staged = _KEEP
        if "reranker" not in exclude:
            with self._coded_load_errors(None):
                msg = srsly.msgpack_loads(bytes_data)
                cfg = msg.get("cfg") if "cfg" not in exclude else None
                staged = self._staged_reranker(cfg, msg.get("reranker"), "entry")
        super().from_bytes(bytes_data, exclude=exclude)
        self._take_reranker(staged)
        return self

    def from_disk(self, path, *, exclude=tuple()):
        from spacy import util
        path = util.ensure_path(path)
        staged = _KEEP
        if "reranker" not in exclude:
            with self._coded_load_errors(path):
                cfg = (path / "cfg").read_bytes() if "cfg" not in exclude and (path / "cfg").exists() else None
                f = path / "reranker"
                staged = self._staged_reranker(cfg, f.read_bytes() if f.exists() else None, "file")
        super().from_disk(path, exclude=exclude)
        self._take_reranker(staged)
        return self

    def to_disk(self, path, *, exclude=tuple()) -> None:
        from spacy import util
        super().to_disk(path, exclude=exclude)
        if "reranker" not in exclude and self._reranking is not None:
            (util.ensure_path(path) / "reranker").write_bytes(self._reranker_bytes())

    def _take_reranker(self, staged) -> None:
        if self.reranker:   # a block saved before a setting existed gets its default
            self.cfg["reranker"] = _reranker_block(self.name, self.cfg["decoder"], self.reranker)
        self._reset_reranker()
        if staged is not _KEEP and self._reranking is not None:
            self._reranking.take(staged)

    def __reduce__(self):
        # The reranker's whole training state, not its saved form (ParserReranker.training_state).
        fn, args = super().__reduce__()
        state = self._reranking.training_state() if self._reranking is not None else None
        return (_unpickle_parser, (fn, args, state))

    def set_annotations(self, docs: Iterable[Doc], predictions) -> None:
        """Write heads and labels of the whole batch in one docarrays.write (what from_array per
        Doc would set); spaCy's deprojectivize (a Python step per token) runs only on the Docs
        that got a decorated label."""
        docs = list(docs)
        if isinstance(predictions, ParseBatch) and predictions.matches(docs):
            heads, classes, offsets = predictions.heads, predictions.classes, predictions.offsets
        else:
            predictions = list(predictions)
            heads = numpy.concatenate([h for h, _ in predictions]) if predictions \
                else numpy.zeros((0,), dtype=numpy.int64)
            classes = numpy.concatenate([c for _, c in predictions]) if predictions else heads
            offsets = numpy.zeros((len(predictions) + 1,), dtype=numpy.int64)
            numpy.cumsum([len(h) for h, _ in predictions], out=offsets[1:])
        if len(offsets) == 1:
            return
        lengths = numpy.diff(offsets)
        starts = offsets[:-1]
        positions = numpy.arange(len(heads)) - numpy.repeat(starts, lengths)
        values = numpy.zeros((len(heads), 2), dtype=numpy.uint64)
        values[:, 0] = (heads - positions).astype(numpy.int64).view(numpy.uint64)
        values[:, 1] = self._label_values[classes]
        # Which Docs got a decorated label, in one pass (empty Docs have none).
        nonempty = lengths > 0
        decorated = numpy.zeros((len(lengths),), dtype=bool)
        if nonempty.any():
            decorated[nonempty] = numpy.logical_or.reduceat(self._decorated[classes], starts[nonempty])
        docarrays.write(docs, offsets, [HEAD, DEP], values)
        for k in numpy.flatnonzero(decorated).tolist():
            deprojectivize(docs[k])

    # Training ----------------------------------------------------------------------------------

    def _gold(self, eg: Example, start: int, end: int, heads, deps) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """Gold heads (index in the span, -1 root, -2 missing) and label classes for a span.

        spaCy marks a missing head as head == self with an empty label (Token.has_head() is
        false), a root as head == self with a label: only the latter is a root. Missing heads
        stay missing (-2), and the oracle makes no decision about them (see
        ArcStandardSystem.gold_action), so partially annotated trees teach only what they say."""
        n = end - start
        gold_heads = numpy.full((n,), -2, dtype=numpy.int32)
        gold_labels = numpy.full((n,), -1, dtype=numpy.int32)
        root = self.cfg["root_label"]
        for k in range(n):
            i = start + k
            h, d = heads[i], deps[i]
            if h is None:
                continue
            if h == i:
                if d:
                    gold_heads[k] = -1
            elif start <= h < end:
                gold_heads[k] = h - start
                if d and d != root:
                    gold_labels[k] = self._label_id(d)
        return gold_heads, gold_labels

    def _complete_tree(self, system: ArcStandardSystem, atoms, gold_heads, gold_labels, allow_break):
        """A partial gold tree completed with the model's best parse that keeps every known arc
        (greedy, the oracle's action wherever it knows it, else the best action that breaks no
        known arc): the perceptron then learns every decision along a tree that agrees with the
        annotation, as for partially labelled tagging (SequenceLabeller._complete_gold). Falls
        back to the partial tree if the completion is not a full parse."""
        system.set_sentence(atoms, gold_heads, gold_labels, allow_break)
        system.complete_gold = True
        try:
            heads, labels = system.run(lookahead.decode(system, 0))
        except ValueError:
            return gold_heads, gold_labels
        finally:
            system.complete_gold = False
        known = gold_heads != -2
        if not ((heads[known] == gold_heads[known]).all() and (labels >= -1).all()):
            return gold_heads, gold_labels
        known_labels = gold_labels >= 0
        labels = labels.copy()
        labels[known_labels] = gold_labels[known_labels]
        labels[heads < 0] = -1
        return heads.astype(numpy.int32), labels.astype(numpy.int32)

    def _training_atoms(self, eg: Example) -> numpy.ndarray:
        """Atoms of eg.predicted; if it lacks an annotation the features read (no tagger runs
        before the parser in training) and the tokens are the gold ones, the reference's."""
        try:
            return self.model.atoms(eg.predicted, self.name)
        except ValueError:
            if not self.same_tokens(eg):
                raise
            return self.model.atoms(eg.reference, self.name)

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One online perceptron pass over the examples.

        losses[name] counts wrong decisions of the current weights along the gold derivation
        (greedy) or the wrong actions of the final beam derivation (beam). `{name}_updates` counts
        updates; with the standard and hybrid beam updates, `{name}_invalid_updates` counts those
        that were not violations (huang2012 Fig. 5).
        """
        losses = self.start_update(examples, losses)
        weights = self.model.weights
        system = self.system
        use_beam = self.cfg["decoder"] == "beam"
        dynamic = self.cfg.get("oracle", "static") == "dynamic"
        explore = self.cfg.get("explore", 0.0) if self._epoch >= self.cfg.get("explore_after", 0) else 0.0
        mistakes = n_updates = n_invalid = n_skipped = 0
        for eg in examples:
            doc = eg.predicted
            if len(doc):
                heads, deps = projective_gold(eg, self.name)
                unhidden = atoms = self._training_atoms(eg)
                atoms = hide_words(atoms, self.model.atom_names, self.cfg.get("word_dropout", 0.0),
                                   weights.clock)
                spans, allow_break = self._spans(doc)
                for start, end in spans:
                    gold_heads, gold_labels = self._gold(eg, start, end, heads, deps)
                    if not (gold_heads > -2).any():
                        continue
                    # A partial tree is completed first, except for arc-hybrid's dynamic oracle,
                    # which reads missing heads as no arcs (arc-standard's costs would then need
                    # the mask of mask_inconsistent, which exploration must not have).
                    if (gold_heads == -2).any() and not use_beam and not (dynamic and system.system == "arc-hybrid"):
                        gold_heads, gold_labels = self._complete_tree(system, atoms[start:end], gold_heads,
                                                                      gold_labels, allow_break)
                    system.set_sentence(atoms[start:end], gold_heads, gold_labels, allow_break)
                    if use_beam:
                        if system.oracle_path() is None:
                            n_skipped += 1   # beam updates need a complete gold derivation
                            continue
                        result = beam.train(system, self.cfg["beam_width"], self.cfg["update"])
                        mistakes += result["wrong"]
                        n_updates += result["updated"]
                        n_invalid += result["invalid"]
                    else:
                        # The exploration's draws follow the averaging clock (one tick per
                        # example, saved and pickled with the weights) and the span: a copy
                        # trained on the same examples draws the same.
                        system.keep_gold_arcs = dynamic
                        updates, errors, _ = lookahead.train(
                            system, self.cfg["lookahead_depth"], self.cfg["margin"], dynamic=dynamic,
                            explore=explore, seed=(weights.clock << 16) + start)
                        mistakes += errors
                        n_updates += updates
                if self.reranker is not None:
                    feat_doc = doc if doc.has_annotation("TAG") or not self.same_tokens(eg) else eg.reference
                    self._collect_candidates(eg, feat_doc, unhidden, spans, allow_break, heads, deps)
            weights.next_example()
        losses[self.name] += mistakes
        losses[f"{self.name}_updates"] = losses.get(f"{self.name}_updates", 0.0) + n_updates
        if use_beam:
            losses[f"{self.name}_skipped"] = losses.get(f"{self.name}_skipped", 0.0) + n_skipped
            if self.cfg["update"] in ("standard", "hybrid"):
                losses[f"{self.name}_invalid_updates"] = losses.get(f"{self.name}_invalid_updates", 0.0) + n_invalid
        return losses


_KEEP = object()   # from_bytes / from_disk with "reranker" excluded: the reranker is not loaded


def _unpickle_parser(fn, args, reranker_state):
    pipe = fn(*args)
    if pipe._reranking is not None and reranker_state is not None:
        if isinstance(reranker_state, (bytes, bytearray)):   # pickled before the training state
            if reranker_state:   # b"": nothing fitted, in that release's pickles
                pipe._load_reranker_bytes(reranker_state)
        else:
            pipe._reranking.set_training_state(reranker_state)
    return pipe
