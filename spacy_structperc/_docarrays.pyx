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

from spacy.attrs cimport DEP, HEAD, MORPH, attr_id_t
from spacy.structs cimport TokenC
from spacy.tokens.doc cimport Doc, get_token_attr, set_children_from_heads
from spacy.tokens.token cimport Token
from spacy.typedefs cimport attr_t

import numpy

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


def read(docs, list ids):
    """The values of the attributes `ids` (spacy.attrs ids) of every token of `docs`: a uint64
    array (tokens of all the Docs, len(ids)), Doc after Doc, equal to
    numpy.concatenate([doc.to_array(ids) for doc in docs]) with to_array's 2-d shape (spaCy's own
    get_token_attr reads each value, so HEAD is relative and SENT_START -1 is 2**64 - 1, as
    to_array gives them)."""
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


def write(docs, offsets, list ids, values):
    """Doc k gets rows offsets[k]:offsets[k + 1] of `values` (a C-contiguous uint64 array, one
    column per attribute id of `ids`), as `doc.from_array(ids, rows)` would set them; with HEAD
    and DEP, the Doc's children, edges and sentence starts set from the heads if some DEP is not
    0. docarrays.write checks the batch first (docarrays._check: the errors, the Docs they name,
    nothing written unless all can be); here only what memory safety needs is checked again,
    before anything is written: each Doc's rows and heads within it."""
    cdef int n_attrs = len(ids)
    cdef const int64_t[::1] c_offsets = offsets
    cdef const uint64_t[:, ::1] v = values
    cdef int64_t[::1] c_ids = numpy.asarray(ids, dtype=numpy.int64)
    cdef int head_col = ids.index(HEAD) if HEAD in ids else -1
    cdef int dep_col = ids.index(DEP) if DEP in ids else -1
    cdef Doc doc
    cdef Py_ssize_t k, n_docs = len(docs)
    cdef int64_t a
    cdef int i, j
    cdef int32_t head
    if c_offsets.shape[0] != n_docs + 1 or v.shape[1] != n_attrs or MORPH in ids \
            or c_offsets[0] != 0 or c_offsets[n_docs] != v.shape[0]:
        raise ValueError(Errors.S307.format(problem="write takes the batch docarrays._check returns"))
    for k in range(n_docs):
        doc = docs[k]
        a = c_offsets[k]
        if c_offsets[k + 1] - a != doc.length:
            raise ValueError(Errors.S307.format(problem=f"Doc {k}'s rows do not fit it"))
        for i in range(doc.length if head_col >= 0 else 0):
            head = <int32_t>v[a + i, head_col]   # as from_array: the low 32 bits, signed
            if head + i < 0 or head + i >= doc.length:
                raise ValueError(Errors.S307.format(problem=f"Doc {k}'s head {i} is outside it"))
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
