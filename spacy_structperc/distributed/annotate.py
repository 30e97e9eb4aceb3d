r"""`annotate`: a corpus through a saved pipeline, in Dask partitions, resumable and lossless.

Inputs are .txt files (a record per non-blank line), .jsonl files (a record per non-blank line:
an object with a "text" field; other fields travel in `doc.user_data["meta"]`) or .spacy DocBins
(a record per Doc), given as a file, a folder or a glob, local or any fsspec URL. A line of a
.txt or .jsonl file ends at "\n" and nowhere else: one "\r" before it is dropped (Windows line
ends), and a bare "\r", "\u2028" or any other Unicode line separator stays inside the record's
text; a line of whitespace only is not a record; a UTF-8 byte-order mark at the start of the
file is not part of the first record. Line numbers (`line` in the identity) count "\n" from 1.
The driver's plan and the workers read records through the same splitter (`text_records`), so
they always agree on what a record is. The driver cuts each file into partitions of
`partition_size` records (text by byte offsets found in one scan, so a worker seeks to its
partition) and each partition becomes

    part-FFFFF-SSSSSSSSSS.spacy           the annotated Docs (user_data: source, line, id, meta)
    part-FFFFF-SSSSSSSSSS.errors.jsonl    the records that could not be annotated, with the reason
    part-FFFFF-SSSSSSSSSS.jsonl           the annotations as JSON lines (with --jsonl)

written to a temporary name and moved into place, the .spacy last: a partition is finished when
its .spacy exists, and a half-written one never does. A re-run skips finished partitions. Every
input record is in exactly one .spacy or one errors file.
"""
import io
import json
import os
import time
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..errors import Errors
from ._docbin import add_docs, docbin_bytes, get_docs, set_user_data

KINDS = {".txt": "text", ".jsonl": "jsonl", ".spacy": "spacy"}
MANIFEST = "annotate.json"
_WORKER_NLP: Dict[str, Any] = {}


# Planning --------------------------------------------------------------------------------------

def find_inputs(input: str) -> List[str]:
    import fsspec

    fs, _, paths = fsspec.get_fs_token_paths(input)
    found: List[str] = []
    for path in paths:
        if fs.isdir(path):
            found.extend(p for p in fs.find(path) if os.path.splitext(p)[1] in KINDS)
        elif fs.exists(path):
            found.append(path)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    prefix = "" if protocol in ("file", "local") else f"{protocol}://"
    found = sorted(dict.fromkeys(prefix + p for p in found))
    if not found:
        raise ValueError(Errors.S347.format(input=input))
    for path in found:
        if os.path.splitext(path)[1] not in KINDS:
            raise ValueError(Errors.S348.format(path=path, reason="not a .txt, .jsonl or .spacy file"))
    return found


def plan_partitions(paths: List[str], partition_size: int) -> List[Dict[str, Any]]:
    """Partitions of at most `partition_size` records; text ones carry byte offsets."""
    import fsspec
    from spacy.tokens import DocBin

    parts = []
    for f_idx, path in enumerate(paths):
        kind = KINDS[os.path.splitext(path)[1]]
        if kind == "spacy":
            with fsspec.open(path, "rb") as fh:
                n = len(DocBin().from_bytes(fh.read()))
            for start in range(0, n, partition_size):
                parts.append({"id": f"part-{f_idx:05d}-{start:010d}", "path": path, "kind": kind,
                              "start": start, "stop": min(n, start + partition_size)})
            continue
        # One scan: the byte offset and line number where every partition starts.
        n_records = 0
        part: Optional[Dict[str, Any]] = None
        with fsspec.open(path, "rb") as fh:
            for line_no, start, end, _ in text_records(fh):
                if part is None or part["n"] == partition_size:
                    if part is not None:
                        parts.append(part)
                    part = {"id": f"part-{f_idx:05d}-{n_records:010d}", "path": path, "kind": kind,
                            "offset": start, "first_line": line_no, "n": 0}
                part["n"] += 1
                part["end"] = end
                n_records += 1
        if part is not None:
            parts.append(part)
    return parts


BOM = b"\xef\xbb\xbf"


def text_records(lines: Iterable[bytes], first_line: int = 1, offset: int = 0
                 ) -> Iterator[Tuple[int, int, int, bytes]]:
    """The records of a .txt or .jsonl input: (line number, start byte, end byte, record bytes)
    for each non-blank line of `lines` (a binary file object, or its lines split at b"\\n" with
    the b"\\n" kept: what iterating a binary file gives). `first_line` and `offset` are the line
    number and byte offset of the first line (a partition's, when a worker reads one).

    The one definition of a record, for the driver's plan and the workers alike: a line ends at
    b"\\n" only; its b"\\n" and one b"\\r" before it are not part of the record; a bare b"\\r" and
    every other line separator (U+2028, U+0085, form feed...) is; a line of ASCII whitespace
    only is not a record; a UTF-8 byte-order mark at byte 0 is dropped. The record bytes are
    not decoded (the worker does that, and reports bytes that are not UTF-8)."""
    for line_no, line in enumerate(lines, first_line):
        start = offset
        offset += len(line)
        record = line[:-1] if line.endswith(b"\n") else line
        if record.endswith(b"\r"):
            record = record[:-1]
        if start == 0 and record.startswith(BOM):
            record = record[len(BOM):]
        if record.strip():
            yield line_no, start, offset, record


