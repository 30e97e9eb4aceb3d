"""Shared helpers for the component benchmarks in this folder.

Every benchmark script (tagger, chunker, NER, parser, ...) follows the same shape: convert the
corpus once into a work dir, run each system in its own child process so that its peak memory can
be read from that child alone, and write one JSON file of rows under ``benchmarks/results/``.
This module holds the parts they share:

- paths: the repo root, the default data dir, the work dir;
- measuring: peak RSS, wall-clock timing, single-threaded child environments;
- corpus: CoNLL-U -> DocBin conversion (gold tokenization, one Doc per sentence), un-annotated
  copies of Docs for prediction, token-attribute scoring with spaCy's ``Scorer``;
- ``spacy train`` in a subprocess, with the number of steps it actually ran parsed from its log;
- running a function in a child process (``run_child``) and getting back its result and peak RSS;
- the results file: rows ``{system, setting, dataset, split, metric, value}``, merged on re-runs;
- the run itself (``Bench``): the options every script has, the job loop (one child per measured
  system, its rows, details and errors), saving, plots. A script declares its jobs and says which
  old rows a run replaces; nothing else.

Nothing here imports spaCy at module level, so a child's peak RSS only counts what the measured
system itself loads.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shlex
import datetime as _dt
import hashlib
import importlib.util
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_WORK_DIR = BENCH_DIR / ".work"
ROW_KEYS = ("system", "setting", "dataset", "split", "metric", "value")

# Environment variables that keep numeric libraries on one core. The benchmark machine has few
# cores and is shared, and "words per second (one process)" should mean one thread too.
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}


# ---------------------------------------------------------------------------------------------
# Paths


def default_data_root() -> Path:
    """The folder that holds the corpora: $STRUCTPERC_DATA, else ../shared/data from the repo."""
    env = os.environ.get("STRUCTPERC_DATA")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "data"


def default_data_dir(corpus: str) -> Path:
    """The folder of one corpus, e.g. ``default_data_dir("ud_en_ewt")``."""
    return default_data_root() / corpus


def find_split_file(data_dir: Path, split: str, pattern: str = "*-{split}.conllu") -> Path:
    """Find the one file of a split in a corpus dir (e.g. ``en_ewt-ud-train.conllu``)."""
    hits = sorted(Path(data_dir).glob(pattern.format(split=split)))
    if len(hits) != 1:
        raise FileNotFoundError(
            f"expected one file matching {pattern.format(split=split)!r} in {data_dir}, "
            f"found {len(hits)}: pass the corpus folder with --data or set STRUCTPERC_DATA"
        )
    return hits[0]


def slug(text: str) -> str:
    """A file-name-safe form of a setting name."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "default"


# ---------------------------------------------------------------------------------------------
# Measuring


def peak_rss_mb(include_children: bool = True) -> float:
    """Peak resident set size in MB of this process (and, by default, of the largest waited-for
    child process, e.g. a ``spacy train`` subprocess). ru_maxrss is KiB on Linux, bytes on macOS.
    """
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if include_children:
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return peak / scale


class Timer:
    """Wall-clock timer: ``with Timer() as t: ...; t.seconds``."""

    def __enter__(self) -> "Timer":
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def load_average() -> Optional[float]:
    """The 1-minute load average (other work on the machine skews timings), if known."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Environment for child processes: one thread, the repo importable, unbuffered output."""
    env = dict(os.environ)
    env.update(SINGLE_THREAD_ENV)
    env["PYTHONUNBUFFERED"] = "1"
    paths = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if extra:
        env.update(extra)
    return env


def machine_info() -> Dict[str, Any]:
    """What the numbers were measured on."""
    info: Dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        info["cpu"] = platform.processor()
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
            info["mem_gb"] = round(kb / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    for pkg in ("spacy", "thinc", "numpy", "pycrfsuite", "spacy_structperc"):
        try:
            from importlib.metadata import version

            dist = {"pycrfsuite": "python-crfsuite", "spacy_structperc": "spacy-structperc"}
            info[pkg] = version(dist.get(pkg, pkg))
        except Exception:
            pass
    return info


def git_revision() -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=10,
        )
        return out.stdout.strip() or None
    except Exception:
        return None


# ---------------------------------------------------------------------------------------------
# Corpus


def _file_fingerprint(path: Path) -> str:
    st = Path(path).stat()
    return f"{Path(path).resolve()}:{st.st_size}:{int(st.st_mtime)}"


