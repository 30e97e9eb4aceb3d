"""The rerankers pipeline components hold: jackknifed training lists, fitting, reranked
prediction and the saved form.

``ParserReranker`` is what a structperc_parser with a ``reranker`` block holds. In training it
keeps ``folds`` fold models: fold f's weights are updated on every example outside fold f (an
example's fold is a checksum of its text), and the candidates of an example come from its own
fold's model, which never saw it (jackknifing, Collins 2000). The latest lists of every training
example are kept; the reranker is (re)trained on them whenever they changed and the parser is
asked to predict or save, so `spacy train`'s evaluations and saved pipelines use an up-to-date
reranker. At prediction it takes the beam's k-best trees of each span, extracts their global
features in C and lets the learner choose.

With learner "none" it rescores instead: a right-to-left model (``reverse`` > 0) and a
second-order graph model (``graph`` > 0), each trained beside the parser, score every candidate
(with ``union``, the reversed model's own k best join the list), and the tree with the best
forward score + reverse x reversed score + graph x graph score wins (``rescored``, ``choose``).
With ``tag_flips`` > 0 each span is also parsed with each of its least certain tokens given the
tagger's runner-up tag (``tag_variants``), those trees paying ``tag_weight`` x the token's
margin, and the best tree over all variants wins (``rescored_choice``).
"""
import copy
import hashlib
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
import srsly

from .._core import beam
from ..docarrays import TAG_ALTERNATIVES
from ..errors import Errors
from .features import FEATURES_VERSION, TreeFeatures, node_labels
from .graph import GraphScorer
from .candidates import CandidateLists
from .learners import make_reranker, reranker_from_dict
from .reverse import path_scores, reverse_tree

# A candidate of one span: (base score, heads relative to the span with -1 for a root, classes).
Candidate = Tuple[float, numpy.ndarray, numpy.ndarray]


# The learners' settings inside a pipeline unless the block's settings say otherwise. There are
# no dev lists in `spacy train`, so the perceptron chooses the base score's weight (and its
# epochs) on every 4th jackknifed training list and then trains on all of them
# (PerceptronReranker's holdout), with each list's base scores divided by the list's own spread.
# On UD EWT (benchmarks/results/reranking.json, k = 8, dev UAS): the 1-best 86.97, the learned
# weight 86.69, this rule 86.99, the weight chosen on dev lists 87.08; the held-out lists pick the
# weight dev picks (256), where the learned one is about 19. The learned weight (None) is left
# out of the grid, and so are weights below 64: in side runs on the same lists (k = 4 / 8 / 16,
# both normalizations) each of them made more dev errors than the best weight from 64 to 1024
# (and all but one, 32 with per-list spread at k = 8, more than every such weight), and the
# held-out lists, fold-model lists like the training ones, sometimes chose them.
BASE_WEIGHT_GRID = [64.0, 128.0, 256.0, 512.0, 1024.0]
LEARNER_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "perceptron": {"epochs": 8, "min_count": 2, "base_weights": BASE_WEIGHT_GRID,
                   "base_norm": "list", "holdout": 4},
}


def block_settings(block: Dict[str, Any]) -> Dict[str, Any]:
    """The learner settings of a reranker block: LEARNER_DEFAULTS under the block's own."""
    settings = {**LEARNER_DEFAULTS.get(block["learner"], {}), **dict(block["settings"])}
    if block["learner"] == "dual":
        settings.setdefault("kernel", block["kernel"])
    return settings


def fit_block(block: Dict[str, Any], lists: CandidateLists):
    """A learner made from a reranker block (learner, kernel, settings) and fitted on lists."""
    return make_reranker(block["learner"], **block_settings(block)).fit(lists)


# The saved reranker: MAGIC, then a blake2b-128 of the payload, then the payload (msgpack of the
# learner's dict tagged with its feature version). A file of the first version (plain msgpack,
# before the checksum) still loads; a damaged magic makes it neither, and it is refused. A
# reranker that is not fitted is the checksummed record EMPTY, never b"": empty bytes are what a
# file cut to nothing holds, and they used to load as "no reranker" (the beam's 1-best) without
# a word. They are refused (S254).
MAGIC = b"SPRR\x02"
DIGEST_SIZE = 16
EMPTY = {"learner": None}


