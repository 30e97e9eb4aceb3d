"""SequenceLabeller: one label per token over the shared core, for the tagger and the chunker.

Three decoders over one model: exact Viterbi (first or second order, Collins 2002), beam search
with violation-fixing updates (huang2012), and greedy history-based decoding with depth-D
lookahead and the margin perceptron (tsuruoka2011). Subclasses say how gold labels become class
ids (`_gold_classes`), how decisions are written to the Doc (`set_annotations`), and optionally
which label bigrams are valid (`_transitions`, e.g. BIO) and which labels each token may take
(`_position_mask`, e.g. a tag dictionary).
"""
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.training import Example
from spacy.vocab import Vocab

from .._core import batch, beam, lookahead, viterbi
from .._core.tagging import TagSystem
from .. import docarrays
from ..errors import Errors
from ..atoms import AtomBatch, hide_words
from ..model import PerceptronModel
from ..pipeline.base import PerceptronPipe

DECODERS = ("greedy", "viterbi", "beam")
DIRECTIONS = ("ltr", "rtl")


# Long Docs are decoded in windows of WINDOW tokens. Without sentence boundaries each window is
# bound with MARGIN more tokens on either side, which are decoded but not kept: the labels kept
# are those a decoding of the whole Doc gives wherever the best paths merge within MARGIN tokens
# (they do within a few tokens in practice). With boundaries, windows hold whole sentences and
# the chain restarts at each window (only a sentence longer than a window is split by margins).
WINDOW = 1000
MARGIN = 50


def decode_windows(doc: Doc, window: int = WINDOW, margin: int = MARGIN) -> List[Tuple[int, int, int, int]]:
    """(bind_start, bind_end, keep_start, keep_end) for each piece of `doc` to decode."""
    n = len(doc)
    if n <= window + 2 * margin:
        return [(0, n, 0, n)]
    groups: List[Tuple[int, int]] = []
    if doc.has_annotation("SENT_START"):
        start = end = 0
        for sent in doc.sents:
            if sent.end - start > window and end > start:
                groups.append((start, end))
                start = end
            end = sent.end
        groups.append((start, end))
    else:
        groups = [(0, n)]
    out = []
    for g_start, g_end in groups:
        if g_end - g_start <= window + 2 * margin:
            out.append((g_start, g_end, g_start, g_end))
            continue
        for keep_a in range(g_start, g_end, window):
            keep_b = min(g_end, keep_a + window)
            out.append((max(g_start, keep_a - margin), min(g_end, keep_b + margin), keep_a, keep_b))
    return out


def batch_windows(docs: Sequence[Doc], offsets: numpy.ndarray) -> numpy.ndarray:
    """`decode_windows` of every doc, as (n_windows, 4) int64 rows of the batch whose Doc k is
    rows offsets[k]:offsets[k + 1]. A Doc that fits one window is one row, found without Python
    per Doc."""
    window, margin = decode_windows.__defaults__
    starts, lengths = offsets[:-1], numpy.diff(offsets)
    whole = (lengths > 0) & (lengths <= window + 2 * margin)
    rows = [numpy.stack([starts, starts + lengths, starts, starts + lengths], axis=1)[whole]]
    for k in numpy.flatnonzero(lengths > window + 2 * margin).tolist():
        rows.append(numpy.asarray(decode_windows(docs[k]), dtype=numpy.int64) + offsets[k])
    return numpy.ascontiguousarray(numpy.concatenate(rows), dtype=numpy.int64)


class Prepared(NamedTuple):
    """A batch ready to decode: its atoms, position mask (None: no constraint) and windows."""
    atoms: AtomBatch
    allowed: Optional[numpy.ndarray]
    windows: numpy.ndarray


class BatchClasses(List[numpy.ndarray]):
    """What `predict` returns: the class ids of each Doc (a list of arrays, one per Doc), with
    the whole batch's `classes` concatenated, the Docs' `offsets` into them and `extra`, the
    values of the component's `read_attrs` read with the atoms at predict time (rows as
    `classes`), so set_annotations makes no second pass over the Docs to read them. A plain
    list of arrays is accepted by set_annotations too (it then reads the Docs itself)."""

    def __init__(self, classes: numpy.ndarray, offsets: numpy.ndarray, extra: numpy.ndarray):
        bounds = offsets.tolist()
        super().__init__(classes[a:b] for a, b in zip(bounds[:-1], bounds[1:]))
        self.classes, self.offsets, self.extra = classes, offsets, extra
        self.lengths = numpy.diff(offsets).tolist()

    def matches(self, docs: Sequence[Doc]) -> bool:
        """Whether these were predicted for Docs of the lengths of `docs`."""
        return list(map(len, docs)) == self.lengths


