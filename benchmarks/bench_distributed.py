"""Benchmark iterative parameter mixing (train-distributed) and annotate on Dask.

One run, on UD English EWT (gold tokenization, one Doc per sentence; XPOS in ``tag_``):

1. accuracy (``--parts accuracy``): the tagger (``configs/tagger.cfg``) and the tagger + parser
   (``configs/parser.cfg``) trained serially (one shard) and by mixing S shards, with the test
   accuracy after every epoch. The shards train one after another in one process
   (``train_distributed(simulate=True)``): a mix is the same whether its shards trained on one
   core or on S workers (tests/on_dask checks one case bit for bit), and the accuracy of 8 or 16
   shards needs no 16 cores. Each run is its own child process.
2. timing (``--parts timing``): the same configs trained serially in one process without Dask
   (``child_serial``: spaCy's update loop, a dev evaluation per epoch, model-best saved) and on
   a LocalCluster of 1, 2, ... worker processes (one thread each, one shard per worker): the
   wall-clock seconds per epoch with its evaluation and saving (the median over the epochs after
   the first, which also starts the workers), the speed-up over serial and over one worker, the
   workers' peak RSS and its ratio to the serial process's.
3. annotate (``--parts annotate``): words/s of ``python -m spacy_structperc annotate`` (warm
   workers) with 1 and 2 workers on the EWT training text, against one ``nlp.pipe`` process and
   ``nlp.pipe(n_process=2)``, with the tagger + parser pipeline of the serial run.
4. ceiling (``--parts ceiling``): what two of this machine's cores give at most: the same work in
   one process alone and in two processes at once (annotate's ``nlp.pipe``; the tagger's update
   epoch), started together once both are ready. The pair's throughput over the lone process's
   bounds every two-process speed-up above before its own costs (Dask, mixing, writing).

Timing and annotate run every setting ``--rounds`` times in interleaved rounds (each round in
another order) and report medians, so load from other jobs on a shared machine falls on all
settings alike; every run records the load average at its start and end. The clusters are the
ones the commands start (``distributed._dask.dask_client``). Every timing run records where an
epoch's time went (``breakdown``: serial update/average/evaluate/save; per worker the task's
prepare/train/delta wall and CPU seconds, preemptions and page faults, and the CPU of the
worker's other threads; the driver's mix message/apply/evaluate/save and its process CPU; the
sync gaps between epochs), printed per setting at the end of the part; annotate runs record the
workers' CPU by phase (pipeline, DocBin, writing) and the driver's CPU. ``--compare-nice`` adds
the most workers with their training threads at nice 0 and at nice 3 (``train_distributed(worker_nice=...)``;
the default runs take train_distributed's automatic choice, recorded in the details).

Writes ``benchmarks/results/distributed.json`` and ``distributed_mixing.png``. Timings are only
meaningful on an otherwise idle machine: each detail records the load average.

    python benchmarks/bench_distributed.py --parts accuracy
    python benchmarks/bench_distributed.py --parts accuracy --components parser --parser-epochs 4 \
        --parser-shards 2 --variants sent1,mistakes       # the parser with one sentence per Doc, mistake mixing
    python benchmarks/bench_distributed.py --parts testdocs --components parser   # parser test read as documents
    python benchmarks/bench_distributed.py --parts timing --components tagger --rounds 2 --eval-every 1,4 \
        --compare-nice
    python benchmarks/bench_distributed.py --parts annotate --rounds 2   # needs runs/accuracy-parser-1
    python benchmarks/bench_distributed.py --parts ceiling --rounds 3    # pipe needs runs/accuracy-parser-1
    python benchmarks/bench_distributed.py --quick            # smoke run on slices
    python benchmarks/bench_distributed.py --plots-only
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "distributed"
DATASET = "ud_en_ewt"
RESULTS = C.RESULTS_DIR / f"{COMPONENT}.json"
PLOT = C.RESULTS_DIR / "distributed_mixing.png"
CONFIGS = {"tagger": "tagger.cfg", "parser": "parser.cfg"}
DOCUMENTS_READER = "spacy-structperc.documents_corpus.v1"
METRIC = {"tagger": "tag_acc", "parser": "dep_las"}


# ---------------------------------------------------------------------------------------------
# Children


# Variants of the accuracy runs (--variants): config overrides and the mixing, beside the
# default (the config as it is, uniform mixing).
VARIANTS: Dict[str, Dict[str, Any]] = {
    "": {"overrides": {}, "mixing": "uniform", "label": ""},
    # One sentence per Doc: how configs/parser.cfg trained before its reader merged ten (da53c79).
    "sent1": {"overrides": {"corpora.train.sentences_per_doc": 1, "corpora.dev.sentences_per_doc": 1},
              "mixing": "uniform", "label": ", one sentence per Doc"},
    "mistakes": {"overrides": {}, "mixing": "mistakes", "label": ", mistake-weighted"},
    # The same runs with another shuffling seed: how far two runs of one setting differ.
    "seed1": {"overrides": {"system.seed": 1}, "mixing": "uniform", "label": ", seed 1"},
    "seed2": {"overrides": {"system.seed": 2}, "mixing": "uniform", "label": ", seed 2"},
    "seed3": {"overrides": {"system.seed": 3}, "mixing": "uniform", "label": ", seed 3"},
    # A diagnostic of why documents mix worse than sentences: the sentences are dealt to the
    # shards round-robin (as sent1 deals them) and each shard's sentences are then merged into
    # documents of the configured size, so every shard sees every document's vocabulary, while
    # the parser still trains on multi-sentence Docs with no sentence starts (it learns BREAK).
    "deal-sents": {"overrides": {}, "mixing": "uniform", "deal": "sentences",
                   "label": ", shards dealt by sentence"},
    "deal-sents-seed1": {"overrides": {"system.seed": 1}, "mixing": "uniform", "deal": "sentences",
                         "label": ", shards dealt by sentence, seed 1"},
}


def _deal_by_sentence(write_shards):
    """`write_shards` that splits each document into its sentences, deals the sentences
    round-robin and merges each shard's sentences back into documents of the original size."""
    from spacy.training import Example

    from spacy_structperc.documents import merge_sentences, predicted_doc

    def deal(examples, n_shards, shard_dir):
        sents = [s.as_doc() for eg in examples for s in eg.reference.sents]
        per_doc = max(1, round(len(sents) / len(examples)))
        urls = []
        for s in range(n_shards):
            docs = [Example(predicted_doc(ref), ref) for ref in merge_sentences(sents[s::n_shards], per_doc)]
            urls += write_shards(docs, 1, f"{shard_dir.rstrip('/')}/dealt-{s:03d}")
        return urls
    return deal


