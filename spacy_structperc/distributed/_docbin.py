"""DocBin user data without srsly's per-Doc cost.

`DocBin.add` (with `store_user_data`) and `DocBin.get_docs` (de)serialize each Doc's user data
with `srsly.msgpack_dumps/loads`, which build a msgpack packer and look the registered codecs up
through the entry points (importlib.metadata) on every call: about 2.5 ms per Doc, more than
tagging it. Here the packer and the codec chain are built once per process; the bytes are the
ones srsly writes, so any DocBin reader reads them.
"""
import functools
import zlib
from typing import Any, Dict, Iterable, Iterator, List, Optional

import numpy
from srsly import msgpack as _msgpack

# The token attributes whose strings `DocBin.add` adds one token at a time (text, tag_, lemma_,
# norm_, str(morph), dep_, ent_type_, ent_kb_id_, ent_id_).
_STRING_ATTRS = ("ORTH", "TAG", "LEMMA", "NORM", "MORPH", "DEP", "ENT_TYPE", "ENT_KB_ID", "ENT_ID")


@functools.lru_cache(maxsize=1)
def _packer():
    return _msgpack.Packer(use_bin_type=True)


@functools.lru_cache(maxsize=1)
def _object_hook():
    hook = None
    for decoder in _msgpack.msgpack_decoders.get_all().values():
        hook = functools.partial(decoder, chain=hook)
    return hook


def pack_user_data(user_data: Dict[Any, Any]) -> bytes:
    return _packer().pack(user_data)


def unpack_user_data(data: bytes) -> Dict[Any, Any]:
    return _msgpack._unpackb(data, raw=False, use_list=False, object_hook=_object_hook())


def set_user_data(db, user_data: List[Optional[Dict[Any, Any]]]) -> None:
    """Give a DocBin made with `store_user_data=False` one user-data dict (or None) per Doc, as
    `store_user_data=True` would have; nothing is stored when all are empty."""
    if len(user_data) != len(db):
        raise ValueError(f"{len(user_data)} user-data entries for {len(db)} docs")
    if any(user_data):
        db.store_user_data = True
        db.user_data = [pack_user_data(u) if u else None for u in user_data]


def get_docs(db, vocab) -> Iterator:
    """`db.get_docs(vocab)` with each Doc's user data restored."""
    stored, db.user_data = db.user_data, []
    try:
        for i, doc in enumerate(db.get_docs(vocab)):
            if i < len(stored) and stored[i] is not None:
                doc.user_data.update(unpack_user_data(stored[i]))
            yield doc
    finally:
        db.user_data = stored


def add_docs(db, docs: Iterable) -> None:
    """`db.add(doc)` for each Doc, with the strings collected once per distinct value instead of
    nine `StringStore.add` calls per token (a tenth of the cost of tagging). The DocBin ends up
    as `add` leaves it: the same arrays, flags, cats, span groups and string set (tested)."""
    from spacy.attrs import SPACY, intify_attrs

    string_ids = list(intify_attrs({a: 0 for a in _STRING_ATTRS}).keys())
    n_attrs = len(db.attrs)
    # One to_array call per Doc: the DocBin's attributes, SPACY, and the string attributes it
    # does not store (none with the default attributes: each string column is read only once).
    extra = [a for a in string_ids if a not in db.attrs]
    columns = list(db.attrs) + [SPACY] + extra
    where = {a: i for i, a in enumerate(columns)}
    string_cols = numpy.asarray([where[a] for a in string_ids], dtype=numpy.intp)
    seen: List[numpy.ndarray] = []
    vocab = None
    for doc in docs:
        vocab = doc.vocab
        array = doc.to_array(columns)
        db.tokens.append(array[:, :n_attrs])
        db.spaces.append(array[:, n_attrs:n_attrs + 1].astype(bool))
        db.flags.append({"has_unknown_spaces": doc.has_unknown_spaces})
        seen.append(array[:, string_cols].reshape(-1))
        db.cats.append(doc.cats)
        if db.store_user_data:
            db.user_data.append(pack_user_data(doc.user_data))
        db.span_groups.append(doc.spans.to_bytes())
        for group in doc.spans.values():
            for span in group:
                db.strings.add(span.label_)
                if span.kb_id in span.doc.vocab.strings:
                    db.strings.add(span.kb_id_)
                if span.id in span.doc.vocab.strings:
                    db.strings.add(span.id_)
    if seen:
        keys = numpy.sort(numpy.concatenate(seen))
        keep = numpy.ones(keys.size, dtype=bool)
        keep[1:] = keys[1:] != keys[:-1]
        for key in keys[keep].tolist():
            db.strings.add(vocab.strings[key] if key else "")


def docbin_bytes(db, level: int = 1) -> bytes:
    """`db.to_bytes()` compressed at zlib `level` (DocBin uses zlib's default, 6: a third of
    annotate's writing time for files a few percent smaller). Any zlib level decompresses the
    same way, so `DocBin().from_bytes` reads them; the message is the one `to_bytes` packs."""
    lengths = [len(tokens) for tokens in db.tokens]
    tokens = numpy.vstack(db.tokens) if db.tokens else numpy.asarray([])
    spaces = numpy.vstack(db.spaces) if db.spaces else numpy.asarray([])
    msg = {
        "version": db.version,
        "attrs": db.attrs,
        "tokens": tokens.tobytes("C"),
        "spaces": spaces.tobytes("C"),
        "lengths": numpy.asarray(lengths, dtype="int32").tobytes("C"),
        "strings": sorted(db.strings),
        "cats": db.cats,
        "flags": db.flags,
        "span_groups": db.span_groups,
    }
    if db.store_user_data:
        msg["user_data"] = db.user_data
    return zlib.compress(_packer().pack(msg), level)
