"""The perceptron "model" a component holds: templates, atom extraction and averaged weights.

It stands where a thinc Model would, so spaCy's training loop and serialization find a `model`
attribute, but it has no thinc parameters: averaging happens inside `AveragedWeights`.
"""
import hashlib
import io
import re
import struct
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import numpy
import srsly
from spacy.util import registry
from srsly.msgpack import Packer

from ._core.templates import TemplateSet
from ._core.weights import PRECISIONS, AveragedWeights, sparse_rows
from .atoms import (LEXICON_POS, AtomExtractor, CasingTable, Lexicon, atoms_of, casing_code, casing_key,
                    uses_casing, uses_clusters, uses_lexicon)
from .errors import Errors

# Version 2 closes the map with a checksum of everything before it (see _checksum_tail); version
# 1 files, written before it existed, still load. Version 3 stores the rows in the model's
# precision ("precision": float32, float16, or int8 with a float32 "scales" entry, one per row),
# keys strictly ascending, and loads them in place (AveragedWeights.load_frozen); versions 1 and
# 2 (float32 rows) load the same way.
FORMAT_VERSION = 3
OLDEST_FORMAT_VERSION = 1
MODEL_KIND = "spacy-structperc.AveragedPerceptron"
CHECKSUM_KEY = "checksum"
DIGEST_SIZE = 16
WRITE_ROWS = 1 << 14   # weight rows gathered per slice when writing a model

# The model size settings' defaults, chosen on UD English EWT dev (benchmarks/results/size_tuning.json).
PRECISION = "float16"
PRUNE_BELOW = 0.0


def _bin_header(n_bytes: int) -> bytes:
    """msgpack's header for a bin of n_bytes (the Packer only writes whole objects)."""
    if n_bytes < 1 << 8:
        return struct.pack(">BB", 0xC4, n_bytes)
    if n_bytes < 1 << 16:
        return struct.pack(">BH", 0xC5, n_bytes)
    if n_bytes < 1 << 32:
        return struct.pack(">BI", 0xC6, n_bytes)
    raise ValueError(f"a model of {n_bytes} bytes of weights is beyond msgpack's 4 GB bin limit")


def _checksum_tail(digest: bytes) -> bytes:
    """The last entry of a version-2 model map: "checksum" -> blake2b of the bytes before it."""
    packer = Packer(use_bin_type=True)
    return packer.pack(CHECKSUM_KEY) + packer.pack(digest)


_TAIL_PREFIX = _checksum_tail(bytes(DIGEST_SIZE))[:-DIGEST_SIZE]
_TAIL_SIZE = len(_TAIL_PREFIX) + DIGEST_SIZE


def _verify_checksum(data, component: str) -> bool:
    """Whether `data` ends with a checksum entry (False: none, a version-1 file); raises S120
    when the checksum does not match the bytes before it."""
    view = memoryview(data)
    if len(view) < _TAIL_SIZE or bytes(view[-_TAIL_SIZE:-DIGEST_SIZE]) != _TAIL_PREFIX:
        return False
    digest = hashlib.blake2b(view[:-_TAIL_SIZE], digest_size=DIGEST_SIZE).digest()
    if digest != bytes(view[-DIGEST_SIZE:]):
        raise ValueError(Errors.S120.format(name=component))
    return True


def pack_model_msg(msg: dict) -> bytes:
    """A model map (as msgpack_loads gives it) written back with a valid checksum: what a
    writer that got the contents wrong would produce. For tests of the checks behind the
    checksum."""
    body = {k: v for k, v in msg.items() if k != CHECKSUM_KEY}
    packer = Packer(use_bin_type=True)
    payload = packer.pack_map_header(len(body) + 1) + b"".join(
        packer.pack(k) + packer.pack(v) for k, v in body.items())
    return payload + _checksum_tail(hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest())


def _field(msg: dict, key: str, kind, default=None):
    """msg[key], checked to be of type `kind`; a coded reason names the field otherwise."""
    value = msg.get(key, default)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ValueError(f"the field '{key}' is missing or damaged")
    return value


