"""Feature atoms (per-token observations) and the template sets built from them.

An atom is a uint64 per token; 0 means "absent", and a template touching an absent atom fires no
feature. Lexical atoms depend only on the word's text, so they are computed once per word type and
cached; document atoms (an upstream tag, say) are read from the Docs with `docarrays.read` (what
`Doc.to_array` gives, for a whole batch in one call).
"""
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy
from spacy.attrs import IS_LOWER, IS_TITLE, IS_UPPER, LOWER, ORTH, POS, SENT_START, TAG
from spacy.strings import hash_string  # type: ignore[attr-defined]  # (no stub; in spaCy since v2)
from spacy.tokens import Doc

from . import docarrays
from ._core.atoms import AtomTable
from ._core.occurrences import first_occurrences, value_sets
from .errors import Errors


def _shape(text: str) -> str:
    # Like spaCy's word shape: character classes, runs longer than 4 collapsed.
    out: List[str] = []
    last, run = "", 0
    for ch in text:
        if ch.isalpha():
            c = "X" if ch.isupper() else "x"
        elif ch.isdigit():
            c = "d"
        else:
            c = ch
        if c == last:
            run += 1
        else:
            last, run = c, 0
        if run < 4:
            out.append(c)
    return "".join(out)


def _short_shape(text: str) -> str:
    out: List[str] = []
    for ch in _shape(text):
        if not out or out[-1] != ch:
            out.append(ch)
    return "".join(out)


def _h(kind: str, value: Optional[str]) -> int:
    if value is None or value == "":
        return 0
    return hash_string(f"{kind}={value}") or 1


def _prefix(k: int) -> Callable[[str], int]:
    return lambda text: _h(f"p{k}", text[:k]) if len(text) >= k else 0


def _suffix(k: int) -> Callable[[str], int]:
    return lambda text: _h(f"s{k}", text[-k:]) if len(text) >= k else 0


def _flag(name: str, test: Callable[[str], bool]) -> Callable[[str], int]:
    return lambda text: _h(name, "1") if test(text) else 0


def _length(text: str) -> int:
    return _h("len", str(min(len(text), 8)))


LEXICAL_ATOMS: Dict[str, Callable[[str], int]] = {
    "bias": lambda text: 1,
    "orth": lambda text: _h("orth", text),
    "lower": lambda text: _h("lower", text.lower()),
    "shape": lambda text: _h("shape", _shape(text)),
    "short_shape": lambda text: _h("sshape", _short_shape(text)),
    "length": _length,
    "has_digit": _flag("has_digit", lambda t: any(c.isdigit() for c in t)),
    "has_hyphen": _flag("has_hyphen", lambda t: "-" in t),
    "has_upper": _flag("has_upper", lambda t: any(c.isupper() for c in t)),
    "is_title": _flag("is_title", lambda t: t[:1].isupper() and t[1:].islower()),
    "is_upper": _flag("is_upper", lambda t: t.isupper()),
    "is_punct": _flag("is_punct", lambda t: not any(c.isalnum() for c in t)),
    **{f"p{k}": _prefix(k) for k in range(1, 6)},
    **{f"s{k}": _suffix(k) for k in range(1, 6)},
}

# What a component's word_dropout hides of a token in training: its identity. Everything else
# the token has (shape, affixes, tag, clusters, gazetteer matches) stays.
WORD_ATOMS = ("orth", "lower")


def check_word_dropout(name: str, p) -> None:
    if isinstance(p, bool) or not (isinstance(p, (int, float)) and 0 <= p < 1):
        raise ValueError(Errors.S012.format(setting="word_dropout", name=name, value=p,
                                            requirement="a number in [0, 1)"))