def conllu_to_docbins(
    conllu_path: Path,
    outputs: Dict[str, Path],
    *,
    limit: int = 0,
    transforms: Optional[Dict[str, Callable[[Any], Any]]] = None,
) -> Dict[str, Any]:
    """Convert one CoNLL-U file to one or more ``.spacy`` DocBins.

    Gold tokenization (the syntactic words; multiword-token ranges and empty nodes are dropped by
    spaCy's converter), one Doc per sentence, XPOS in ``tag_``, UPOS in ``pos_``, plus lemmas,
    morphs, heads and deps. ``outputs`` maps a variant name to its path; ``transforms`` maps a
    variant name to a function ``Doc -> Doc`` applied before saving (no transform: saved as read).
    ``limit`` > 0 keeps the first ``limit`` sentences. A stamp file next to each output records
    the source and limit, so an up-to-date output is not rebuilt.
    """
    from spacy.tokens import DocBin
    from spacy.training.converters import conllu_to_docs

    transforms = transforms or {}
    stamp = json.dumps(
        {"source": _file_fingerprint(conllu_path), "limit": limit, "version": 1}, sort_keys=True
    )
    todo = {
        name: Path(path)
        for name, path in outputs.items()
        if not (Path(path).exists() and _read(Path(str(path) + ".stamp")) == stamp)
    }
    if not todo:
        return {"converted": False}
    text = Path(conllu_path).read_text(encoding="utf8")
    docs = []
    for doc in conllu_to_docs(text, n_sents=1, no_print=True):
        docs.append(doc)
        if limit and len(docs) >= limit:
            break
    n_tokens = sum(len(d) for d in docs)
    for name, path in todo.items():
        fn = transforms.get(name)
        db = DocBin(store_user_data=False)
        for doc in docs:
            db.add(fn(doc) if fn else doc)
        path.parent.mkdir(parents=True, exist_ok=True)
        db.to_disk(path)
        Path(str(path) + ".stamp").write_text(stamp)
    return {"converted": True, "docs": len(docs), "tokens": n_tokens}


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text()
    except OSError:
        return None


def load_docs(path: Path, vocab=None) -> list:
    """Read a ``.spacy`` file into a list of Docs (with a fresh or given Vocab)."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    return list(DocBin().from_disk(path).get_docs(vocab if vocab is not None else Vocab()))


def unannotated_copies(docs: Iterable, vocab) -> list:
    """Copies of ``docs`` with the same words and spaces and no annotation at all."""
    from spacy.tokens import Doc

    return [Doc(vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d])
            for d in docs]


def count_tokens(docs: Iterable) -> int:
    return sum(len(d) for d in docs)


def examples(pred_docs: Sequence, gold_docs: Sequence) -> list:
    """``Example(predicted, gold)`` of each pair, for spaCy's scorers; the two lists must match."""
    from spacy.training import Example

    if len(pred_docs) != len(gold_docs):
        raise ValueError(f"{len(pred_docs)} predicted docs for {len(gold_docs)} gold docs")
    return [Example(p, g) for p, g in zip(pred_docs, gold_docs)]


def score_token_attrs(pred_docs: Sequence, gold_docs: Sequence, attrs: Sequence[str]) -> Dict[str, float]:
    """``Scorer.score_token_attr`` over ``examples(pred_docs, gold_docs)`` for each attr ("tag",
    "pos", "lemma", ...). Returns e.g. ``{"tag_acc": 0.95}`` as fractions."""
    from spacy.scorer import Scorer

    pairs = examples(pred_docs, gold_docs)
    scores: Dict[str, float] = {}
    for attr in attrs:
        scores.update(Scorer.score_token_attr(pairs, attr))
    return scores


def time_pipe(nlp, gold_docs: Sequence, batch_size: int = 1000, repeats: int = 1):
    """Run ``nlp.pipe`` (one process) over un-annotated copies of ``gold_docs``; time only the pipe
    call. With ``repeats`` > 1 the pipe runs that many times on fresh copies and the fastest run
    counts (less noise on a busy machine). Returns ``(predicted_docs, words_per_second,
    seconds)`` with the predictions of the first run."""
    return time_pipe_best_of(nlp, lambda: unannotated_copies(gold_docs, nlp.vocab),
                             count_tokens(gold_docs), repeats, batch_size)


def materialize_averages(nlp_or_pipe) -> None:
    """See time_pipe_best_of: make in-process components score as their saved selves do."""
    procs = [p for _, p in nlp_or_pipe.pipeline] if hasattr(nlp_or_pipe, "pipeline") else [nlp_or_pipe]
    for proc in procs:
        average = getattr(getattr(getattr(proc, "model", None), "weights", None), "average", None)
        if callable(average):
            average()