def check_header(msg, kind: str, supported: int, component: str, what: str, oldest: int = 1) -> None:
    """A saved model's msgpack map must name its kind and a format version this code reads."""
    if not isinstance(msg, dict) or msg.get("kind") != kind:
        raise ValueError(Errors.S006.format(name=component, reason=f"no spacy-structperc {what} header"))
    version = msg.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(Errors.S006.format(name=component, reason="missing format version"))
    if version > supported:
        raise ValueError(Errors.S007.format(name=component, found=version, supported=supported))
    if version < oldest:
        raise ValueError(Errors.S126.format(name=component, found=version, oldest=oldest, supported=supported))


def check_size_settings(precision: str, prune_below: float) -> None:
    """The model's size settings: a precision of PRECISIONS and a pruning threshold >= 0."""
    if precision not in PRECISIONS:
        raise ValueError(Errors.S008.format(setting="precision", value=precision, name="model",
                                            options=", ".join(PRECISIONS)))
    if isinstance(prune_below, bool) or not isinstance(prune_below, (int, float)) or not prune_below >= 0:
        raise ValueError(Errors.S012.format(setting="prune_below", name="model",
                                            requirement="a number >= 0", value=prune_below))


class PerceptronModel:
    def __init__(self, templates: Sequence[dict], n_buckets: int = 1 << 20, precision: str = "float32",
                 prune_below: float = 0.0):
        if n_buckets < 1:
            raise ValueError(Errors.S012.format(setting="n_buckets", name="model",
                                                requirement="a positive integer", value=n_buckets))
        check_size_settings(precision, prune_below)
        self.n_buckets = int(n_buckets)
        # How the weights are saved: rows whose averaged weights are all within prune_below of
        # zero are left out, the rest stored in `precision` (and read in it after loading).
        self.precision = precision
        self.prune_below = float(prune_below)
        self.weights: Optional[AveragedWeights] = None
        # Word clusters travel with the model so a saved pipeline needs no lookup package.
        self.clusters: Dict[int, int] = {}
        # How words are cased and how frequent they are in general text (atoms.CASING_ATOMS).
        self.casing: Optional[CasingTable] = None
        # Lemmatizer tables used as a morphological lexicon (see features.Lexicon).
        self.lexicon_tables: Dict[str, Dict] = {}
        # Tag dictionary: word (orth hash) -> the classes it was seen with in training.
        self.label_dict: Dict[int, List[int]] = {}
        # Feature keys updates may touch (None: all), part of the training state: the parser's
        # min_feature_freq filter. Saved and pickled with the weights.
        self.allowed_keys: Optional[numpy.ndarray] = None
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
        return AtomExtractor(self.atom_names, clusters=self.clusters, lexicon=lexicon, casing=self.casing)

    def load_resources(self, lang: str, component: str = "") -> None:
        """Fetch what the atoms need beyond the text (spacy-lookups-data): Brown clusters, word
        frequencies by case, and the lemmatizer tables used as a lexicon. They are saved with the
        model afterwards."""
        need_clusters = uses_clusters(self.atom_names) and not self.clusters
        need_casing = uses_casing(self.atom_names) and self.casing is None
        need_lexicon = uses_lexicon(self.atom_names) and not self.lexicon_tables
        if not need_clusters and not need_casing and not need_lexicon:
            return
        what, setting = (("Brown clusters", "clusters") if need_clusters else
                         ("word frequencies", "casing") if need_casing else ("lemmatizer tables", "lexicon"))
        require_lookups_data(component, what, f"model.features.{setting} = false")
        try:
            from spacy.lookups import load_lookups
            if need_clusters:
                self.clusters = _nonzero_clusters(lang)
            if need_casing:
                self.casing = _casing_table(lang)
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
            raise ValueError(Errors.S014.format(name=component, lang=lang, what=what, setting=setting,
                                                reason=f"{type(e).__name__}: {e}")) from None
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
        out = io.BytesIO()
        for chunk in self._packed(component):
            out.write(chunk)
        return out.getvalue()

    def to_file(self, path, component: str = "") -> None:
        """Write `to_bytes()` to a file a slice of weights at a time: saving a parser (hundreds
        of MB of weights, saved at every evaluation of a training run) costs no copy of them."""
        with Path(path).open("wb") as file_:
            for chunk in self._packed(component):
                file_.write(chunk)

    def _packed(self, component: str = "") -> Iterator[bytes]:
        """The model as one msgpack map, in pieces; the weights are gathered (averaged) from the
        training state in slices, in ascending key order so identical models give identical bytes.
        The last entry is a checksum of all bytes before it."""
        hasher = hashlib.blake2b(digest_size=DIGEST_SIZE)
        for chunk in self._payload(component):
            hasher.update(chunk)
            yield chunk
        yield _checksum_tail(hasher.digest())

    def _payload(self, component: str = "") -> Iterator[bytes]:
        msg = {"kind": MODEL_KIND, "format_version": FORMAT_VERSION,
               "templates": self.template_specs, "atoms": self.atom_names,
               "n_buckets": self.n_buckets, "n_classes": 0, "n_rows": 0,
               "keys": b"", "cluster_keys": b"", "cluster_values": b"", "casing_keys": b"", "casing_codes": b""}
        if self.clusters:
            ckeys = numpy.array(sorted(self.clusters), dtype="<u8")
            msg["cluster_keys"] = ckeys.tobytes()
            msg["cluster_values"] = numpy.array([self.clusters[k] for k in ckeys.tolist()], dtype="<u8").tobytes()
        if self.casing is not None:
            msg["casing_keys"] = self.casing.keys.astype("<u4", copy=False).tobytes()
            msg["casing_codes"] = self.casing.codes.astype("u1", copy=False).tobytes()
        msg["precision"] = self.precision
        msg.update(indptr=b"", columns=b"", weights=b"", scales=b"")
        if self.weights is not None:
            keys, indptr, cols, values, scales = self._sparse_weights(component)
            msg.update(n_classes=int(self.weights.n_classes), n_rows=int(len(keys)),
                       keys=keys.astype("<u8", copy=False).tobytes(),
                       indptr=indptr.astype("<u4", copy=False).tobytes(),
                       columns=cols.astype(cols.dtype.newbyteorder("<"), copy=False).tobytes(),
                       weights=values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes(),
                       scales=b"" if scales is None else scales.astype("<f4", copy=False).tobytes())
        msg["label_dict"] = [[k, v] for k, v in sorted(self.label_dict.items())]
        msg["lexicon"] = self.lexicon_tables
        msg["allowed_keys"] = (None if self.allowed_keys is None else
                               numpy.asarray(self.allowed_keys, dtype="<u8").tobytes())
        packer = Packer(use_bin_type=True)
        yield packer.pack_map_header(len(msg) + 1)   # + checksum
        for key, value in msg.items():
            yield packer.pack(key)
            yield packer.pack(value)

    def _sparse_weights(self, component: str):
        """The averaged weights as sparse rows in the model's precision: (keys ascending, indptr,
        classes, values, scales or None), rows whose weights are all within prune_below of
        zero left out. The dense float32 rows are gathered a slice at a time (a parser's are
        hundreds of MB). Rows loaded in this precision are written as they were read, so a
        loaded model saves to the bytes it was loaded from."""
        assert self.weights is not None
        weights = self.weights
        keys, rows = weights.sorted_rows(averaged=True, prune=True, min_abs=self.prune_below)
        if weights.precision == self.precision:
            indptr, cols, values, scales = weights.frozen_arrays()
            starts = indptr[rows].astype(numpy.int64)
            counts = indptr[rows + 1].astype(numpy.int64) - starts
            ends = numpy.cumsum(counts)
            entries = numpy.repeat(starts - (ends - counts), counts) + numpy.arange(int(ends[-1]) if len(ends) else 0)
            return (keys, _indptr(counts), cols[entries], values[entries],
                    None if scales is None else scales[rows])
        parts = []
        for start in range(0, len(rows), WRITE_ROWS):
            try:
                # Rows are pruned whole (sorted_rows above); a kept row keeps every nonzero weight,
                # as a loaded row resaved in its precision does.
                parts.append(sparse_rows(weights.gather(rows[start:start + WRITE_ROWS], averaged=True),
                                         self.precision))
            except ValueError as e:
                raise ValueError(Errors.S127.format(name=component or "model", precision=self.precision,
                                                    reason=e)) from None
        if not parts:
            parts.append(sparse_rows(numpy.zeros((0, weights.n_classes), numpy.float32), self.precision))
        counts = numpy.concatenate([p[0] for p in parts])
        scales = None if self.precision != "int8" else numpy.concatenate([p[3] for p in parts])
        return (keys, _indptr(counts), numpy.concatenate([p[1] for p in parts]),
                numpy.concatenate([p[2] for p in parts]), scales)

    # Loading is parse (nothing changes; every check) then apply (nothing can fail), so a
    # damaged model leaves the component as it was.

    def from_bytes(self, data: bytes, component: str = "") -> "PerceptronModel":
        self.apply(self.parse_bytes(data, component))
        return self

    def from_file(self, path, component: str = "") -> "PerceptronModel":
        self.apply(self.parse_file(path, component))
        return self

    def parse_file(self, path, component: str = "") -> dict:
        try:
            holder = [Path(path).read_bytes()]
        except OSError as e:
            raise ValueError(Errors.S006.format(name=component, reason=f"cannot read {path} ({type(e).__name__})")) from None
        return self._parse(holder, component)

    def parse_bytes(self, data: bytes, component: str = "") -> dict:
        """Everything a model file holds, checked and decoded, without changing this model."""
        return self._parse([data], component)

    def _parse(self, holder: list, component: str) -> dict:
        # `holder` owns the file's bytes, so they can be dropped once unpacked: the unpacked
        # arrays are copies, and a parser's file is hundreds of MB.
        data = holder[0]
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(Errors.S006.format(name=component, reason=f"expected bytes, got {type(data).__name__}"))
        if not len(data):   # every model written has a header: nothing is damage, never "no model"
            raise ValueError(Errors.S128.format(name=component, what="model"))
        verified = _verify_checksum(data, component)
        try:
            msg = srsly.msgpack_loads(data)
        except Exception as e:  # msgpack raises several unrelated types on garbage
            raise ValueError(Errors.S006.format(name=component, reason=f"not msgpack ({type(e).__name__})")) from None
        del data
        holder.clear()
        return self._fields(msg, component, verified)

    def _fields(self, msg, component: str, verified: bool) -> dict:
        check_header(msg, MODEL_KIND, FORMAT_VERSION, component, "weights", OLDEST_FORMAT_VERSION)
        version = msg["format_version"]
        if version >= 2 and not verified:
            raise ValueError(Errors.S121.format(name=component))
        try:
            n_classes, n_rows = _field(msg, "n_classes", int), _field(msg, "n_rows", int)
            # Versions 1 and 2 have float32 rows and no precision entry.
            precision = _field(msg, "precision", str, "float32") if version >= 3 else "float32"
            if precision not in PRECISIONS:
                raise ValueError("the field 'precision' is missing or damaged")
            keys = numpy.frombuffer(_field(msg, "keys", bytes), dtype="<u8")
            values = numpy.frombuffer(_field(msg, "weights", bytes), dtype=numpy.dtype(precision).newbyteorder("<"))
            if n_classes < 0 or len(keys) != n_rows:
                raise ValueError("the weight arrays do not match their header")
            if n_rows > 1 and not (keys[1:] > keys[:-1]).all():
                raise ValueError("the keys are not strictly ascending")
            scales = indptr = cols = None
            if version >= 3:   # sparse rows
                indptr = numpy.frombuffer(_field(msg, "indptr", bytes), dtype="<u4")
                cols = numpy.frombuffer(_field(msg, "columns", bytes), dtype="<u2" if n_classes > 256 else "u1")
                if len(indptr) != (n_rows + 1 if n_classes else 0) or len(cols) != len(values):
                    raise ValueError("the weight arrays do not match their header")
                if precision == "int8":
                    scales = numpy.frombuffer(_field(msg, "scales", bytes), dtype="<f4")
                    if len(scales) != n_rows:
                        raise ValueError("the field 'scales' does not match the rows")
            elif len(values) != n_rows * n_classes:
                raise ValueError("the weight arrays do not match their header")
            n_buckets = _field(msg, "n_buckets", int, self.n_buckets)
            if n_buckets < 1:
                raise ValueError("the field 'n_buckets' is missing or damaged")
            ckeys = numpy.frombuffer(_field(msg, "cluster_keys", bytes, b""), dtype="<u8")
            cvalues = numpy.frombuffer(_field(msg, "cluster_values", bytes, b""), dtype="<u8")
            if len(ckeys) != len(cvalues):
                raise ValueError("the cluster table's keys and values differ in number")
            casing_keys = _field(msg, "casing_keys", bytes, b"")
            casing = None
            if casing_keys:
                casing = CasingTable(numpy.frombuffer(casing_keys, dtype="<u4").astype(numpy.uint32, copy=False),
                                     numpy.frombuffer(_field(msg, "casing_codes", bytes), dtype="u1"))
            label_dict = {}
            for entry in _field(msg, "label_dict", list, []):
                if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
                    raise ValueError("the field 'label_dict' is damaged")
                label_dict[int(entry[0])] = [int(c) for c in entry[1]]
            if any(c < 0 or c >= n_classes for v in label_dict.values() for c in v):
                raise ValueError("the tag dictionary refers to classes the weights do not have")
            lexicon = _field(msg, "lexicon", dict, {})
            allowed = msg.get("allowed_keys")
            if allowed is not None:
                allowed = numpy.frombuffer(_field(msg, "allowed_keys", bytes), dtype="<u8").astype(numpy.uint64)
            templates = _field(msg, "templates", list)
            probe = type(self).__new__(type(self))   # compile the templates without touching self
            probe.clusters, probe.lexicon_tables, probe.casing = {}, {}, None
            probe.set_templates(templates)
            if casing is None and uses_casing(probe.atom_names):
                raise ValueError("the features read word casing, but the casing table is missing")
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            reason = str(e) if isinstance(e, ValueError) else f"the header is damaged ({type(e).__name__})"
            raise ValueError(Errors.S006.format(name=component, reason=reason)) from None
        bad = _count_non_finite(scales if precision == "int8" else values)
        if bad:
            raise ValueError(Errors.S122.format(name=component, n=bad))
        table = None
        if n_classes:
            table = AveragedWeights(n_classes, 1)
            if indptr is None:   # versions 1 and 2: dense float32 rows
                counts, cols, values, scales = sparse_rows(values.reshape((n_rows, n_classes)), "float32")
                indptr = _indptr(counts)
            # Little-endian is the native layout here: the rows are read where msgpack put them,
            # not copied; the keys (ascending) are hashed in one C pass.
            native = lambda a: None if a is None else a.astype(a.dtype.newbyteorder("="), copy=False)
            try:
                table.load_frozen(native(keys), native(indptr), native(cols), native(values), native(scales))
            except ValueError as e:
                raise ValueError(Errors.S006.format(name=component, reason=str(e))) from None
        return {"n_buckets": n_buckets, "n_classes": n_classes, "weights": table,
                "clusters": _clusters_of(ckeys, cvalues), "casing": casing, "label_dict": label_dict,
                "lexicon_tables": dict(lexicon), "allowed_keys": allowed, "templates": templates}

    def apply(self, fields: dict) -> None:
        """Take the parsed contents of a model file (from parse_bytes / parse_file)."""
        self.n_buckets = fields["n_buckets"]
        self.clusters = fields["clusters"]
        self.casing = fields["casing"]
        self.label_dict = fields["label_dict"]
        self.lexicon_tables = fields["lexicon_tables"]
        self.allowed_keys = fields["allowed_keys"]
        self.set_templates(fields["templates"])
        self.weights = fields["weights"]

    def __reduce__(self):
        # Pickling (nlp.pipe with n_process > 1 under spawn) keeps the full training state.
        return (_rebuild_model, (self.template_specs, self.n_buckets, self.weights, self.clusters,
                                 self.label_dict, self.lexicon_tables, self.allowed_keys,
                                 self.precision, self.prune_below, self.casing))


