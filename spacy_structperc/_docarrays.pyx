# cython: language_level=3, boundscheck=False, wraparound=False
"""A batch of Docs' token attributes read and written in one call, through doc.c, as spaCy's
own parser writes them: what `Doc.to_array`, `Doc.has_annotation("SENT_START")` and
`Doc.from_array` do for one Doc, done for all the Docs of a batch without a Python call per Doc.

This module is compiled against spaCy's C structs (TokenC, Doc): it is only correct for the
spaCy it was built against. `BUILT_FOR_SPACY` is that version (set by setup.py at compile time);
`spacy_structperc/docarrays.py` uses this module only when the running spaCy's major.minor is
the same, and otherwise falls back to to_array / from_array per Doc. Import it through that
module, never directly. It is not part of `_core`, which knows nothing of spaCy.
"""
from libc.stdint cimport int32_t, int64_t, uint64_t

from spacy.attrs cimport DEP, ENT_IOB, HEAD, MORPH, attr_id_t
from spacy.structs cimport TokenC
from spacy.tokens.doc cimport Doc, get_token_attr, set_children_from_heads
from spacy.tokens.token cimport Token
from spacy.typedefs cimport attr_t

import numpy
from spacy.attrs import IDS as _IDS

from .errors import Errors

cdef extern from *:
    """
    #ifndef STRUCTPERC_SPACY_VERSION
    #define STRUCTPERC_SPACY_VERSION ""
    #endif
    """
    const char* STRUCTPERC_SPACY_VERSION

# The spaCy version this module was compiled against ("" if the build did not say).
BUILT_FOR_SPACY = STRUCTPERC_SPACY_VERSION.decode("ascii")


def attr_ids(attrs) -> list:
    """Attribute ids as Doc.to_array / from_array take them: one id or name, or a sequence of
    them; names (any case) are looked up in spacy.attrs.IDS."""
    if isinstance(attrs, str) or not hasattr(attrs, "__iter__"):
        attrs = [attrs]
    return [_IDS[a.upper()] if hasattr(a, "upper") else int(a) for a in attrs]


def read(docs, attrs):
    """The values of `attrs` of every token of `docs`: a uint64 array (tokens of all the Docs,
    len(attrs)), Doc after Doc, equal to numpy.concatenate([doc.to_array(attrs) for doc in
    docs]) with to_array's 2-d shape (spaCy's own get_token_attr reads each value, so HEAD is
    relative and SENT_START -1 is 2**64 - 1, as to_array gives them)."""
    ids = attr_ids(attrs)
    cdef int n_attrs = len(ids)
    cdef Doc doc
    cdef Py_ssize_t total = 0
    docs = list(docs)
    for doc in docs:
        total += doc.length
    out = numpy.empty((total, n_attrs), dtype=numpy.uint64)
    if total == 0 or n_attrs == 0:
        return out
    cdef uint64_t[:, ::1] values = out
    cdef int64_t[::1] c_ids = numpy.asarray(ids, dtype=numpy.int64)
    cdef Py_ssize_t row = 0
    cdef int i, j
    for doc in docs:
        for i in range(doc.length):
            for j in range(n_attrs):
                values[row, j] = get_token_attr(&doc.c[i], <attr_id_t>c_ids[j])
            row += 1
    return out


def has_sent_starts(docs):
    """[doc.has_annotation("SENT_START") for doc in docs] as a bool array: an empty or one-token
    Doc, or one with a "sents" user hook, has them; another has them if a token after its
    first has sent_start != 0."""
    docs = list(docs)
    out = numpy.zeros((len(docs),), dtype=bool)
    cdef Doc doc
    cdef int i
    cdef Py_ssize_t k = 0
    for doc in docs:
        if doc.length == 0 or "sents" in doc.user_hooks or doc.length == 1:
            out[k] = True
        else:
            for i in range(1, doc.length):
                if doc.c[i].sent_start != 0:
                    out[k] = True
                    break
        k += 1
    return out


def has_user_hook(docs, str name):
    """[name in doc.user_hooks for doc in docs] as a bool array."""
    docs = list(docs)
    out = numpy.zeros((len(docs),), dtype=bool)
    cdef Doc doc
    cdef Py_ssize_t k = 0
    for doc in docs:
        if name in doc.user_hooks:
            out[k] = True
        k += 1
    return out