def time_pipe_best_of(nlp, make_inputs: Callable[[], list], n_words: int, repeats: int = 1,
                      batch_size: int = 1000):
    """Run ``nlp.pipe`` over fresh inputs from ``make_inputs()`` ``repeats`` times; return (the
    first run's predictions, words per second of the fastest run, its seconds).

    Our components trained in this process score with averages computed from the training state
    as rows are read; a saved and loaded pipeline reads them directly. The averages are
    materialized first, so in-process timings are those of the saved pipeline."""
    materialize_averages(nlp)
    first, best = None, float("inf")
    for _ in range(max(1, repeats)):
        docs = make_inputs()
        with Timer() as t:
            preds = list(nlp.pipe(docs, batch_size=batch_size))
        first = preds if first is None else first
        best = min(best, t.seconds)
    return first, n_words / best, best


# ---------------------------------------------------------------------------------------------
# The CRFsuite peer: a first-order linear-chain CRF (python-crfsuite), every label transition
# allowed; a script gives its features and labels.


def crf_fit(sequences: Iterable, model_path: Path, params: Dict[str, Any]) -> float:
    """Train on (features, labels) sentences; returns the wall seconds."""
    import pycrfsuite

    with Timer() as t:
        trainer = pycrfsuite.Trainer(algorithm=params["algorithm"], verbose=False)
        for features, labels in sequences:
            trainer.append(features, labels)
        trainer.set_params({"c1": params["c1"], "c2": params["c2"], "max_iterations": params["max_iterations"],
                            "feature.possible_transitions": True})
        trainer.train(str(model_path))
    return t.seconds


def crf_tag(model_path: Path, make_docs: Callable[[], list], featurize: Callable, write: Callable,
            repeats: int = 1):
    """Label fresh Docs from ``make_docs()``: ``write(doc, labels)`` of ``featurize(doc)``, the
    three inside the timed loop. Returns (the first pass's Docs, the fastest pass's seconds)."""
    import pycrfsuite

    tagger = pycrfsuite.Tagger()
    tagger.open(str(model_path))
    first, best = None, float("inf")
    for _ in range(max(1, repeats)):
        docs = make_docs()
        with Timer() as t:
            for doc in docs:
                write(doc, tagger.tag(featurize(doc)))
        first = docs if first is None else first
        best = min(best, t.seconds)
    tagger.close()
    return first, best


def crf_setting(params: Dict[str, Any]) -> str:
    """The setting name of a CRFsuite row."""
    return (f"1st-order, {params['algorithm']} c1={params['c1']} c2={params['c2']}, "
            f"{params['max_iterations']} iters")


# ---------------------------------------------------------------------------------------------
# spacy train in a subprocess

_TRAIN_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+[-\d.]+\s")
_TRAIN_HEADER = re.compile(r"^\s*E\s+#\s+")


def batches_by_words(examples: Iterable, size_words: int = 1000):
    """Batches of Examples of about ``size_words`` reference words each, in order."""
    batch, n = [], 0
    for eg in examples:
        batch.append(eg)
        n += len(eg.reference)
        if n >= size_words:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def train_epochs(nlp, examples: Sequence, epochs: int, *, seed: int = 0, update: Optional[Callable] = None,
                 before: Optional[Callable] = None, after: Optional[Callable] = None) -> float:
    """In-process training: ``nlp.initialize`` on ``examples``, then ``epochs`` passes (numbered
    from 1), each over a fresh shuffle (``random.Random(seed)``) in ``batches_by_words``, through
    ``update`` (default ``nlp.update``); ``before(epoch)`` opens a pass (inside its timing),
    ``after(epoch, losses, seconds)`` follows it. Returns the seconds of initialization and passes."""
    import random

    rng, update = random.Random(seed), update or nlp.update
    with Timer() as t:
        nlp.initialize(lambda: examples)
    seconds = t.seconds
    for epoch in range(1, epochs + 1):
        order = list(examples)
        rng.shuffle(order)
        losses: Dict[str, float] = {}
        with Timer() as t:
            if before is not None:
                before(epoch)
            for batch in batches_by_words(order):
                update(batch, losses=losses)
        seconds += t.seconds
        if after is not None:
            after(epoch, losses, t.seconds)
    return seconds