_CLUSTER_TABLES: "OrderedDict[bytes, Dict[int, int]]" = OrderedDict()


def _clusters_of(keys: numpy.ndarray, values: numpy.ndarray) -> Dict[int, int]:
    """The word -> cluster dict of a model file's cluster arrays. Components saved from one
    pipeline carry the same table (a tagger's and a parser's: 190k entries, ~0.2 s and ~20 MB to
    build), so the dict is built once and shared, as at training (_nonzero_clusters); nothing
    writes to it."""
    if not len(keys):
        return {}
    digest = hashlib.blake2b(keys.tobytes(), digest_size=DIGEST_SIZE)
    digest.update(values.tobytes())
    key = digest.digest()
    table = _CLUSTER_TABLES.get(key)
    if table is None:
        table = dict(zip(keys.tolist(), values.tolist()))
        _CLUSTER_TABLES[key] = table
        while len(_CLUSTER_TABLES) > 2:
            _CLUSTER_TABLES.popitem(last=False)
    else:
        _CLUSTER_TABLES.move_to_end(key)
    return table


def _indptr(counts: numpy.ndarray) -> numpy.ndarray:
    """Row bounds (n + 1, uint32) of sparse rows with `counts` entries each."""
    bounds = numpy.zeros((len(counts) + 1,), dtype=numpy.int64)
    numpy.cumsum(counts, out=bounds[1:])
    if bounds[-1] >= 1 << 32:
        raise ValueError(f"{bounds[-1]} nonzero weights: beyond the format's 2**32")
    return bounds.astype(numpy.uint32)


