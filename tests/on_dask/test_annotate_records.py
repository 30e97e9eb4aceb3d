"""What a record of a .txt or .jsonl input is, and that the driver's plan and the workers agree
on it: every record annotated exactly once, under its own (source, line) identity.

A line ends at "\\n" only (one "\\r" before it dropped); a bare "\\r", U+2028, U+2029, U+0085,
"\\x0b" or "\\x0c" stays inside the record; whitespace-only lines are not records; a UTF-8 BOM at
the start of a file is not part of the first record. Before the shared splitter the plan counted
lines at "\\n" and the workers split with bytes.splitlines() (which also splits at a bare "\\r"):
400 records gave 402 Docs, rc 0, no error record, and repeated identities."""
import io
import json
from collections import Counter

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_structperc.distributed.annotate import annotate, annotate_partition, plan_partitions, text_records

SEPARATORS = ["\r", "\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c"]


def _lines(n):
    """(raw line as written, text of its record or None) for n lines of every kind."""
    out = []
    for i in range(n):
        sep = SEPARATORS[i % len(SEPARATORS)]
        kind = i % 5
        if kind == 0:
            out.append((f"w{i} a{sep}b{i}\n", f"w{i} a{sep}b{i}"))
        elif kind == 1:
            out.append((f"w{i} crlf\r\n", f"w{i} crlf"))
        elif kind == 2:
            out.append(("\n" if i % 2 else "  \t \r\n", None))   # blank: not a record
        elif kind == 3:
            out.append((f"w{i}{sep} x\r\n", f"w{i}{sep} x"))
        else:
            out.append((f"{sep}w{i}\n", f"{sep}w{i}"))
    return out


def _jsonl_line(i, text):
    # a raw "\r" between JSON tokens (JSON whitespace), U+2028 raw inside the string
    return json.dumps({"text": text}, ensure_ascii=False)[:-1] + f',\r"id": {i}}}'


def write_inputs(folder, n=40):
    """a.txt (with a BOM, no newline at the end) and b.jsonl; returns {(path, line): text}."""
    folder.mkdir(exist_ok=True)
    expected = {}
    lines = _lines(n)
    txt = "\ufeff" + "".join(raw for raw, _ in lines) + "last line\rno newline"
    (folder / "a.txt").write_bytes(txt.encode("utf8"))
    for no, (_, text) in enumerate(lines, 1):
        if text is not None:
            expected[(str(folder / "a.txt"), no)] = text
    expected[(str(folder / "a.txt"), n + 1)] = "last line\rno newline"
    jl = []
    for no, (raw, text) in enumerate(lines, 1):
        if text is None:
            jl.append(raw)
        else:
            jl.append(_jsonl_line(no, text) + ("\r\n" if no % 2 else "\n"))
            expected[(str(folder / "b.jsonl"), no)] = text
    (folder / "b.jsonl").write_bytes("".join(jl).encode("utf8"))
    return expected


# The splitter itself ------------------------------------------------------------------------------

def test_a_line_ends_at_newline_only():
    data = "\ufeffone\rtwo\r\nthree\u2028four\n\n \r\nfive\x85six\x0bseven\r\rend".encode("utf8")
    got = [(no, start, end, rec.decode("utf8")) for no, start, end, rec in text_records(io.BytesIO(data))]
    assert [(no, text) for no, _, _, text in got] == [
        (1, "one\rtwo"), (2, "three\u2028four"), (5, "five\x85six\x0bseven\r\rend")]
    # the byte ranges tile the lines they came from
    assert data[got[0][1]:got[0][2]] == "\ufeffone\rtwo\r\n".encode("utf8")
    assert got[-1][2] == len(data)


def test_a_partition_reads_the_records_the_plan_counted(tmp_path):
    expected = write_inputs(tmp_path / "in")
    paths = sorted(str(p) for p in (tmp_path / "in").iterdir())
    for size in (1, 3, 7, 1000):
        parts = plan_partitions(paths, size)
        assert sum(p["n"] for p in parts) == len(expected)
        seen = []
        for part in parts:
            with open(part["path"], "rb") as fh:
                fh.seek(part["offset"])
                data = fh.read(part["end"] - part["offset"])
            recs = list(text_records(io.BytesIO(data), part["first_line"], part["offset"]))
            assert len(recs) == part["n"], (size, part)
            seen += [(part["path"], no) for no, _, _, _ in recs]
        assert sorted(seen) == sorted(expected), size


# Through the workers' code --------------------------------------------------------------------

@pytest.fixture(scope="module")
def blank_pipeline(tmp_path_factory):
    path = tmp_path_factory.mktemp("blank") / "nlp"
    spacy.blank("en").to_disk(path)
    return str(path)


def _annotated(out):
    seen, texts, errors = Counter(), {}, []
    vocab = spacy.blank("en").vocab
    for path in sorted(out.glob("part-*.spacy")):
        for doc in DocBin().from_disk(path).get_docs(vocab):
            ident = (doc.user_data["source"], doc.user_data["line"])
            seen[ident] += 1
            texts[ident] = doc.text
    for path in sorted(out.glob("part-*.errors.jsonl")):
        errors += [json.loads(line) for line in path.read_text().splitlines()]
    return seen, texts, errors


def test_every_record_is_annotated_once_by_the_worker_code(tmp_path, blank_pipeline):
    expected = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    paths = sorted(str(p) for p in (tmp_path / "in").iterdir())
    for part in plan_partitions(paths, 4):
        annotate_partition(part, blank_pipeline, str(out))
    seen, texts, errors = _annotated(out)
    assert errors == []
    assert sorted(seen) == sorted(expected) and set(seen.values()) == {1}
    assert texts == expected


def test_every_record_is_annotated_once_on_dask(tmp_path, blank_pipeline, cluster):
    expected = write_inputs(tmp_path / "in", n=24)
    out = tmp_path / "out"
    result = annotate(blank_pipeline, str(tmp_path / "in"), str(out), client=cluster, partition_size=10,
                      progress=False)
    seen, texts, errors = _annotated(out)
    assert result["docs"] == len(expected) and result["errors"] == 0 and errors == []
    assert sorted(seen) == sorted(expected) and set(seen.values()) == {1}
    assert texts == expected
