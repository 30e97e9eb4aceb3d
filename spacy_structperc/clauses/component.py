"""structperc_clauses: clause identification with the FR-Perceptron (carreras2003).

Writes the clauses of every sentence to doc.spans[spans_key] (label S), nested or disjoint, never
crossing. Reads the words, token.tag_ (required: put a tagger first) and the chunks in
doc.spans[chunks_key] when present (our chunker writes them; without them, verb groups are
found from the tags and the chunk features stay silent).

Each sentence (doc.sents when the Doc has sentence boundaries, else the whole Doc) is recognized
on its own: start and end filters propose candidates, the phrase scorer ranks them and the
bottom-up search of eq. 1 picks the best coherent set (spacy_structperc._core.span_ranker).
Training (`method`): "fr" is the FR-Perceptron feedback of §3.1, "co" and "cb" the online and
batch classification baselines of Table 1 (CO-VP, CB-VP).

Bad input: a Doc without tags raises S300 (the shared missing-input error; S203 if the features are called directly); empty Docs get no clauses; a sentence of one token
can have one clause. Gold clauses that cross a sentence boundary of the predicted Doc, or cross
another gold clause, cannot be represented: they are left out of training (warning W200), and
the scorer still counts them as missed.
"""
import warnings
from typing import Dict, Iterable, List, Optional, Tuple

from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab

from .._core.span_ranker import METHODS, SpanRecognizer
from ..errors import Errors, Warnings
from ..pipeline.base import PerceptronPipe
from .features import ClauseAtoms
from .model import ClauseModel

Clause = Tuple[int, int]   # token indexes in the Doc, end exclusive