def _count_non_finite(values: Optional[numpy.ndarray], chunk: int = 1 << 22) -> int:
    """How many of `values` are NaN or infinite (int8 rows are always finite: only their scales
    are checked); a slice at a time, so the check allocates no model-sized mask."""
    if values is None or values.dtype.kind != "f":
        return 0
    bad = 0
    for start in range(0, len(values), chunk):
        part = values[start:start + chunk]
        if not numpy.isfinite(part).all():
            bad += int((~numpy.isfinite(part)).sum())
    return bad


def require_lookups_data(component: str, what: str, setting: str) -> None:
    """spacy-lookups-data is the optional extra [lookups]: only training with clusters or the
    lexicon reads it. Raise S302, naming the extra, when it is not installed."""
    try:
        import spacy_lookups_data  # noqa: F401
    except ImportError as e:
        raise ValueError(Errors.S302.format(name=component, what=what, setting=setting,
                                            reason=f"{type(e).__name__}: {e}")) from None


@lru_cache(maxsize=2)
def _nonzero_clusters(lang: str) -> Dict[int, int]:
    """word hash -> Brown cluster, for the ~190k English words that have one.

    Read straight from spacy-lookups-data's file, dropping zeros while parsing: building spaCy's
    Table of all 1M entries first costs ~300 MB of peak memory for nothing. The flat JSON map is
    read entry by entry with a regular expression rather than json.load, whose million
    transient pairs, freed only after the dict is built, left ~100 MB of Python's arenas
    resident for the rest of a training run (measured 141 MB RSS against 237 MB after
    reading). Cached: parsing takes ~1.5 s, and the chunker's default features read it at every
    initialize. Nothing writes to the table (from_bytes replaces a model's dict rather than
    filling it).
    """
    import gzip
    import json
    from spacy.strings import hash_string  # type: ignore[attr-defined]
    from spacy.util import registry

    tables = registry.lookups.get(lang)
    if "lexeme_cluster" not in tables:
        raise ValueError(f"spacy-lookups-data has no lexeme_cluster table for '{lang}'")
    path = Path(tables["lexeme_cluster"])
    if path.exists():   # spaCy's registry names the .json; the package ships .json.gz
        text = path.read_text(encoding="utf8")
    else:
        with gzip.open(path.with_suffix(path.suffix + ".gz"), "rt", encoding="utf8") as f:
            text = f.read()
    table: Dict[int, int] = {}
    n_entries = 0
    for match in _JSON_ENTRY.finditer(text):
        n_entries += 1
        value = int(match.group(2))
        if value:
            word = match.group(1)
            table[hash_string(json.loads(f'"{word}"') if "\\" in word else word)] = value
    if not n_entries and text.strip() not in ("", "{}"):
        raise ValueError("the lexeme_cluster table is not a JSON map of words to integers")
    return table


