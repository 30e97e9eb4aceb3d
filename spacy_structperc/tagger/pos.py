"""The tagger's second pass (pos = "predict"): universal POS from the predicted fine tags.

A fine tag seen with one universal POS in training gets it, as with pos = "map". A tag seen
with several (IN: ADP or SCONJ, VBZ: AUX or VERB, DT: DET or PRON, ...) has its POS chosen among
those, by a linear model over the tag conjoined with the word and the next one, its suffix and
the tags on both sides (the right-hand one, which the left-to-right tagger could not read).
Only tokens whose predicted tag is ambiguous are scored. A POS counts as a tag's candidate when
seen with it at least MIN_COUNT times and on at least MIN_SHARE of its tokens: on UD English
EWT that leaves 17 of its 49 tags ambiguous, 63% of the tokens, instead of 26 and 82% for every
POS ever seen (dev UPOS 95.49 against 95.51 offline, for ~40% less of the pass's time).

The model's rows live in the tagger's own weight table, under keys of their own: a tag's
candidates are columns 0..K-1 (most frequent first), so the rows are averaged, saved, pruned,
checksummed and mixed (distributed training) with the tagger's weights and need no file of
their own. It is trained in the tagger's update() on the gold tags.
"""
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy
from spacy.attrs import IS_TITLE, LOWER, SUFFIX
from spacy.parts_of_speech import IDS as UPOS_IDS

from .._core.tagging import prefix_scores
from .._core.weights import AveragedWeights

# The token attributes the features read besides the tags (read with the tagger's atoms).
READ_ATTRS = (LOWER, SUFFIX, IS_TITLE)

MIN_COUNT = 2
MIN_SHARE = 0.01

# Template parts: "x" the token's own tag, "t-1" and "t+1" its neighbours' tags, "w0" and "w+1"
# the lowercase word and the next, "s" the suffix, "title" capitalization and Doc-initial
# position. On EWT dev (offline, tags of the tagger) these eight score as the fourteen with the
# tag bigrams t+1 t+2 and t-2 t-1, w-1 and the conjunctions w0 t+1, w0 w+1 and t-1 w0 did.
TEMPLATES: Tuple[Tuple[str, ...], ...] = (
    ("x",), ("x", "w0"), ("x", "t-1"), ("x", "t+1"), ("x", "t-1", "t+1"), ("x", "w+1"),
    ("x", "s"), ("x", "title"),
)
N_FEATURES = len(TEMPLATES)

_M1 = numpy.uint64(0x9E3779B97F4A7C15)
_M2 = numpy.uint64(0xBF58476D1CE4E5B9)
_R1 = numpy.uint64(31)
_R2 = numpy.uint64(29)
# A seed per template, away from the tagger's template hashes (64-bit keys: a collision with
# them is as unlikely as between two of its own templates).
_SEEDS = [numpy.uint64((0x5EC0D9A55 * (t + 1)) ^ 0xD1B54A32D192ED03) for t in range(N_FEATURES)]


def count_candidates(pairs: Dict[str, Dict[str, int]], labels: Sequence[str], n_columns: int
                     ) -> Dict[str, List[str]]:
    """The candidates of each ambiguous tag: the universal POS it was seen with (counts in
    `pairs`: tag -> POS -> count) at least MIN_COUNT times and on MIN_SHARE of its tokens, most
    frequent first, at most `n_columns`; tags with one such POS (or not among `labels`) are
    left out."""
    out = {}
    for tag in sorted(pairs):
        if tag not in labels:
            continue
        total = sum(pairs[tag].values())
        seen = sorted(pairs[tag].items(), key=lambda kv: (-kv[1], kv[0]))
        cands = [pos for pos, n in seen if pos in UPOS_IDS and n >= MIN_COUNT and n >= MIN_SHARE * total]
        cands = cands[:n_columns]
        if len(cands) >= 2:
            out[tag] = cands
    return out