def hide_words(atoms: numpy.ndarray, names: Sequence[str], p: float, seed) -> numpy.ndarray:
    """`atoms` (tokens x `names`), or a copy in which each token's word atoms are absent (0: the
    templates that read them fire nothing there) with probability p, drawn from `seed` (an int
    or a sequence of ints), so the same seed hides the same tokens."""
    columns = [i for i, name in enumerate(names) if name in WORD_ATOMS]
    if not p or not columns or not len(atoms):
        return atoms
    hidden = numpy.flatnonzero(numpy.random.default_rng(seed).random(len(atoms)) < p)
    atoms = atoms.copy()
    atoms[numpy.ix_(hidden, numpy.asarray(columns, dtype=numpy.intp))] = 0
    return atoms


# Cluster atoms: prefixes of a word's Brown-cluster bit path (Koo et al. 2008), read from a table
# the model carries (see PerceptronModel.resources). Words without a cluster get no feature.
CLUSTER_ATOMS: Dict[str, Optional[int]] = {"c4": 4, "c6": 6, "c10": 10, "c20": 20, "cluster": None}


def _cluster_atom(kind: str, length: Optional[int], cluster: int) -> int:
    if not cluster:
        return 0
    bits = bin(cluster)[2:]
    return _h(kind, bits if length is None else bits[:length])


# Casing atoms: how a word is written in general text, from a table of word frequencies the model
# carries (spacy-lookups-data's lexeme_prob, cased: read by PerceptronModel.load_resources), read by the
# word's lower-cased form whatever its own case: cshare, the share of its occurrences that start
# with a capital (binned); cfreq, how frequent it is in all its cases (binned). "Bush" is
# capitalised 73% of the time, "May" 7%, "Leeds" 92%: where a token's own case says nothing (at a
# sentence start, in an all-caps headline) or is misleading, this says how name-like the word is.
# A word with letters that the table lacks gets the value "unk"; a word without letters, none.
CASING_ATOMS = ("cshare", "cfreq")
CASE_SHARE_BINS = (0.02, 0.1, 0.3, 0.7, 0.9, 0.98)