# The task a worker runs ------------------------------------------------------------------------

def pipeline_stamp(path: str) -> str:
    """A stamp of the saved pipeline at `path` (each file's name, size and modification time),
    so a worker reloads a pipeline that was saved again under the same path."""
    import hashlib

    import fsspec

    fs, _, (root,) = fsspec.get_fs_token_paths(path)
    h = hashlib.sha1()
    for name, info in sorted(fs.find(root, detail=True).items()):
        h.update(f"{name}\0{info.get('size')}\0{info.get('mtime', info.get('LastModified', ''))}\n".encode())
    return h.hexdigest()


def _pipeline(path: str, stamp: Optional[str] = None):
    """The pipeline at `path`, loaded once per worker process and kept for later partitions
    (and later runs) while its stamp is the same."""
    key = (path, stamp)
    nlp = _WORKER_NLP.get(key)
    if nlp is None:
        import spacy

        _WORKER_NLP.clear()
        nlp = _WORKER_NLP[key] = spacy.load(path)
    return nlp


def _records(part: Dict[str, Any], nlp) -> Iterator[Tuple[Dict[str, Any], Any, Optional[str]]]:
    """(identity, input, error) per record of the partition: input is a text or a Doc."""
    import fsspec

    path = part["path"]
    if part["kind"] == "spacy":
        from spacy.tokens import DocBin

        with fsspec.open(path, "rb") as fh:
            db = DocBin().from_bytes(fh.read())
        for i, doc in enumerate(get_docs(db, nlp.vocab)):
            if part["start"] <= i < part["stop"]:
                yield {"source": path, "line": i}, doc, None
        return
    with fsspec.open(path, "rb") as fh:
        fh.seek(part["offset"])
        data = fh.read(part["end"] - part["offset"])
    for line_no, _, _, raw in text_records(io.BytesIO(data), part["first_line"], part["offset"]):
        ident: Dict[str, Any] = {"source": path, "line": line_no}
        try:
            line = raw.decode("utf8")
        except UnicodeDecodeError as e:
            yield ident, None, f"not UTF-8 ({e})"
            continue
        if part["kind"] == "text":
            yield ident, line, None
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            yield ident, None, f"not JSON ({e})"
            continue
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            yield ident, None, 'no "text" string field'
            continue
        if "id" in record:
            ident["id"] = record["id"]
        meta = {k: v for k, v in record.items() if k not in ("text", "id")}
        if meta:
            ident["meta"] = meta
        yield ident, record["text"], None


def _annotate(nlp, inputs: List[Tuple[Dict, Any]], batch_size: int):
    """(identity, doc or None, error or None) for each input; a failing batch is redone one
    record at a time so only the records that fail are lost to the errors file."""
    try:
        docs = list(nlp.pipe([x for _, x in inputs], batch_size=batch_size))
        return [(ident, doc, None) for (ident, _), doc in zip(inputs, docs)]
    except Exception:
        out = []
        for ident, x in inputs:
            try:
                out.append((ident, nlp(x), None))
            except Exception as e:
                out.append((ident, None, f"{type(e).__name__}: {e}"))
        return out


def doc_to_json(doc, ident: Dict[str, Any]) -> Dict[str, Any]:
    tokens = []
    for t in doc:
        tok: Dict[str, Any] = {"text": t.text}
        for attr in ("tag_", "pos_", "lemma_", "dep_"):
            if getattr(t, attr):
                tok[attr.rstrip("_")] = getattr(t, attr)
        if t.dep_:
            tok["head"] = t.head.i
        tokens.append(tok)
    out = {**ident, "text": doc.text, "tokens": tokens}
    if doc.ents:
        out["ents"] = [[e.start, e.end, e.label_] for e in doc.ents]
    return out


