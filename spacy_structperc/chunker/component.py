"""structperc_chunker: text chunking (CoNLL-2000) as BIO tagging over the shared core.

Chunks are written as spans to doc.spans[spans_key], labelled with their type (NP, VP, PP...).
Internally each token gets one of 1 + 2 * n_types classes (O, B-X, I-X) and the decoders search
only valid BIO sequences: I-X may only follow B-X or I-X. Decoding is greedy with depth-D
lookahead and the margin perceptron by default (tsuruoka2011 §4.1), or exact Viterbi / beam
search with violation-fixing updates (huang2012).
"""
from typing import Any, Dict, Iterable, List, Optional

import numpy
from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Example
from spacy.vocab import Vocab

from ..errors import Errors
from ..model import PerceptronModel
from ..pipeline.bio import BIOLabels, batch_chunks, bio_transitions, n_bio_classes, spans_to_classes
from ..pipeline.sequence import SequenceLabeller, batch_arrays


class StructuredChunker(BIOLabels, SequenceLabeller):
    """Finds non-overlapping chunks and writes them to doc.spans[spans_key].

    The settings (spans_key, decoder, lookahead_depth, order, beam_width, update, margin,
    direction) are documented on the factory, `spacy_structperc.chunker.factory.make_chunker`.
    """

    factory_name = "structperc_chunker"
    span_kind = "chunk type"

    def __init__(self, vocab: Vocab, model: PerceptronModel, name: str = "chunker", *,
                 spans_key: str = "chunks", decoder: str = "greedy", lookahead_depth: int = 0,
                 order: int = 2, beam_width: int = 4, update: str = "max-violation",
                 margin: float = 40.0, direction: str = "ltr", scorer=None,
                 lookahead_gap: Optional[float] = None):
        if not isinstance(spans_key, str) or not spans_key:
            raise ValueError(Errors.S012.format(setting="spans_key", name=name, value=spans_key,
                                                requirement="a non-empty string"))
        super().__init__(vocab, model, name, decoder=decoder, lookahead_depth=lookahead_depth,
                         order=order, beam_width=beam_width, update=update, margin=margin,
                         direction=direction, scorer=scorer, spans_key=spans_key,
                         lookahead_gap=lookahead_gap)
        self._labels_changed()

    # Labels and classes ------------------------------------------------------------------------
    # Class 0 is O; chunk type k has B = 1 + 2k and I = 2 + 2k, so adding a type appends columns.

    @property
    def n_classes(self) -> int:
        return n_bio_classes(len(self.labels))

    def pipe_meta_overrides(self) -> Dict[str, Any]:
        key = self.cfg["spans_key"]
        return {**super().pipe_meta_overrides(),
                "default_score_weights": {f"{key}_f": 1.0, f"{key}_p": 0.0, f"{key}_r": 0.0}}

    def _transitions(self) -> numpy.ndarray:
        """I-X only after B-X or I-X (and never first)."""
        return bio_transitions(len(self.labels))

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Take the chunk types from `labels` (spacy init labels) or from the training examples'
        doc.spans[spans_key]."""
        key = self.cfg["spans_key"]
        self._init_labels(get_examples, labels,
                          lambda eg: (s.label_ for s in eg.reference.spans.get(key, [])),
                          f"doc.spans[{key!r}]", nlp)

    # Decoding ----------------------------------------------------------------------------------

    def set_annotations(self, docs: Iterable[Doc], batch_classes: List[numpy.ndarray]) -> None:
        """doc.spans[spans_key] = the Doc's chunks. A Span object per chunk is most of the time
        this takes (~1 us each: spaCy offers no bulk constructor that is faster; SpanGroup.from_bytes
        scans the installed packages' entry points on every call)."""
        docs = list(docs)
        classes, offsets, _ = batch_arrays(docs, batch_classes, (), self.name)
        self._label_hashes_for(docs)
        starts, ends, kinds, doc_of = batch_chunks(classes, offsets)
        base = offsets[doc_of]
        labels = self._label_hashes
        rows = list(zip((starts - base).tolist(), (ends - base).tolist(), kinds.tolist()))
        per_doc = numpy.searchsorted(doc_of, numpy.arange(len(docs) + 1)).tolist()
        key = self.cfg["spans_key"]
        for doc, a, b in zip(docs, per_doc, per_doc[1:]):
            doc.spans[key] = SpanGroup(doc, name=key, spans=[Span(doc, s, e, labels[k]) for s, e, k in rows[a:b]])

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
        return spans_to_classes(((s.start, s.end, s.label_) for s in spans), n, self._type_of, self.name)