def child_accuracy(config: str, train: str, dev: str, test: str, output: str, shards: int,
                   epochs: int, overrides: Optional[Dict[str, Any]] = None, mixing: str = "uniform",
                   deal: str = "examples") -> Dict[str, Any]:
    """Train by mixing `shards` shards in this process; the test scores after every epoch.
    deal = "sentences": the shards are dealt by sentence (the deal-sents variant)."""
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    from spacy_structperc.distributed import train as dist_train
    from spacy_structperc.distributed.train import train_distributed

    if deal == "sentences":
        dist_train.write_shards = _deal_by_sentence(dist_train.write_shards)
    vocab = spacy.blank("en").vocab
    gold = list(DocBin().from_disk(test).get_docs(vocab))
    curve: List[Dict[str, Any]] = []

    def on_epoch(row, nlp):
        # Gold tokens, as the configs' gold_preproc readers give them.
        examples = [Example(spacy.tokens.Doc(nlp.vocab, words=[t.text for t in g],
                                             spaces=[bool(t.whitespace_) for t in g]), g) for g in gold]
        scores = nlp.evaluate(examples)
        point = {"epoch": row["epoch"], "dev_score": row["score"], "train_seconds": row["train_seconds"],
                 "mistakes": row["mistakes"], "test": {k: scores.get(k) for k in ("tag_acc", "dep_uas", "dep_las")}}
        # The test split as the config reads its dev split (the parser's: documents of ten
        # sentences with no sentence starts given, which it learned to split): the setting the
        # model was trained and selected for, beside the one-sentence Docs above.
        dev_reader = nlp.config["corpora"]["dev"]
        if dev_reader.get("@readers") == DOCUMENTS_READER and dev_reader.get("sentences_per_doc", 0) > 1:
            from spacy_structperc.documents import create_documents_corpus

            reader = create_documents_corpus(test, sentences_per_doc=dev_reader["sentences_per_doc"],
                                             gold_preproc=dev_reader.get("gold_preproc", True))
            scores = nlp.evaluate(list(reader(nlp)))
            point["test_docs"] = {k: scores.get(k) for k in ("tag_acc", "dep_uas", "dep_las", "sents_f")}
        curve.append(point)
        print(f"epoch {row['epoch']}: test {point['test']} documents {point.get('test_docs')}", flush=True)

    log = train_distributed(config, output, overrides={"paths.train": train, "paths.dev": dev, **(overrides or {})},
                            n_shards=shards, epochs=epochs, simulate=True, on_epoch=on_epoch, mixing=mixing)
    return {"curve": curve, "log_epochs": len(log["epochs"])}


def _training(config: str, train: str, dev: Optional[str]):
    """The config's pipeline initialized as `spacy train` does it: (nlp, resolved [training],
    training examples, dev corpus, the batcher's payload for `_update_epoch`)."""
    from spacy import util
    from spacy.schemas import ConfigSchemaTraining
    from spacy.training.initialize import init_nlp
    from spacy.util import registry, resolve_dot_names

    cfg = util.load_config(config, overrides={"paths.train": train, "paths.dev": dev}, interpolate=False)
    nlp = init_nlp(cfg, use_gpu=-1)
    T = registry.resolve(nlp.config.interpolate()["training"], schema=ConfigSchemaTraining)
    train_corpus, dev_corpus = resolve_dot_names(nlp.config.interpolate(), [T["train_corpus"], T["dev_corpus"]])
    size = nlp.config["training"].get("batcher", {}).get("size", 1000)
    return nlp, T, list(train_corpus(nlp)), dev_corpus, {"batch_words": size if isinstance(size, int) else 1000}


def _update_epoch(nlp, T, payload: Dict[str, Any], examples: List) -> None:
    """One pass of `nlp.update` over `examples` in train-distributed's batches."""
    from spacy_structperc.distributed.train import _batches

    for batch in _batches(payload, examples):
        nlp.update(batch, sgd=False, losses={}, exclude=T["frozen_components"],
                   annotates=T["annotating_components"])


def child_serial(config: str, train: str, dev: str, output: str, epochs: int, eval_every: int = 1) -> Dict[str, Any]:
    """The serial baseline: the config trained in this one process as `spacy train` does it (its
    corpus readers, `nlp.update` on batches of the configured size, a dev evaluation every
    `eval_every` epochs and after the last, model-best saved when it improves), without Dask.
    Before evaluating, the averaged weights are materialized, as train_distributed's driver does
    (so the comparison is of the training, not of two ways to score averages). Seconds per epoch:
    all of that, as `train_distributed`'s are; `update_seconds` the updates alone. The peak RSS is
    the process's."""
    import random

    from spacy.training.loop import create_evaluation_callback

    load_start = C.load_average()
    nlp, T, examples, dev_corpus, payload = _training(config, train, dev)
    evaluate = create_evaluation_callback(nlp, dev_corpus, T["score_weights"])
    seconds, update_seconds, scores = [], [], []
    best = None
    Path(output).mkdir(parents=True, exist_ok=True)
    cpu, phases = [], []
    for epoch in range(1, epochs + 1):
        marks = [("", _now())]
        start, cpu_start = time.perf_counter(), time.process_time()
        for _, pipe in nlp.pipeline:
            if hasattr(pipe, "start_epoch"):
                pipe.start_epoch(epoch - 1)
        random.Random(f"0:{epoch}:0").shuffle(examples)
        _update_epoch(nlp, T, payload, examples)
        update_seconds.append(time.perf_counter() - start)
        marks.append(("update", _now()))
        if epoch % eval_every == 0 or epoch == epochs:
            for _, pipe in nlp.pipeline:
                weights = getattr(getattr(pipe, "model", None), "weights", None)
                if hasattr(weights, "average"):
                    weights.average()
            marks.append(("average", _now()))
            scores.append(evaluate()[0])
            marks.append(("evaluate", _now()))
            if best is None or scores[-1] > best:
                best = scores[-1]
                nlp.to_disk(Path(output) / "model-best")
            marks.append(("save", _now()))
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
        phases.append(_phases(marks))
    steady = seconds[1:] or seconds
    return {"train_seconds": seconds, "update_seconds": update_seconds, "cpu_seconds": cpu,
            "cpu_per_epoch": statistics.median(cpu[1:] or cpu), "phases": phases,
            "breakdown": _median_phases(phases[1:] or phases),
            "seconds_per_epoch": statistics.median(steady), "dev_scores": scores,
            "load_average_start": load_start, "load_average": C.load_average()}


def _now() -> tuple:
    """(wall clock, this process's CPU seconds)."""
    return time.perf_counter(), time.process_time()


def _phases(marks) -> Dict[str, Dict[str, float]]:
    """Wall and CPU seconds between consecutive (name, _now()) marks, by the later mark's name."""
    return {name: {"wall": round(b[0] - a[0], 4), "cpu": round(b[1] - a[1], 4)}
            for (_, a), (name, b) in zip(marks, marks[1:])}


