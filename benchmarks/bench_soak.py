"""Soak run of the Dask commands under worker loss (not timed: a reliability check).

1. ``annotate`` of N short documents (default 100,000) on an embedded LocalCluster of two
   worker processes, while a thread SIGKILLs a random worker every few seconds (uniform 3-6 s):
   every record must come out once (a Doc in a ``.spacy`` shard or a line in an
   ``.errors.jsonl``), none twice; a second run of the same command over the same output must
   skip every partition (the run is finished). If the run under kills stops (Dask gives up on a
   task whose workers died 4 times: kills faster than a fresh worker finishes a partition), that
   is recorded, and the second run must finish the rest.
2. ``train-distributed`` of a synthetic tagger corpus for E epochs on a LocalCluster of two
   workers with a worker killed in every epoch (the fault hook: shard 0's worker dies after its
   first batch of every epoch, and every worker holding the epoch's data as soon as it got it):
   the saved model's digest must equal an undisturbed run's (two shards trained in turn in this
   process: the workers' model bit for bit).

Writes ``benchmarks/results/soak.json`` (paths relative to the repository). CPU heavy for a few
minutes on two cores: ``--docs`` and ``--train-sentences`` make it smaller.

    python benchmarks/bench_soak.py [--docs 100000] [--epochs 4] [--kill-every 3,6]
"""
import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, RESULTS_DIR, git_revision, load_average, machine_info, now_iso  # noqa: E402

WORDS = {
    "DT": ["the", "a", "this", "every", "some"],
    "JJ": ["big", "small", "red", "old", "quick", "green", "new", "long"],
    "NN": ["dog", "cat", "house", "idea", "car", "tree", "bird", "river", "city", "book"],
    "VBZ": ["sees", "likes", "finds", "takes", "wants", "reads"],
    "RB": ["quickly", "often", "never", "rarely"],
}


def sentence(rng):
    tags = ["DT"] + (["JJ"] if rng.random() < 0.5 else []) + ["NN"]
    tags += (["RB"] if rng.random() < 0.3 else []) + ["VBZ", "DT"]
    tags += (["JJ"] if rng.random() < 0.5 else []) + ["NN"]
    return [rng.choice(WORDS[t]) for t in tags], tags


def write_docbin(path, n, seed):
    import spacy
    from spacy.tokens import Doc, DocBin

    rng = random.Random(seed)
    vocab = spacy.blank("en").vocab
    db = DocBin()
    for _ in range(n):
        words, tags = sentence(rng)
        db.add(Doc(vocab, words=words, tags=tags))
    db.to_disk(path)
    return path


def write_config(path, work):
    from spacy import util

    config = util.load_config(REPO_ROOT / "configs" / "tagger.cfg", interpolate=False)
    config["components"]["tagger"]["model"]["n_buckets"] = 1 << 16
    config["components"]["tagger"]["model"]["features"] = {"@misc": "spacy-structperc.tagger_features_small.v1"}
    config["paths"]["tagger_labels"] = str(work / "no-labels.json")
    config.to_disk(path)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


class Killer(threading.Thread):
    """Kills a random worker of `client` every `low`-`high` seconds until stopped."""

    def __init__(self, client, low, high, seed=0):
        super().__init__(daemon=True)
        self.client, self.low, self.high = client, low, high
        self.rng, self.stop, self.kills, self.errors = random.Random(seed), threading.Event(), 0, []

    def run(self):
        from spacy_structperc.distributed import _faults

        while not self.stop.wait(self.rng.uniform(self.low, self.high)):
            try:
                workers = sorted(self.client.nthreads())
                if workers:
                    self.kills += _faults.kill_workers(self.client, [self.rng.choice(workers)], wait=10)
            except Exception as e:    # noqa: BLE001 - a kill that misses is counted, not fatal
                self.errors.append(f"{type(e).__name__}: {e}")


def count_output(folder: Path):
    """Docs in the .spacy shards, error records, and the (source, line) ids seen more than once."""
    import spacy
    from spacy.tokens import DocBin

    vocab = spacy.blank("en").vocab
    docs, errors, seen, dupes = 0, 0, set(), 0
    for path in sorted(folder.glob("*.spacy")):
        for doc in DocBin().from_disk(path).get_docs(vocab):
            docs += 1
            ident = (doc.user_data.get("source"), doc.user_data.get("line"))
            dupes += ident in seen
            seen.add(ident)
    for path in sorted(folder.glob("*.errors.jsonl")):
        with open(path, encoding="utf8") as f:
            errors += sum(1 for line in f if line.strip())
    return docs, errors, dupes


