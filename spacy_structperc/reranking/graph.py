"""A second opinion of another model family for reranking: an arc-factored (first-order,
graph-based) dependency model, McDonald et al. 2005, trained with the averaged perceptron and
exact projective search (``_core/arcfactored.pyx`` over ``_core/eisner.pyx``).

Parser combination across families (transition-based + graph-based: Sagae and Lavie 2006, Nivre
and McDonald 2008) is where ensembles of dependency parsers gain; the candidates of a k-best
list all come from one transition-based beam, so its errors are the kind a graph-based model
sees differently. ``GraphScorer`` scores each candidate tree with the graph model (the sum of its
arc scores) and finds the graph model's own best tree; ``graph_keys`` turns those into reranker
features (keys of the list format), so every learner can use them.

Training lists need graph scores from a graph model that did not see their sentence (jackknifed
like the base parser: bench_reranking's ``--only graph``). In a pipeline (a reranker block with
``graph`` > 0, pipes.py) a second-order GraphScorer is trained online beside the parser
(``train_online``) and its score of each candidate (``score_span``) joins the forward and
reversed models' scores at prediction.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
import srsly

from .._core.arcfactored import ArcModel
from ..errors import Errors
from ..model import PerceptronModel
from .candidates import CandidateLists

GRAPH_KIND = "spacy-structperc graph model"

N_TAG_IDS = 63   # tag ids 1..62 for the commonest tags, 63 for the rest (0 is the root)


class TagIndex:
    """Tag hashes -> small ids for the in-between features: the 62 commonest training tags
    (ties by hash, so the order is stable), every other tag 63."""

    def __init__(self, tags: numpy.ndarray):
        self.tags = numpy.asarray(tags, dtype=numpy.uint64)
        # sorted once: ids() runs for every span a pipeline's graph model scores
        self._order = numpy.argsort(self.tags)
        self._sorted = self.tags[self._order]

    @classmethod
    def fit(cls, tags: numpy.ndarray) -> "TagIndex":
        values, counts = numpy.unique(numpy.asarray(tags, dtype=numpy.uint64), return_counts=True)
        order = numpy.lexsort((values, -counts))
        return cls(values[order][:N_TAG_IDS - 1])

    def ids(self, tags: numpy.ndarray) -> numpy.ndarray:
        tags = numpy.asarray(tags, dtype=numpy.uint64)
        if not len(self.tags):
            return numpy.full((len(tags),), N_TAG_IDS, dtype=numpy.int32)
        pos = numpy.minimum(numpy.searchsorted(self._sorted, tags), len(self.tags) - 1)
        found = self._sorted[pos] == tags
        return numpy.where(found, self._order[pos] + 1, N_TAG_IDS).astype(numpy.int32)


class GraphScorer:
    """The arc-factored model over sentences given as flat arrays: words and tags (uint64 atoms,
    e.g. LOWER and TAG hashes), sent_ptr (m + 1 word offsets), heads per word (index in its
    sentence, -1 for the root)."""

    def __init__(self, epochs: int = 5, seed: int = 0, n_buckets: int = 1 << 22, order: int = 1):
        self.epochs = epochs
        self.seed = seed
        self.order = order
        self.model = ArcModel(n_buckets, order)
        self.tag_index = TagIndex(numpy.zeros((0,), dtype=numpy.uint64))
        self.curve: List[Dict[str, float]] = []

    def fit(self, words, tags, sent_ptr, heads, heldout: Optional[Tuple[Any, Any, Any, Any]] = None
            ) -> "GraphScorer":
        """Train for `epochs` epochs (sentences shuffled each epoch, seeded). With `heldout`
        (words, tags, sent_ptr, heads), the curve records its UAS (all words) after each epoch."""
        words, tags, sent_ptr, heads = _arrays(words, tags, sent_ptr, heads)
        self.tag_index = TagIndex.fit(tags)
        tag_ids = self.tag_index.ids(tags)
        rng = numpy.random.default_rng(self.seed)
        self.curve = []
        for epoch in range(self.epochs):
            order = rng.permutation(len(sent_ptr) - 1).astype(numpy.int64)
            wrong, total = self.model.train_epoch(words, tags, tag_ids, sent_ptr, heads, order)
            point = {"epoch": epoch + 1, "train_head_errors": wrong, "train_words": total}
            if heldout is not None:
                self.model.finish()
                got, _ = self.decode(*heldout[:3])
                point["heldout_uas_all_words"] = float((got == numpy.asarray(heldout[3])).mean())
            self.curve.append(point)
        self.model.finish()
        return self

    # Online training beside a parser (the reranker block's "graph": one perceptron step per
    # sentence as `spacy train` hands the examples over), scoring one span's candidates at
    # prediction, and the saved form.

    def start(self, tags) -> None:
        """Before `train_online`: the tag ids, from the training tags."""
        self.tag_index = TagIndex.fit(numpy.asarray(tags, dtype=numpy.uint64))

    def train_online(self, words, tags, sent_ptr, heads) -> Tuple[int, int]:
        """One perceptron step per sentence, in the given order: (wrong heads, words)."""
        words, tags, sent_ptr, heads = _arrays(words, tags, sent_ptr, heads)
        order = numpy.arange(len(sent_ptr) - 1, dtype=numpy.int64)
        return self.model.train_epoch(words, tags, self.tag_index.ids(tags), sent_ptr, heads, order)

    def score_span(self, words, tags, trees: Sequence[numpy.ndarray]) -> numpy.ndarray:
        """The averaged model's score of each tree (heads per word, -1 for the root) of one
        span. Only reads the weights (setting averages on is a no-op once set), so threads may
        score at once."""
        self.model.weights.set_use_averages(True)
        n = len(words)
        if not len(trees):
            return numpy.zeros((0,), dtype=numpy.float64)
        heads = numpy.concatenate([numpy.asarray(h, dtype=numpy.int32) for h in trees])
        return self.score(words, tags, numpy.array([0, n]), numpy.zeros((len(trees),), dtype=numpy.int64), heads)

    def to_bytes(self, name: str, precision: str, prune_below: float = 0.0) -> bytes:
        """msgpack of the order, the tag index and the averaged weights (a PerceptronModel file
        without templates, checksummed on its own), in `precision`, rows within `prune_below`
        of zero left out."""
        holder = PerceptronModel([], 1, precision, prune_below)
        holder.weights = self.model.weights
        return srsly.msgpack_dumps({"kind": GRAPH_KIND, "order": self.order,
                                    "tags": self.tag_index.tags.astype("<u8").tobytes(),
                                    "weights": holder.to_bytes(f"{name} (graph model)")})

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> "GraphScorer":
        """A scorer of to_bytes' bytes; S006 (or the weights' own errors) when damaged."""
        try:
            msg = srsly.msgpack_loads(bytes(data))
            kind, order, tags, weights = msg["kind"], msg["order"], msg["tags"], msg["weights"]
            if kind != GRAPH_KIND or order not in (1, 2) or not isinstance(tags, bytes) or len(tags) % 8:
                raise ValueError
        except Exception:
            raise ValueError(Errors.S006.format(name=name, reason="its graph model is damaged")) from None
        fields = PerceptronModel([], 1).parse_bytes(weights, f"{name} (graph model)")
        if fields["weights"] is None or fields["n_classes"] != 1:
            raise ValueError(Errors.S006.format(name=name, reason="its graph model has no weights"))
        scorer = cls(order=order, n_buckets=1)
        scorer.model.set_weights(fields["weights"])
        scorer.tag_index = TagIndex(numpy.frombuffer(tags, dtype="<u8").astype(numpy.uint64))
        return scorer

    def decode(self, words, tags, sent_ptr) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """Each sentence's best projective tree under the model (heads per word) and its score."""
        words, tags, sent_ptr, _ = _arrays(words, tags, sent_ptr, None)
        return self.model.decode(words, tags, self.tag_index.ids(tags), sent_ptr)

    def score(self, words, tags, sent_ptr, cand_sent, cand_heads) -> numpy.ndarray:
        """The model's score of each candidate tree (see ArcModel.score_trees)."""
        words, tags, sent_ptr, _ = _arrays(words, tags, sent_ptr, None)
        return self.model.score_trees(words, tags, self.tag_index.ids(tags), sent_ptr,
                                      numpy.ascontiguousarray(cand_sent, dtype=numpy.int64),
                                      numpy.ascontiguousarray(cand_heads, dtype=numpy.int32))


