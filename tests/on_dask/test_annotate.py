"""annotate: every input record once in the output or in an errors file, resumable partition by
partition, and nothing lost when a worker dies mid-partition."""
import json
import sys
from collections import Counter

import cloudpickle
import pytest
import spacy
from spacy.tokens import Doc, DocBin

from spacy_structperc.distributed.annotate import annotate
from spacy_structperc.distributed.train import train_distributed

from .conftest import toy_sentences, write_docbin, write_toy_config
from .test_train_distributed import KillOnce, assert_killed

pytestmark = pytest.mark.slow
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    train = write_docbin(tmp / "train.spacy", toy_sentences(120, 3))
    train_distributed(write_toy_config(tmp), tmp / "out", overrides={"paths.train": str(train), "paths.dev": str(train)},
                      simulate=True, epochs=1, printer=None)
    return str(tmp / "out" / "model-last")


@pytest.fixture
def corpus(tmp_path):
    """A folder of text, JSONL and .spacy inputs, with two bad JSONL records; returns the folder
    and every record's (source, line) identity."""
    src = tmp_path / "in"
    src.mkdir()
    sents = [" ".join(w) for w, _ in toy_sentences(40, 9)]
    records = []
    with open(src / "a.txt", "w") as f:
        for i, s in enumerate(sents[:20]):
            f.write(s + "\n")
            if i % 6 == 5:
                f.write("\n")   # blank lines are not records
    lines = [json.dumps({"text": s, "id": f"r{i}"}) for i, s in enumerate(sents[20:32])]
    lines[3] = '{"text": "broken'
    lines[7] = json.dumps({"body": "no text field"})
    (src / "b.jsonl").write_text("\n".join(lines) + "\n")
    vocab = spacy.blank("en").vocab
    db = DocBin()
    for s in sents[32:]:
        db.add(Doc(vocab, words=s.split()))
    db.to_disk(src / "c.spacy")
    for name in ("a.txt", "b.jsonl"):
        for n, line in enumerate((src / name).read_text().splitlines(), start=1):
            if line.strip():
                records.append((str(src / name), n))
    records += [(str(src / "c.spacy"), i) for i in range(len(sents) - 32)]
    return src, records


def _outputs(out):
    """(source, line) of every annotated doc and every error record, with the docs' tags."""
    seen, tagged = Counter(), []
    vocab = spacy.blank("en").vocab
    for path in sorted(out.glob("part-*.spacy")):
        for doc in DocBin().from_disk(path).get_docs(vocab):
            seen[(doc.user_data["source"], doc.user_data["line"])] += 1
            tagged.append(all(t.tag_ for t in doc))
    errors = []
    for path in sorted(out.glob("part-*.errors.jsonl")):
        for line in path.read_text().splitlines():
            e = json.loads(line)
            seen[(e["source"], e["line"])] += 1
            errors.append(e)
    return seen, tagged, errors


def test_every_record_once_and_a_rerun_redoes_only_the_deleted_shard(tmp_path, cluster, pipeline, corpus):
    src, records = corpus
    out = tmp_path / "out"
    summary = annotate(pipeline, str(src), str(out), client=cluster, partition_size=7, jsonl=True, progress=False)
    seen, tagged, errors = _outputs(out)
    assert seen == Counter(records)
    assert all(tagged) and len(tagged) == len(records) - 2
    assert sorted(e["reason"][:8] for e in errors) == ['no "text', "not JSON"]
    assert summary["errors"] == 2 and summary["skipped"] == 0
    n_parts = summary["partitions"]
    assert n_parts == len(list(out.glob("part-*.spacy"))) >= 6
    jsonl = [json.loads(l) for p in out.glob("part-*[0-9].jsonl") for l in p.read_text().splitlines()]
    assert len(jsonl) == len(records) - 2 and all(t.get("tag") for r in jsonl for t in r["tokens"])

    shards = sorted(out.glob("part-*.spacy"))
    victim = shards[len(shards) // 2]
    before = {p: p.stat().st_mtime_ns for p in shards if p != victim}
    victim.unlink()
    # What a worker killed mid-write leaves: a temporary file, which is not a finished partition.
    (out / (victim.name + ".tmp-deadbeef")).write_bytes(b"half a shard")
    again = annotate(pipeline, str(src), str(out), client=cluster, partition_size=7, jsonl=True, progress=False)
    assert again["skipped"] == n_parts - 1 and again["annotated"] == 1
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert victim.exists()
    assert _outputs(out)[0] == Counter(records)
    assert not list(out.glob("*.tmp-*"))


def test_resuming_with_other_partitions_is_refused(tmp_path, cluster, pipeline, corpus):
    src, _ = corpus
    annotate(pipeline, str(src), str(tmp_path / "out"), client=cluster, partition_size=7, progress=False)
    with pytest.raises(ValueError, match="S349"):
        annotate(pipeline, str(src), str(tmp_path / "out"), client=cluster, partition_size=5, progress=False)


def test_a_worker_killed_mid_partition_loses_no_record(tmp_path, cluster, pipeline, corpus):
    src, records = corpus
    marker = tmp_path / "killed"
    cluster.register_plugin(KillOnce("structperc-annotate-", marker))
    annotate(pipeline, str(src), str(tmp_path / "out"), client=cluster, partition_size=7, progress=False)
    assert_killed(marker)
    assert _outputs(tmp_path / "out")[0] == Counter(records)


def test_a_pipeline_saved_again_under_the_same_path_is_reloaded(pipeline, tmp_path):
    """Workers keep the loaded pipeline between partitions and runs, keyed by path and stamp:
    the same files give the same object, a pipeline saved again there a fresh load."""
    import shutil

    from spacy_structperc.distributed.annotate import _pipeline, pipeline_stamp

    path = tmp_path / "model"
    shutil.copytree(pipeline, path)
    first = _pipeline(str(path), pipeline_stamp(str(path)))
    assert _pipeline(str(path), pipeline_stamp(str(path))) is first
    first.meta["name"] = "saved_again_with_a_longer_name"
    first.to_disk(path)
    again = _pipeline(str(path), pipeline_stamp(str(path)))
    assert again is not first and again.meta["name"] == "saved_again_with_a_longer_name"
