"""Chunk scoring exactly as conlleval counts it (CoNLL-2000 shared task).

A chunk is correct when its type and both boundaries match a gold chunk. IOB tag sequences are
read the conlleval way: B-X starts a chunk; I-X continues the open chunk only when it is of type
X, so I-X after O, at the start of a sentence or after a chunk of another type starts a new one.
"""
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from spacy.training import Example
from spacy.util import registry

Chunk = Tuple[int, int, str]  # (start, end exclusive, type)


def split_tag(tag: str) -> Tuple[str, str]:
    """"B-NP" -> ("B", "NP"); "O" -> ("O", ""). Only the IOB prefixes are known here."""
    if tag == "O" or not tag:
        return "O", ""
    prefix, sep, kind = tag.partition("-")
    if not sep or prefix not in ("B", "I") or not kind:
        raise ValueError(f"not an IOB chunk tag: {tag!r} (expected O, B-TYPE or I-TYPE)")
    return prefix, kind


def iob_to_chunks(tags: Sequence[str]) -> List[Chunk]:
    """The chunks conlleval reads from one sentence's IOB1/IOB2 tags."""
    chunks: List[Chunk] = []
    start, kind = -1, ""
    for i, tag in enumerate(tags):
        prefix, this = split_tag(tag)
        # conlleval endOfChunk / startOfChunk for the B/I/O tags
        if start >= 0 and (prefix != "I" or this != kind):
            chunks.append((start, i, kind))
            start, kind = -1, ""
        if prefix != "O" and start < 0:
            start, kind = i, this
    if start >= 0:
        chunks.append((start, len(tags), kind))
    return chunks


def inconsistent_iob(tags: Sequence[str]) -> int:
    """How many I-X tags do not continue a chunk of type X (conlleval starts a chunk there)."""
    n, prev = 0, ("O", "")
    for tag in tags:
        prefix, kind = split_tag(tag)
        if prefix == "I" and (prev[0] == "O" or prev[1] != kind):
            n += 1
        prev = (prefix, kind)
    return n


def chunks_to_iob(n: int, chunks: Iterable[Chunk]) -> List[str]:
    """IOB2 tags for non-overlapping chunks (later overlapping chunks are dropped)."""
    tags = ["O"] * n
    for start, end, kind in sorted(chunks, key=lambda c: (c[0], -c[1])):
        if start >= end or any(t != "O" for t in tags[start:end]):
            continue
        tags[start] = f"B-{kind}"
        for i in range(start + 1, end):
            tags[i] = f"I-{kind}"
    return tags


class ChunkCounts:
    """conlleval's counters: found (predicted), gold and correct chunks, overall and per type."""

    def __init__(self):
        self.found: Dict[str, int] = {}
        self.gold: Dict[str, int] = {}
        self.correct: Dict[str, int] = {}

    def add(self, gold: Iterable[Chunk], predicted: Iterable[Chunk]) -> None:
        gold, predicted = set(gold), set(predicted)
        for _, _, kind in gold:
            self.gold[kind] = self.gold.get(kind, 0) + 1
        for _, _, kind in predicted:
            self.found[kind] = self.found.get(kind, 0) + 1
        for _, _, kind in gold & predicted:
            self.correct[kind] = self.correct.get(kind, 0) + 1

    def add_tags(self, gold_tags: Sequence[str], predicted_tags: Sequence[str]) -> None:
        if len(gold_tags) != len(predicted_tags):
            raise ValueError("gold and predicted tag sequences differ in length")
        self.add(iob_to_chunks(gold_tags), iob_to_chunks(predicted_tags))

    @staticmethod
    def _prf(correct: int, found: int, gold: int) -> Dict[str, float]:
        p = correct / found if found else 0.0
        r = correct / gold if gold else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return {"p": p, "r": r, "f": f}

    def totals(self) -> Tuple[int, int, int]:
        return sum(self.correct.values()), sum(self.found.values()), sum(self.gold.values())

    def scores(self, prefix: str) -> Dict[str, Any]:
        correct, found, gold = self.totals()
        overall = self._prf(correct, found, gold)
        per_type = {kind: self._prf(self.correct.get(kind, 0), self.found.get(kind, 0), self.gold.get(kind, 0))
                    for kind in sorted(set(self.found) | set(self.gold))}
        return {f"{prefix}_p": overall["p"], f"{prefix}_r": overall["r"], f"{prefix}_f": overall["f"],
                f"{prefix}_per_type": per_type}


def _same_tokens(eg: Example) -> bool:
    x, y = eg.predicted, eg.reference
    return len(x) == len(y) and all(a.text == b.text for a, b in zip(x, y))


def _chunks_of(spans) -> List[Chunk]:
    return [(s.start, s.end, s.label_) for s in spans]


def score_chunks(examples: Iterable[Example], *, spans_key: str = "chunks",
                 **kwargs) -> Dict[str, Any]:
    """{key}_p/r/f and {key}_per_type (chunks_f, ...: short enough for the `spacy train` table,
    which cuts names at 13 characters), counted as conlleval counts, and the same under spaCy's
    span-scorer names spans_{key}_p/r/f/per_type, which `spacy evaluate --spans-key` reads.

    Examples whose reference has no `spans_key` group are unannotated and skipped; when no
    example is annotated, every score is None (absent), not 0.0. Predicted
    chunks are mapped onto the reference tokens when the tokenizations differ; a chunk that does
    not align counts as found but wrong.
    """
    counts = ChunkCounts()
    prefix = f"spans_{spans_key}"
    annotated = False
    for eg in examples:
        if spans_key not in eg.reference.spans:
            continue
        annotated = True
        gold = _chunks_of(eg.reference.spans[spans_key])
        pred_spans = list(eg.predicted.spans.get(spans_key, []))
        if _same_tokens(eg):
            predicted = _chunks_of(pred_spans)
        else:
            predicted = []
            for i, span in enumerate(pred_spans):
                aligned = eg.get_aligned_spans_x2y([span], allow_overlap=True)
                # A chunk that maps onto no reference tokens is found, and wrong.
                predicted += _chunks_of(aligned) if aligned else [(-1 - i, -1, span.label_)]
        counts.add(gold, predicted)
    if not annotated:
        # Nothing to score against: absent (None), as spaCy's scorers report it, never 0.0;
        # `spacy train` leaves None out of its weighted score and `spacy evaluate` prints "-".
        return {f"{p}_{s}": None for p in (spans_key, prefix) for s in ("p", "r", "f", "per_type")}
    return {**counts.scores(spans_key), **counts.scores(prefix)}


@registry.scorers("spacy-structperc.chunk_scorer.v1")
def make_chunk_scorer():
    return score_chunks
