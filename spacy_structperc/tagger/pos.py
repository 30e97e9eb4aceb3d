"""The tagger's second pass (pos = "predict"): universal POS from the predicted fine tags.

A fine tag seen with one universal POS in training gets it, as with pos = "map". A tag seen
with several (IN: ADP or SCONJ, VBZ: AUX or VERB, DT: DET or PRON, ...) has its POS chosen among
those, by a linear model over the tag conjoined with the word and the next one, its suffix and
the tags on both sides (the right-hand one, which the left-to-right tagger could not read).
Only tokens whose predicted tag is ambiguous are scored. A POS counts as a tag's candidate when
seen with it at least MIN_COUNT times and on at least MIN_SHARE of its tokens: on UD English
EWT that leaves 17 of its 49 tags ambiguous, 65% of the tokens, instead of 26 and 82% for every
POS ever seen (dev UPOS 95.48 against 95.51 with the fourteen templates below, for a fifth less
of the pass's time).

The model's rows live in the tagger's own weight table, under keys of their own: a tag's
candidates are columns 0..K-1 (most frequent first), so the rows are averaged, saved, pruned,
checksummed and mixed (distributed training) with the tagger's weights and need no file of
their own. It is trained in the tagger's update() on the gold tags.
"""
from typing import Container, Dict, Iterable, List, Sequence, Tuple

import numpy
from spacy.parts_of_speech import IDS as UPOS_IDS

from .._core.tagging import pos_keys, prefix_scores
from .._core.weights import AveragedWeights

# The word atoms the features read besides the tags: columns of the atoms the tagger extracted
# for its own templates, so the pass reads nothing more from the Docs (reading three token
# attributes from the Docs cost a third of the pass's time). An atom the tagger's templates do
# not read is 0.
WORD_ATOMS = ("lower", "s3", "is_title")

MIN_COUNT = 2
MIN_SHARE = 0.01

# The parts a template may combine, in the order of pos_keys's part codes.
PARTS = ("x", "t-1", "t+1", "w0", "w+1", "s", "title")

# Template parts: "x" the token's own tag, "t-1" and "t+1" its neighbours' tags, "w0" and "w+1"
# the lowercase word and the next, "s" the suffix, "title" capitalization and Doc-initial
# position. On EWT dev these eight give 95.40 UPOS; fourteen (adding the tag bigrams t+1 t+2 and
# t-2 t-1, w-1 and the conjunctions w0 t+1, w0 w+1 and t-1 w0) gave 95.48 for 75% more of the
# pass's time, which the tagger's speed target has no room for.
TEMPLATES: Tuple[Tuple[str, ...], ...] = (
    ("x",), ("x", "w0"), ("x", "t-1"), ("x", "t+1"), ("x", "t-1", "t+1"), ("x", "w+1"),
    ("x", "s"), ("x", "title"),
)

# A seed per template, away from the tagger's template hashes (64-bit keys: a collision with
# them is as unlikely as between two of its own templates).
_SEEDS = [numpy.uint64((0x5EC0D9A55 * (t + 1)) ^ 0xD1B54A32D192ED03) for t in range(64)]


def count_candidates(pairs: Dict[str, Dict[str, int]], labels: Container[str], n_columns: int
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
    """The second pass of a tagger with these labels, candidates and templates (the parts of
    each: TEMPLATES when trained, saved with the tagger), over atoms named `atom_names`."""

    def __init__(self, labels: Sequence[str], candidates: Dict[str, List[str]],
                 templates: Sequence[Sequence[str]], atom_names: Sequence[str]):
        self.templates = [tuple(parts) for parts in templates]
        self.spec = numpy.full((len(self.templates), 3), -1, dtype=numpy.int64)
        for t, parts in enumerate(self.templates):
            self.spec[t, :len(parts)] = [PARTS.index(part) for part in parts]
        self.seeds = numpy.asarray(_SEEDS[:len(self.templates)], dtype=numpy.uint64)
        self.word_cols = [list(atom_names).index(a) if a in atom_names else -1 for a in WORD_ATOMS]
        self.width = max([len(c) for c in candidates.values()] + [0])
        n = len(labels)
        self.n_candidates = numpy.zeros((n,), dtype=numpy.int64)
        self.candidates = numpy.zeros((n, max(1, self.width)), dtype=numpy.uint64)
        for i, label in enumerate(labels):
            cands = candidates.get(label, [])
            self.n_candidates[i] = len(cands)
            self.candidates[i, :len(cands)] = [UPOS_IDS[p] for p in cands]
        self.ambiguous = self.n_candidates >= 2
        # Added to a token's scores: -inf in the columns its tag has no candidate for.
        self.penalty = numpy.where(numpy.arange(max(1, self.width))[None, :] < self.n_candidates[:, None],
                                   numpy.float32(0), numpy.float32(-numpy.inf)).astype(numpy.float32)

    def __bool__(self) -> bool:
        return bool(self.ambiguous.any())

    def words(self, atoms: numpy.ndarray) -> numpy.ndarray:
        """The WORD_ATOMS columns of the tagger's atoms (tokens x atoms), 0 for one it lacks."""
        out = numpy.zeros((len(atoms), len(WORD_ATOMS)), dtype=numpy.uint64)
        for k, col in enumerate(self.word_cols):
            if col >= 0:
                out[:, k] = atoms[:, col]
        return out

    def keys(self, classes: numpy.ndarray, offsets: numpy.ndarray, words: numpy.ndarray,
             rows: numpy.ndarray) -> numpy.ndarray:
        """The feature keys (len(rows), templates) of tokens `rows` of a batch: its tag
        classes (-1 = unknown), Doc offsets and `words` (rows as classes). Each key hashes its
        template's seed and part values (64-bit multiply-xorshift steps); see pos_keys."""
        return pos_keys(numpy.asarray(classes, dtype=numpy.int64) + 1, offsets, words, rows, self.spec, self.seeds)

    def _choose(self, weights: AveragedWeights, classes: numpy.ndarray, keys: numpy.ndarray,
                rows: numpy.ndarray) -> numpy.ndarray:
        scores = prefix_scores(weights, keys, self.width)
        scores += self.penalty[classes[rows]]
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
        gold POS is one of its candidates (gold_pos: UPOS ids, 0 = unknown; extra: its `words`).
        Returns (tokens scored, mistakes)."""
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