def batch_arrays(docs: Sequence[Doc], batch_classes: Sequence[numpy.ndarray], attrs: Sequence[int],
                 name: str) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """(classes concatenated, offsets, values of `attrs`) of predictions for `docs`: taken from a
    matching BatchClasses, else concatenated and read from the Docs; `name` (the pipe) is what
    errors name."""
    if isinstance(batch_classes, BatchClasses) and batch_classes.extra.shape[1] == len(attrs) \
            and batch_classes.matches(docs):
        return batch_classes.classes, batch_classes.offsets, batch_classes.extra
    lengths = list(map(len, batch_classes))
    n_tokens = list(map(len, docs))
    if n_tokens != lengths:
        raise ValueError(Errors.S303.format(name=name, n_predicted=sum(lengths), n_tokens=sum(n_tokens)))
    offsets = numpy.zeros((len(lengths) + 1,), dtype=numpy.int64)
    offsets[1:] = numpy.cumsum(lengths)
    classes = numpy.concatenate(batch_classes) if lengths else numpy.zeros((0,), dtype=numpy.int32)
    extra = docarrays.read(docs, list(attrs)) if attrs else numpy.zeros((len(classes), 0), dtype=numpy.uint64)
    return classes, offsets, extra


def _choice(name: str, setting: str, value, options) -> None:
    if value not in options:
        raise ValueError(Errors.S008.format(setting=setting, value=value, name=name, options=list(options)))


