"""Two-stage prediction aggregation (Ratinov and Roth 2009 §5) for structperc_ner.

The first stage decodes a Doc without these atoms; the second decodes it again with what the
first said about the other occurrences of each word (lower-cased) in the same Doc:
- agg: the entity types (or O) the first stage gave the word's other occurrences, as a set;
- aggp: the same for its earlier occurrences only (the extended prediction history).
With the component's aggregate = "entities", a word whose other occurrences are all O has no
such atom: only what the first stage found as entities is passed on. A window whose tokens then
have no stage atom at all decodes in the second stage exactly as in the first, so it is not
decoded again (most sentences of a text), which makes the second stage cheap.
A Doc is on its own: its atoms are the same in any batch, so nlp(), nlp.pipe and
nlp.pipe(n_process=2) agree. A Doc of a whole text gives the most; a sentence, little.
"""
from typing import Dict, List, Sequence

import numpy

from .._core.occurrences import first_occurrences, value_sets
from ..atoms import _h

STAGE_ATOMS = ("agg", "aggp")
# A set of types and O is a 64-bit mask (below 2**63, as the atom values' tables index it).
MAX_STAGE_TYPES = 62
_VALUES: Dict[tuple, int] = {}


def _value(name: str, mask: int) -> int:
    key = (name, mask)
    value = _VALUES.get(key)
    if value is None:
        bits = [str(b) for b in range(64) if mask >> b & 1]
        value = _VALUES[key] = _h(name, "|".join(bits))
    return value


def stage_atoms(words: numpy.ndarray, classes: numpy.ndarray, offsets: numpy.ndarray,
                names: Sequence[str], entities_only: bool = False) -> List[numpy.ndarray]:
    """The atoms `names` (of STAGE_ATOMS) of a batch whose Doc k is rows offsets[k]:offsets[k+1]:
    `words` identifies a token's word (its lower-cased form), `classes` are the first stage's
    BIO classes (0 = O, 1 + 2t = B of type t, 2 + 2t = I of type t). With `entities_only`, a
    set without an entity type (the word's other occurrences all O) is no atom (0)."""
    n = len(words)
    out = {name: numpy.zeros((n,), dtype=numpy.uint64) for name in names}
    if n == 0:
        return [out[name] for name in names]
    classes = numpy.asarray(classes, dtype=numpy.int64)
    value = numpy.where(classes > 0, (classes - 1) // 2 + 1, 0)   # 0 = O, t + 1 = type t
    if int(value.max()) > MAX_STAGE_TYPES:   # the component raises S406 before this
        raise ValueError(f"stage_atoms: at most {MAX_STAGE_TYPES} types, not {int(value.max())}")
    group, _ = first_occurrences(numpy.ascontiguousarray(words, dtype=numpy.uint64),
                                 numpy.ascontiguousarray(offsets, dtype=numpy.int64))
    others, earlier, _ = value_sets(group, numpy.left_shift(numpy.uint64(1), value.astype(numpy.uint64)))
    for name, sets in (("agg", others), ("aggp", earlier)):
        if name in out:
            masks = sets.astype(numpy.int64)
            out[name] = _column(name, _entities(masks) if entities_only else masks)
    return [out[name] for name in names]


def _entities(masks: numpy.ndarray) -> numpy.ndarray:
    """`masks` with the sets holding O alone (bit 0) made empty."""
    return numpy.where(masks == 1, 0, masks)


# Masks below this are looked up in a table as long (no sort): up to 12 types and O.
_DENSE = 1 << 13


def _column(name: str, masks: numpy.ndarray) -> numpy.ndarray:
    if len(masks) and int(masks.max()) < _DENSE:
        present = numpy.zeros((int(masks.max()) + 1,), dtype=bool)
        present[masks] = True
        table = numpy.zeros((len(present),), dtype=numpy.uint64)
        for m in numpy.flatnonzero(present[1:]).tolist():
            table[m + 1] = _value(name, m + 1)
        return table[masks]
    uniq, inverse = numpy.unique(masks, return_inverse=True)
    table = numpy.array([_value(name, m) if m else 0 for m in uniq.tolist()], dtype=numpy.uint64)
    return table[inverse.reshape(-1)]