def parse_spacy_train_log(text: str) -> Dict[str, Any]:
    """Epoch and step of the last evaluation row in ``spacy train``'s console table, and that
    row's columns as a dict (e.g. TAG_ACC in %). spaCy stops training right
    after an evaluation (patience) or at ``max_steps``/``max_epochs``, so the last row's step is
    the number of steps run (to within ``eval_frequency``)."""
    header: Optional[List[str]] = None
    rows: List[Dict[str, Any]] = []
    for line in text.splitlines():
        if _TRAIN_HEADER.match(line):
            header = re.split(r"\s{2,}", line.strip())  # "LOSS TAGGER" is one column
            continue
        m = _TRAIN_ROW.match(line)
        if m:
            values = line.split()
            row: Dict[str, Any] = {"epoch": int(m.group(1)), "step": int(m.group(2))}
            if header and len(header) == len(values):
                for name, value in zip(header[2:], values[2:]):
                    try:
                        row[name] = float(value)
                    except ValueError:
                        row[name] = value
            rows.append(row)
    if not rows:
        return {"epochs": None, "steps": None, "last_eval": None, "evaluations": 0}
    return {"epochs": rows[-1]["epoch"], "steps": rows[-1]["step"], "last_eval": rows[-1],
            "evaluations": len(rows)}