class PosPass:
    """The second pass of a tagger with these labels and candidates (see the module)."""

    def __init__(self, labels: Sequence[str], candidates: Dict[str, List[str]]):
        self.width = max([len(c) for c in candidates.values()] + [0])
        n = len(labels)
        self.n_candidates = numpy.zeros((n,), dtype=numpy.int64)
        self.candidates = numpy.zeros((n, max(1, self.width)), dtype=numpy.uint64)
        for i, label in enumerate(labels):
            cands = candidates.get(label, [])
            self.n_candidates[i] = len(cands)
            self.candidates[i, :len(cands)] = [UPOS_IDS[p] for p in cands]
        self.ambiguous = self.n_candidates >= 2

    def __bool__(self) -> bool:
        return bool(self.ambiguous.any())

    def keys(self, classes: numpy.ndarray, offsets: numpy.ndarray, extra: numpy.ndarray,
             rows: numpy.ndarray) -> numpy.ndarray:
        """The feature keys (len(rows), N_FEATURES) of tokens `rows` of a batch: its tag
        classes (-1 = unknown), Doc offsets and READ_ATTRS values (rows as classes)."""
        doc_of = numpy.searchsorted(offsets, rows, side="right") - 1
        start, end = offsets[doc_of], offsets[doc_of + 1]
        tags = numpy.asarray(classes, dtype=numpy.int64) + 1   # 0: unknown or outside the Doc
        values: Dict[str, numpy.ndarray] = {}

        def at(column: numpy.ndarray, d: int) -> numpy.ndarray:
            j = rows + d
            inside = (j >= start) & (j < end)
            out = numpy.zeros((len(rows),), dtype=numpy.uint64)
            out[inside] = column[j[inside]]
            return out

        values["x"] = tags[rows].astype(numpy.uint64)
        values["t-1"] = at(tags, -1)
        values["t+1"] = at(tags, 1)
        values["w0"] = extra[rows, 0]
        values["w+1"] = at(extra[:, 0], 1)
        values["s"] = extra[rows, 1]
        values["title"] = extra[rows, 2] * numpy.uint64(2) + (rows == start).astype(numpy.uint64)
        out = numpy.empty((len(rows), N_FEATURES), dtype=numpy.uint64)
        for t, parts in enumerate(TEMPLATES):
            h = numpy.full((len(rows),), _SEEDS[t], dtype=numpy.uint64)
            for part in parts:
                h ^= values[part]
                h *= _M1
                h ^= h >> _R1
            h *= _M2
            h ^= h >> _R2
            out[:, t] = h
        numpy.maximum(out, 1, out=out)   # key 0 marks an empty bucket of the table
        return out

    def _choose(self, weights: AveragedWeights, classes: numpy.ndarray, keys: numpy.ndarray,
                rows: numpy.ndarray) -> numpy.ndarray:
        scores = prefix_scores(weights, keys, self.width)
        n_cands = self.n_candidates[classes[rows]]
        scores[numpy.arange(self.width)[None, :] >= n_cands[:, None]] = -numpy.inf
        return numpy.argmax(scores, axis=1)

    def predict(self, weights: AveragedWeights, classes: numpy.ndarray, offsets: numpy.ndarray,
                extra: numpy.ndarray, pos: numpy.ndarray) -> None:
        """Overwrite `pos` (UPOS ids, rows as `classes`) at the tokens of ambiguous tags."""
        rows = numpy.flatnonzero(self.ambiguous[classes])
        if not len(rows):
            return
        cols = self._choose(weights, classes, self.keys(classes, offsets, extra, rows), rows)
        pos[rows] = self.candidates[classes[rows], cols]

    def update(self, weights: AveragedWeights, gold_classes: numpy.ndarray, gold_pos: numpy.ndarray,
               extra: numpy.ndarray) -> Tuple[int, int]:
        """One perceptron step at each token of one Doc whose gold tag is ambiguous and whose
        gold POS is one of its candidates (gold_pos: UPOS ids, 0 = unknown). Returns (tokens
        scored, mistakes)."""
        classes = numpy.asarray(gold_classes, dtype=numpy.int64)
        known = classes >= 0
        amb = numpy.zeros((len(classes),), dtype=bool)
        amb[known] = self.ambiguous[classes[known]]
        rows = numpy.flatnonzero(amb & (gold_pos != 0))
        if not len(rows):
            return 0, 0
        match = self.candidates[classes[rows]] == gold_pos[rows, None]
        match[numpy.arange(self.candidates.shape[1])[None, :] >= self.n_candidates[classes[rows]][:, None]] = False
        has = match.any(axis=1)
        rows, gold_cols = rows[has], numpy.argmax(match[has], axis=1)
        if not len(rows):
            return 0, 0
        offsets = numpy.array([0, len(classes)], dtype=numpy.int64)
        keys = self.keys(classes, offsets, extra, rows)
        guess = self._choose(weights, classes, keys, rows)
        wrong = numpy.flatnonzero(guess != gold_cols)
        for i in wrong.tolist():
            good, bad = int(gold_cols[i]), int(guess[i])
            for key in keys[i].tolist():
                weights.add(key, good, 1.0)
                weights.add(key, bad, -1.0)
        return len(rows), len(wrong)


def pos_counts(docs: Iterable) -> Dict[str, Dict[str, int]]:
    """tag -> universal POS -> count over the tokens of `docs` that have both."""
    counts: Dict[str, Dict[str, int]] = {}
    for doc in docs:
        if not doc.has_annotation("POS") or not doc.has_annotation("TAG"):
            continue
        for token in doc:
            if token.tag_ and token.pos_:
                seen = counts.setdefault(token.tag_, {})
                seen[token.pos_] = seen.get(token.pos_, 0) + 1
    return counts
