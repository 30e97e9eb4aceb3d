"""BIO encoding shared by the span-finding labellers (chunker, NER).

Class 0 is O; span type k has B = 1 + 2k and I = 2 + 2k, so adding a type appends columns.
"""
import operator
from typing import TYPE_CHECKING, Dict, Iterable, List, Sequence, Tuple

import numpy

from ..errors import Errors

if TYPE_CHECKING:   # a mixin for PerceptronPipe subclasses: type-check it as one
    from .base import PerceptronPipe
    _MixinBase = PerceptronPipe
else:
    _MixinBase = object


class BIOLabels(_MixinBase):
    """Label handling of the span finders (chunker, NER): labels are span types, encoded as
    O / B-X / I-X classes; `span_kind` names them in errors ("chunk type", "entity type")."""

    span_kind = "span type"

    @property
    def class_names(self) -> List[str]:
        return bio_class_names(self.labels)

    def _check_label(self, label: str) -> None:
        if not label.strip():
            raise ValueError(Errors.S012.format(setting="label", name=self.name, value=label,
                                                requirement=f"a non-empty {self.span_kind}"))

    def _labels_changed(self) -> None:
        super()._labels_changed()
        self._type_of = {label: k for k, label in enumerate(self.labels)}
        self._label_hashes = [self.vocab.strings.add(label) for label in self.labels]
        self._type_by_hash = {h: k for k, h in enumerate(self._label_hashes)}

    def _label_hashes_for(self, docs: Sequence) -> List[int]:
        """The labels' hashes, for Spans of `docs`: a Span's label must be in its Doc's
        StringStore, so the Vocab of a Doc of another Vocab first gets the label strings (hashes
        are the same in every Vocab)."""
        for vocab in set(map(_vocab_of, docs)):
            if vocab is not self.vocab:
                for label in self.labels:
                    vocab.strings.add(label)
        return self._label_hashes


_vocab_of = operator.attrgetter("vocab")


def n_bio_classes(n_types: int) -> int:
    return 1 + 2 * n_types


def bio_class_names(types: Iterable[str]) -> List[str]:
    return ["O"] + [f"{p}-{t}" for t in types for p in ("B", "I")]


def bio_transitions(n_types: int) -> numpy.ndarray:
    """Valid class bigrams (m + 1, m), row m = the sentence start: I-X only after B-X or I-X."""
    m = n_bio_classes(n_types)
    allowed = numpy.ones((m + 1, m), dtype=numpy.uint8)
    for k in range(n_types):
        inside = 2 + 2 * k
        allowed[:, inside] = 0
        allowed[1 + 2 * k, inside] = 1
        allowed[inside, inside] = 1
    return allowed


def latent_transitions(allowed: numpy.ndarray, n_latent: int) -> numpy.ndarray:
    """Expand label bigram constraints to latent states: state s belongs to label s // n_latent."""
    m = allowed.shape[1]
    states = numpy.repeat(numpy.repeat(allowed[:m], n_latent, axis=0), n_latent, axis=1)
    start = numpy.repeat(allowed[m:], n_latent, axis=1)
    return numpy.ascontiguousarray(numpy.vstack([states, start]), dtype=numpy.uint8)


def spans_to_classes(spans: Iterable, n_tokens: int, type_of: Dict[str, int], name: str) -> numpy.ndarray:
    """BIO classes for (start, end, label) spans. Overlapping spans: the earlier (then longer)
    one is kept. A label outside `type_of` is an error naming it."""
    classes = numpy.zeros((n_tokens,), dtype=numpy.int32)
    for start, end, label in sorted(spans, key=lambda s: (s[0], -s[1])):
        k = type_of.get(label)
        if k is None:
            raise ValueError(Errors.S004.format(label=label, name=name))
        if start >= end or classes[start:end].any():
            continue
        classes[start] = 1 + 2 * k
        classes[start + 1:end] = 2 + 2 * k
    return classes


def classes_to_chunks(classes) -> List[Tuple[int, int, int]]:
    """(start, end, type index) for a valid BIO class sequence (0 = O, 1 + 2k = B, 2 + 2k = I)."""
    return chunks_by_doc([numpy.asarray(classes)])[0]


def chunks_by_doc(batch_classes: Sequence[numpy.ndarray]) -> List[List[Tuple[int, int, int]]]:
    """`classes_to_chunks` of each doc's classes, found for the whole batch at once."""
    lengths = numpy.array([len(c) for c in batch_classes], dtype=numpy.int64)
    offsets = numpy.concatenate([[0], numpy.cumsum(lengths)]).astype(numpy.int64)
    if offsets[-1] == 0:
        return [[] for _ in batch_classes]
    c = numpy.concatenate([numpy.asarray(x, dtype=numpy.int64) for x in batch_classes])
    starts, ends, kinds, doc_of = batch_chunks(c, offsets)
    base = offsets[doc_of]
    rows = list(zip((starts - base).tolist(), (ends - base).tolist(), kinds.tolist()))
    per_doc = numpy.searchsorted(doc_of, numpy.arange(len(batch_classes) + 1))
    return [rows[a:b] for a, b in zip(per_doc[:-1].tolist(), per_doc[1:].tolist())]


def batch_chunks(classes: numpy.ndarray, offsets: numpy.ndarray) -> Tuple[numpy.ndarray, ...]:
    """The chunks of a batch's BIO classes (Doc k's tokens are classes[offsets[k]:offsets[k + 1]]),
    as arrays in batch order: (start, end) rows of the batch, type index and Doc of each.

    A chunk starts at every B, and at an I that does not continue a chunk of its type (after O,
    at the start of a doc or after another type); it ends before the next start or O."""
    c = numpy.asarray(classes, dtype=numpy.int64)
    n = len(c)
    lengths = numpy.diff(offsets)
    inside = c != 0
    is_b = (c % 2) == 1
    kind = numpy.where(is_b, (c - 1) // 2, (c - 2) // 2)
    first = numpy.zeros((n,), dtype=bool)
    first[offsets[:-1][lengths > 0]] = True
    continues = numpy.zeros((n,), dtype=bool)
    continues[1:] = inside[:-1] & (kind[:-1] == kind[1:])
    starts = inside & (is_b | first | ~continues)
    boundaries = numpy.flatnonzero(starts | ~inside | first)
    start_idx = numpy.flatnonzero(starts)
    following = numpy.searchsorted(boundaries, start_idx, side="right")
    ends = numpy.append(boundaries, n)[following]
    doc_of = numpy.searchsorted(offsets, start_idx, side="right") - 1
    return start_idx, ends, kind[start_idx], doc_of