_JSON_ENTRY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*(-?\d+)')
_JSON_NUMBER_ENTRY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*(-?[0-9][0-9.eE+-]*)')


@lru_cache(maxsize=2)
def _casing_table(lang: str) -> CasingTable:
    """The casing table of spacy-lookups-data's lexeme_prob (1M cased words and their natural log
    probabilities, 630k lower-cased forms with letters for English): for each lower-cased form,
    the share of its probability that its capitalised forms have, and its probability in all
    cases (atoms.casing_code). Read entry by entry as _nonzero_clusters reads its table."""
    import gzip
    import json
    import math

    tables = registry.lookups.get(lang)
    if "lexeme_prob" not in tables:
        raise ValueError(f"spacy-lookups-data has no lexeme_prob table for '{lang}'")
    path = Path(tables["lexeme_prob"])
    if path.exists():
        text = path.read_text(encoding="utf8")
    else:
        with gzip.open(path.with_suffix(path.suffix + ".gz"), "rt", encoding="utf8") as f:
            text = f.read()
    total: Dict[str, float] = {}
    capital: Dict[str, float] = {}
    for match in _JSON_NUMBER_ENTRY.finditer(text):
        word = match.group(1)
        if "\\" in word:
            word = json.loads(f'"{word}"')
        if not any(c.isalpha() for c in word):
            continue
        p = math.exp(float(match.group(2)))
        lower = word.lower()
        total[lower] = total.get(lower, 0.0) + p
        if word[:1].isupper():
            capital[lower] = capital.get(lower, 0.0) + p
    if not total and text.strip() not in ("", "{}"):
        raise ValueError("the lexeme_prob table is not a JSON map of words to numbers")
    keys = numpy.fromiter((casing_key(w) for w in total), dtype=numpy.uint32, count=len(total))
    codes = numpy.fromiter((casing_code(capital.get(w, 0.0) / p, math.log(p)) for w, p in total.items()),
                           dtype=numpy.uint8, count=len(total))
    order = numpy.argsort(keys, kind="stable")
    keys, codes = keys[order], codes[order]
    if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():   # two forms with one hash: keep neither
        same = numpy.zeros((len(keys),), dtype=bool)
        same[1:] = keys[1:] == keys[:-1]
        same[:-1] |= same[1:].copy()
        keys, codes = keys[~same], codes[~same]
    return CasingTable(keys, codes)