def _median_phases(phases: List[Dict[str, Dict[str, float]]]) -> Dict[str, Dict[str, float]]:
    """Per phase and figure, the median over the epochs (0 for an epoch without the phase: the
    evaluation and saving of the epochs that do not evaluate; a figure an epoch's phase lacks,
    such as the last epoch's time to submit the next, is left out)."""
    out: Dict[str, Dict[str, float]] = {}
    for name in dict.fromkeys(n for p in phases for n in p):
        fields = dict.fromkeys(f for p in phases for f in p.get(name, {}))
        out[name] = {}
        for f in fields:
            values = [p[name][f] if name in p else 0.0 for p in phases if name not in p or f in p[name]]
            out[name][f] = round(statistics.median(values), 4)
    return out


def child_timing(config: str, train: str, dev: str, output: str, workers: int, epochs: int,
                 eval_every: int = 1, worker_nice: Optional[int] = None) -> Dict[str, Any]:
    from spacy_structperc.distributed._dask import dask_client
    from spacy_structperc.distributed.train import train_distributed

    load_start = C.load_average()
    # The LocalCluster train-distributed starts (dask_client: one single-threaded worker process
    # per shard, its Dask settings).
    with dask_client("train-distributed", workers=workers) as client:
        log = train_distributed(config, output, overrides={"paths.train": train, "paths.dev": dev},
                                client=client, epochs=epochs, eval_every=eval_every, worker_nice=worker_nice,
                                startup_seconds=client.structperc_startup_seconds)
    rows = log["epochs"]
    # Wall-clock per epoch with its dev evaluation and saving, as the serial baseline counts it.
    steady = [r["wall_seconds"] for r in rows[1:]] or [rows[0]["wall_seconds"]]
    breakdown = _timing_breakdown(rows)
    keep = ("epoch", "wall_seconds", "train_seconds", "mix_seconds", "shard_seconds", "shard_phases", "shard_phases_cpu",
            "delta_mb", "mix_mb",
            "worker_peak_rss_mb", "score", "driver_cpu", "driver_phases_cpu", "mix_message_cpu", "shard_task_cpu", "shard_process_cpu")
    return {"train_seconds": [r["wall_seconds"] for r in rows], "seconds_per_epoch": statistics.median(steady),
            "idle_estimate": _idle_estimate([{k: r.get(k) for k in keep} for r in rows]),
            "worker_peak_rss_mb": max(max(r["worker_peak_rss_mb"]) for r in rows),
            "dev_scores": [r["score"] for r in rows], "epochs": [{k: r[k] for k in keep} for r in rows],
            "resent_full_base": log["resent_full_base"], "worker_nice": log.get("worker_nice"),
            "cluster_startup_seconds": log["startup_seconds"],     # apart from the epochs' seconds
            "phases": breakdown, "breakdown": _median_phases(breakdown[1:] or breakdown),
            "load_average_start": load_start, "load_average": C.load_average()}


def _timing_breakdown(rows: List[Dict[str, Any]]) -> List[Dict[str, Dict[str, float]]]:
    """Per epoch, where the time went (wall and CPU seconds; worker figures are the mean over
    the shards):

    * worker_prepare / worker_train / worker_delta: the task's phases (bringing the tables to
      the mix; the updates; reading the change journal), the task thread's wall and CPU, its
      preemptions (nivcsw) and minor page faults;
    * worker_other_cpu: the worker process's CPU outside the task thread (Dask's event loop,
      receiving the mix, sending the delta), from the end of its last task to the end of this one;
    * driver_mix_message / driver_apply / driver_evaluate / driver_save: the driver's main thread
      (CPU); driver_process: the driver process's CPU over the epoch (all threads: the scheduler
      and client of the LocalCluster too);
    * sync: wall seconds from the last shard's end to the driver having the results (late when
      the driver was still evaluating), from there to the next epoch submitted (the mix message),
      and from there to the first shard of the next epoch starting.
    """
    out: List[Dict[str, Dict[str, float]]] = []
    last_end: Dict[int, float] = {}
    for i, r in enumerate(rows):
        usage = r.get("shard_phases_usage")
        clock = r.get("clock")
        if not usage or not clock:
            return out
        epoch: Dict[str, Dict[str, float]] = {}
        for phase in ("prepare", "train", "delta"):
            epoch[f"worker_{phase}"] = {f: round(statistics.mean(u[phase][f] for u in usage), 4)
                                        for f in ("wall", "cpu", "nivcsw", "minflt")}
        other = []
        for (pid, cpu_start), (_, cpu_end), u in zip(r["shard_process_cpu_start"], r["shard_process_cpu"], usage):
            task_thread = sum(u[ph]["cpu"] for ph in u)
            since = last_end.get(pid, cpu_start)
            other.append(cpu_end - since - task_thread)
            last_end[pid] = cpu_end
        epoch["worker_other_cpu"] = {"cpu": round(statistics.mean(other), 4)}
        for phase, cpu in r["driver_phases_cpu"].items():
            epoch[f"driver_{phase}"] = {"cpu": round(cpu, 4)}
        epoch["driver_process"] = {"cpu": round(r["driver_cpu"], 4)}
        shard_end = max(c[2] for c in clock["shards"])
        sync = {"results_late": round(clock["collected"] - shard_end, 4)}
        if clock.get("submitted") is not None:
            sync["mix_to_submit"] = round(clock["submitted"] - clock["collected"], 4)
            if i + 1 < len(rows) and rows[i + 1].get("clock"):
                sync["submit_to_start"] = round(min(c[0] for c in rows[i + 1]["clock"]["shards"]) - clock["submitted"], 4)
        epoch["sync"] = sync
        epoch["epoch"] = {"wall": round(r["wall_seconds"], 4)}
        out.append(epoch)
    return out


def _idle_estimate(rows: List[Dict[str, Any]], cores: int = 2) -> Optional[Dict[str, Any]]:
    """Seconds per epoch on `cores` idle cores, from CPU time (which other jobs do not inflate):
    the longer of the critical path (the busiest worker process's CPU over the epoch, then the
    driver's mix message) and all CPU spent (workers and driver) over the cores. Epochs after the
    first; None without CPU figures."""
    if not rows or "shard_process_cpu" not in rows[0] or rows[0].get("shard_process_cpu") is None:
        return None
    last: Dict[int, float] = {}
    for pid, cpu in rows[0]["shard_process_cpu"]:
        last[pid] = max(cpu, last.get(pid, 0.0))
    epochs = []
    for r in rows[1:]:
        now: Dict[int, float] = {}
        for pid, cpu in r["shard_process_cpu"]:
            now[pid] = max(cpu, now.get(pid, 0.0))
        if set(now) != set(last):      # a worker restarted: no clean figure for this epoch
            last = now
            continue
        workers = [now[p] - last[p] for p in now]
        critical = max(workers) + r["mix_message_cpu"]
        total = sum(workers) + r["driver_cpu"]
        epochs.append({"epoch": r["epoch"], "workers_cpu": workers, "driver_cpu": r["driver_cpu"],
                       "critical": critical, "total": total, "seconds": max(critical, total / cores)})
        last = now
    if not epochs:
        return None
    return {"epochs": epochs, "seconds_per_epoch": statistics.median(e["seconds"] for e in epochs)}