def _arrays(words, tags, sent_ptr, heads):
    c = numpy.ascontiguousarray
    return (c(words, dtype=numpy.uint64), c(tags, dtype=numpy.uint64), c(sent_ptr, dtype=numpy.int64),
            None if heads is None else c(heads, dtype=numpy.int32))


# Keys of the graph features (salted constants; the perceptron counts repeats).
_SALT = 0x67726170685F6B31
GAP_BINS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
DIS_BINS = (0, 1, 2, 3, 5, 8)
GAP_UNITS = 4        # repeats of the gap key per list-spread of the graph score
MAX_REPEATS = 40


def _k(kind: int, value: int = 0) -> numpy.uint64:
    x = (_SALT * (kind + 1) + 0x9E3779B97F4A7C15 * (value + 1)) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 29
    return numpy.uint64(x | 1)


def graph_keys(offsets: numpy.ndarray, graph: numpy.ndarray, disagree: numpy.ndarray,
               groups=("rank", "gap", "disagree"), arc_ptr: Optional[numpy.ndarray] = None,
               arc_atoms: Optional[numpy.ndarray] = None) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """(ptr, keys): each candidate's graph features, CSR over the candidates of lists given by
    `offsets`, from its graph score and its number of heads that differ from the graph model's
    own best tree. Groups:

    - ``rank``: the candidate's rank by graph score in its list (0 = best, ties share), 0..7+;
    - ``gap``: the graph score's gap to the list's best, divided by the list's mean gap (as the
      base score's "list" norm), binned at GAP_BINS, and as a count (GAP_UNITS repeats per mean
      gap, at most MAX_REPEATS): a linear feature in the perceptron's count form;
    - ``disagree``: the heads differing from the graph's best tree, binned at DIS_BINS, both
      absolute and above the list's least, and as a count (at most MAX_REPEATS);
    - ``arcs``: one key per head that differs from the graph's best tree, by an atom describing
      the word (arc_ptr / arc_atoms: CSR over the candidates, e.g. the word's tag and the two
      arcs' directions, see disagreement_atoms), so the learner weighs the graph model's
      opinion by the kind of word it is about.
    """
    offsets = numpy.asarray(offsets, dtype=numpy.int64)
    graph = numpy.asarray(graph, dtype=numpy.float64)
    disagree = numpy.asarray(disagree, dtype=numpy.int64)
    per: List[List[numpy.uint64]] = [[] for _ in range(len(graph))]
    for i in range(len(offsets) - 1):
        a, b = offsets[i], offsets[i + 1]
        if b <= a:
            continue
        g = graph[a:b]
        rel = g - g.max()
        below = rel[rel < 0]
        spread = float(-below.mean()) if len(below) else 0.0
        gap = -rel / spread if spread > 0 else numpy.zeros_like(rel)
        ranks = numpy.array([(g > x).sum() for x in g])
        dmin = disagree[a:b].min()
        for j in range(b - a):
            keys = per[a + j]
            if "rank" in groups:
                keys.append(_k(1, min(int(ranks[j]), 7)))
            if "gap" in groups:
                keys.append(_k(2, int(numpy.searchsorted(GAP_BINS, gap[j], side="left"))))
                keys.extend([_k(3)] * min(MAX_REPEATS, int(round(gap[j] * GAP_UNITS))))
            if "disagree" in groups:
                d = int(disagree[a + j])
                keys.append(_k(4, int(numpy.searchsorted(DIS_BINS, d, side="left"))))
                keys.append(_k(5, int(numpy.searchsorted(DIS_BINS, d - dmin, side="left"))))
                keys.extend([_k(6)] * min(MAX_REPEATS, d - int(dmin)))
            if "arcs" in groups and arc_ptr is not None:
                keys.extend(_k(7, int(v)) for v in arc_atoms[arc_ptr[a + j]:arc_ptr[a + j + 1]])
    ptr = numpy.zeros((len(graph) + 1,), dtype=numpy.int64)
    ptr[1:] = numpy.cumsum([len(k) for k in per])
    keys = numpy.array([k for ks in per for k in ks], dtype=numpy.uint64)
    return ptr, keys


