"""Training the measured systems: ours in-process (``train_epochs``), any spaCy config with
``spacy train`` in a subprocess (``spacy_train``, the steps it ran read from its log), spaCy's own
configs as the peer (``train_spacy_peer``) and the CRFsuite peer (``crf_fit``, ``crf_tag``).
Nothing imports spaCy or pycrfsuite at module level."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from _machine import REPO_ROOT, Timer, child_env

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
# Our components in-process, spaCy configs with spacy train

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