def _lookahead_gap(name: str, value) -> Optional[float]:
    """lookahead_gap checked: null (search every action ahead from every state) or a score
    difference >= 0 (search only the actions that score within it of the best)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(Errors.S012.format(setting="lookahead_gap", name=name, value=value,
                                            requirement="null or a number >= 0"))
    return float(value)


class SequenceLabeller(PerceptronPipe):
    """A structured-perceptron sequence labeller: subclass it, do not add it to a pipeline."""

    model: PerceptronModel
    # Doc attributes (spacy.attrs ids) set_annotations reads: read with the atoms at predict
    # time and handed over in BatchClasses.extra.
    read_attrs: Tuple[int, ...] = ()

    def __init__(self, vocab: Vocab, model: PerceptronModel, name: str, *,
                 decoder: str = "greedy", lookahead_depth: int = 0, order: int = 2,
                 beam_width: int = 4, update: str = "max-violation", margin: float = 40.0,
                 direction: str = "ltr", scorer=None, lookahead_gap: Optional[float] = None, **cfg):
        _choice(name, "decoder", decoder, DECODERS)
        _choice(name, "direction", direction, DIRECTIONS)
        _choice(name, "update", update, beam.UPDATE_METHODS)
        _choice(name, "order", order, (1, 2))
        for setting, value, low in (("lookahead_depth", lookahead_depth, 0), ("beam_width", beam_width, 1)):
            if not isinstance(value, int) or value < low:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=value,
                                                    requirement=f"an integer >= {low}"))
        if not margin >= 0:
            raise ValueError(Errors.S012.format(setting="margin", name=name, value=margin, requirement=">= 0"))
        if decoder == "viterbi" and model.templates.max_history > order:
            raise ValueError(Errors.S011.format(name=name, history=model.templates.max_history,
                                                decoder=decoder, order=order))
        super().__init__(vocab, model, name, scorer=scorer, decoder=decoder,
                         lookahead_depth=lookahead_depth, order=order, beam_width=beam_width,
                         update=update, margin=float(margin), direction=direction,
                         lookahead_gap=_lookahead_gap(name, lookahead_gap), **cfg)

    # Classes -----------------------------------------------------------------------------------

    def _transitions(self) -> Optional[numpy.ndarray]:
        """Valid label bigrams, left to right: (n_classes + 1, n_classes) bool, row n_classes =
        the sentence start; None allows all."""
        return None

    def _position_mask(self, doc: Doc, gold: Optional[numpy.ndarray]) -> Optional[numpy.ndarray]:
        """Labels each token may take (n_tokens, n_classes) uint8, in text order; None allows all."""
        return None

    def _position_masks(self, docs: Sequence[Doc], atoms: AtomBatch) -> Optional[numpy.ndarray]:
        """`_position_mask` of every doc (without gold), as rows of the batch; None allows all."""
        return None

    def _gold_classes(self, eg: Example) -> numpy.ndarray:
        """Gold class per token of eg.predicted; -1 where unknown."""
        raise NotImplementedError

    @property
    def system(self) -> TagSystem:
        """This thread's TagSystem over the current weights (see PerceptronPipe._thread_system)."""
        return self._thread_system(self._build_system)

    def _build_system(self) -> TagSystem:
        trans = self._transitions()
        start_mask = None
        if trans is not None:
            trans = numpy.asarray(trans, dtype=numpy.uint8)
            m = trans.shape[1]
            if self.cfg.get("direction", "ltr") == "rtl":
                # Right to left, the previous decision is the next token: transpose, and the
                # constraint on the first token becomes one on the last decision.
                if not trans[m].all():
                    start_mask = trans[m].copy()
                rtl = numpy.ones_like(trans)
                rtl[:m] = trans[:m].T
                trans = rtl
        self._thread_extra()["start_mask"] = start_mask
        return TagSystem(self.model.templates, self.model.weights, trans)

    # Decoding ----------------------------------------------------------------------------------

    def check_inputs(self, docs: Iterable[Doc]) -> None:
        """Nothing to do before predict: reading the atoms checks the annotations the features
        use, for the whole batch at once, and raises the same S300 (see PerceptronPipe)."""

    def _bind(self, doc: Doc, gold: Optional[numpy.ndarray] = None) -> None:
        self._bind_arrays(self.model.atoms(doc, self.name), self._position_mask(doc, gold), gold)

    def _bind_arrays(self, atoms: numpy.ndarray, allowed: Optional[numpy.ndarray],
                     gold: Optional[numpy.ndarray] = None) -> None:
        system = self.system
        if self.cfg.get("direction", "ltr") == "rtl":
            start_mask = self._thread_extra().get("start_mask")
            if start_mask is not None and len(atoms):
                allowed = numpy.ones((len(atoms), self.n_classes), dtype=numpy.uint8) if allowed is None \
                    else allowed.copy()
                allowed[0] &= start_mask
            atoms = atoms[::-1]
            gold = gold[::-1] if gold is not None else None
            allowed = allowed[::-1] if allowed is not None else None
        system.set_sentence(atoms, gold, allowed)

    def _decoder_setting(self) -> Tuple[str, int]:
        """The decoder predict uses ("greedy", "viterbi" or "beam") and its parameter (the
        lookahead depth, the order or the beam width)."""
        decoder = self.cfg["decoder"]
        if decoder == "viterbi":
            return decoder, self.cfg["order"]
        if decoder == "beam":
            return decoder, self.cfg["beam_width"]
        return decoder, self.cfg["lookahead_depth"]

    def _project(self, classes: numpy.ndarray) -> numpy.ndarray:
        """The output classes of decoded system classes (NER maps latent states to labels)."""
        return classes

    def _decode(self) -> numpy.ndarray:
        """Decode the sentence bound to this thread's system (see `_bind`), in its direction."""
        decoder, param = self._decoder_setting()
        if decoder == "viterbi":
            return self._project(viterbi.viterbi(self.system, param)[0])
        if decoder == "beam":
            return self._project(beam.decode(self.system, param))
        return self._project(lookahead.decode(self.system, param, self.cfg.get("lookahead_gap")))

    def predict(self, docs: Iterable[Doc]) -> BatchClasses:
        """Class ids for every token of every doc, with averaged weights (a list of arrays, one
        per doc: a BatchClasses, see there).

        The whole batch is decoded in one call with the GIL released (`_core/batch.pyx`). A Doc
        of up to WINDOW + 2 * MARGIN tokens is decoded at once. A longer one is decoded a window
        at a time (see `decode_windows`), so time and memory per token do not grow with the Doc:
        second-order Viterbi holds ~20 KB per bound token."""
        self.begin_predict()
        return self._decode_prepared(self._prepare(list(docs)))

    def _prepare(self, docs: Sequence[Doc]) -> Prepared:
        """The atoms, position masks and windows of a batch (the first stage of predict)."""
        atoms = self.model.atoms.batch(docs, self.name, self.read_attrs, self._missing_input)
        return Prepared(atoms, self._position_masks(docs, atoms), batch_windows(docs, atoms.offsets))

    def _decode_prepared(self, prepared: Prepared) -> BatchClasses:
        """Decode a prepared batch (the second stage of predict): class ids per doc."""
        atoms, offsets = prepared.atoms.atoms, prepared.atoms.offsets
        allowed, windows = prepared.allowed, prepared.windows
        start_mask = None
        rtl = self.cfg.get("direction", "ltr") == "rtl"
        system = self.system
        if rtl:
            # Right to left: decode the reversed batch, where each window's first token (whose
            # constraint from the transitions' start row becomes one on the last decision) is
            # the window's last row.
            start_mask = self._thread_extra().get("start_mask")
            atoms = atoms[::-1]
            allowed = allowed[::-1] if allowed is not None else None
            windows = len(atoms) - windows[:, [1, 0, 3, 2]]
        decoder, param = self._decoder_setting()
        classes = batch.tag(system, decoder, param, atoms, allowed, windows, start_mask,
                            gap=self.cfg.get("lookahead_gap"))
        if rtl:
            classes = classes[::-1]
        return BatchClasses(self._project(classes), offsets, prepared.atoms.extra)

    def kbest(self, doc: Doc, k: int, width: Optional[int] = None) -> List:
        """The k best distinct label sequences of `doc` by beam search of width max(k,
        beam_width) (or `width`), best first: a list of (score, class ids in text order). The
        first is the beam's 1-best; an empty doc has one empty sequence."""
        self.begin_predict()
        if len(doc) == 0:
            return [(0.0, numpy.zeros((0,), dtype=numpy.int32))]
        width = max(k, self.cfg["beam_width"]) if width is None else width
        self._bind(doc)
        rtl = self.cfg.get("direction", "ltr") == "rtl"
        return [(float(score), path[::-1].copy() if rtl else path)
                for score, path in beam.kbest(self.system, width, k)]

    # Training ----------------------------------------------------------------------------------

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One online perceptron pass over the examples.

        losses[name] counts wrongly labelled tokens (decoded with the current weights, before each
        update). For beam training, `{name}_updates` and `{name}_invalid_updates` count updates and
        those standard updates that were not violations (huang2012 Fig. 5).
        """
        losses = self.start_update(examples, losses)
        weights = self.model.weights
        system = self.system
        decoder = self.cfg["decoder"]
        mistakes = n_updates = n_invalid = 0
        for eg in examples:
            doc = eg.predicted
            if len(doc):
                gold = self._gold_classes(eg)
                if (gold >= 0).any():
                    atoms = hide_words(self.model.atoms(doc, self.name), self.model.atom_names,
                                       self.cfg.get("word_dropout", 0.0), weights.clock)
                    self._bind_arrays(atoms, self._position_mask(doc, gold), gold)
                    if decoder == "viterbi":
                        wrong, _ = viterbi.train_viterbi(system, self.cfg["order"])
                        mistakes += wrong
                        n_updates += wrong > 0
                    elif decoder == "beam":
                        if (gold < 0).any():
                            self._complete_gold(gold)
                        result = beam.train(system, self.cfg["beam_width"], self.cfg["update"])
                        mistakes += result["wrong"]
                        n_updates += result["updated"]
                        n_invalid += result["invalid"]
                    else:
                        updates, errors, _ = lookahead.train(system, self.cfg["lookahead_depth"], self.cfg["margin"])
                        mistakes += errors
                        n_updates += updates
            weights.next_example()
        losses[self.name] += mistakes
        losses[f"{self.name}_updates"] = losses.get(f"{self.name}_updates", 0.0) + n_updates
        if decoder == "beam" and self.cfg["update"] in ("standard", "hybrid"):
            losses[f"{self.name}_invalid_updates"] = losses.get(f"{self.name}_invalid_updates", 0.0) + n_invalid
        return losses

    def _complete_gold(self, gold: numpy.ndarray) -> None:
        """Fill missing gold labels with the model's best guess consistent with the known ones."""
        system = self.system
        atoms, allowed_before = system._bound_atoms(), system._bound_allowed()
        if self.cfg.get("direction", "ltr") == "rtl":
            gold = gold[::-1]
        known = gold >= 0
        allowed = numpy.ones((len(gold), self.n_classes), dtype=numpy.uint8)
        if allowed_before is not None:
            allowed &= allowed_before
        allowed[known] = 0
        allowed[known, gold[known]] = 1
        system.set_sentence(atoms, None, allowed)
        completed = lookahead.decode(system, 0)
        system.set_sentence(atoms, completed, allowed_before)