def _write_atomic(fs, path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with fs.open(tmp, "wb") as fh:
        fh.write(data)
    fs.mv(tmp, path)


def annotate_partition(part: Dict[str, Any], pipeline: str, output: str, jsonl: bool = False,
                       batch_size: int = 256, stamp: Optional[str] = None) -> Dict[str, Any]:
    """Annotate one partition and write its files (the .spacy last). Returns its counts."""
    import fsspec
    from spacy.tokens import DocBin

    start, cpu_start = time.perf_counter(), time.thread_time()
    nlp = _pipeline(pipeline, stamp)
    loaded = time.perf_counter()
    fs, _, (root,) = fsspec.get_fs_token_paths(output)
    base = f"{root.rstrip('/')}/{part['id']}"
    docs = DocBin()   # user data set at the end, packed the fast way (see _docbin.py)
    user_data: List[Dict[str, Any]] = []
    errors: List[Dict[str, Any]] = []
    lines: List[str] = []
    n_words = 0
    pending: List[Tuple[Dict, Any]] = []
    # CPU seconds of this thread: the pipeline, and building the DocBin (and JSON lines).
    cpu = {"pipeline": 0.0, "docbin": 0.0}

    def flush():
        nonlocal n_words
        done = []
        at = time.thread_time()
        annotated = _annotate(nlp, pending, batch_size)
        cpu["pipeline"] += time.thread_time() - at
        at = time.thread_time()
        for ident, doc, error in annotated:
            if error is not None:
                errors.append({**ident, "reason": error})
                continue
            doc.user_data.update(ident)
            done.append(doc)
            user_data.append(dict(doc.user_data))
            n_words += len(doc)
            if jsonl:
                lines.append(json.dumps(doc_to_json(doc, ident), ensure_ascii=False))
        add_docs(docs, done)
        pending.clear()
        cpu["docbin"] += time.thread_time() - at

    for ident, x, error in _records(part, nlp):
        if error is not None:
            errors.append({**ident, "reason": error})
            continue
        pending.append((ident, x))
        if len(pending) >= batch_size:
            flush()
    flush()
    annotated, write_cpu = time.perf_counter(), time.thread_time()
    _write_atomic(fs, base + ".errors.jsonl", "".join(json.dumps(e) + "\n" for e in errors).encode("utf8"))
    if jsonl:
        _write_atomic(fs, base + ".jsonl", "".join(line + "\n" for line in lines).encode("utf8"))
    set_user_data(docs, user_data)
    _write_atomic(fs, base + ".spacy", docbin_bytes(docs))
    return {"id": part["id"], "docs": len(docs), "errors": len(errors), "words": n_words,
            "seconds": time.perf_counter() - start, "pid": os.getpid(),
            "cpu": time.thread_time() - cpu_start,
            "phases": {"load": loaded - start, "annotate": annotated - loaded,
                       "write": time.perf_counter() - annotated},
            # The rest of annotate's CPU is reading the input records.
            "phases_cpu": {**cpu, "write": time.thread_time() - write_cpu}}


# The driver ------------------------------------------------------------------------------------

def annotate(pipeline: str, input: str, output: str, *, client, partition_size: int = 1000,
             jsonl: bool = False, batch_size: int = 256, progress: bool = True) -> Dict[str, Any]:
    """Annotate every record under `input` with the pipeline at `pipeline` (a path every worker
    can read) on the Dask `client`; skip partitions a previous run finished."""
    import fsspec
    from distributed import as_completed

    if partition_size < 1:
        raise ValueError(Errors.S012.format(setting="partition_size", name="annotate",
                                            requirement="a positive integer", value=partition_size))
    paths = find_inputs(input)
    parts = plan_partitions(paths, partition_size)
    fs, _, (root,) = fsspec.get_fs_token_paths(output)
    fs.makedirs(root, exist_ok=True)
    manifest_path = f"{root.rstrip('/')}/{MANIFEST}"
    manifest = {"inputs": paths, "partition_size": partition_size,
                "partitions": [p["id"] for p in parts]}
    if fs.exists(manifest_path):
        with fs.open(manifest_path, "rb") as fh:
            old = json.loads(fh.read())
        for field in ("inputs", "partition_size", "partitions"):
            if old.get(field) != manifest[field]:
                raise ValueError(Errors.S349.format(output=output, field=field, found=old.get(field),
                                                    expected=manifest[field]))
    else:
        _write_atomic(fs, manifest_path, json.dumps(manifest, indent=2).encode("utf8"))
    todo = [p for p in parts if not fs.exists(f"{root.rstrip('/')}/{p['id']}.spacy")]
    token = uuid.uuid4().hex[:12]
    start = time.perf_counter()
    stamp = pipeline_stamp(pipeline)
    futures = [client.submit(annotate_partition, p, pipeline, output, jsonl, batch_size, stamp, pure=False,
                             key=f"structperc-annotate-{token}-{p['id']}") for p in todo]
    results = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(parts), initial=len(parts) - len(todo), unit="partition", desc="annotate")
    try:
        for future in as_completed(futures):
            results.append(future.result())
            if bar is not None:
                bar.update(1)
                bar.set_postfix(words=sum(r["words"] for r in results))
    finally:
        if bar is not None:
            bar.close()
    for tmp in fs.glob(f"{root.rstrip('/')}/*.tmp-*"):   # left by workers that died mid-write
        fs.rm(tmp)
    seconds = time.perf_counter() - start
    words = sum(r["words"] for r in results)
    return {"partitions": len(parts), "skipped": len(parts) - len(todo), "annotated": len(results),
            "docs": sum(r["docs"] for r in results), "errors": sum(r["errors"] for r in results),
            "words": words, "seconds": seconds, "words_per_second": words / seconds if seconds else 0.0,
            "worker_phases": {k: sum(r["phases"][k] for r in results) for k in ("load", "annotate", "write")},
            "worker_phases_cpu": {k: sum(r["phases_cpu"][k] for r in results) for k in ("pipeline", "docbin", "write")},
            "worker_cpu": {str(pid): sum(r["cpu"] for r in results if r["pid"] == pid)
                           for pid in sorted({r["pid"] for r in results})}}