def spacy_train(
    config: Path,
    output: Path,
    train: Path,
    dev: Path,
    *,
    overrides: Sequence[str] = (),
    code: Optional[Path] = None,
    log_path: Optional[Path] = None,
    env: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    """Run ``python -m spacy train`` in a subprocess (CPU), logging to ``log_path``.

    Returns ``{"seconds", "steps", "epochs", "best_dev_score", "model_dir", "command"}``; the
    wall time covers the whole command (loading data, initialization, training and spaCy's own
    dev evaluations). Raises ``RuntimeError`` with the log's tail if it fails.
    """
    output = Path(output)
    cmd = [sys.executable, "-m", "spacy", "train", str(config), "--output", str(output),
           "--paths.train", str(train), "--paths.dev", str(dev), "--gpu-id", "-1"]
    if code:
        cmd += ["--code", str(code)]
    cmd += [str(x) for x in overrides]
    log_path = Path(log_path) if log_path else output.parent / f"{output.name}.train.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log, Timer() as t:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                              env=env or child_env(), cwd=REPO_ROOT)
    text = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(text.splitlines()[-30:])
        raise RuntimeError(f"spacy train failed (exit {proc.returncode}); log {log_path}:\n{tail}")
    info = parse_spacy_train_log(text)
    model_dir = output / "model-best"
    if not model_dir.exists():
        model_dir = output / "model-last"
    try:  # full-precision dev scores of the saved model (the console table rounds SCORE)
        info["model_dev_scores"] = json.loads((model_dir / "meta.json").read_text()).get("performance")
    except (OSError, ValueError):
        info["model_dev_scores"] = None
    info.update({"seconds": t.seconds, "model_dir": str(model_dir), "log": str(log_path),
                 "command": " ".join(cmd[1:])})
    return info


GOLD_PREPROC_OVERRIDES = ("--corpora.train.gold_preproc", "true", "--corpora.dev.gold_preproc", "true")


def spacy_init_config(path: Path, pipeline: str, optimize: str = "efficiency", lang: str = "en") -> Path:
    """Write spaCy's own config for ``pipeline`` (e.g. "tagger,parser") with ``spacy init
    config`` (the peers' configs: CPU, ``--optimize efficiency`` unless told)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "spacy", "init", "config", str(path), "--lang", lang,
                    "--pipeline", pipeline, "--optimize", optimize, "--force"],
                   check=True, stdout=subprocess.DEVNULL, env=child_env())
    return path


def train_spacy_peer(out_dir: Path, pipeline: str, train: Path, dev: Path, *,
                     max_steps: Optional[int] = None, extra_overrides: Sequence[str] = (),
                     gold_preproc: bool = True, optimize: str = "efficiency") -> Dict[str, Any]:
    """The usual spaCy peer: ``spacy init config --pipeline PIPELINE --optimize efficiency``
    trained with ``spacy train`` on gold tokens (``gold_preproc``), for at most ``max_steps``
    (None or 0: the config's own stopping). Config in ``out_dir/config.cfg``, model under
    ``out_dir/model``, log ``out_dir/train.log``; returns spacy_train's dict plus the
    ``overrides`` used."""
    out = Path(out_dir)
    config = spacy_init_config(out / "config.cfg", pipeline, optimize=optimize)
    overrides = list(GOLD_PREPROC_OVERRIDES) if gold_preproc else []
    if max_steps:
        overrides += ["--training.max_steps", str(max_steps)]
    overrides += list(extra_overrides)
    run = spacy_train(config, out / "model", train, dev, overrides=overrides, log_path=out / "train.log")
    run["overrides"] = overrides
    return run


def code_fingerprint(*paths: str) -> str:
    """A short hash of the code under ``paths`` (repo-relative) as it is now: the git tree of each
    at HEAD plus any uncommitted change to it. Cached models are keyed on it, so a model trained
    by older code is retrained rather than measured as the new code's."""
    parts = []
    for rel in paths or ("spacy_structperc",):
        for cmd in (["git", "rev-parse", f"HEAD:{rel}"], ["git", "diff", "HEAD", "--", rel],
                    ["git", "ls-files", "--others", "--exclude-standard", "--", rel]):
            try:
                out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
                parts.append(out.stdout)
            except Exception:
                parts.append("?")
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def dir_bytes(path: Path) -> int:
    """Bytes of all files under ``path`` (or of the file itself)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def current_rss_mb() -> Optional[float]:
    """This process's resident set size now (VmRSS), in MB; None where /proc is missing."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# ---------------------------------------------------------------------------------------------
# Running one system in a child process


def run_child(
    module_path: Path,
    func_name: str,
    kwargs: Dict[str, Any],
    *,
    log_path: Path,
    env: Optional[Dict[str, str]] = None,
    timeout: Optional[float] = None,
) -> Dict[str, Any]:
    """Call ``func_name(**kwargs)`` from the module file ``module_path`` in a fresh interpreter.

    The function must return a JSON-serializable dict. The child adds ``peak_rss_mb`` (its own
    ru_maxrss, or that of the largest subprocess it waited for, whichever is larger) and
    ``child_seconds``. Output goes to ``log_path``. Raises ``RuntimeError`` with the log's tail
    if the child fails.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    io_base = log_path.with_suffix("")
    in_json = Path(str(io_base) + ".in.json")
    out_json = Path(str(io_base) + ".out.json")
    in_json.write_text(json.dumps(kwargs, indent=1, default=str))
    if out_json.exists():
        out_json.unlink()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(Path(module_path).resolve()),
           func_name, str(in_json), str(out_json)]
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env or child_env(),
                              cwd=REPO_ROOT, timeout=timeout)
    if proc.returncode != 0 or not out_json.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"{func_name} failed in child (exit {proc.returncode}); "
                           f"log {log_path}:\n{tail}")
    return json.loads(out_json.read_text())


def _child_main(argv: List[str]) -> int:
    module_path, func_name, in_json, out_json = argv
    t0 = time.perf_counter()
    sys.path.insert(0, str(Path(module_path).parent))
    spec = importlib.util.spec_from_file_location(Path(module_path).stem, module_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kwargs = json.loads(Path(in_json).read_text())
    try:
        result = getattr(module, func_name)(**kwargs)
    except Exception:
        traceback.print_exc()
        return 1
    result = dict(result or {})
    result["peak_rss_mb"] = peak_rss_mb(include_children=True)
    result["peak_rss_self_mb"] = peak_rss_mb(include_children=False)
    result["child_seconds"] = time.perf_counter() - t0
    Path(out_json).write_text(json.dumps(result, indent=1, default=str))
    return 0


# ---------------------------------------------------------------------------------------------
# Results file


def run_job(script: Path, func: str, kwargs: Dict[str, Any], label: str, log_path: Path,
            errors: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """Run one measured system in a child (run_child) and return its result, with
    ``metrics["peak_rss_mb"]``, ``seconds`` and the load averages around it added; on failure,
    record it in ``errors[label]``, say so, and return None."""
    load_before = load_average()
    try:
        with Timer() as t:
            res = run_child(script, func, kwargs, log_path=log_path)
    except Exception as err:
        errors[label] = str(err)
        print(f"  FAILED: {err}", flush=True)
        return None
    res["metrics"] = dict(res["metrics"], peak_rss_mb=res["peak_rss_mb"])
    res.update(seconds=t.seconds, load_avg_before=load_before, load_avg_after=load_average())
    return res


def show_metrics(setting: str, metrics: Dict[str, Any], seconds: float) -> None:
    """Print a job's metrics: fractions to 4 places, counts and rates with thousands separators."""
    shown = ", ".join(f"{k}={v:.4f}" if isinstance(v, float) and v < 1.5 else f"{k}={v:,.0f}"
                      for k, v in metrics.items() if v is not None)
    print(f"  {setting}: {shown}  ({seconds:.0f}s)", flush=True)


def make_row(system: str, setting: str, metric: str, value: float, *, dataset: str,
             split: str = "test") -> Dict[str, Any]:
    if isinstance(value, float):
        value = round(value, 6)
    return {"system": system, "setting": setting, "dataset": dataset, "split": split,
            "metric": metric, "value": value}


def load_results(path: Path) -> Dict[str, Any]:
    path = Path(path)
    if path.exists():
        return json.loads(path.read_text())
    return {}


def merge_rows(old_rows: Sequence[Dict[str, Any]], new_rows: Sequence[Dict[str, Any]],
               replace: Callable[[Dict[str, Any]], bool]) -> List[Dict[str, Any]]:
    """Old rows for which ``replace(row)`` is false, then the new rows; also drops any old row
    with the same (system, setting, dataset, split, metric) as a new one."""
    new_keys = {tuple(r[k] for k in ROW_KEYS[:-1]) for r in new_rows}
    kept = [r for r in old_rows
            if not replace(r) and tuple(r[k] for k in ROW_KEYS[:-1]) not in new_keys]
    return kept + list(new_rows)


# An absolute path inside a string: a "/" that starts a word (not "words/s", not "https://"),
# then at least two components. tests/test_results_files.py checks the committed files with its
# own copy of this pattern.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~<>%$-])/(?:[^\s/\"'`,;:()\[\]{}=|<>@\\]+/)+[^\s/\"'`,;:()\[\]{}=|<>@\\]*")


# Paths every Linux machine has alike (/proc/stat, /usr/bin/time): left as they are.
SYSTEM_ROOTS = ("proc", "sys", "dev", "usr", "bin", "etc")


def relative_path(path: str, root: Path = REPO_ROOT) -> str:
    """An absolute path as a results file may show it: relative to the repository (also above
    it, "../shared/data/..."), a temporary file under "<tmp>", a home directory as "~", a
    system path (SYSTEM_ROOTS) as it is."""
    import tempfile

    p = Path(path)
    if p.parts[1:2] and p.parts[1] in SYSTEM_ROOTS:
        return path
    # The checkout and the corpora beside it (project.yml's data_dir, ../shared/data) are
    # relative to the checkout wherever it lies, a temporary folder included.
    for near in (root, root.parent / "shared"):
        if p == near or near in p.parents:
            return os.path.relpath(p, root).replace(os.sep, "/")
    for tmp in {Path(tempfile.gettempdir()), Path("/tmp")}:
        if p == tmp or tmp in p.parents:
            return "<tmp>/" + p.relative_to(tmp).as_posix()
    home = Path.home()
    if home != Path("/") and home in p.parents:
        return "~/" + p.relative_to(home).as_posix()
    return os.path.relpath(p, root).replace(os.sep, "/")


def relative_paths(obj: Any, root: Path = REPO_ROOT) -> Any:
    """``obj`` (dicts, lists, strings: a results payload) with every absolute path in its strings
    and keys made machine-neutral by ``relative_path``: a results file says where a run read and
    wrote relative to the checkout, never where the checkout was."""
    if isinstance(obj, str):
        return ABSOLUTE_PATH.sub(lambda m: relative_path(m.group(0), root), obj)
    if isinstance(obj, dict):
        return {relative_paths(k, root): relative_paths(v, root) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [relative_paths(v, root) for v in obj]
    return obj


def write_results(path: Path, component: str, rows: Sequence[Dict[str, Any]],
                  **extra: Any) -> Path:
    """Write ``{"component", "rows", **extra}``; every row has exactly ROW_KEYS. Absolute paths
    in the payload are written relative to the repository (``relative_paths``)."""
    for r in rows:
        if tuple(sorted(r)) != tuple(sorted(ROW_KEYS)):
            raise ValueError(f"bad row keys: {sorted(r)}")
    payload = {"component": component, "rows": list(rows)}
    payload.update(extra)
    payload = relative_paths(payload)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def save_results(path: Path, component: str, new_rows: Sequence[Dict[str, Any]],
                 details: Dict[str, Any], replace: Callable[[Dict[str, Any]], bool],
                 errors: Dict[str, str], drop_detail: Optional[Callable[[str], bool]] = None,
                 **settings: Any) -> None:
    """Merge one run into the results file, under its lock: old rows that ``replace`` selects
    (and any with a new row's key) give way to ``new_rows``, old details that ``drop_detail``
    selects are dropped and ``details`` added; the run's ``settings`` (command, notes, ...),
    machine, date and git revision replace the file's, and the run's errors are kept as
    ``errors_last_run``. Nothing is written when the run made no rows."""
    if not new_rows:
        return
    with locked(path):
        old = load_results(path)
        rows = merge_rows(old.get("rows", []), new_rows, replace)
        all_details = {k: v for k, v in old.get("details", {}).items()
                       if drop_detail is None or not drop_detail(k)}
        all_details.update(details)
        extra = {k: v for k, v in old.items() if k not in ("component", "rows", "details", "errors_last_run")}
        extra.update(settings, machine=machine_info(), date=now_iso(), git=git_revision(), details=all_details)
        if errors:
            extra["errors_last_run"] = errors
        write_results(path, component, rows, **extra)
    print(f"wrote {path} ({len(new_rows)} new rows, {len(rows)} in all)")


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock on ``path`` + ".lock" (fcntl), so that two benchmark runs finishing at
    the same time do not lose each other's rows when they merge into one results file."""
    lock_path = Path(str(path) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        try:
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # not on POSIX: no lock
            pass
        yield


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        sys.exit(_child_main(sys.argv[2:]))
    print("usage: _common.py --child MODULE_PATH FUNC IN_JSON OUT_JSON (internal)", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------
# The run: options, job loop, saving


def csv(cast: Callable[[str], Any] = str) -> Callable[[str], List[Any]]:
    """An argparse type: "a,b,c" -> [cast(a), cast(b), cast(c)] (blanks dropped)."""
    return lambda text: [cast(x.strip()) for x in text.split(",") if x.strip()]


def add_run_args(p: argparse.ArgumentParser, predict_repeats: int = 3) -> argparse.ArgumentParser:
    """The options every benchmark script has: where it works and writes, --quick, the number
    of timed prediction passes, and --plots-only."""
    p.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR,
                   help="converted corpora, trained models and logs (default benchmarks/.work)")
    p.add_argument("--results-dir", type=Path, default=None,
                   help="default benchmarks/results; with --quick: WORK_DIR/quick-results")
    p.add_argument("--quick", action="store_true", help="smoke run: corpus slices, short training")
    p.add_argument("--predict-repeats", type=int, default=predict_repeats,
                   help=f"time the prediction pass N times, keep the fastest (default {predict_repeats})")
    p.add_argument("--plots-only", action="store_true", help="redraw the plots from the JSON")
    return p


def parse_only(only: Optional[str], systems: Sequence[str], ours: str,
               known_settings: Optional[Iterable[str]] = None):
    """``--only crfsuite,spacy``, or with settings of ours by name (names contain commas, so
    they come last, after ``<ours>:``, separated by ';'): ``--only "crfsuite,ours:beam 4, early;viterbi"``.
    Returns (systems, our settings or None for all); unknown names end the run."""
    if not only:
        return set(systems), None
    settings = None
    head, sep, tail = only.partition(ours + ":")
    if sep:
        settings = {n.strip() for n in tail.split(";") if n.strip()}
        known = set(known_settings) if known_settings is not None else settings
        if settings - known:
            raise SystemExit(f"unknown setting(s) {sorted(settings - known)}; known: {sorted(known)}")
    chosen = {p.strip() for p in head.split(",") if p.strip()} | ({ours} if sep else set())
    if chosen - set(systems):
        raise SystemExit(f"unknown system(s) {sorted(chosen - set(systems))}; choose from {list(systems)}")
    return chosen, settings


@dataclasses.dataclass
class Job:
    """One measured system: ``func(**kwargs)`` of the script, run in a child process."""
    key: str                       # its progress line, log file and details entry
    system: str
    func: str
    kwargs: Dict[str, Any]
    setting: Optional[str] = None  # None: the child's result names it
    dataset: str = ""
    split: str = "test"
    info: Dict[str, Any] = dataclasses.field(default_factory=dict)  # the script's own (e.g. what it replaces)


class Bench:
    """One run of a benchmark script: ``Bench.start`` (None after --plots-only), ``run(jobs)``
    (rows, details and errors gathered; returns the jobs that ran with their settings), then
    ``finish(replaces, ...)`` to merge the rows into ``results/<component>.json`` and redraw."""

    def __init__(self, component: str, script: str, args: argparse.Namespace,
                 argv: Optional[Sequence[str]], make_plots: Callable[[Path, Path], List[Path]], ours: str):
        self.component = component
        self.ours = ours
        self.script = Path(script).resolve()
        self.args = args
        self.make_plots = make_plots
        self.quick = bool(getattr(args, "quick", False))
        self.work_dir = Path(args.work_dir).resolve()
        self.results_dir = Path(args.results_dir or (self.work_dir / "quick-results" if self.quick
                                                     else RESULTS_DIR)).resolve()
        self.results_path = self.results_dir / f"{component}.json"
        self.run_dir = self.work_dir / "runs" / ("quick" if self.quick else "full") / component
        self.command = f"python benchmarks/{self.script.name} " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        self.t_start = time.time()
        self.rows: List[Dict[str, Any]] = []
        self.details: Dict[str, Any] = {}
        self.errors: Dict[str, str] = {}
        self.done: List[Any] = []   # (job, setting) of every job that ran

    @classmethod
    def start(cls, component: str, script: str, args: argparse.Namespace, argv: Optional[Sequence[str]],
              make_plots: Callable[[Path, Path], List[Path]], ours: str, data: Any = None) -> Optional["Bench"]:
        bench = cls(component, script, args, argv, make_plots, ours)
        if getattr(args, "plots_only", False):
            bench.plots()
            return None
        print(f"data: {data}\nwork: {bench.work_dir}\nresults: {bench.results_path}", flush=True)
        return bench

    def plots(self) -> None:
        for path in self.make_plots(self.results_path, self.results_dir):
            print(f"wrote {path}")

    def child(self, func: str, kwargs: Dict[str, Any], name: str) -> Dict[str, Any]:
        """``func(**kwargs)`` of the script in a child, logged to run_dir/logs/<name>.log (for
        tuning runs, which keep their own records)."""
        return run_child(self.script, func, kwargs, log_path=self.run_dir / "logs" / f"{name}.log")

    def run(self, jobs: Sequence[Job]) -> List[Any]:
        """Run every job in its own child; one failing does not lose the others. Returns
        (job, setting) for each job that ran."""
        done = []
        for n, job in enumerate(jobs, 1):
            log = self.run_dir / "logs" / f"{slug(job.key)}.log"
            print(f"[{n}/{len(jobs)}] {job.key} (log: {log})", flush=True)
            res = run_job(self.script, job.func, job.kwargs, job.key, log, self.errors)
            if res is None:
                continue
            setting = job.setting or res["setting"]
            extra_rows = dict(res.get("extra_rows", {}))
            for name, metrics in [(setting, res["metrics"])] + list(extra_rows.items()):
                for metric, value in metrics.items():
                    if value is not None:
                        self.rows.append(make_row(job.system, name, metric, value, dataset=job.dataset,
                                                  split=job.split))
            self.details[job.key if job.setting else f"{job.key} | {setting}"] = dict(
                res.get("details", {}), setting=setting, dataset=job.dataset, split=job.split,
                date=now_iso(), command=self.command,
                # other work on the machine skews the timings: 1-minute load averages
                load_avg_before=res["load_avg_before"], load_avg_after=res["load_avg_after"],
                child_seconds=res.get("child_seconds"), peak_rss_self_mb=res.get("peak_rss_self_mb"))
            show_metrics(setting, res["metrics"], res["seconds"])
            done.append((job, setting))
        self.done += done
        return done

    def replaces(self, row: Dict[str, Any]) -> bool:
        """Whether a run replaces an old row: a job of ours replaces its setting's rows; a peer
        that ran replaces all its rows (its setting may have changed), on the same data and split."""
        return any(row["system"] == job.system and row["dataset"] == job.dataset and row["split"] == job.split
                   and (job.system != self.ours or row["setting"] == setting) for job, setting in self.done)

    def drops_detail(self, key: str) -> bool:
        """A re-run peer's old details go with its old rows."""
        return any(job.system != self.ours and not job.setting and key.startswith(f"{job.key} | ")
                   for job, _ in self.done)

    def finish(self, **settings: Any) -> int:
        """Merge the run into the results file (old rows that ``replaces`` selects give way),
        redraw the plots, say how it went; the exit status is 1 when a job failed."""
        save_results(self.results_path, self.component, self.rows, self.details, self.replaces, self.errors,
                     drop_detail=self.drops_detail, command=self.command, quick=self.quick, **settings)
        self.plots()
        failed = f"; {len(self.errors)} failed: {sorted(self.errors)}" if self.errors else ""
        print(f"done in {time.time() - self.t_start:.0f}s{failed}")
        return 1 if self.errors else 0
