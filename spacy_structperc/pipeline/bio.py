"""BIO encoding shared by the span-finding labellers (chunker, NER).

Class 0 is O; span type k has B = 1 + 2k and I = 2 + 2k, so adding a type appends columns.
"""
from typing import TYPE_CHECKING, Dict, Iterable, List, Tuple

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
