"""Token attributes of a batch of Docs, read and written in one call (issue 14: per-Doc overhead).

The components read their inputs and write their outputs here, not with `Doc.to_array`,
`Doc.has_annotation` and `Doc.from_array` per Doc. Two paths give the same results:

- the compiled one (`_docarrays.pyx`): one Cython loop over the batch through doc.c, as spaCy's
  own parser writes Docs. It reads spaCy's C structs, so it is used only when it imported
  cleanly (Cython checks the size of spaCy's Doc type at import; a "size changed" warning counts
  as a failure here) and was compiled against a spaCy of the running one's major.minor;
- the Python one: to_array / from_array / has_annotation per Doc, as the components did before.

`FAST_PATH` says which one runs (`WHY_PYTHON` why not the compiled one); set the environment
variable STRUCTPERC_DOCARRAYS=python, or use `python_path()`, to force the Python one (tests
compare the two). Both check a whole batch before writing any Doc of it, and raise the same
coded errors (S304-S307).

This module sits beside atoms.py, below pipeline/: atoms.py uses it, and pipeline/ imports
atoms.py, so it cannot live in pipeline/ without an import cycle.
"""
import os
import warnings
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy
from spacy import about as spacy_about
from spacy.attrs import ENT_IOB, HEAD, IDS, MORPH
from spacy.tokens import Doc, Token
from thinc.types import Ints2d

from .errors import Errors

# doc.user_data key of the runner-up tags a structperc_tagger with `alternatives` writes and a
# structperc_parser's reranker with `tag_flips` reads (StructuredTagger.alternatives)
TAG_ALTERNATIVES = "structperc_tag_alternatives"

Attrs = Union[int, str, Sequence[Union[int, str]]]


def _major_minor(version: str) -> Tuple[str, ...]:
    return tuple(version.split(".")[:2])


def _load() -> Tuple[Optional[ModuleType], str]:
    """The compiled module if it can be used with the running spaCy, and why not otherwise."""
    if os.environ.get("STRUCTPERC_DOCARRAYS", "").lower() == "python":
        return None, "STRUCTPERC_DOCARRAYS=python"
    try:
        with warnings.catch_warnings():
            # Cython warns (RuntimeWarning) when an imported type is larger than it was at
            # compile time ("size changed, may indicate binary incompatibility"), and raises
            # when it is smaller: either way the structs are not those it was compiled for.
            warnings.filterwarnings("error", message=".*size changed.*")
            from . import _docarrays
    except Exception as err:   # ImportError, ValueError (type size), a warning made an error
        return None, f"spacy_structperc._docarrays did not import: {err!r}"
    built, running = _docarrays.BUILT_FOR_SPACY, spacy_about.__version__
    if not built or _major_minor(built) != _major_minor(running):
        return None, f"spacy_structperc._docarrays was compiled for spaCy {built or '(unknown)'}, running {running}"
    return _docarrays, ""


_compiled, WHY_PYTHON = _load()
FAST_PATH = _compiled is not None


@contextmanager
def python_path() -> Iterator[None]:
    """Use the Python path inside the block (for tests: it must give what the compiled one does).
    It sets a module-wide flag: do not use it while other threads annotate."""
    global FAST_PATH
    old, FAST_PATH = FAST_PATH, False
    try:
        yield
    finally:
        FAST_PATH = old


def attr_ids(attrs: Attrs) -> List[int]:
    """Attribute ids as Doc.to_array / from_array take them: one id or name, or a sequence of
    them; names (any case) are looked up in spacy.attrs.IDS."""
    if isinstance(attrs, str) or not hasattr(attrs, "__iter__"):
        attrs = [attrs]
    return [IDS[a.upper()] if isinstance(a, str) else int(a) for a in attrs]


def read(docs: Sequence[Doc], attrs: Attrs) -> numpy.ndarray:
    """The values of `attrs` of every token of `docs`, Doc after Doc: a uint64 array (tokens,
    len(attrs)) equal to numpy.concatenate([doc.to_array(attrs) for doc in docs]) with to_array's
    2-d shape (HEAD relative, as to_array gives it)."""
    if FAST_PATH:
        return _compiled.read(docs, attr_ids(attrs))  # type: ignore[union-attr]
    ids: List[Union[int, str]] = [*attr_ids(attrs)]
    columns = [doc.to_array(ids).reshape((len(doc), len(ids))) for doc in docs if len(doc)] if ids else []
    if not columns:
        return numpy.zeros((sum(map(len, docs)), len(ids)), dtype=numpy.uint64)
    return numpy.concatenate(columns)


def has_sent_starts(docs: Sequence[Doc]) -> numpy.ndarray:
    """[doc.has_annotation("SENT_START") for doc in docs], a bool array."""
    if FAST_PATH:
        return _compiled.has_sent_starts(docs)  # type: ignore[union-attr]
    return numpy.array([doc.has_annotation("SENT_START") for doc in docs], dtype=bool).reshape((-1,))


def has_user_hook(docs: Sequence[Doc], name: str) -> numpy.ndarray:
    """[name in doc.user_hooks for doc in docs], a bool array."""
    if FAST_PATH:
        return _compiled.has_user_hook(docs, name)  # type: ignore[union-attr]
    return numpy.array([name in doc.user_hooks for doc in docs], dtype=bool).reshape((-1,))