class ClauseIdentifier(PerceptronPipe):
    """Finds clauses (nested spans) and writes them to doc.spans[spans_key]."""

    factory_name = "structperc_clauses"
    model: ClauseModel

    def __init__(self, vocab: Vocab, model: ClauseModel, name: str = "clauses", *, spans_key: str = "clauses",
                 label: str = "S", chunks_key: str = "chunks", method: str = "fr", max_boundaries: int = 100,
                 max_span: int = 0, scorer=None):
        for setting, value in (("spans_key", spans_key), ("label", label), ("chunks_key", chunks_key)):
            if not isinstance(value, str) or not value:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=value,
                                                    requirement="a non-empty string"))
        if method not in METHODS:
            raise ValueError(Errors.S008.format(setting="method", value=method, name=name, options=list(METHODS)))
        for setting, number, low in (("max_boundaries", max_boundaries, 1), ("max_span", max_span, 0)):
            if not isinstance(number, int) or isinstance(number, bool) or number < low:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=number,
                                                    requirement=f"an integer >= {low}"))
        super().__init__(vocab, model, name, scorer=scorer, spans_key=spans_key, label=label,
                         chunks_key=chunks_key, method=method, max_boundaries=max_boundaries,
                         max_span=max_span)
        self._atoms = ClauseAtoms(name, chunks_key)

    # Labels and model --------------------------------------------------------------------------

    @property
    def n_classes(self) -> int:
        return 1

    def _check_label(self, label: str) -> None:
        if label != self.cfg["label"]:
            raise ValueError(Errors.S004.format(label=label, name=self.name))

    @property
    def recognizer(self) -> SpanRecognizer:
        """This thread's recognizer (its sentence buffers are per thread, the functions shared),
        rebuilt when the functions change (initialize, load)."""
        slot = self._thread_extra()
        rec = slot.get("recognizer")
        functions = self.model.functions   # set: callers check initialization (S001) first
        if rec is None or slot.get("generation") != self._decoding.generation or \
                functions is None or rec.start_fn is not functions["start"]:
            rec = self.model.recognizer(self.cfg["max_boundaries"], self.cfg["max_span"])
            slot["recognizer"] = rec
            slot["generation"] = self._decoding.generation
        return rec

    def _require_initialized(self) -> None:
        if not self.model.is_initialized or not self.labels:
            raise ValueError(Errors.S001.format(name=self.name))

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Check that the training examples carry clauses and start from zero functions. The one
        label is the `label` setting (spacy init labels may list it)."""
        validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
        key = self.cfg["spans_key"]
        n_examples = n_clauses = 0
        for eg in get_examples():
            n_examples += 1
            n_clauses += len(eg.reference.spans.get(key, []))
            if n_clauses:
                break
        if not n_examples and labels is None:
            raise ValueError(Errors.S005.format(name=self.name))
        if labels is not None:
            for label in labels:
                self._check_label(label)
        elif not n_clauses:
            raise ValueError(Errors.S204.format(name=self.name, key=key))
        self.cfg["labels"] = [self.cfg["label"]]
        self.vocab.strings.add(self.cfg["label"])
        self.model.initialize(self.name)
        self._labels_changed()

    def add_label(self, label: str) -> int:
        if not isinstance(label, str):
            raise ValueError(Errors.S003.format(value=label, type=type(label).__name__))
        self._check_label(label)
        if label in self.cfg["labels"]:
            return 0
        self.cfg["labels"].append(label)
        return 1

    # Averaging ---------------------------------------------------------------------------------

    def begin_update(self) -> None:
        if self.model.is_initialized:
            self.model.set_averaged(False)

    def begin_predict(self) -> None:
        self._require_initialized()
        self.model.set_averaged(True)

    # Sentences ---------------------------------------------------------------------------------

    @staticmethod
    def sentence_bounds(doc: Doc) -> List[Tuple[int, int]]:
        if len(doc) == 0:
            return []
        if doc.has_annotation("SENT_START"):
            return [(s.start, s.end) for s in doc.sents]
        return [(0, len(doc))]

    def _bind(self, rec: SpanRecognizer, features, start: int, end: int) -> None:
        atoms, elements, is_vp = features
        rec.set_sentence(atoms[start:end], elements[start:end], is_vp[start:end])

    # Prediction --------------------------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[List[Clause]]:
        """The clauses of every Doc as (start, end exclusive) token pairs, averaged functions."""
        self.begin_predict()
        rec = self.recognizer
        out = []
        for doc in docs:
            clauses: List[Clause] = []
            if len(doc):
                atoms, elements, is_vp, sent_start = self._atoms(doc, sentences=True)
                if "sents" in doc.user_hooks:   # sentences as doc.sents gives them
                    sent_start = sent_start.copy()
                    sent_start[:] = 0
                    sent_start[[s for s, _ in self.sentence_bounds(doc)]] = 1
                # Else SENT_START as doc.sents reads it: 1 starts a sentence (none set: one).
                clauses = [(s, e + 1) for s, e in rec.recognize_doc(atoms, elements, is_vp, sent_start)]
            out.append(clauses)
        return out

    def set_annotations(self, docs: Iterable[Doc], batch_clauses: List[List[Clause]]) -> None:
        key, label = self.cfg["spans_key"], self.cfg["label"]
        for doc, clauses in zip(docs, batch_clauses):
            doc.spans[key] = [Span(doc, s, e, label=label) for s, e in clauses]

    # Training ----------------------------------------------------------------------------------

    def gold_clauses(self, eg: Example) -> Tuple[List[List[Clause]], int, int]:
        """Gold clauses of eg.predicted, per sentence (sentence-relative, end inclusive), and the
        counts of clauses dropped for crossing a sentence boundary or another clause."""
        key = self.cfg["spans_key"]
        doc = eg.predicted
        spans = list(eg.reference.spans.get(key, []))
        if spans and not self.same_tokens(eg):
            spans = eg.get_aligned_spans_y2x(spans, allow_overlap=True)
        clauses = sorted({(s.start, s.end) for s in spans}, key=lambda c: (c[0], -c[1]))
        kept: List[Clause] = []
        n_crossing = 0
        for c in clauses:
            if any(a < c[0] < b < c[1] or c[0] < a < c[1] < b for a, b in kept):
                n_crossing += 1
            else:
                kept.append(c)
        per_sentence: List[List[Clause]] = []
        n_outside = 0
        used = 0
        for start, end in self.sentence_bounds(doc):
            inside = [(s - start, e - start - 1) for s, e in kept if start <= s and e <= end]
            used += len(inside)
            per_sentence.append(inside)
        n_outside = len(kept) - used
        return per_sentence, n_outside, n_crossing

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One online pass: recognize each sentence with the current functions and apply the
        feedback of `method`. losses[name] counts missed plus over-predicted clauses;
        losses[name_updates] the function updates."""
        losses = self.start_update(examples, losses)
        rec = self.recognizer
        key = self.cfg["spans_key"]
        method = self.cfg["method"]
        errors = n_updates = n_outside = n_crossing = 0
        for eg in examples:
            doc = eg.predicted
            if not len(doc) or key not in eg.reference.spans:
                continue
            gold, outside, crossing = self.gold_clauses(eg)
            n_outside += outside
            n_crossing += crossing
            features = self._atoms(doc)
            for (start, end), clauses in zip(self.sentence_bounds(doc), gold):
                self._bind(rec, features, start, end)
                result = rec.train(clauses, method)
                predicted = set(result["predicted"])
                errors += len(predicted ^ set(clauses))
                n_updates += sum(result["updates"].values())
                rec.tick()
        if n_outside:
            warnings.warn(Warnings.W200.format(name=self.name, n=n_outside,
                                               reason="they cross a sentence boundary of the Doc"), UserWarning)
        if n_crossing:
            warnings.warn(Warnings.W200.format(name=self.name, n=n_crossing,
                                               reason="they cross another gold clause"), UserWarning)
        losses[self.name] += errors
        losses[f"{self.name}_updates"] = losses.get(f"{self.name}_updates", 0.0) + n_updates
        return losses

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, float]:
        validate_examples(examples, f"{type(self).__name__}.score")
        return self.scorer(examples, spans_key=self.cfg["spans_key"], **kwargs)