def dumps_model(model) -> bytes:
    """A fitted learner as checksummed bytes, tagged with its feature definition; None (nothing
    fitted) as the checksummed record EMPTY."""
    msg = EMPTY if model is None else {**model.to_dict(), "features_version": FEATURES_VERSION}
    payload = srsly.msgpack_dumps(msg)
    return MAGIC + hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload


def loads_model(data: bytes, name: str, what: str = "file"):
    """The learner of dumps_model (None for the EMPTY record). S254 for empty bytes, S248 for
    damaged bytes, S246 for another feature definition; any other failure to rebuild the
    learner is S006."""
    data = bytes(data)
    if not data:
        raise ValueError(Errors.S254.format(name=name, what=what))
    checked = data.startswith(MAGIC)
    if checked:
        digest, payload = data[len(MAGIC):len(MAGIC) + DIGEST_SIZE], data[len(MAGIC) + DIGEST_SIZE:]
        if hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() != digest:
            raise ValueError(Errors.S248.format(name=name))
    else:
        payload = data
    try:
        msg = srsly.msgpack_loads(payload)
    except Exception:
        raise ValueError(Errors.S248.format(name=name)) from None
    if not isinstance(msg, dict):
        raise ValueError(Errors.S248.format(name=name))
    if checked and msg == EMPTY:
        return None
    found = msg.get("features_version", 1)
    if found != FEATURES_VERSION:
        raise ValueError(Errors.S246.format(name=name, found=found, expected=FEATURES_VERSION))
    try:
        return reranker_from_dict(msg)
    except ValueError as e:
        if str(e).startswith("[S"):
            raise
        raise ValueError(Errors.S006.format(name=name, reason=f"its reranker: {e}")) from None
    except Exception as e:
        raise ValueError(Errors.S006.format(name=name, reason=f"its reranker: {type(e).__name__}: {e}")) from None


# The saved reranker with a reversed or a graph model (block "reverse" or "graph" > 0):
# STATE_MAGIC, a blake2b-128 of the payload, then the payload: msgpack of {"learner":
# dumps_model bytes, "reverse": the reversed ParserModel's own bytes (checksummed too) or b"",
# "graph": GraphScorer.to_bytes or b""; a file written before the graph model has no "graph"}.
# Without either model the learner's bytes are saved alone, as before.
STATE_MAGIC = b"SPRS\x01"


def dumps_state(model, reverse_bytes: bytes, graph_bytes: bytes = b"") -> bytes:
    """The saved reranker: the learner (dumps_model), and the reversed and graph models' bytes
    if any."""
    if not reverse_bytes and not graph_bytes:
        return dumps_model(model)
    msg = {"learner": dumps_model(model), "reverse": reverse_bytes}
    if graph_bytes:
        msg["graph"] = graph_bytes
    payload = srsly.msgpack_dumps(msg)
    return STATE_MAGIC + hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload


def loads_state(data: bytes, name: str, what: str = "file") -> Tuple[Any, bytes, bytes]:
    """(learner or None, reversed model bytes or b"", graph model bytes or b"") of dumps_state;
    S254 for empty bytes, S248 for damaged bytes."""
    data = bytes(data)
    if not data.startswith(STATE_MAGIC):
        return loads_model(data, name, what), b"", b""
    digest, payload = data[len(STATE_MAGIC):len(STATE_MAGIC) + DIGEST_SIZE], data[len(STATE_MAGIC) + DIGEST_SIZE:]
    if hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() != digest:
        raise ValueError(Errors.S248.format(name=name))
    try:
        msg = srsly.msgpack_loads(payload)
        learner, reverse, graph = msg["learner"], msg["reverse"], msg.get("graph", b"")
    except Exception:
        raise ValueError(Errors.S248.format(name=name)) from None
    if not all(isinstance(x, bytes) for x in (learner, reverse, graph)):
        raise ValueError(Errors.S248.format(name=name))
    # Inside this checksummed record, b"" is what a file written before EMPTY holds for a
    # learner that was not fitted (learner "none"): it cannot be a file cut short.
    return (loads_model(learner, name, what) if learner else None), reverse, graph