def child_pipe(pipeline: str, texts_path: str, n_process: int, warm_path: Optional[str] = None) -> Dict[str, Any]:
    import spacy

    load_start = C.load_average()
    nlp = spacy.load(pipeline)
    texts = Path(texts_path).read_text(encoding="utf8").splitlines()
    if warm_path:      # first-use costs out of the timing, as for annotate's workers
        list(nlp.pipe(Path(warm_path).read_text(encoding="utf8").splitlines(), batch_size=256))
    start, cpu = time.perf_counter(), time.process_time()
    n_words = sum(len(d) for d in nlp.pipe(texts, batch_size=256, n_process=n_process))
    seconds = time.perf_counter() - start
    return {"words": n_words, "seconds": seconds, "words_per_second": n_words / seconds,
            "cpu": time.process_time() - cpu if n_process == 1 else None,
            "load_average_start": load_start, "load_average": C.load_average()}


def _warm(pipeline: str, warm_path: Optional[str] = None) -> None:
    from spacy_structperc.distributed.annotate import _pipeline, pipeline_stamp

    nlp = _pipeline(pipeline, pipeline_stamp(pipeline))   # the pipeline stays on the worker
    if warm_path:
        # First use of a pipeline costs once per process: the parser's transition system (its
        # feature filter sorted again: 1-2 s) and the vocabulary's first lexemes. One nlp.pipe
        # process pays them once, each worker pays them too: out of the steady throughput on
        # both sides (child_pipe warms up on the same text).
        list(nlp.pipe(Path(warm_path).read_text(encoding="utf8").splitlines(), batch_size=256))


def child_annotate(pipeline: str, texts_path: str, output: str, workers: int,
                   warm_path: Optional[str] = None, partition_size: int = 500) -> Dict[str, Any]:
    import shutil

    from spacy_structperc.distributed._dask import dask_client
    from spacy_structperc.distributed.annotate import annotate

    load_start = C.load_average()
    # The LocalCluster the annotate command starts (dask_client).
    with dask_client("annotate", workers=workers) as client:
        # Load the pipeline on every worker first: the figure is the steady throughput. As a
        # task, not client.run: the parser's decoding state is per thread, and tasks run in
        # the worker's executor thread.
        workers = sorted(client.scheduler_info()["workers"])
        client.gather([client.submit(_warm, pipeline, warm_path, workers=[w], allow_other_workers=False,
                                     pure=False, key=f"warm-{i}") for i, w in enumerate(workers)])
        shutil.rmtree(output, ignore_errors=True)
        # The driver process's CPU while annotating: planning, the client and (LocalCluster)
        # the scheduler, which share the cores with the workers.
        driver_cpu = time.process_time()
        summary = annotate(pipeline, texts_path, output, client=client, partition_size=partition_size,
                           progress=False)
        summary["driver_cpu"] = time.process_time() - driver_cpu
    summary["partition_size"] = partition_size
    summary["load_average_start"] = load_start
    summary["load_average"] = C.load_average()
    return summary


# ---------------------------------------------------------------------------------------------
# Driver


def prepare(data_dir: Path, work: Path, quick: bool) -> Dict[str, Path]:
    limit = {"train": 1500, "dev": 300, "test": 300} if quick else {"train": 0, "dev": 0, "test": 0}
    paths = {}
    for split, pattern in (("train", "*-ud-train.conllu"), ("dev", "*-ud-dev.conllu"), ("test", "*-ud-test.conllu")):
        out = work / f"{split}{'.quick' if quick else ''}.spacy"
        C.conllu_to_docbins(C.find_split_file(data_dir, split, pattern), {"x": out}, limit=limit[split])
        paths[split] = out
    texts = work / f"train{'.quick' if quick else ''}.txt"
    if not texts.exists():
        texts.write_text("\n".join(d.text for d in C.load_docs(paths["train"])) + "\n", encoding="utf8")
    paths["texts"] = texts
    # The warm-up text for annotate's timing (dev sentences: not the measured text).
    warm = work / f"warm{'.quick' if quick else ''}.txt"
    if not warm.exists():
        warm.write_text("\n".join(d.text for d in C.load_docs(paths["dev"])[:500]) + "\n", encoding="utf8")
    paths["warm"] = warm
    return paths


def _child(fn: str, kwargs: Dict[str, Any], log_path: Path) -> Dict[str, Any]:
    """run_child, reusing the result of an earlier run with the same inputs (--reuse), so an
    interrupted benchmark resumes where it stopped."""
    base = log_path.with_suffix("")
    in_json, out_json = Path(str(base) + ".in.json"), Path(str(base) + ".out.json")
    if REUSE and out_json.exists() and in_json.exists() and \
            json.loads(in_json.read_text()) == json.loads(json.dumps(kwargs, default=str)):
        print(f"   reusing {out_json}", flush=True)
        return json.loads(out_json.read_text())
    return C.run_child(Path(__file__), fn, kwargs, log_path=log_path)


REUSE = False


def _attempt(key: str, call: Callable[[], Any], details: Dict[str, Any], errors: Dict[str, str],
             runs: Optional[List[Any]] = None) -> Any:
    """`call()`'s result recorded under `key` in details (and appended to `runs`), or its error
    under `key` in errors and None: one failed run must not lose the others."""
    try:
        res = call()
    except Exception as e:
        errors[key] = str(e)[-2000:]
        print(errors[key])
        return None
    details[key] = res
    if runs is not None:
        runs.append(res)
    return res