def casing_code(cap_share: float, log_prob: float) -> int:
    """The table's value for a word: its capital share's bin (0-6) and its log frequency's
    (natural log, in steps of 2, 1-15), packed as share_bin * 16 + freq_bin (never 0)."""
    share_bin = sum(cap_share >= b for b in CASE_SHARE_BINS)
    freq_bin = max(1, min(15, int(-log_prob // 2)))
    return share_bin * 16 + freq_bin


def _casing_atoms(code: int) -> Tuple[int, int]:
    if not code:
        return _h("cshare", "unk"), _h("cfreq", "unk")
    return _h("cshare", str(code >> 4)), _h("cfreq", str(code & 15))


def casing_key(text: str) -> int:
    """The table's key of a word: the low 32 bits of its lower-cased form's hash_string."""
    return hash_string(text.lower()) & 0xFFFFFFFF


class CasingTable:
    """casing_key -> casing_code, as two arrays sorted by key (uint32, uint8): 630k words take
    3.2 MB, where a dict would hold ~60 MB of Python objects, and a saved model's arrays are read
    where the file's bytes are (no copy). Words whose keys collide are left out when the table
    is built; a word the table lacks reads another word's code only if its key is that word's,
    one word in ~7,000 (630k keys of 2**32)."""

    def __init__(self, keys: numpy.ndarray, codes: numpy.ndarray):
        if keys.shape != codes.shape or keys.ndim != 1:
            raise ValueError("the casing table's keys and codes differ in number")
        if len(keys) and not (keys[1:] > keys[:-1]).all():
            raise ValueError("the casing table's keys are not in ascending order")
        share, freq = codes >> 4, codes & 15
        if len(codes) and not ((share <= len(CASE_SHARE_BINS)) & (freq >= 1)).all():
            raise ValueError("the casing table holds codes out of range")
        self.keys = keys
        self.codes = codes

    def __len__(self) -> int:
        return len(self.keys)

    def __reduce__(self):
        return (CasingTable, (self.keys, self.codes))

    def code(self, text: str) -> int:
        """The word's code, or 0 when the table lacks it."""
        key = numpy.uint32(casing_key(text))
        i = int(self.keys.searchsorted(key))
        return int(self.codes[i]) if i < len(self.keys) and self.keys[i] == key else 0


# Lexicon atoms: what a word could be according to spaCy's English lemmatizer tables (WordNet's
# noun/verb/adjective/adverb index, its exceptions and suffix rules). For a word never seen in
# training, "could be a plural noun or a 3rd-person verb" is most of what a tagger needs to know.
LEXICON_POS = ("noun", "verb", "adj", "adv")
LEXICON_ATOMS = ("lex",) + tuple(f"lex_{pos}" for pos in LEXICON_POS)


class Lexicon:
    def __init__(self, tables: Dict[str, Dict]):
        self.tables = tables
        self.index = {pos: set(tables.get("index", {}).get(pos, ())) for pos in LEXICON_POS}
        self.exc = {pos: set(tables.get("exc", {}).get(pos, ())) for pos in LEXICON_POS}
        self.rules = {pos: [tuple(r) for r in tables.get("rules", {}).get(pos, ()) if r[0]]
                      for pos in LEXICON_POS}

    def analyze(self, text: str) -> Dict[str, str]:
        """pos -> how `text` can be read as that part of speech ("base", "exc", or "-suffix")."""
        word = text.lower()
        out: Dict[str, str] = {}
        for pos in LEXICON_POS:
            if word in self.index[pos]:
                out[pos] = "base"
            elif word in self.exc[pos]:
                out[pos] = "exc"
            else:
                for old, new in self.rules[pos]:
                    if word.endswith(old) and len(word) > len(old) and word[: -len(old)] + new in self.index[pos]:
                        out[pos] = "-" + old
                        break
        return out


# Document atoms: read from an attribute the Doc must carry (set by an upstream component or the
# corpus reader); the attribute's annotation is checked, and its value hashes are used as atoms.
DOC_ATOMS: Dict[str, int] = {"tag": TAG, "pos": POS}


# Context atoms: what the other occurrences of a token's word (lower-cased) in the same Doc say
# (Ratinov and Roth 2009 §5, context aggregation). A Doc is whatever the caller passes: a
# sentence, or a whole text (nlp() of a news story), so these see as far as the Doc goes.
# dcase: the cases the word has elsewhere where case tells something (not at a sentence start:
# the first token of the Doc or of a sentence, or after . ! ?), of title, upper and lower;
# dprev / dnext: the lower-cased words before and after its first other occurrence, for words
# that are capitalised somewhere in the Doc (not at a sentence start). Absent (0) without one.
CONTEXT_ATOMS = ("dcase", "dprev", "dnext")
CONTEXT_ATTRS = [LOWER, IS_TITLE, IS_UPPER, IS_LOWER, SENT_START]
_SENTENCE_END = numpy.array([hash_string(p) for p in (".", "!", "?")], dtype=numpy.uint64)
_DCASE = numpy.array([0] + [_h("dcase", str(bits)) for bits in range(1, 8)], dtype=numpy.uint64)
_EDGE = {"dprev": _h("dprev", "<s>"), "dnext": _h("dnext", "</s>")}


def context_atoms(values: numpy.ndarray, offsets: numpy.ndarray, names: Sequence[str]) -> List[numpy.ndarray]:
    """The context atoms `names` (one array each) of a batch whose Doc k is rows
    offsets[k]:offsets[k + 1] of `values`, the CONTEXT_ATTRS columns per token. Each Doc is on
    its own: a Doc's atoms are the same in any batch."""
    n = len(values)
    out = {name: numpy.zeros((n,), dtype=numpy.uint64) for name in names}
    if n == 0:
        return [out[name] for name in names]
    lower = values[:, 0]
    lengths = numpy.diff(offsets)
    first = numpy.zeros((n,), dtype=bool)
    first[offsets[:-1][lengths > 0]] = True
    last = numpy.zeros((n,), dtype=bool)
    last[offsets[1:][lengths > 0] - 1] = True
    initial = first | (values[:, 4].astype(numpy.int64) == 1)
    initial[1:] |= numpy.isin(lower[:-1], _SENTENCE_END)
    # Case bits where case tells something: title 1 (Smith), upper 2 (USA), lower 4 (smith).
    upper = values[:, 2] != 0
    bits = numpy.where(upper, 2, numpy.where(values[:, 1] != 0, 1, numpy.where(values[:, 3] != 0, 4, 0)))
    bits[initial] = 0
    # The tokens of one word in one Doc are a group, named by its first token (in text order).
    group, second = first_occurrences(numpy.ascontiguousarray(lower, dtype=numpy.uint64),
                                      numpy.ascontiguousarray(offsets, dtype=numpy.int64))
    others, _, whole = value_sets(group, bits.astype(numpy.uint64))
    if "dcase" in out:
        out["dcase"] = _DCASE[others.astype(numpy.int64)]
    # The first other occurrence of each token's word (the second for the first), if any.
    other = numpy.where(group != numpy.arange(n), group, second[group])
    capitalised = (whole & numpy.uint64(3)) != 0
    has = (other >= 0) & capitalised
    o = other[has]
    for name, step, edge in (("dprev", -1, first), ("dnext", 1, last)):
        if name in out:
            near = numpy.clip(o + step, 0, n - 1)
            out[name][has] = numpy.where(edge[o], numpy.uint64(_EDGE[name]), lower[near])
    return [out[name] for name in names]


def check_atoms(names: Iterable[str]) -> None:
    known = sorted(LEXICAL_ATOMS) + sorted(CLUSTER_ATOMS) + sorted(LEXICON_ATOMS) + sorted(DOC_ATOMS) \
        + sorted(CONTEXT_ATOMS) + sorted(CASING_ATOMS)
    for name in names:
        if name not in known:
            raise ValueError(Errors.S013.format(atom=name, known=", ".join(known)))


class AtomBatch(NamedTuple):
    """The atoms of several Docs, concatenated: Doc k's tokens are rows offsets[k]:offsets[k + 1]
    of `atoms` (and of `orths`, their orth ids, and of `extra`, the values of the attributes the
    caller asked for besides, read in the same `docarrays.read` call; (n, 0) when none)."""
    atoms: numpy.ndarray
    offsets: numpy.ndarray
    orths: numpy.ndarray
    extra: numpy.ndarray = numpy.zeros((0, 0), dtype=numpy.uint64)

    def doc_atoms(self, k: int) -> numpy.ndarray:
        return self.atoms[self.offsets[k]:self.offsets[k + 1]]


class AtomExtractor:
    """Turns Docs into (n_tokens, n_atoms) uint64 arrays, caching lexical atoms per word type.

    `word_atoms` is the definition of a word type's row; it runs once per new word type, and the
    rows of known words are gathered from an AtomTable (C) by orth id. Document atoms (TAG,
    POS) are read with `docarrays.read` (Doc.to_array for the batch). The cache is shared by
    every thread using the component; AtomTable's methods are atomic under the GIL, so no lock is needed."""

    def __init__(self, atom_names: Sequence[str], component: str = "structperc",
                 clusters: Optional[Dict[int, int]] = None, lexicon: Optional[Lexicon] = None,
                 casing: Optional[CasingTable] = None):
        check_atoms(atom_names)
        self.atom_names = list(atom_names)
        self.component = component
        self.clusters = clusters or {}
        self.lexicon = lexicon
        self._lexicon = [(j, n) for j, n in enumerate(self.atom_names) if n in LEXICON_ATOMS]
        self._casing = [(j, CASING_ATOMS.index(n)) for j, n in enumerate(self.atom_names) if n in CASING_ATOMS]
        self.casing = casing
        self._lexical = [(j, LEXICAL_ATOMS[n]) for j, n in enumerate(self.atom_names) if n in LEXICAL_ATOMS]
        self._cluster = [(j, n, CLUSTER_ATOMS[n]) for j, n in enumerate(self.atom_names) if n in CLUSTER_ATOMS]
        self._doc = [(j, n, DOC_ATOMS[n]) for j, n in enumerate(self.atom_names) if n in DOC_ATOMS]
        self._context = [(j, n) for j, n in enumerate(self.atom_names) if n in CONTEXT_ATOMS]
        self._attrs = [ORTH] + [attr for _, _, attr in self._doc] + (CONTEXT_ATTRS if self._context else [])
        self._table = AtomTable(len(self.atom_names))

    def __reduce__(self):
        return (AtomExtractor, (self.atom_names, self.component, self.clusters, self.lexicon, self.casing))

    def cluster_of(self, text: str) -> int:
        clusters = self.clusters
        return clusters.get(hash_string(text)) or clusters.get(hash_string(text.lower()), 0)

    def word_atoms(self, text: str) -> List[int]:
        """The atoms of a word type, one per column (0 in the columns of document atoms)."""
        row = [0] * len(self.atom_names)
        for j, fn in self._lexical:
            row[j] = fn(text)
        if self._cluster:
            cluster = self.cluster_of(text)
            for j, name, length in self._cluster:
                row[j] = _cluster_atom(name, length, cluster)
        if self._casing and self.casing is not None and any(c.isalpha() for c in text):
            values = _casing_atoms(self.casing.code(text))
            for j, k in self._casing:
                row[j] = values[k]
        if self._lexicon and self.lexicon is not None:
            readings = self.lexicon.analyze(text)
            for j, name in self._lexicon:
                if name == "lex":
                    row[j] = _h("lex", "|".join(f"{p}{r}" for p, r in sorted(readings.items())) or "none")
                else:
                    row[j] = _h(name, readings.get(name[4:]))
        return row

    def batch(self, docs: Sequence[Doc], name: Optional[str] = None, extra: Sequence[int] = (),
              on_missing: Optional[Callable[[str], Exception]] = None) -> AtomBatch:
        """The atoms of `docs`, concatenated; `name`, the pipe asking, is what errors name.
        `extra`: attribute ids (spacy.attrs) whose values are returned as AtomBatch.extra, read
        with the atoms' own `docarrays.read` (one call for the batch in all). A Doc without the
        annotation a document atom reads raises S009, or `on_missing(atom name)` if given."""
        n_cols = len(self.atom_names)
        attrs = self._attrs + list(extra)
        lengths = list(map(len, docs))
        offsets = numpy.zeros((len(docs) + 1,), dtype=numpy.int64)
        offsets[1:] = numpy.cumsum(lengths)
        values = docarrays.read(docs, attrs)   # (tokens, len(attrs)), as to_array per Doc
        if self._doc and len(values):
            # Doc.has_annotation(attr) of a non-empty Doc is "some token's value is not 0".
            starts = offsets[:-1][numpy.asarray(lengths) > 0]
            for k, (j, atom, attr) in enumerate(self._doc):
                annotated = numpy.logical_or.reduceat(values[:, k + 1] != 0, starts)
                if not annotated.all():
                    if on_missing is not None:
                        raise on_missing(atom)
                    raise ValueError(Errors.S009.format(attr=atom.upper(), atom=atom, name=name or self.component))
        orths = numpy.ascontiguousarray(values[:, 0], dtype=numpy.uint64)
        # Every row is written: by gather (whole rows, 0 in document atoms' columns), or below.
        atoms = numpy.empty((len(orths), n_cols), dtype=numpy.uint64)
        missing = self._table.gather(orths, atoms)
        if len(missing):
            # A new word type's text comes from the vocab of a Doc that holds it.
            firsts = numpy.unique(orths[missing], return_index=True)[1]
            where = numpy.searchsorted(offsets, missing[firsts], side="right") - 1
            for i, k in zip(missing[firsts].tolist(), where.tolist()):
                orth = int(orths[i])
                self._table.add(orth, self.word_atoms(docs[k].vocab.strings[orth]))
            found = numpy.zeros((len(missing), n_cols), dtype=numpy.uint64)
            if len(self._table.gather(orths[missing], found)):   # cannot happen: all were added
                raise RuntimeError("word types without atoms after adding them")
            atoms[missing] = found
        for k, (j, _, _) in enumerate(self._doc):
            atoms[:, j] = values[:, k + 1]
        if self._context:
            first = 1 + len(self._doc)
            columns = context_atoms(values[:, first:first + len(CONTEXT_ATTRS)], offsets,
                                    [n for _, n in self._context])
            for (j, _), column in zip(self._context, columns):
                atoms[:, j] = column
        return AtomBatch(atoms, offsets, orths, values[:, len(self._attrs):])

    def __call__(self, doc: Doc, name: Optional[str] = None) -> numpy.ndarray:
        """The atoms of `doc`; `name`, the pipe asking, is what errors name."""
        return self.batch([doc], name).atoms


def template(name: str, *parts) -> dict:
    return {"name": name, "parts": [list(p) for p in parts]}


def leave_out(templates: List[dict], names: Iterable[str], where: str) -> List[dict]:
    """`templates` without those named in `names` (a feature set's `leave_out`, `where` naming it
    in errors): S020 when a name is none of theirs, so that a misspelt name cannot leave a
    template in silently."""
    names = list(names)
    known = [t["name"] for t in templates]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(Errors.S020.format(where=where, names=", ".join(map(repr, unknown)),
                                            known=", ".join(known)))
    drop = set(names)
    return [t for t in templates if t["name"] not in drop]


def uses_clusters(atom_names: Iterable[str]) -> bool:
    return any(name in CLUSTER_ATOMS for name in atom_names)


def uses_casing(atom_names: Iterable[str]) -> bool:
    return any(name in CASING_ATOMS for name in atom_names)


def uses_lexicon(atom_names: Iterable[str]) -> bool:
    return any(name in LEXICON_ATOMS for name in atom_names)


def word_and_pos_window(window: int, pos: bool) -> List[dict]:
    """Sha & Pereira's (2003) words and POS tags in a window, shared by the chunker and NER:
    w0, w-k..w+k, w-1w0, w0w+1; with pos, p0, p-k..p+k and the POS bigrams and trigrams."""
    t = [template("w0", (0, "lower"))]
    for k in range(1, window + 1):
        t.append(template(f"w-{k}", (-k, "lower")))
        t.append(template(f"w+{k}", (k, "lower")))
    t.append(template("w-1,w0", (-1, "lower"), (0, "lower")))
    t.append(template("w0,w+1", (0, "lower"), (1, "lower")))
    if pos:
        t.append(template("p0", (0, "tag")))
        for k in range(1, window + 1):
            t.append(template(f"p-{k}", (-k, "tag")))
            t.append(template(f"p+{k}", (k, "tag")))
        t.append(template("p-2,p-1", (-2, "tag"), (-1, "tag")))
        t.append(template("p-1,p0", (-1, "tag"), (0, "tag")))
        t.append(template("p0,p+1", (0, "tag"), (1, "tag")))
        t.append(template("p+1,p+2", (1, "tag"), (2, "tag")))
        t.append(template("p-2,p-1,p0", (-2, "tag"), (-1, "tag"), (0, "tag")))
        t.append(template("p-1,p0,p+1", (-1, "tag"), (0, "tag"), (1, "tag")))
        t.append(template("p0,p+1,p+2", (0, "tag"), (1, "tag"), (2, "tag")))
    return t


def atoms_of(templates: Sequence[dict]) -> List[str]:
    """The atom names a template set reads, in a stable order (bias first)."""
    seen: List[str] = []
    for spec in templates:
        for part in spec["parts"]:
            if part[0] != "hist" and part[1] not in seen:
                seen.append(part[1])
    return sorted(seen, key=lambda n: (n != "bias", n))
