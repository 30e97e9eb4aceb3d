"""The perceptron "model" a component holds: templates, atom extraction and averaged weights.

It stands where a thinc Model would, so spaCy's training loop and serialization find a `model`
attribute, but it has no thinc parameters: averaging happens inside `AveragedWeights`.
"""
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy
import srsly

from ._core.templates import TemplateSet
from ._core.weights import AveragedWeights
from .errors import Errors
from .features import LEXICON_POS, AtomExtractor, Lexicon, atoms_of, uses_clusters, uses_lexicon

FORMAT_VERSION = 1
MODEL_KIND = "spacy-structperc.AveragedPerceptron"


class PerceptronModel:
    def __init__(self, templates: Sequence[dict], n_buckets: int = 1 << 20):
        if n_buckets < 1:
            raise ValueError(Errors.S012.format(setting="n_buckets", name="model",
                                                requirement="a positive integer", value=n_buckets))
        self.n_buckets = int(n_buckets)
        self.weights: Optional[AveragedWeights] = None
        # Word clusters travel with the model so a saved pipeline needs no lookup package.
        self.clusters: Dict[int, int] = {}
        # Lemmatizer tables used as a morphological lexicon (see features.Lexicon).
        self.lexicon_tables: Dict[str, Dict] = {}
        # Tag dictionary: word (orth hash) -> the classes it was seen with in training.
        self.label_dict: Dict[int, List[int]] = {}
        self.set_templates(templates)

    def set_templates(self, templates: Sequence[dict]) -> None:
        self.template_specs = [dict(name=t["name"], parts=[list(p) for p in t["parts"]],
                                    **({"tied": True} if t.get("tied") else {}))
                               for t in templates]
        self.atom_names = atoms_of(self.template_specs)
        self.templates = TemplateSet(self.template_specs, self.atom_names)
        self.atoms = self._atom_extractor()

    def _atom_extractor(self) -> AtomExtractor:
        lexicon = Lexicon(self.lexicon_tables) if self.lexicon_tables else None
        return AtomExtractor(self.atom_names, clusters=self.clusters, lexicon=lexicon)

    def load_resources(self, lang: str, component: str = "") -> None:
        """Fetch what the atoms need beyond the text (spacy-lookups-data): Brown clusters, and the
        lemmatizer tables used as a lexicon. They are saved with the model afterwards."""
        need_clusters = uses_clusters(self.atom_names) and not self.clusters
        need_lexicon = uses_lexicon(self.atom_names) and not self.lexicon_tables
        if not need_clusters and not need_lexicon:
            return
        try:
            from spacy.lookups import load_lookups
            if need_clusters:
                self.clusters = _nonzero_clusters(lang)
            if need_lexicon:
                lookups = load_lookups(lang, ["lemma_index", "lemma_exc", "lemma_rules"])
                index, exc = lookups.get_table("lemma_index"), lookups.get_table("lemma_exc")
                rules = lookups.get_table("lemma_rules")
                self.lexicon_tables = {
                    "index": {pos: sorted(index.get(pos, [])) for pos in LEXICON_POS},
                    "exc": {pos: sorted(exc.get(pos, {})) for pos in LEXICON_POS},
                    "rules": {pos: [list(r) for r in rules.get(pos, [])] for pos in LEXICON_POS},
                }
        except Exception as e:
            raise ValueError(Errors.S014.format(name=component, lang=lang, reason=f"{type(e).__name__}: {e}")) from None
        self.atoms = self._atom_extractor()

    @property
    def is_initialized(self) -> bool:
        return self.weights is not None

    def initialize(self, n_classes: int) -> None:
        self.weights = AveragedWeights(n_classes, self.n_buckets)

    def resize(self, n_classes: int) -> None:
        if self.weights is None:
            return
        self.weights.resize(n_classes)

    def to_bytes(self, component: str = "") -> bytes:
        msg = {"kind": MODEL_KIND, "format_version": FORMAT_VERSION,
               "templates": self.template_specs, "atoms": self.atom_names,
               "n_buckets": self.n_buckets, "n_classes": 0, "n_rows": 0,
               "keys": b"", "weights": b"", "cluster_keys": b"", "cluster_values": b""}
        if self.clusters:
            ckeys = numpy.array(sorted(self.clusters), dtype="<u8")
            msg["cluster_keys"] = ckeys.tobytes()
            msg["cluster_values"] = numpy.array([self.clusters[k] for k in ckeys.tolist()], dtype="<u8").tobytes()
        if self.weights is not None:
            keys, weights = self.weights.to_arrays(averaged=True, prune=True)
            # One copy of the weights in bytes, and the array dropped before msgpack makes its own:
            # a parser's weights are hundreds of MB, saved at every evaluation.
            weight_bytes = weights.astype("<f4", copy=False).tobytes()
            del weights
            msg.update(n_classes=int(self.weights.n_classes), n_rows=int(len(keys)),
                       keys=keys.astype("<u8", copy=False).tobytes(), weights=weight_bytes)
        msg["label_dict"] = [[k, v] for k, v in sorted(self.label_dict.items())]
        msg["lexicon"] = self.lexicon_tables
        return srsly.msgpack_dumps(msg)

    def from_bytes(self, data: bytes, component: str = "") -> "PerceptronModel":
        try:
            msg = srsly.msgpack_loads(data)
        except Exception as e:  # msgpack raises several unrelated types on garbage
            raise ValueError(Errors.S006.format(name=component, reason=f"not msgpack ({type(e).__name__})")) from None
        if not isinstance(msg, dict) or msg.get("kind") != MODEL_KIND:
            raise ValueError(Errors.S006.format(name=component, reason="no spacy-structperc weights header"))
        version = msg.get("format_version")
        if not isinstance(version, int):
            raise ValueError(Errors.S006.format(name=component, reason="missing format version"))
        if version > FORMAT_VERSION:
            raise ValueError(Errors.S007.format(name=component, found=version, supported=FORMAT_VERSION))
        try:
            n_classes, n_rows = int(msg["n_classes"]), int(msg["n_rows"])
            keys = numpy.frombuffer(msg["keys"], dtype="<u8")
            weights = numpy.frombuffer(msg["weights"], dtype="<f4")
            if n_classes < 0 or len(keys) != n_rows or len(weights) != n_rows * n_classes:
                raise ValueError("array sizes do not match their header")
            self.n_buckets = int(msg.get("n_buckets", self.n_buckets))
            ckeys = numpy.frombuffer(msg.get("cluster_keys", b""), dtype="<u8")
            cvalues = numpy.frombuffer(msg.get("cluster_values", b""), dtype="<u8")
            if len(ckeys) != len(cvalues):
                raise ValueError("cluster table sizes do not match")
            self.clusters = dict(zip(ckeys.tolist(), cvalues.tolist()))
            self.label_dict = {int(k): [int(c) for c in v] for k, v in msg.get("label_dict", [])}
            self.lexicon_tables = dict(msg.get("lexicon") or {})
            if any(c < 0 or c >= n_classes for v in self.label_dict.values() for c in v):
                raise ValueError("tag dictionary refers to classes the weights do not have")
            self.set_templates(msg["templates"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(Errors.S006.format(name=component, reason=str(e))) from None
        if n_classes == 0:
            self.weights = None
        else:
            self.weights = AveragedWeights(n_classes, max(self.n_buckets, 2 * n_rows))
            self.weights.load_arrays(keys.astype(numpy.uint64), weights.reshape((n_rows, n_classes)).astype(numpy.float32))
        return self

    def __reduce__(self):
        # Pickling (nlp.pipe with n_process > 1 under spawn) keeps the full training state.
        return (_rebuild_model, (self.template_specs, self.n_buckets, self.weights, self.clusters,
                                 self.label_dict, self.lexicon_tables))


@lru_cache(maxsize=2)
def _nonzero_clusters(lang: str) -> Dict[int, int]:
    """word hash -> Brown cluster, for the ~190k English words that have one.

    Read straight from spacy-lookups-data's file, dropping zeros while parsing: building spaCy's
    Table of all 1M entries first costs ~300 MB of peak memory for nothing. Cached: parsing
    takes ~1.5 s, and the chunker's default features read it at every initialize. Nothing
    writes to the table (from_bytes replaces a model's dict rather than filling it).
    """
    import gzip
    import json
    from spacy.strings import hash_string
    from spacy.util import registry

    tables = registry.lookups.get(lang)
    if "lexeme_cluster" not in tables:
        raise ValueError(f"spacy-lookups-data has no lexeme_cluster table for '{lang}'")

    def keep(pairs):
        return {hash_string(word): value for word, value in pairs if value}

    path = Path(tables["lexeme_cluster"])
    if path.exists():   # spaCy's registry names the .json; the package ships .json.gz
        with path.open(encoding="utf8") as f:
            return json.load(f, object_pairs_hook=keep)
    with gzip.open(path.with_suffix(path.suffix + ".gz"), "rt", encoding="utf8") as f:
        return json.load(f, object_pairs_hook=keep)


def _rebuild_model(templates: List[dict], n_buckets: int, weights: Optional[AveragedWeights],
                   clusters: Dict[int, int], label_dict: Dict[int, List[int]], lexicon_tables: Dict):
    model = PerceptronModel(templates, n_buckets)
    model.clusters = clusters
    model.label_dict = label_dict
    model.lexicon_tables = lexicon_tables
    model.set_templates(templates)
    model.weights = weights
    return model