def write(docs, offsets, attrs, values):
    """Doc k gets rows offsets[k]:offsets[k + 1] of `values` (uint64, one column per attribute
    of `attrs`), as `doc.from_array(attrs, rows)` would set them: heads relative, checked to be
    within the Doc; ENT_IOB checked to index Token.iob_strings(); with HEAD and DEP, the Doc's
    children, edges and sentence starts set from the heads if some DEP is not 0. The whole batch
    is checked before any Doc is written, so a bad value raises a ValueError and leaves every
    Doc as it was. MORPH is refused (from_array adds morph strings to the vocab's table)."""
    ids = attr_ids(attrs)
    cdef int n_attrs = len(ids)
    if n_attrs == 0:
        raise ValueError(Errors.S307.format(problem="no attributes to write"))
    if MORPH in ids:
        raise ValueError(Errors.S307.format(problem="MORPH is not written by docarrays.write; use "
                                                    "Doc.from_array"))
    if len(set(ids)) != n_attrs:
        raise ValueError(Errors.S307.format(problem=f"an attribute is given twice ({ids})"))
    docs = list(docs)
    array = numpy.asarray(values)
    if array.dtype != numpy.uint64:
        raise ValueError(Errors.S307.format(problem=f"values must be uint64, not {array.dtype}"))
    if array.ndim == 1 and n_attrs == 1:
        array = array.reshape((-1, 1))
    if array.ndim != 2 or array.shape[1] != n_attrs:
        raise ValueError(Errors.S307.format(
            problem=f"values of shape {array.shape} for {n_attrs} attributes"))
    bounds = numpy.asarray(offsets)
    if bounds.shape != (len(docs) + 1,):
        raise ValueError(Errors.S307.format(
            problem=f"{len(docs)} Docs need {len(docs) + 1} offsets, not shape {bounds.shape}"))
    cdef int64_t[::1] c_offsets = numpy.ascontiguousarray(bounds, dtype=numpy.int64)
    cdef const uint64_t[:, ::1] v = numpy.ascontiguousarray(array)
    cdef int64_t[::1] c_ids = numpy.asarray(ids, dtype=numpy.int64)
    cdef int head_col = ids.index(HEAD) if HEAD in ids else -1
    cdef int dep_col = ids.index(DEP) if DEP in ids else -1
    cdef int iob_col = ids.index(ENT_IOB) if ENT_IOB in ids else -1
    cdef uint64_t n_iob = len(Token.iob_strings())
    cdef Doc doc
    cdef Py_ssize_t k, n_docs = len(docs), n_rows = v.shape[0]
    cdef int64_t a, b
    cdef int i, j
    cdef int32_t head
    # Check the whole batch first: nothing is written unless every Doc can be.
    if c_offsets[0] != 0 or c_offsets[n_docs] != n_rows:
        raise ValueError(Errors.S307.format(
            problem=f"offsets run from {c_offsets[0]} to {c_offsets[n_docs]}, not from 0 to the "
                    f"{n_rows} rows of the values"))
    for k in range(n_docs):
        doc = docs[k]
        a, b = c_offsets[k], c_offsets[k + 1]
        if b - a != doc.length:
            raise ValueError(Errors.S306.format(doc=k, doc_length=doc.length, start=a, end=b,
                                                array_length=b - a, n_rows=n_rows))
    # Then each Doc's values, in order: its heads, then its ENT_IOB values.
    for k in range(n_docs):
        doc = docs[k]
        a = c_offsets[k]
        if head_col >= 0:
            for i in range(doc.length):
                head = <int32_t>v[a + i, head_col]   # as from_array: the low 32 bits, signed
                if head + i < 0 or head + i >= doc.length:
                    raise ValueError(Errors.S304.format(doc=k, index=i, value=v[a + i, head_col],
                                                        rel_head_index=head, length=doc.length))
        if iob_col >= 0:
            for i in range(doc.length):
                if v[a + i, iob_col] >= n_iob:
                    raise ValueError(Errors.S305.format(doc=k, index=i, value=v[a + i, iob_col],
                                                        values=Token.iob_strings()))
    cdef bint children
    cdef TokenC* token
    for k in range(n_docs):
        doc = docs[k]
        a = c_offsets[k]
        children = False
        for i in range(doc.length):
            token = &doc.c[i]
            for j in range(n_attrs):
                Token.set_struct_attr(token, <attr_id_t>c_ids[j], v[a + i, j])
            if dep_col >= 0 and v[a + i, dep_col] != 0:
                children = True
        if head_col >= 0 and children:
            set_children_from_heads(doc.c, 0, doc.length)