class ParserReranker:
    """The k-best reranker of a structperc_parser (see the module docstring)."""

    def __init__(self, parser, block: Dict[str, Any]):
        self.parser = parser
        self.block = block
        self.features = TreeFeatures(block["features"])
        self.model = None
        self.fold_weights: List[Any] = []
        self.fold_systems: List[Any] = []
        self.fold_seen: List[set] = []
        self.store: Dict[int, CandidateLists] = {}
        self.store_version = 0
        self.fit_version = 0
        # The right-to-left model (block "reverse" > 0): the parser's templates and labels over
        # reversed spans, trained beside the parser, rescoring the k-best at prediction.
        self.reverse_model: Any = None
        # The second-order graph model (block "graph" > 0, graph.GraphScorer): trained beside the
        # parser on each training sentence's first `graph_epochs` visits (graph_seen counts them).
        self.graph_model: Optional[GraphScorer] = None
        self.graph_seen: Dict[int, int] = {}

    def with_block(self, block: Dict[str, Any]) -> "ParserReranker":
        """This reranker's trained state (learner, jackknifing, reversed and graph models)
        under another block that differs in prediction settings only (the component's
        configure_reranker); S253 for a weight > 0 on a model that was never trained."""
        for setting, model, trained in (("reverse", "reversed", self.reverse_model),
                                        ("graph", "graph", self.graph_model)):
            if block[setting] > 0 and self.block[setting] <= 0 and trained is None:
                raise ValueError(Errors.S253.format(name=self.parser.name, model=model, setting=setting))
        other = copy.copy(self)   # shares the trained parts; only the block differs
        other.block = block
        return other

    @property
    def reverse(self) -> float:
        return float(self.block.get("reverse", 0.0))

    @property
    def graph(self) -> float:
        return float(self.block.get("graph", 0.0))

    @property
    def rescores(self) -> bool:
        """Whether the k-best are rescored by other models (reversed, graph) instead of a learner."""
        return self.reverse > 0 or self.graph > 0

    @property
    def learns(self) -> bool:
        """Whether a learner is trained on jackknifed lists (learner "none": no)."""
        return self.block["learner"] != "none"

    @property
    def needs_trees(self) -> bool:
        return self.block["learner"] == "dual" and self.block["kernel"] == "tree"

    # Jackknifing -------------------------------------------------------------------------------

    def fold_of(self, doc) -> int:
        """The jackknife fold of a training doc: a checksum of its text, modulo `folds`."""
        return zlib.crc32(doc.text.encode("utf8")) % self.block["folds"]

    def fold_system(self, f: int):
        from .._core.arcstandard import ArcStandardSystem
        from .._core.weights import AveragedWeights

        parser = self.parser
        weights = parser.model.weights
        folds = self.block["folds"]
        if len(self.fold_weights) != folds or self.fold_weights[0].n_classes != weights.n_classes:
            self.fold_weights = [AveragedWeights(weights.n_classes, 1 << 16) for _ in range(folds)]
            self.fold_systems = []
            self.fold_seen = [set() for _ in range(folds)]
        if not self.fold_systems:
            for w in self.fold_weights:
                system = ArcStandardSystem(parser.model.templates, w, len(parser.cfg["labels"]),
                                           parser.cfg["label_candidates"], parser.transition_system)
                system.set_allowed_keys(parser.model.allowed_keys)
                self.fold_systems.append(system)
        return self.fold_systems[f]

    def collect(self, eg, doc_for_features, atoms, spans, allow_break, heads, deps) -> None:
        """Jackknifed training lists of one example; updates the fold models outside its fold
        (and the reversed and graph models, with them)."""
        key = zlib.crc32(eg.predicted.text.encode("utf8")) * 1000003 + len(eg.predicted)
        if self.rescores:
            golds = [self.parser._gold(eg, a, b, heads, deps) for a, b in spans]
            if self.reverse > 0:
                self.train_reverse(atoms, spans, allow_break, golds)
            if self.graph > 0:
                self.train_graph(key, doc_for_features, spans, golds)
        if not self.learns:
            return
        parser = self.parser
        f = self.fold_of(eg.predicted)
        k = self.block["k"]
        width = max(k, parser.cfg["beam_width"])
        golds, all_cands, kept = [], [], []
        for start, end in spans:
            gold_heads, gold_labels = parser._gold(eg, start, end, heads, deps)
            if not (gold_heads > -2).any():
                continue
            for g in range(self.block["folds"]):
                system = self.fold_system(g)
                if g == f:
                    continue
                system.set_sentence(atoms[start:end], gold_heads, gold_labels, allow_break)
                if system.oracle_path() is not None:
                    beam.train(system, parser.cfg["beam_width"], parser.cfg["update"])
                self.fold_seen[g].add(key)
            own = self.fold_system(f)
            own.weights.set_use_averages(False)
            all_cands.append(parser._span_kbest(own, atoms[start:end], allow_break, k, width))
            golds.append((gold_heads, gold_labels))
            kept.append((start, end))
        for w in self.fold_weights:
            w.next_example()
        if kept:
            self.store[key] = self.candidate_lists(doc_for_features, kept, all_cands, golds)
            self.store_version += 1

    # The reversed model ------------------------------------------------------------------------

    def new_reverse_model(self, n_classes: Optional[int] = None):
        """A right-to-left model: the parser's model kind, templates, atoms and precision, with
        empty weights of `n_classes` classes (None: no weights, for loading)."""
        from .._core.weights import AveragedWeights

        m = self.parser.model
        model = type(m)(m.template_specs, m.n_buckets, m.precision, m.prune_below)
        model.clusters = m.clusters
        model.casing = m.casing
        model.lexicon_tables = m.lexicon_tables
        model.set_templates(m.template_specs)
        if n_classes is not None:
            model.weights = AveragedWeights(n_classes, 1 << 16)
        return model

    def initialize(self, get_examples) -> None:
        """A fresh reversed model (block "reverse" > 0) for the parser's labels, with the
        parser's feature filter (min_feature_freq) counted on the reversed training trees; a
        fresh graph model (block "graph" > 0) with the tag ids of the training tags."""
        from .._core.arcstandard import ArcStandardSystem

        self.reverse_model = None
        self.graph_model = None
        self.graph_seen = {}
        if self.graph > 0:
            self.graph_model = GraphScorer(order=2)
            tags = [eg.reference.to_array("TAG") for eg in get_examples()]
            self.graph_model.start(numpy.concatenate(tags) if tags else numpy.zeros((0,), dtype=numpy.uint64))
        if self.reverse <= 0:
            return
        parser = self.parser
        model = self.new_reverse_model(parser.model.weights.n_classes)
        if parser.cfg["min_feature_freq"] > 1:
            counting = ArcStandardSystem(model.templates, model.weights, len(parser.cfg["labels"]),
                                         parser.cfg["label_candidates"], parser.transition_system)
            model.allowed_keys = parser._gold_features(get_examples, parser.cfg["min_feature_freq"],
                                                       counting, reverse=True)
        self.reverse_model = model

    def reverse_system(self):
        """This thread's transition system over the reversed model's weights, with its feature
        filter (initialize)."""
        from .._core.arcstandard import ArcStandardSystem

        n_classes = self.parser.model.weights.n_classes
        if self.reverse_model is None or self.reverse_model.weights.n_classes != n_classes:
            self.reverse_model = self.new_reverse_model(n_classes)
        weights = self.reverse_model.weights
        extra = self.parser._thread_extra()
        system = extra.get("reverse_system")
        if system is None or system.weights is not weights:
            system = ArcStandardSystem(self.reverse_model.templates, weights, len(self.parser.cfg["labels"]),
                                       self.parser.cfg["label_candidates"], self.parser.transition_system)
            system.set_allowed_keys(self.reverse_model.allowed_keys)
            extra["reverse_system"] = system
        return system

    def train_reverse(self, atoms, spans, allow_break: bool, golds) -> None:
        """One beam update of the reversed model per span with a complete gold tree."""
        system = self.reverse_system()
        system.weights.set_use_averages(False)
        for (start, end), (gold_heads, gold_labels) in zip(spans, golds):
            if not len(gold_heads) or (gold_heads == -2).any():
                continue   # the beam needs a whole derivation; a partial tree is left out
            heads, labels = reverse_tree((gold_heads, gold_labels))
            system.set_sentence(numpy.ascontiguousarray(atoms[start:end][::-1]), heads.astype(numpy.int32),
                                labels.astype(numpy.int32), allow_break)
            if system.oracle_path() is not None:
                beam.train(system, self.parser.cfg["beam_width"], self.parser.cfg["update"])
        system.weights.next_example()

    # The graph model -----------------------------------------------------------------------

    def train_graph(self, key: int, doc, spans, golds) -> None:
        """One perceptron step of the graph model per span with a complete gold tree, on the
        first `graph_epochs` visits of the example (`key`: its text's checksum and length, so
        copies of one sentence share their visits); words and tags are `doc`'s (the tags the
        parser trains with)."""
        seen = self.graph_seen.get(key, 0)
        if seen >= self.block["graph_epochs"]:
            return
        self.graph_seen[key] = seen + 1
        if self.graph_model is None:
            self.graph_model = GraphScorer(order=2)
        kept = [(a, b, g[0]) for (a, b), g in zip(spans, golds) if b > a and not (g[0] == -2).any()]
        if not kept:
            return
        words, tags = doc.to_array("LOWER"), doc.to_array("TAG")
        index = numpy.concatenate([numpy.arange(a, b) for a, b, _ in kept])
        ptr = numpy.concatenate([[0], numpy.cumsum([b - a for a, b, _ in kept])])
        self.graph_model.train_online(words[index], tags[index], ptr,
                                      numpy.concatenate([h for _, _, h in kept]))

    # Rescoring by other models -----------------------------------------------------------------

    def rescored(self, words, tags, atoms, allow_break: bool, cands: Sequence[Candidate], k: int,
                 width: int) -> Tuple[List[Tuple[numpy.ndarray, numpy.ndarray]], numpy.ndarray]:
        """The trees of one span to choose from and their scores, one column per model: the
        forward parser's, the reversed model's (0 without one) and the graph model's (0 without
        one). The trees are the forward k best, then (with "union") the reversed model's k best
        that are new. A tree's score under a transition model is the one its beam gave it when
        the beam found it, else its canonical path's (reverse.TreeScorer.score), so each model
        scores only the other's trees; the graph model scores every tree."""
        trees = [(h, c) for _, h, c in cands]
        base = [score for score, _, _ in cands]
        reverse = numpy.zeros((len(trees),))
        if self.reverse > 0:
            reverse = self._reverse_scores(atoms, allow_break, trees, base, k, width)
        graph = numpy.zeros((len(trees),))
        if self.graph > 0 and self.graph_model is not None:
            graph = self.graph_model.score_span(words, tags, [h for h, _ in trees])
        return trees, numpy.stack([numpy.asarray(base, dtype=numpy.float64), reverse, graph], axis=1)

    def _reverse_scores(self, atoms, allow_break: bool, trees: List[Tuple[numpy.ndarray, numpy.ndarray]],
                        base: List[float], k: int, width: int) -> numpy.ndarray:
        """The reversed model's scores of `trees`; with "union" its own k best that are new are
        appended to `trees` first (and their forward scores to `base`)."""
        root = len(self.parser.cfg["labels"])
        system = self.reverse_system()
        system.weights.set_use_averages(True)
        ratoms = numpy.ascontiguousarray(atoms[::-1])
        found: Dict[bytes, float] = {}   # the reversed beam's scores of its trees
        if self.block.get("union"):
            index = {h.tobytes() + c.tobytes(): i for i, (h, c) in enumerate(trees)}
            added = []
            for score, h, c in self.parser._span_kbest(system, ratoms, allow_break, k, width):
                h, c = reverse_tree((h, c))
                c = numpy.where(h >= 0, c, root)
                key = h.tobytes() + c.tobytes()
                found.setdefault(key, score)
                if key not in index:
                    index[key] = len(trees)
                    trees.append((h, c))
                    added.append((h, c))
            base.extend(path_scores(self.parser.system, atoms, added, allow_break))
        todo = [i for i, (h, c) in enumerate(trees) if h.tobytes() + c.tobytes() not in found]
        reverse = numpy.array([found.get(h.tobytes() + c.tobytes(), 0.0) for h, c in trees])
        reverse[todo] = path_scores(system, ratoms, [reverse_tree(trees[i]) for i in todo], allow_break)
        return reverse

    def rescoring_weights(self) -> numpy.ndarray:
        """The weights of `rescored`'s columns: 1, reverse, graph."""
        return numpy.array([1.0, self.reverse, self.graph])

    def totals(self, scores: numpy.ndarray) -> numpy.ndarray:
        """The weighted sums of `rescored`'s scores (-inf for a tree a weighted model cannot
        score)."""
        with numpy.errstate(invalid="ignore"):   # 0 x -inf: a tree one model cannot score
            total = scores @ self.rescoring_weights()
        return numpy.where(numpy.isnan(total), -numpy.inf, total)

    def choose(self, trees, scores: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The tree of `rescored` with the best weighted sum of its scores."""
        return trees[int(numpy.argmax(self.totals(scores)))]

    def rescored_choice(self, doc, atoms, spans, allow_break) -> List[Tuple[numpy.ndarray, numpy.ndarray]]:
        """Per span, the tree with the best weighted sum of `rescored`'s scores, over the doc's
        tags and (block "tag_flips" > 0) over tag variants too: the span's tags with one of its
        `tag_flips` least certain tokens (smallest margin in the tagger's alternatives) given
        its runner-up tag, whose trees pay `tag_weight` x that margin. Only the trees change:
        the doc keeps its tags."""
        parser = self.parser
        k = self.block["k"]
        width = max(k, parser.cfg["beam_width"])
        words, tags = doc.to_array("LOWER"), doc.to_array("TAG")
        alternatives = self.tag_alternatives(doc, tags) if self.block["tag_flips"] > 0 else None
        out = []
        for a, b in spans:
            best, chosen = -numpy.inf, None
            for span_tags, span_atoms, cost, _ in self.tag_variants(tags[a:b], atoms[a:b], alternatives, a):
                cands = parser._span_kbest(parser.system, span_atoms, allow_break, k, width)
                trees, scores = self.rescored(words[a:b], span_tags, span_atoms, allow_break, cands, k, width)
                total = self.totals(scores) - self.block["tag_weight"] * cost
                j = int(numpy.argmax(total))
                if chosen is None or total[j] > best:
                    best, chosen = total[j], trees[j]
            out.append(chosen)
        return out

    @staticmethod
    def tag_alternatives(doc, tags: numpy.ndarray) -> Optional[Tuple[numpy.ndarray, numpy.ndarray]]:
        """(runner-up tags, margins) of the doc's tokens from a structperc_tagger with
        `alternatives` (its doc.user_data entry), with no alternative (0, inf) where the doc's
        tag is no longer the one the tagger wrote; None when the doc has no such entry for its
        tokens (the tags are then parsed as they are)."""
        entry = doc.user_data.get(TAG_ALTERNATIVES)
        n = len(doc)
        if not isinstance(entry, dict) or any(len(entry.get(x, ())) != n for x in ("tags", "second", "margin")):
            return None
        second = numpy.asarray(entry["second"], dtype=numpy.uint64)
        margin = numpy.asarray(entry["margin"], dtype=numpy.float64)
        same = numpy.asarray(entry["tags"], dtype=numpy.uint64) == tags.astype(numpy.uint64)
        return numpy.where(same, second, 0).astype(numpy.uint64), numpy.where(same, margin, numpy.inf)

    def tag_variants(self, tags, atoms, alternatives, start: int, flips: Optional[int] = None):
        """(tags, atoms, cost, rank) of a span (`start`: its offset in the doc's alternatives): as
        they are (cost 0, rank 0), then, for the `flips` (default the block's tag_flips) tokens
        of smallest margin, ranked 1, 2, ... by margin, the span with that token given its
        runner-up tag, cost its margin (a token without a runner-up gives no variant)."""
        yield tags, atoms, 0.0, 0
        if alternatives is None:
            return
        second, margin = alternatives[0][start:start + len(tags)], alternatives[1][start:start + len(tags)]
        columns = [i for i, name in enumerate(self.parser.model.atom_names) if name == "tag"]
        order = numpy.argsort(margin, kind="stable")[:self.block["tag_flips"] if flips is None else flips]
        for rank, j in enumerate(order.tolist(), 1):
            if not numpy.isfinite(margin[j]) or second[j] == 0:
                continue
            flipped_tags = numpy.array(tags, dtype=numpy.uint64)
            flipped_tags[j] = second[j]
            flipped = atoms.copy()
            flipped[j, columns] = second[j]
            yield flipped_tags, flipped, float(margin[j]), rank

    # Candidates as lists -----------------------------------------------------------------------

    def candidate_lists(self, doc, spans: Sequence[Tuple[int, int]],
                        all_cands: Sequence[Sequence[Candidate]], golds=None) -> CandidateLists:
        """The candidates of each span as CandidateLists: base scores, global features (C),
        the trees when the learner is the tree kernel, and the loss (wrong heads + wrong labelled
        arcs among the known gold ones) when golds are given."""
        words = doc.to_array("LOWER").astype(numpy.uint64)
        tags = doc.to_array("TAG").astype(numpy.uint64)
        values = self.parser._label_values
        offsets, base, loss, key_ptr, keys = [0], [], [], [numpy.zeros((1,), dtype=numpy.int64)], []
        tree_ptr, tree_heads, tree_nodes = [0], [], []
        n_keys = 0
        for s, ((start, end), cands) in enumerate(zip(spans, all_cands)):
            H = numpy.stack([h for _, h, _ in cands])
            C = numpy.stack([c for _, _, c in cands])
            L = values[C]
            ptr, kk = self.features.batch(words[start:end], tags[start:end], H, L)
            key_ptr.append(ptr[1:] + n_keys)
            n_keys += len(kk)
            keys.append(kk)
            base.extend(score for score, _, _ in cands)
            offsets.append(offsets[-1] + len(cands))
            if golds is not None:
                gold_heads, gold_labels = golds[s]
                known = gold_heads > -2
                wrong_head = (H != gold_heads[None, :]) & known
                wrong_label = wrong_head | ((C != gold_labels[None, :]) & (gold_labels >= 0) & (H >= 0))
                loss.extend((wrong_head.sum(axis=1) + (wrong_label & known).sum(axis=1)).tolist())
            else:
                loss.extend([numpy.nan] * len(cands))
            if self.needs_trees:
                for i in range(len(cands)):
                    tree_heads.append(H[i])
                    tree_nodes.append(node_labels(tags[start:end], L[i]))
                    tree_ptr.append(tree_ptr[-1] + (end - start))
        cat = lambda xs, dt: numpy.concatenate(xs).astype(dt) if xs else numpy.zeros((0,), dtype=dt)
        lists = CandidateLists(offsets, base, loss, numpy.concatenate(key_ptr), cat(keys, numpy.uint64))
        if self.needs_trees:
            lists.tree_ptr = numpy.asarray(tree_ptr, dtype=numpy.int64)
            lists.heads = cat(tree_heads, numpy.int32)
            lists.nodes = cat(tree_nodes, numpy.uint64)
        return lists

    # Fitting and prediction --------------------------------------------------------------------

    def fit_if_stale(self) -> None:
        if self.fit_version == self.store_version or not self.store or not self.learns:
            return
        lists = CandidateLists.concat([self.store[k] for k in sorted(self.store)])
        self.model = fit_block(self.block, lists)
        self.fit_version = self.store_version

    def rerank(self, doc, atoms, spans, allow_break) -> List[Tuple[numpy.ndarray, numpy.ndarray]]:
        """Per span, the (heads, classes) of the reranker's choice among the k-best (the beam's
        1-best while no reranker is trained)."""
        self.fit_if_stale()
        parser = self.parser
        system = parser.system
        k = self.block["k"]
        width = max(k, parser.cfg["beam_width"])
        if self.rescores:
            return self.rescored_choice(doc, atoms, spans, allow_break)
        all_cands = [parser._span_kbest(system, atoms[a:b], allow_break, k, width) for a, b in spans]
        if self.model is None:
            return [(c[0][1], c[0][2]) for c in all_cands]
        lists = self.candidate_lists(doc, spans, all_cands)
        rows = self.model.choose(lists)
        return [c[int(rows[i] - lists.offsets[i])][1:] for i, c in enumerate(all_cands)]

    # Serialization -----------------------------------------------------------------------------
    # to_bytes is the saved form (the fitted learner, the reversed and graph models' averaged
    # weights). Pickle carries the training state instead (training_state), so that training
    # continued on a copy equals training continued on the original: the fold models and what
    # they saw, the stored lists and their versions, the reversed and graph models' training
    # weights and the graph model's visit counts. Only the thread's decoding systems are rebuilt.

    TRAINING_STATE = ("model", "fold_weights", "fold_seen", "store", "store_version", "fit_version",
                      "reverse_model", "graph_model", "graph_seen")

    def training_state(self) -> Dict[str, Any]:
        """Everything training has built, for pickle (see above)."""
        return {key: getattr(self, key) for key in self.TRAINING_STATE}

    def set_training_state(self, state: Dict[str, Any]) -> None:
        for key in self.TRAINING_STATE:
            setattr(self, key, state[key])
        self.fold_systems = []   # rebuilt over the fold weights on first use

    def to_bytes(self) -> bytes:
        self.fit_if_stale()
        reverse = graph = b""
        # a model is saved while it exists, weighted or not: configure_reranker can set its
        # weight to 0 and back again
        if self.reverse_model is not None:
            reverse = self.reverse_model.to_bytes(f"{self.parser.name} (reversed)")
        if self.graph_model is not None:
            m = self.parser.model   # saved as the parser's and the reversed model's weights are
            graph = self.graph_model.to_bytes(self.parser.name, m.precision, m.prune_below)
        return dumps_state(self.model, reverse, graph)

    def from_bytes(self, data: bytes) -> None:
        self.take(self.stage(data))

    def stage(self, data: bytes, what: str = "file"):
        """The loaded state of saved bytes, every check done (S254, S248, S246, and the reversed
        and graph models' own), nothing changed yet: (learner or None, parsed reversed model or
        None, graph model or None)."""
        name = self.parser.name
        model, reverse, graph = loads_state(data, name, what)
        parsed = self.new_reverse_model().parse_bytes(reverse, f"{name} (reversed)") if reverse else None
        return model, parsed, GraphScorer.from_bytes(graph, name) if graph else None

    def take(self, staged) -> None:
        """Use a staged state (stage; None: nothing fitted) as the fitted one."""
        model, parsed, graph = staged if staged is not None else (None, None, None)
        self.model = model
        self.graph_model = graph
        self.fit_version = self.store_version
        if parsed is not None:
            self.reverse_model = self.new_reverse_model()
            self.reverse_model.apply(parsed)
