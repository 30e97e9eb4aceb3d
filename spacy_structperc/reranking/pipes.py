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
"""
import hashlib
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
import srsly

from .._core import beam
from ..errors import Errors
from .features import FEATURES_VERSION, TreeFeatures, node_labels
from .learners import CandidateLists, make_reranker, reranker_from_dict
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
# before the checksum) still loads; a damaged magic makes it neither, and it is refused.
MAGIC = b"SPRR\x02"
DIGEST_SIZE = 16


def dumps_model(model) -> bytes:
    """A fitted learner as checksummed bytes (b"" for none), tagged with its feature definition."""
    if model is None:
        return b""
    payload = srsly.msgpack_dumps({**model.to_dict(), "features_version": FEATURES_VERSION})
    return MAGIC + hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload


def loads_model(data: bytes, name: str):
    """The learner of dumps_model (None for empty bytes). S248 for damaged bytes, S246 for
    another feature definition; any other failure to rebuild the learner is S006."""
    if not data:
        return None
    data = bytes(data)
    if data.startswith(MAGIC):
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


# The saved reranker with a reversed model (block "reverse" > 0): STATE_MAGIC, a blake2b-128 of
# the payload, then the payload: msgpack of {"learner": dumps_model bytes, "reverse": the
# reversed ParserModel's own bytes (checksummed too)}. Without a reversed model the learner's
# bytes are saved alone, as before.
STATE_MAGIC = b"SPRS\x01"


def dumps_state(model, reverse_bytes: bytes) -> bytes:
    """The saved reranker: the learner (dumps_model), and the reversed model's bytes if any."""
    if not reverse_bytes:
        return dumps_model(model)
    payload = srsly.msgpack_dumps({"learner": dumps_model(model), "reverse": reverse_bytes})
    return STATE_MAGIC + hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload


def loads_state(data: bytes, name: str) -> Tuple[Any, bytes]:
    """(learner or None, reversed model bytes or b"") of dumps_state; S248 for damaged bytes."""
    data = bytes(data or b"")
    if not data.startswith(STATE_MAGIC):
        return loads_model(data, name), b""
    digest, payload = data[len(STATE_MAGIC):len(STATE_MAGIC) + DIGEST_SIZE], data[len(STATE_MAGIC) + DIGEST_SIZE:]
    if hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() != digest:
        raise ValueError(Errors.S248.format(name=name))
    try:
        msg = srsly.msgpack_loads(payload)
        learner, reverse = msg["learner"], msg["reverse"]
    except Exception:
        raise ValueError(Errors.S248.format(name=name)) from None
    if not isinstance(learner, bytes) or not isinstance(reverse, bytes):
        raise ValueError(Errors.S248.format(name=name))
    return loads_model(learner, name), reverse


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

    @property
    def reverse(self) -> float:
        return float(self.block.get("reverse", 0.0))

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
                                           parser.cfg["label_candidates"])
                system.set_allowed_keys(parser.model.allowed_keys)
                self.fold_systems.append(system)
        return self.fold_systems[f]

    def collect(self, eg, doc_for_features, atoms, spans, allow_break, heads, deps) -> None:
        """Jackknifed training lists of one example; updates the fold models outside its fold
        (and the reversed model, with one)."""
        if self.reverse > 0:
            self.train_reverse(atoms, spans, allow_break, [self.parser._gold(eg, a, b, heads, deps)
                                                           for a, b in spans])
        if not self.learns:
            return
        parser = self.parser
        f = self.fold_of(eg.predicted)
        key = zlib.crc32(eg.predicted.text.encode("utf8")) * 1000003 + len(eg.predicted)
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
        model.lexicon_tables = m.lexicon_tables
        model.set_templates(m.template_specs)
        if n_classes is not None:
            model.weights = AveragedWeights(n_classes, 1 << 16)
        return model

    def initialize(self, get_examples) -> None:
        """A fresh reversed model (block "reverse" > 0) for the parser's labels, with the
        parser's feature filter (min_feature_freq) counted on the reversed training trees."""
        from .._core.arcstandard import ArcStandardSystem

        self.reverse_model = None
        if self.reverse <= 0:
            return
        parser = self.parser
        model = self.new_reverse_model(parser.model.weights.n_classes)
        if parser.cfg["min_feature_freq"] > 1:
            counting = ArcStandardSystem(model.templates, model.weights, len(parser.cfg["labels"]),
                                         parser.cfg["label_candidates"])
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
                                       self.parser.cfg["label_candidates"])
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

    def bidirectional(self, atoms, allow_break: bool, cands: Sequence[Candidate], k: int,
                      width: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """The candidate with the best base + reverse x reversed score (with "union", among the
        forward and the reversed model's k best): (heads, classes). A tree's score under a model
        is the one that model's beam gave it when the beam found it, else its canonical path's
        (reverse.TreeScorer.score), so each model scores only the other's trees."""
        root = len(self.parser.cfg["labels"])
        system = self.reverse_system()
        system.weights.set_use_averages(True)
        ratoms = numpy.ascontiguousarray(atoms[::-1])
        trees = [(h, c) for _, h, c in cands]
        base = [score for score, _, _ in cands]
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
        return trees[int(numpy.argmax(numpy.asarray(base) + self.reverse * reverse))]

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
        all_cands = [parser._span_kbest(system, atoms[a:b], allow_break, k, width) for a, b in spans]
        if self.reverse > 0:
            return [self.bidirectional(atoms[a:b], allow_break, c, k, width) for (a, b), c in zip(spans, all_cands)]
        if self.model is None:
            return [(c[0][1], c[0][2]) for c in all_cands]
        lists = self.candidate_lists(doc, spans, all_cands)
        rows = self.model.choose(lists)
        return [c[int(rows[i] - lists.offsets[i])][1:] for i, c in enumerate(all_cands)]

    # Serialization -----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        self.fit_if_stale()
        reverse = b""
        if self.reverse > 0 and self.reverse_model is not None:
            reverse = self.reverse_model.to_bytes(f"{self.parser.name} (reversed)")
        return dumps_state(self.model, reverse)

    def from_bytes(self, data: bytes) -> None:
        self.take(self.stage(data))

    def stage(self, data: bytes):
        """The loaded state of saved bytes, every check done (S248, S246, and the reversed
        model's own), nothing changed yet: (learner or None, parsed reversed model or None)."""
        model, reverse = loads_state(data, self.parser.name)
        parsed = self.new_reverse_model().parse_bytes(reverse, f"{self.parser.name} (reversed)") if reverse else None
        return model, parsed

    def take(self, staged) -> None:
        """Use a staged state (stage; None: nothing fitted) as the fitted one."""
        model, parsed = staged if staged is not None else (None, None)
        self.model = model
        self.fit_version = self.store_version
        if parsed is not None:
            self.reverse_model = self.new_reverse_model()
            self.reverse_model.apply(parsed)