def run_accuracy(args, paths, work, rows, details, errors):
    runs = [(comp, shards, variant) for comp in args.components for variant in args.variants
            for shards in [1] + args.shards[comp]
            if not (shards == 1 and (VARIANTS[variant]["mixing"] != "uniform" or VARIANTS[variant].get("deal")))]
    # one shard: no mixing, and dealing sentences to one shard gives the documents back
    for comp, shards, variant in runs:
        epochs = args.epochs[comp]
        spec = VARIANTS[variant]
        setting = ("serial" if shards == 1 else f"mixed, {shards} shards") + spec["label"]
        n_epochs = epochs + (args.extra_epochs if shards > 1 else 0)
        key = f"accuracy:{comp}:{shards}" + (f":{variant}" if variant else "")
        print(f"== {key}: {n_epochs} epochs", flush=True)
        kwargs = dict(config=str(C.REPO_ROOT / "configs" / CONFIGS[comp]), train=str(paths["train"]),
                      dev=str(paths["dev"]), test=str(paths["test"]),
                      output=str(work / "runs" / key.replace(":", "-")), shards=shards, epochs=n_epochs)
        if variant:
            kwargs.update(overrides=spec["overrides"], mixing=spec["mixing"])
            if spec.get("deal"):
                kwargs["deal"] = spec["deal"]
        res = _attempt(key, lambda: _child("child_accuracy", kwargs, work / "logs" / f"{key.replace(':', '-')}.log"),
                       details, errors)
        if res is None:
            continue
        res["load_average"] = C.load_average()
        metric = METRIC[comp]
        for point in res["curve"]:
            if point["epoch"] in (epochs, epochs + 1, epochs + 2) and point["epoch"] <= n_epochs:
                rows.append({"system": f"structperc_{comp}", "setting": f"{setting}, {point['epoch']} epochs",
                             "dataset": DATASET, "split": "test", "metric": metric,
                             "value": point["test"][metric]})
                if comp == "parser":
                    rows.append({"system": f"structperc_{comp}", "setting": f"{setting}, {point['epoch']} epochs",
                                 "dataset": DATASET, "split": "test", "metric": "tag_acc",
                                 "value": point["test"]["tag_acc"]})


def child_test_docs(pipeline: str, test: str) -> Dict[str, Any]:
    """A saved pipeline's test scores with the test split read as its config reads the dev split
    (the parser's: documents of ten sentences, no sentence starts given)."""
    import spacy

    from spacy_structperc.documents import create_documents_corpus

    nlp = spacy.load(pipeline)
    dev_reader = nlp.config["corpora"]["dev"]
    reader = create_documents_corpus(test, sentences_per_doc=dev_reader.get("sentences_per_doc", 0),
                                     gold_preproc=dev_reader.get("gold_preproc", True))
    scores = nlp.evaluate(list(reader(nlp)))
    return {"sentences_per_doc": dev_reader.get("sentences_per_doc", 0),
            "test_docs": {k: scores.get(k) for k in ("tag_acc", "dep_uas", "dep_las", "sents_f")}}


def run_test_docs(args, paths, work, rows, details, errors):
    """The parser runs' last models (`--parts testdocs`) scored on the test split read as
    documents, as the config reads its dev split: the setting the parser was trained for."""
    for comp in args.components:
        if comp != "parser":
            continue
        for run in sorted((work / "runs").glob("accuracy-parser-*")):
            key = "accuracy:" + ":".join(run.name.split("-")[1:])
            shards, variant = int(key.split(":")[2]), (key.split(":")[3:] or [""])[0]
            model = run / "model-last"
            log_file = run / "ipm_log.json"
            if variant not in VARIANTS or not model.exists() or not log_file.exists():
                continue
            epochs = len(json.loads(log_file.read_text())["epochs"])
            print(f"== testdocs {key} (model-last, {epochs} epochs)", flush=True)
            try:
                res = _child("child_test_docs", dict(pipeline=str(model), test=str(paths["test"])),
                             work / "logs" / f"testdocs-{run.name}.log")
            except Exception as e:
                errors[f"testdocs:{key}"] = str(e)[-2000:]
                continue
            res.update(epochs=epochs, load_average=C.load_average())
            details[f"testdocs:{key}"] = res
            if res["sentences_per_doc"] <= 1:
                continue          # the test split as the accuracy runs read it: rows there already
            setting = ("serial" if shards == 1 else f"mixed, {shards} shards") + VARIANTS[variant]["label"]
            for metric in ("dep_las", "tag_acc"):
                rows.append({"system": "structperc_parser", "setting": f"{setting}, {epochs} epochs",
                             "dataset": f"{DATASET} (test as documents of {res['sentences_per_doc']} sentences)",
                             "split": "test", "metric": metric, "value": res["test_docs"][metric]})


def _rounds(settings: List[Any], rounds: int) -> List[Any]:
    """The settings `rounds` times, each round in another order (rotated), so that a load that
    changes over the run falls on every setting alike."""
    out = []
    for r in range(rounds):
        k = r % max(1, len(settings))
        out.extend(settings[k:] + settings[:k])
    return out