def disagreement_atoms(cand_heads: numpy.ndarray, ref_heads: numpy.ndarray,
                       tags: numpy.ndarray, cand_len: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """(disagree, ptr, atoms) of candidates against reference trees: cand_heads and ref_heads
    flat over the candidates' words (the reference tree repeated for each candidate of its
    sentence), tags the words' tags likewise, cand_len the candidates' lengths. disagree: per
    candidate the heads that differ; ptr / atoms: CSR of one atom per differing word, its tag
    and the directions (root, left, right) of the candidate's and the reference's arc."""
    cand_heads = numpy.asarray(cand_heads, dtype=numpy.int64)
    ref_heads = numpy.asarray(ref_heads, dtype=numpy.int64)
    starts = numpy.concatenate([[0], numpy.cumsum(cand_len)]).astype(numpy.int64)
    pos = numpy.arange(len(cand_heads)) - numpy.repeat(starts[:-1], cand_len)
    diff = cand_heads != ref_heads

    def side(h):
        return numpy.where(h < 0, 0, numpy.where(h < pos, 1, 2)).astype(numpy.uint64)

    atom = (numpy.asarray(tags, dtype=numpy.uint64) * numpy.uint64(16)) + side(cand_heads) * numpy.uint64(4) + side(ref_heads)
    cand = numpy.repeat(numpy.arange(len(cand_len)), cand_len)
    counts = numpy.bincount(cand[diff], minlength=len(cand_len)).astype(numpy.int64)
    ptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(numpy.int64)
    return counts, ptr, atom[diff]


def with_keys(lists: CandidateLists, ptr: numpy.ndarray, keys: numpy.ndarray) -> CandidateLists:
    """The lists with each candidate's extra keys (CSR ptr / keys over the same rows) appended."""
    if len(ptr) != len(lists) + 1:
        raise ValueError(f"with_keys: {len(ptr) - 1} rows of keys for {len(lists)} candidates")
    own = numpy.diff(lists.key_ptr)
    extra = numpy.diff(ptr)
    new_ptr = numpy.concatenate([[0], numpy.cumsum(own + extra)]).astype(numpy.int64)
    out = numpy.zeros((int(new_ptr[-1]),), dtype=numpy.uint64)
    rows = numpy.repeat(numpy.arange(len(lists)), own)
    out[new_ptr[rows] + (numpy.arange(len(lists.keys)) - lists.key_ptr[rows])] = lists.keys
    rows = numpy.repeat(numpy.arange(len(lists)), extra)
    out[new_ptr[rows] + own[rows] + (numpy.arange(len(keys)) - ptr[rows])] = keys
    res = CandidateLists(lists.offsets, lists.base, lists.loss, new_ptr, out, lists.tree_ptr,
                         lists.heads, lists.nodes)
    return res