def write(docs: Sequence[Doc], offsets: numpy.ndarray, attrs: Attrs, values: numpy.ndarray) -> None:
    """Doc k gets rows offsets[k]:offsets[k + 1] of `values` (uint64, a column per attribute), as
    `doc.from_array(attrs, rows)` sets them (heads relative; with HEAD and DEP, children, edges
    and sentence starts set from the heads when some DEP is not 0). The whole batch is checked
    first: a head outside its Doc (S304), an ENT_IOB value that is not one (S305) or rows that
    do not fit the Docs (S306, S307) raise a ValueError and no Doc is written. MORPH is refused."""
    docs = list(docs)
    ids = attr_ids(attrs)
    array, bounds = _check(docs, offsets, ids, values)
    if FAST_PATH:
        _compiled.write(docs, numpy.asarray(bounds, dtype=numpy.int64), ids,  # type: ignore[union-attr]
                        numpy.ascontiguousarray(array))
        return
    for doc, a, b in zip(docs, bounds, bounds[1:]):
        if a < b:
            doc.from_array([*ids], cast(Ints2d, array[a:b]))


def _check(docs: List[Doc], offsets: numpy.ndarray, ids: List[int], values: numpy.ndarray
           ) -> Tuple[numpy.ndarray, List[int]]:
    """The checks of `write`, on either path: the values as a 2-d array and the offsets as a
    list, if the whole batch can be written (else the first problem's coded error)."""
    n_attrs = len(ids)
    if n_attrs == 0:
        raise ValueError(Errors.S307.format(problem="no attributes to write"))
    if MORPH in ids:
        raise ValueError(Errors.S307.format(problem="MORPH is not written by docarrays.write; use "
                                                    "Doc.from_array"))
    if len(set(ids)) != n_attrs:
        raise ValueError(Errors.S307.format(problem=f"an attribute is given twice ({ids})"))
    array = numpy.asarray(values)
    if array.dtype != numpy.uint64:
        raise ValueError(Errors.S307.format(problem=f"values must be uint64, not {array.dtype}"))
    if array.ndim == 1 and n_attrs == 1:
        array = array.reshape((-1, 1))
    if array.ndim != 2 or array.shape[1] != n_attrs:
        raise ValueError(Errors.S307.format(problem=f"values of shape {array.shape} for {n_attrs} attributes"))
    offsets = numpy.asarray(offsets)
    if offsets.shape != (len(docs) + 1,):
        raise ValueError(Errors.S307.format(
            problem=f"{len(docs)} Docs need {len(docs) + 1} offsets, not shape {offsets.shape}"))
    bounds = offsets.astype(numpy.int64).tolist()
    n_rows = len(array)
    if bounds[0] != 0 or bounds[-1] != n_rows:
        raise ValueError(Errors.S307.format(
            problem=f"offsets run from {bounds[0]} to {bounds[-1]}, not from 0 to the {n_rows} rows of the values"))
    lengths = numpy.asarray(bounds[1:], dtype=numpy.int64) - numpy.asarray(bounds[:-1], dtype=numpy.int64)
    misfit = numpy.flatnonzero(lengths != numpy.fromiter(map(len, docs), dtype=numpy.int64, count=len(docs)))
    if len(misfit):
        k = int(misfit[0])
        a, b = bounds[k], bounds[k + 1]
        raise ValueError(Errors.S306.format(doc=k, doc_length=len(docs[k]), start=a, end=b,
                                            array_length=b - a, n_rows=n_rows))
    # The first bad row of each kind, and its Doc: the compiled loop checks Doc after Doc, its
    # heads before its ENT_IOB values.
    found = []   # (doc, kind, row)
    rel = numpy.zeros((n_rows,), dtype=numpy.int64)
    if HEAD in ids:
        col = ids.index(HEAD)
        rel = array[:, col].astype(numpy.uint32).view(numpy.int32).astype(numpy.int64)  # as from_array
        positions = numpy.arange(n_rows) - numpy.repeat(numpy.asarray(bounds[:-1]), lengths)
        bad = numpy.flatnonzero((rel + positions < 0) | (rel + positions >= numpy.repeat(lengths, lengths)))
        if len(bad):
            found.append((_doc_of(bounds, int(bad[0])), 0, int(bad[0])))
    if ENT_IOB in ids:
        col = ids.index(ENT_IOB)
        bad = numpy.flatnonzero(array[:, col] >= len(Token.iob_strings()))
        if len(bad):
            found.append((_doc_of(bounds, int(bad[0])), 1, int(bad[0])))
    if found:
        k, kind, row = min(found)
        i = row - bounds[k]
        if kind == 0:
            value = array[row, ids.index(HEAD)]
            raise ValueError(Errors.S304.format(doc=k, index=i, value=value, rel_head_index=int(rel[row]),
                                                length=len(docs[k])))
        raise ValueError(Errors.S305.format(doc=k, index=i, value=array[row, ids.index(ENT_IOB)],
                                            values=Token.iob_strings()))
    return array, bounds


def _doc_of(bounds: List[int], row: int) -> int:
    return int(numpy.searchsorted(numpy.asarray(bounds), row, side="right")) - 1