def _median_of(runs: List[Dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _timing_setting(setting: str):
    """(workers, worker_nice) of a timing setting: "serial" (0 workers), "2" (train_distributed's
    default: its automatic choice), "2-nice0" / "2-nice3" (the workers' training threads at that
    nice value)."""
    if setting == "serial":
        return 0, None
    workers, _, nice = setting.partition("-nice")
    return int(workers), (int(nice) if nice else None)


def _timing_label(setting: str) -> str:
    workers, nice = _timing_setting(setting)
    if workers == 0:
        return "serial (one process, no Dask)"
    return f"{workers} worker{'s' if workers > 1 else ''}" + ("" if nice is None else f", workers at nice {nice}")


def run_timing(args, paths, work, rows, details, errors):
    """Serial training (one process, no Dask) and LocalClusters of 1, 2, ... workers, in
    interleaved rounds; per setting the median over rounds of the median epoch (after the first),
    and the median breakdown of an epoch (see `_timing_breakdown`, `child_serial`)."""
    for comp, eval_every in [(c, e) for c in args.components for e in args.eval_every]:
        settings = ["serial"] + [str(w) for w in args.workers[comp]]
        if args.compare_nice and eval_every == 1:
            # The most workers at a fixed priority each way: their own (nice 0) and yielding to the
            # driver's evaluation (nice 3, what the automatic choice takes on an idle machine).
            settings += [f"{max(args.workers[comp])}-nice0", f"{max(args.workers[comp])}-nice3"]
        runs: Dict[str, List[Dict[str, Any]]] = {w: [] for w in settings}
        tag = "" if eval_every == 1 else f":e{eval_every}"
        label = "" if eval_every == 1 else (", dev evaluation after the last epoch only" if eval_every >= args.timing_epochs
                                            else f", dev evaluation every {eval_every} epochs")
        for i, setting in enumerate(_rounds(settings, args.rounds)):
            r = i // len(settings)
            workers, nice = _timing_setting(setting)
            key = f"timing:{comp}:{setting}:r{r}{tag}"
            print(f"== {key}", flush=True)
            common = dict(config=str(C.REPO_ROOT / "configs" / CONFIGS[comp]), train=str(paths["train"]),
                          dev=str(paths["dev"]), output=str(work / "runs" / key.replace(":", "-")),
                          epochs=args.timing_epochs)
            if eval_every != 1:
                common["eval_every"] = eval_every
            if workers == 0:
                fn, kwargs = "child_serial", common
            else:
                fn, kwargs = "child_timing", dict(common, workers=workers)
                if nice is not None:
                    kwargs["worker_nice"] = nice
            res = _attempt(key, lambda: _child(fn, kwargs, work / "logs" / f"{key.replace(':', '-')}.log"),
                           details, errors, runs[setting])
            if res is None:
                continue
            print(f"   {res['seconds_per_epoch']:.2f} s/epoch, load {res.get('load_average_start')}"
                  f"->{res.get('load_average')}", flush=True)
        if not all(runs.values()):
            continue
        serial = _median_of(runs["serial"], "seconds_per_epoch")
        serial_rss = max(r["peak_rss_self_mb"] for r in runs["serial"])
        one = _median_of(runs["1"], "seconds_per_epoch") if runs.get("1") else None
        ds, sys_ = f"{DATASET} (timing)", f"structperc_{comp}"
        loads = [x for w in settings for r in runs[w] for x in (r.get("load_average_start"), r.get("load_average"))
                 if x is not None]
        summary: Dict[str, Any] = {
            "serial_seconds_per_epoch": serial, "serial_peak_rss_mb": serial_rss,
            "rounds": args.rounds, "load_average_min": min(loads), "load_average_max": max(loads),
            "eval_every": eval_every,
            "what_an_epoch_includes": (
                "serial: the updates over the whole training set, then (when it evaluates) averaging the "
                "weights, the dev evaluation (spaCy's evaluation callback, which reads the dev corpus) and "
                "saving model-best when the score improved. N workers: the same updates split over N shards "
                "(each worker's task: bring its tables to the mix, train, read its change journal), the "
                "driver's mix message, then (overlapping the next epoch's training) the driver applying the "
                "mix, averaging, the same evaluation and the same saving; the seconds of an epoch are the "
                "driver's wall clock from one epoch's end to the next (epochs after the first)."),
        }

        def add(setting, metric, value):
            rows.append({"system": sys_, "setting": setting, "dataset": ds, "split": "test", "metric": metric,
                         "value": value})

        serial_cpu = [r["cpu_per_epoch"] for r in runs["serial"] if r.get("cpu_per_epoch")]
        for setting in settings:
            name = _timing_label(setting) + label
            sec = _median_of(runs[setting], "seconds_per_epoch")
            entry: Dict[str, Any] = {"seconds_per_epoch": sec,
                                     "per_round": [r["seconds_per_epoch"] for r in runs[setting]],
                                     "breakdown_per_round": [r.get("breakdown") for r in runs[setting]]}
            add(name, "seconds_per_epoch", sec)
            add(name, "speedup", serial / sec)
            if setting == "serial":
                add(name, "peak_rss_mb", serial_rss)
                entry["cpu_per_epoch_per_round"] = serial_cpu
                summary["serial"] = entry
                continue
            rss = max(r["worker_peak_rss_mb"] for r in runs[setting])
            if one:
                add(name, "speedup_vs_1_worker", one / sec)
            add(name, "worker_peak_rss_mb", rss)
            est = [r["idle_estimate"]["seconds_per_epoch"] for r in runs[setting] if r.get("idle_estimate")]
            if est and serial_cpu:
                add(name, "est_idle_speedup", statistics.median(serial_cpu) / statistics.median(est))
            add(name, "worker_rss_vs_serial", rss / serial_rss)
            entry["worker_peak_rss_mb"] = rss
            entry["worker_nice"] = [r.get("worker_nice") for r in runs[setting]]
            summary[f"{setting}_workers"] = entry
        details[f"timing:{comp}:summary{tag}"] = summary
        for setting in settings:
            print(f"   {_timing_label(setting) + label}: {_median_of(runs[setting], 'seconds_per_epoch'):.2f} s/epoch; "
                  + _breakdown_line([r.get("breakdown") for r in runs[setting]]), flush=True)


def _breakdown_line(breakdowns: List[Optional[Dict[str, Dict[str, float]]]]) -> str:
    """One line of the median epoch's breakdown (CPU seconds unless said), first round."""
    b = next((x for x in breakdowns if x), None)
    if not b:
        return "no breakdown"
    if "update" in b:
        return ", ".join(f"{k} {b[k]['cpu']:.2f}" for k in ("update", "average", "evaluate", "save") if k in b)
    return (f"worker prepare {b['worker_prepare']['cpu']:.2f} train {b['worker_train']['cpu']:.2f} "
            f"(wall {b['worker_train']['wall']:.2f}, {b['worker_train']['nivcsw']:.0f} preemptions) "
            f"delta {b['worker_delta']['cpu']:.2f} other threads {b['worker_other_cpu']['cpu']:.2f}; "
            f"driver mix {b['driver_mix_message']['cpu']:.2f} apply {b['driver_apply']['cpu']:.2f} "
            f"evaluate {b['driver_evaluate']['cpu']:.2f} save {b['driver_save']['cpu']:.2f} "
            f"process {b['driver_process']['cpu']:.2f}; sync (wall) " +
            " ".join(f"{k} {v:.2f}" for k, v in b["sync"].items()))


def run_annotate(args, paths, work, rows, details, errors):
    pipeline = work / "runs" / "accuracy-parser-1" / "model-last"
    if not pipeline.exists():
        errors["annotate"] = f"no pipeline at {pipeline}: run --parts accuracy (parser) first"
        print(errors["annotate"])
        return
    settings = [("nlp.pipe, 1 process", "child_pipe", dict(n_process=1)),
                ("nlp.pipe(n_process=2)", "child_pipe", dict(n_process=2)),
                ("annotate, 1 worker", "child_annotate", dict(workers=1)),
                ("annotate, 2 workers", "child_annotate", dict(workers=2))]
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name, _, _ in settings}
    for i, (setting, fn, extra) in enumerate(_rounds(settings, args.rounds)):
        key = f"annotate:{setting}:r{i // len(settings)}"
        print(f"== {key}", flush=True)
        kwargs = dict(pipeline=str(pipeline), texts_path=str(paths["texts"]), **extra)
        if args.warm:
            kwargs["warm_path"] = str(paths["warm"])
        if fn == "child_annotate":
            kwargs["output"] = str(work / "annotated" / f"w{extra['workers']}")
        log = work / "logs" / f"annotate-{C.slug(setting)}-r{i // len(settings)}.log"
        res = _attempt(key, lambda: _child(fn, kwargs, log_path=log), details, errors, runs[setting])
        if res is None:
            continue
        print(f"   {res['words_per_second']:.0f} words/s, load {res.get('load_average_start')}->"
              f"{res.get('load_average')}", flush=True)
    if not all(runs.values()):
        return
    wps = {name: _median_of(r, "words_per_second") for name, r in runs.items()}
    ds = f"{DATASET} train text (annotate)"
    for setting, fn, _ in settings:
        system = "spacy_structperc annotate" if fn == "child_annotate" else "spacy nlp.pipe"
        for metric, value in (("predict_wps", wps[setting]), ("speedup", wps[setting] / wps["nlp.pipe, 1 process"]),
                              ("speedup_vs_pipe_n2", wps[setting] / wps["nlp.pipe(n_process=2)"])):
            rows.append({"system": system, "setting": setting, "dataset": ds, "split": "test", "metric": metric,
                         "value": value})
    # On idle cores annotate takes about its busiest worker's CPU time (the partitions are
    # independent); one nlp.pipe process takes its CPU time.
    pipe_cpu = [r["cpu"] for r in runs["nlp.pipe, 1 process"] if r.get("cpu")]
    for setting, fn, _ in settings:
        est = [max(r["worker_cpu"].values()) for r in runs[setting] if fn == "child_annotate" and r.get("worker_cpu")]
        if est and pipe_cpu:
            rows.append({"system": "spacy_structperc annotate", "setting": setting, "dataset": ds, "split": "test",
                         "metric": "est_idle_speedup", "value": statistics.median(pipe_cpu) / statistics.median(est)})
    loads = [x for r in sum(runs.values(), []) for x in (r.get("load_average_start"), r.get("load_average"))
             if x is not None]
    details["annotate:summary"] = {"words_per_second": wps, "rounds": args.rounds, "warmed_up": args.warm,
                                   "per_round": {k: [r["words_per_second"] for r in v] for k, v in runs.items()},
                                   "load_average_min": min(loads), "load_average_max": max(loads)}


def child_ceiling(kind: str, target: str, data_path: str, ready: str, go: str,
                  warm_path: Optional[str] = None, dev: Optional[str] = None) -> Dict[str, Any]:
    """One process of the ceiling measurement: the work made ready (pipeline loaded and warmed
    up, or a tagger trained one epoch), then `ready` written and, once `go` exists, one timed
    pass: kind "pipe" runs nlp.pipe over the text lines of `data_path` with the pipeline at
    `target`; kind "train" one epoch of updates (no evaluation) of the config `target` over the
    training DocBin `data_path`. Wall and CPU seconds of the timed pass."""
    import random

    import spacy

    if kind == "pipe":
        nlp = spacy.load(target)
        texts = Path(data_path).read_text(encoding="utf8").splitlines()
        if warm_path:
            list(nlp.pipe(Path(warm_path).read_text(encoding="utf8").splitlines(), batch_size=256))

        def work() -> int:
            return sum(len(d) for d in nlp.pipe(texts, batch_size=256))
    else:
        nlp, T, examples, _, payload = _training(target, data_path, dev)

        def epoch(seed: int) -> int:
            random.Random(seed).shuffle(examples)
            _update_epoch(nlp, T, payload, examples)
            return sum(len(eg.reference) for eg in examples)

        epoch(1)            # the tables grown: the timed epoch is a steady one, as an epoch > 1

        def work() -> int:
            return epoch(2)
    Path(ready).write_text("ready")
    while not Path(go).exists():
        time.sleep(0.005)
    start, cpu = time.perf_counter(), time.process_time()
    words = work()
    return {"words": words, "seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu,
            "load_average": C.load_average()}


def _concurrent_children(fn: str, kwargs_list: List[Dict[str, Any]], work: Path, key: str) -> List[Dict[str, Any]]:
    """Run `fn` in one child per kwargs at once; each waits for the others to be ready (files
    under work/ceiling) before its timed pass."""
    import shutil
    import threading

    sync = work / "ceiling" / C.slug(key)
    shutil.rmtree(sync, ignore_errors=True)
    sync.mkdir(parents=True)
    go = sync / "go"
    results: List[Any] = [None] * len(kwargs_list)

    def run(i: int) -> None:
        try:
            results[i] = C.run_child(Path(__file__), fn, dict(kwargs_list[i], ready=str(sync / f"ready{i}"), go=str(go)),
                                     log_path=work / "logs" / f"{C.slug(key)}-{i}.log")
        except Exception as e:  # the others must not wait for a child that died
            results[i] = e
            go.write_text("go")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(kwargs_list))]
    for t in threads:
        t.start()
    while not go.exists() and not all((sync / f"ready{i}").exists() for i in range(len(kwargs_list))):
        time.sleep(0.005)
    go.write_text("go")
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def run_ceiling(args, paths, work, rows, details, errors):
    """What two cores give at most: the same work in one process alone and in two processes at
    once (each the whole of it), so the pair's throughput over the lone process's is the speed-up
    any two-process scheme can reach here before its own costs. "pipe": nlp.pipe with annotate's
    pipeline over annotate's text; "train": the tagger's update epoch, the part of an epoch
    train-distributed shares between its workers."""
    pipeline = work / "runs" / "accuracy-parser-1" / "model-last"
    jobs = []
    if pipeline.exists():
        jobs.append(("pipe", "annotate's pipeline (tagger + parser), nlp.pipe over EWT train text",
                     dict(kind="pipe", target=str(pipeline), data_path=str(paths["texts"]),
                          warm_path=str(paths["warm"]))))
    else:
        errors["ceiling:pipe"] = f"no pipeline at {pipeline}: run --parts accuracy (parser) first"
    jobs.append(("train", "the tagger's update epoch (configs/tagger.cfg) over EWT train",
                 dict(kind="train", target=str(C.REPO_ROOT / "configs" / CONFIGS["tagger"]),
                      data_path=str(paths["train"]), dev=str(paths["dev"]))))
    for name, what, kwargs in jobs:
        runs: Dict[str, List[List[Dict[str, Any]]]] = {"one process": [], "two processes at once": []}
        for r in range(args.rounds):
            for setting, n in (("one process", 1), ("two processes at once", 2)):
                key = f"ceiling:{name}:{setting}:r{r}"
                print(f"== {key}", flush=True)
                res = _attempt(key, lambda: _concurrent_children("child_ceiling", [kwargs] * n, work, key),
                               details, errors, runs[setting])
                if res is None:
                    continue
                print("   " + ", ".join(f"{p['words'] / p['seconds']:.0f} words/s (cpu {p['cpu']:.2f} s)" for p in res),
                      flush=True)
        if not all(runs.values()):
            continue
        solo = statistics.median(r[0]["words"] / r[0]["seconds"] for r in runs["one process"])
        pair = statistics.median(sum(p["words"] for p in r) / max(p["seconds"] for p in r)
                                 for r in runs["two processes at once"])
        cpu_solo = statistics.median(r[0]["cpu"] for r in runs["one process"])
        cpu_pair = statistics.median(statistics.mean(p["cpu"] for p in r) for r in runs["two processes at once"])
        summary = {"what": what, "words_per_second_one": solo, "words_per_second_two": pair,
                   "ceiling_speedup": pair / solo, "cpu_one": cpu_solo, "cpu_each_of_two": cpu_pair,
                   "cpu_ratio": cpu_pair / cpu_solo, "rounds": args.rounds}
        details[f"ceiling:{name}:summary"] = summary
        print(f"   ceiling {name}: {pair / solo:.2f}x (each of two processes spends {cpu_pair / cpu_solo:.2f}x "
              f"the CPU time of one alone)", flush=True)
        for metric, value in (("ceiling_speedup", pair / solo), ("cpu_ratio_two_vs_one", cpu_pair / cpu_solo)):
            rows.append({"system": "two processes at once", "setting": what, "dataset": f"{DATASET} (ceiling)", "split": "train",
                         "metric": metric, "value": value})


