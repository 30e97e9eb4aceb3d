"""The NER's label encodings: BIO (O, B-X, I-X) or BILOU (O, B-X, I-X, L-X, U-X).

Class 0 is O in both. Entity type k has the classes 1 + w*k ... w*k + w, w = 2 (B, I) or 4 (B, I,
L, U), so adding a type appends columns. Whatever the scheme, the component's predictions are
given back as BIO classes (`to_bio`): BILOU's L-X is I-X there and U-X is B-X, so doc.ents are
written the same way from either.

BILOU (Ratinov and Roth 2009) tells the model where an entity ends and which entities are one
token long; the valid sequences are those of the regular language O | U-X | B-X I-X* L-X, so
B-X and I-X may not end a sentence (the component masks them at the end of each decoded piece).
"""
from typing import Iterable, List, Optional, Tuple

import numpy

SCHEMES = ("bio", "bilou")
_PREFIXES = {"bio": "BI", "bilou": "BILU"}


def width(scheme: str) -> int:
    """Classes per entity type."""
    return len(_PREFIXES[scheme])


def n_classes(n_types: int, scheme: str) -> int:
    return 1 + width(scheme) * n_types


def class_names(types: Iterable[str], scheme: str) -> List[str]:
    return ["O"] + [f"{p}-{t}" for t in types for p in _PREFIXES[scheme]]


def transitions(n_types: int, scheme: str) -> numpy.ndarray:
    """Valid class bigrams (m + 1, m), row = the previous class (row m = the sentence start),
    column = the next: BIO allows I-X only after B-X or I-X; BILOU allows I-X and L-X only after
    B-X or I-X, and nothing else after them."""
    m = n_classes(n_types, scheme)
    allowed = numpy.ones((m + 1, m), dtype=numpy.uint8)
    if scheme == "bio":
        for k in range(n_types):
            b, i = 1 + 2 * k, 2 + 2 * k
            allowed[:, i] = 0
            allowed[b, i] = allowed[i, i] = 1
        return allowed
    for k in range(n_types):
        b, i, last = 1 + 4 * k, 2 + 4 * k, 3 + 4 * k
        allowed[:, [i, last]] = 0
        allowed[[b, i], :] = 0
        allowed[numpy.ix_([b, i], [i, last])] = 1
    return allowed


def open_classes(n_types: int, scheme: str) -> numpy.ndarray:
    """The classes a sentence may not end with (bool, one per class): BILOU's B-X and I-X."""
    m = n_classes(n_types, scheme)
    out = numpy.zeros((m,), dtype=bool)
    if scheme == "bilou":
        out[1::4] = True
        out[2::4] = True
    return out


def to_bio(n_types: int, scheme: str) -> numpy.ndarray:
    """The BIO class of each class of `scheme` (an index array)."""
    if scheme == "bio":
        return numpy.arange(n_classes(n_types, scheme), dtype=numpy.int32)
    out = numpy.zeros((n_classes(n_types, scheme),), dtype=numpy.int32)
    for k in range(n_types):
        out[1 + 4 * k] = out[4 + 4 * k] = 1 + 2 * k      # B, U -> B
        out[2 + 4 * k] = out[3 + 4 * k] = 2 + 2 * k      # I, L -> I
    return out


def from_bio(gold: numpy.ndarray, n_types: int, scheme: str) -> Tuple[numpy.ndarray, Optional[numpy.ndarray]]:
    """Gold classes of `scheme` from gold BIO classes (-1 = missing, kept missing), and a mask
    (n, n_classes) uint8 of the classes each token may take, or None when it allows all.

    Whether a B-X is BILOU's B-X or U-X (an I-X its I-X or L-X) depends on the next token: when
    that token's annotation is missing, the token's class is missing too and the mask keeps it to
    those two. Missing tokens teach nothing either way."""
    gold = numpy.asarray(gold, dtype=numpy.int32)
    if scheme == "bio":
        return gold, None
    n = len(gold)
    out = numpy.full((n,), -1, dtype=numpy.int32)
    out[gold == 0] = 0
    entity = gold > 0
    kind = numpy.where(entity, (gold - 1) // 2, -1)
    is_b = entity & (gold % 2 == 1)
    nxt = numpy.append(gold[1:], 0)      # after the last token: the end, which no I continues
    continued = entity & (nxt == gold + is_b.astype(numpy.int32)) & (nxt > 0) & (nxt % 2 == 0)
    unknown = entity & (nxt < 0)
    base = 1 + 4 * kind
    # B continued -> B, else U; I continued -> I, else L.
    cls = numpy.where(is_b, numpy.where(continued, base, base + 3), numpy.where(continued, base + 1, base + 2))
    known = entity & ~unknown
    out[known] = cls[known]
    if not unknown.any():
        return out, None
    mask = numpy.ones((n, n_classes(n_types, scheme)), dtype=numpy.uint8)
    rows = numpy.flatnonzero(unknown)
    mask[rows] = 0
    b_rows = rows[is_b[rows]]
    i_rows = rows[~is_b[rows]]
    mask[b_rows, base[b_rows]] = 1          # B-X or U-X
    mask[b_rows, base[b_rows] + 3] = 1
    mask[i_rows, base[i_rows] + 1] = 1      # I-X or L-X
    mask[i_rows, base[i_rows] + 2] = 1
    return out, mask
