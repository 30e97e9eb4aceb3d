"""DocBin user data without srsly's per-Doc cost.

`DocBin.add` (with `store_user_data`) and `DocBin.get_docs` (de)serialize each Doc's user data
with `srsly.msgpack_dumps/loads`, which build a msgpack packer and look the registered codecs up
through the entry points (importlib.metadata) on every call: about 2.5 ms per Doc, more than
tagging it. Here the packer and the codec chain are built once per process; the bytes are the
ones srsly writes, so any DocBin reader reads them.
"""
import functools
from typing import Any, Dict, Iterator, List, Optional

from srsly import msgpack as _msgpack


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