def soak_annotate(args, work: Path, model: Path):
    from spacy_structperc.distributed._dask import dask_client
    from spacy_structperc.distributed.annotate import annotate

    rng = random.Random(7)
    text = work / "input.txt"
    with open(text, "w", encoding="utf8") as f:
        for _ in range(args.docs):
            f.write(" ".join(sentence(rng)[0]) + "\n")
    out = work / "annotated"
    low, high = args.kill_every
    start = time.perf_counter()
    with dask_client("annotate", workers=2) as client:
        startup = client.structperc_startup_seconds
        killer = Killer(client, low, high, seed=1)
        killer.start()
        stopped = None
        try:
            summary = annotate(str(model), str(text), str(out), client=client, partition_size=args.partition_size,
                               progress=False)
        except Exception as e:    # noqa: BLE001 - recorded: a run that stops must be resumable
            stopped, summary = f"{type(e).__name__}: {str(e)[:300]}", None
        finally:
            killer.stop.set()
            killer.join()
        # The same command again, undisturbed: it skips the finished partitions (all of them, if
        # the run under kills finished) and does the rest.
        client.wait_for_workers(2, timeout=120)
        again = annotate(str(model), str(text), str(out), client=client, partition_size=args.partition_size,
                         progress=False)
    seconds = time.perf_counter() - start
    docs, errors, dupes = count_output(out)
    return {
        "docs_in": args.docs, "docs_out": docs, "error_records": errors, "duplicates": dupes,
        "every_record_once": docs + errors == args.docs and dupes == 0,
        "partitions": again["partitions"], "stopped_under_kills": stopped,
        "rerun_skipped": again["skipped"], "rerun_annotated": again["annotated"],
        "workers_killed": killer.kills, "kill_errors": killer.errors[:5],
        "kill_every_seconds": [low, high], "cluster_startup_seconds": round(startup, 2),
        "seconds": round(seconds, 1),
        "words_per_second_under_kills": None if summary is None else round(summary["words_per_second"]),
    }


def soak_train(args, work: Path):
    from spacy_structperc.distributed import _faults
    from spacy_structperc.distributed._dask import dask_client
    from spacy_structperc.distributed.train import train_distributed

    train = write_docbin(work / "train.spacy", args.train_sentences, 1)
    dev = write_docbin(work / "dev.spacy", 500, 2)
    config = write_config(work / "tagger.cfg", work)
    kw = dict(overrides={"paths.train": str(train), "paths.dev": str(dev)}, epochs=args.epochs, printer=None)
    start = time.perf_counter()
    train_distributed(config, work / "undisturbed", simulate=True, n_shards=2, **kw)
    undisturbed_seconds = time.perf_counter() - start
    fired = work / "fired"
    fired.mkdir()
    os.environ[_faults.ENV] = "mid-epoch@*,scatter@*"
    os.environ[_faults.ENV_DIR] = str(fired)
    try:
        start = time.perf_counter()
        with dask_client("train-distributed", workers=2) as client:
            log = train_distributed(config, work / "faulted", client=client,
                                    startup_seconds=client.structperc_startup_seconds, **kw)
        seconds = time.perf_counter() - start
    finally:
        del os.environ[_faults.ENV], os.environ[_faults.ENV_DIR]
    a = digest(work / "undisturbed" / "model-last" / "tagger" / "model")
    b = digest(work / "faulted" / "model-last" / "tagger" / "model")
    kills = sorted(p.name for p in fired.iterdir())
    return {
        "train_sentences": args.train_sentences, "epochs": args.epochs, "n_shards": log["n_shards"],
        "faults_fired": kills, "epochs_with_a_kill": len({k.rsplit("-e", 1)[1] for k in kills}),
        "resent_full_base": log["resent_full_base"], "rerun_lost_tasks": log["rerun_lost_tasks"],
        "model_digest_undisturbed": a, "model_digest_faulted": b, "same_model": a == b,
        "cluster_startup_seconds": round(log["startup_seconds"], 2),
        "epoch_seconds": [round(r["seconds"], 2) for r in log["epochs"]],
        "seconds": round(seconds, 1), "undisturbed_seconds_in_process": round(undisturbed_seconds, 1),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--partition-size", type=int, default=2000)
    p.add_argument("--kill-every", type=lambda s: [float(x) for x in s.split(",")], default=[3.0, 6.0],
                   help="seconds between kills: low,high (uniform)")
    p.add_argument("--train-sentences", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--parts", default="annotate,train", help="train always runs (annotate uses its model)")
    p.add_argument("--output", type=Path, default=RESULTS_DIR / "soak.json")
    args = p.parse_args(argv)
    parts = args.parts.split(",")
    results = {"command": "python benchmarks/bench_soak.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "date": now_iso(), "git": git_revision(), "machine": machine_info(),
               "load_average_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        work = Path(tmp)
        (work / "train").mkdir()
        results["train"] = soak_train(args, work / "train")    # annotate uses its model
        print(json.dumps(results["train"], indent=1), flush=True)
        if "annotate" in parts:
            model = work / "train" / "faulted" / "model-last"
            results["annotate"] = soak_annotate(args, work, model)
            print(json.dumps(results["annotate"], indent=1), flush=True)
    results["load_average_end"] = load_average()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(args.output)
    print(f"wrote {args.output.relative_to(REPO_ROOT) if args.output.is_relative_to(REPO_ROOT) else args.output}")
    ok = all(results[k].get(f) for k, f in (("train", "same_model"), ("annotate", "every_record_once"))
             if k in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