def _rebuild_model(templates: List[dict], n_buckets: int, weights: Optional[AveragedWeights],
                   clusters: Dict[int, int], label_dict: Dict[int, List[int]], lexicon_tables: Dict,
                   allowed_keys: Optional[numpy.ndarray] = None, precision: str = "float32",
                   prune_below: float = 0.0, casing: Optional[CasingTable] = None):
    model = PerceptronModel(templates, n_buckets, precision, prune_below)
    model.clusters = clusters
    model.casing = casing
    model.label_dict = label_dict
    model.lexicon_tables = lexicon_tables
    model.allowed_keys = allowed_keys
    model.set_templates(templates)
    model.weights = weights
    return model


@registry.architectures("spacy-structperc.AveragedPerceptron.v1")
def build_averaged_perceptron(features: List[dict], n_buckets: int = 1 << 20, precision: str = PRECISION,
                              prune_below: float = PRUNE_BELOW) -> PerceptronModel:
    """Hashed conjunction features -> dense rows of averaged class weights.

    features: a template set (e.g. spacy-structperc.tagger_features.v1).
    n_buckets: initial size of the feature hash table; it grows as features are added.
    precision: how the weights are saved and read after loading: "float32", "float16", or
    "int8" (with a float32 scale per row). Training is always in float32.
    prune_below: rows whose averaged weights are all at most this in absolute value are left out
    of the saved model (0: only rows of zeros).
    """
    return PerceptronModel(features, n_buckets, precision, prune_below)
