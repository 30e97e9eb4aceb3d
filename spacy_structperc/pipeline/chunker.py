"""structperc_chunker: text chunking (CoNLL-2000) as BIO tagging over the shared core.

Chunks are written as spans to doc.spans[spans_key], labelled with their type (NP, VP, PP...).
Internally each token gets one of 1 + 2 * n_types classes (O, B-X, I-X) and the decoders search
only valid BIO sequences: I-X may only follow B-X or I-X. Decoding is greedy with depth-D
lookahead and the margin perceptron by default (tsuruoka2011 §4.1), or exact Viterbi / beam
search with violation-fixing updates.
"""
from typing import Iterable, List, Optional

import numpy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.vocab import Vocab

from ..errors import Errors
from ..model import PerceptronModel
from .sequence import SequenceLabeller


class StructuredChunker(SequenceLabeller):
    """Finds non-overlapping chunks and writes them to doc.spans[spans_key]."""

    factory_name = "structperc_chunker"

    def __init__(self, vocab: Vocab, model: PerceptronModel, name: str = "chunker", *,
                 spans_key: str = "chunks", decoder: str = "greedy", lookahead_depth: int = 0,
                 order: int = 2, beam_width: int = 4, update: str = "max-violation",
                 margin: float = 40.0, direction: str = "ltr", scorer=None):
        if not isinstance(spans_key, str) or not spans_key:
            raise ValueError(Errors.S012.format(setting="spans_key", name=name, value=spans_key,
                                                requirement="a non-empty string"))
        super().__init__(vocab, model, name, decoder=decoder, lookahead_depth=lookahead_depth,
                         order=order, beam_width=beam_width, update=update, margin=margin,
                         direction=direction, scorer=scorer, spans_key=spans_key)
        self._labels_changed()

    # Labels and classes ------------------------------------------------------------------------
    # Class 0 is O; chunk type k has B = 1 + 2k and I = 2 + 2k, so adding a type appends columns.

    @property
    def n_classes(self) -> int:
        return 1 + 2 * len(self.labels)

    @property
    def class_names(self) -> List[str]:
        return ["O"] + [f"{p}-{label}" for label in self.labels for p in ("B", "I")]

    def _check_label(self, label: str) -> None:
        if not label.strip():
            raise ValueError(Errors.S012.format(setting="label", name=self.name, value=label,
                                                requirement="a non-empty chunk type"))

    def _labels_changed(self) -> None:
        super()._labels_changed()
        self._type_of = {label: k for k, label in enumerate(self.labels)}
        self._label_hashes = [self.vocab.strings.add(label) for label in self.labels]

    def _transitions(self) -> numpy.ndarray:
        """I-X only after B-X or I-X (and never first)."""
        m = self.n_classes
        allowed = numpy.ones((m + 1, m), dtype=numpy.uint8)
        for k in range(len(self.labels)):
            inside = 2 + 2 * k
            allowed[:, inside] = 0
            allowed[1 + 2 * k, inside] = 1
            allowed[inside, inside] = 1
        return allowed

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Take the chunk types from `labels` (spacy init labels) or from the training examples'
        doc.spans[spans_key]."""
        key = self.cfg["spans_key"]
        self._init_labels(get_examples, labels,
                          lambda eg: (s.label_ for s in eg.reference.spans.get(key, [])),
                          f"doc.spans[{key!r}]", nlp)

    # Decoding ----------------------------------------------------------------------------------

    def set_annotations(self, docs: Iterable[Doc], batch_classes: List[numpy.ndarray]) -> None:
        key = self.cfg["spans_key"]
        hashes = self._label_hashes
        for doc, classes in zip(docs, batch_classes):
            doc.spans[key] = [Span(doc, s, e, label=hashes[k]) for s, e, k in classes_to_chunks(classes)]

    # Training ----------------------------------------------------------------------------------

    def _gold_classes(self, eg: Example) -> numpy.ndarray:
        """BIO classes from eg.reference.spans[spans_key]; all -1 (skipped) when the reference has
        no such group. Overlapping gold spans: the earlier (then longer) one is kept."""
        key = self.cfg["spans_key"]
        n = len(eg.predicted)
        if key not in eg.reference.spans:
            return numpy.full((n,), -1, dtype=numpy.int32)
        spans = list(eg.reference.spans[key])
        if not self.same_tokens(eg):
            spans = eg.get_aligned_spans_y2x(spans, allow_overlap=True)
        classes = numpy.zeros((n,), dtype=numpy.int32)
        type_of = self._type_of
        for span in sorted(spans, key=lambda s: (s.start, -s.end)):
            k = type_of.get(span.label_)
            if k is None:
                raise ValueError(Errors.S004.format(label=span.label_, name=self.name))
            if span.start >= span.end or classes[span.start:span.end].any():
                continue
            classes[span.start] = 1 + 2 * k
            classes[span.start + 1:span.end] = 2 + 2 * k
        return classes


def classes_to_chunks(classes) -> List[tuple]:
    """(start, end, type index) for a valid BIO class sequence (0 = O, 1 + 2k = B, 2 + 2k = I)."""
    chunks = []
    start = -1
    kind = -1
    for i, c in enumerate(classes.tolist() if hasattr(classes, "tolist") else classes):
        if c == 0 or c % 2 == 1 or start < 0 or (c - 2) // 2 != kind:
            if start >= 0:
                chunks.append((start, i, kind))
                start = -1
            if c != 0:
                start, kind = i, (c - 1) // 2
        # else: I of the open chunk's type continues it
    if start >= 0:
        chunks.append((start, len(classes), kind))
    return chunks