def plot(results: Dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    details = results.get("details", {})
    comps = [c for c in CONFIGS if any(k.startswith(f"accuracy:{c}:") for k in details)]
    if not comps:
        return
    fig, axes = plt.subplots(1, len(comps), figsize=(5.5 * len(comps), 4), squeeze=False)
    for ax, comp in zip(axes[0], comps):
        keys = sorted((k for k in details if k.startswith(f"accuracy:{comp}:")),
                      key=lambda k: (k.split(":")[3:], int(k.split(":")[2])))
        for key in keys:
            shards, variant = int(key.split(":")[2]), (key.split(":")[3:] or [""])[0]
            curve = details[key]["curve"]
            ax.plot([p["epoch"] for p in curve], [100 * p["test"][METRIC[comp]] for p in curve], marker="o", ms=3,
                    linestyle="--" if variant else "-",
                    label=("serial" if shards == 1 else f"{shards} shards") + VARIANTS.get(variant, {"label": ""})["label"])
        ax.set_title(f"{comp}: test {'XPOS acc.' if comp == 'tagger' else 'LAS'} by epoch (EWT)")
        ax.set_xlabel("epoch")
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    print(f"wrote {PLOT}")


def _ints(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=C.default_data_dir(DATASET))
    parser.add_argument("--work", type=Path, default=C.DEFAULT_WORK_DIR / COMPONENT)
    parser.add_argument("--parts", default="accuracy,timing,annotate")
    parser.add_argument("--components", default="tagger,parser")
    parser.add_argument("--tagger-epochs", type=int, default=10)
    parser.add_argument("--parser-epochs", type=int, default=8)
    parser.add_argument("--extra-epochs", type=int, default=2)
    parser.add_argument("--tagger-shards", default="2,4,8,16")
    parser.add_argument("--parser-shards", default="2,4")
    parser.add_argument("--tagger-workers", default="1,2")
    parser.add_argument("--parser-workers", default="1,2")
    parser.add_argument("--variants", default="",
                        help=f"accuracy: variants to run besides or instead of the default (',' for the default), "
                             f"of {sorted(v for v in VARIANTS if v)}")
    parser.add_argument("--timing-epochs", type=int, default=4)
    parser.add_argument("--eval-every", default="1",
                        help="timing: dev evaluation every N epochs (and after the last), for serial and "
                             "train-distributed alike; several values run several timing sets, e.g. 1,4")
    parser.add_argument("--compare-nice", action="store_true",
                        help="timing: also run the most workers with their training threads at nice 0 "
                             "and at nice 3 (worker_nice; with an evaluation every epoch)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="timing and annotate: interleaved rounds of every setting (medians reported)")
    parser.add_argument("--no-warm", dest="warm", action="store_false",
                        help="annotate: time from a loaded pipeline only, not warmed up on the dev text")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plots-only", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="reuse child results with the same inputs")
    args = parser.parse_args()
    if args.plots_only:
        plot(C.load_results(RESULTS))
        return
    global REUSE
    REUSE = args.reuse
    args.components = [c for c in args.components.split(",") if c]
    args.variants = args.variants.split(",") if args.variants else [""]
    args.eval_every = _ints(args.eval_every)
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}: expected some of {sorted(v for v in VARIANTS if v)}")
    args.epochs = {"tagger": args.tagger_epochs, "parser": args.parser_epochs}
    args.shards = {"tagger": _ints(args.tagger_shards), "parser": _ints(args.parser_shards)}
    args.workers = {"tagger": _ints(args.tagger_workers), "parser": _ints(args.parser_workers)}
    if args.quick:
        args.epochs = {"tagger": 2, "parser": 2}
        args.timing_epochs = 2
    args.work.mkdir(parents=True, exist_ok=True)
    paths = prepare(args.data, args.work, args.quick)
    rows: List[Dict[str, Any]] = []
    details: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    parts = args.parts.split(",")
    load_before = C.load_average()
    for part, fn in (("accuracy", run_accuracy), ("testdocs", run_test_docs), ("timing", run_timing),
                     ("annotate", run_annotate), ("ceiling", run_ceiling)):
        if part in parts:
            fn(args, paths, args.work, rows, details, errors)
            save(args, rows, details, errors, load_before)   # a later part's failure loses nothing
    plot(C.load_results(RESULTS))


def save(args, rows, details, errors, load_before) -> None:
    done = {(r["system"], r["setting"], r["dataset"]) for r in rows}
    # A timing, annotate or ceiling part replaces all of that part's rows and details (its
    # settings changed); timing only those of the components it ran.
    redone = {part for part in ("timing", "annotate", "ceiling") if any(k.startswith(part + ":") for k in details)}
    suffix = {"timing": "(timing)", "annotate": "(annotate)", "ceiling": "(ceiling)"}
    timed = {f"structperc_{c}" for c in args.components}

    def replace(r):
        return (r["system"], r["setting"], r["dataset"]) in done or \
            any(r["dataset"].endswith(suffix[p]) and (p != "timing" or r["system"] in timed) for p in redone)

    def drop_detail(key: str) -> bool:
        part, _, rest = key.partition(":")
        return part in redone and (part != "timing" or f"structperc_{rest.split(':', 1)[0]}" in timed)

    C.save_results(RESULTS, COMPONENT, rows, details, replace=replace,
                   drop_detail=drop_detail, errors=errors, command=" ".join(sys.argv), quick=args.quick,
                   load_average_at_start=load_before, load_average_at_end=C.load_average(),
                   notes=("Accuracy: shards trained in turn in one process (the same mix as on S workers). "
                          "Timing: serial = one process without Dask; N workers = LocalCluster, one "
                          "single-threaded worker process per shard; settings run in interleaved rounds "
                          "(--rounds), medians reported, on a shared 2-core machine: load averages in details "
                          "(timing:*:summary, annotate:summary)."))


if __name__ == "__main__":
    main()
