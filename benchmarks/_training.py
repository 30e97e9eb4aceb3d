"""Training the measured systems: ours in-process (``train_epochs``), any spaCy config with
``spacy train`` in a subprocess (``spacy_train``, the steps it ran read from its log; whether a
config's corpora read documents, ``config_reads_documents``), spaCy's own configs as the peer
(``train_spacy_peer``) and the CRFsuite peer (``crf_fit``, ``crf_tag``; the NER peer's features,
``crf_ner_features``).
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


def crf_ner_features(doc, pos: bool, window: int = 2, affixes: int = 4,
                     context: bool = False) -> List[List[str]]:
    """The NER peer's features (bench_ner.py): the observation features of
    spacy-structperc.ner_features.v1 (clusters excepted); the label history is the CRF's own
    first-order transition. Positions outside the sentence read as <s> / </s>, as the core's
    padding does; a prefix/suffix longer than the word is absent."""
    from spacy_structperc.atoms import _shape, _short_shape

    words = [t.text for t in doc]
    lower = [w.lower() for w in words]
    shape = [_shape(w) for w in words]
    sshape = [_short_shape(w) for w in words]
    tags = [t.tag_ for t in doc] if pos else None
    n = len(words)

    def at(seq, i):
        return seq[i] if 0 <= i < n else ("<s>" if i < 0 else "</s>")

    out = []
    for i in range(n):
        f = ["b", "o0=" + words[i], "w0=" + lower[i]]
        for k in range(1, window + 1):
            f += [f"w-{k}=" + at(lower, i - k), f"w+{k}=" + at(lower, i + k)]
        f += ["w-1w0=" + at(lower, i - 1) + "|" + lower[i], "w0w+1=" + lower[i] + "|" + at(lower, i + 1)]
        if pos:
            f.append("p0=" + tags[i])
            for k in range(1, window + 1):
                f += [f"p-{k}=" + at(tags, i - k), f"p+{k}=" + at(tags, i + k)]
            for a, b in ((-2, -1), (-1, 0), (0, 1), (1, 2)):
                f.append(f"p{a:+d}p{b:+d}=" + at(tags, i + a) + "|" + at(tags, i + b))
            for a in (-2, -1, 0):
                f.append(f"p{a:+d}3=" + "|".join(at(tags, i + a + j) for j in range(3)))
        f.append("sh0=" + shape[i])
        for k in range(1, window + 1):
            f += [f"sh-{k}=" + at(sshape, i - k), f"sh+{k}=" + at(sshape, i + k)]
        for a, b in ((-2, -1), (-1, 0), (0, 1), (1, 2)):
            f.append(f"sh{a:+d}sh{b:+d}=" + at(sshape, i + a) + "|" + at(sshape, i + b))
        w = words[i]
        for k in range(1, affixes + 1):
            if len(w) >= k:
                f += [f"p{k}=" + w[:k], f"s{k}=" + w[-k:]]
        if context:   # ner_features.v1 with context = true
            for d in (-1, 1):
                if 0 <= i + d < n:
                    v = words[i + d]
                    f += [f"s3{d:+d}=" + v[-3:]] if len(v) >= 3 else []
                    f += [f"s4{d:+d}=" + v[-4:]] if len(v) >= 4 else []
                    f += [f"p3{d:+d}=" + v[:3]] if len(v) >= 3 else []
            f += ["w-2w-1=" + at(lower, i - 2) + "|" + at(lower, i - 1),
                  "w+1w+2=" + at(lower, i + 1) + "|" + at(lower, i + 2),
                  "w-1w+1=" + at(lower, i - 1) + "|" + at(lower, i + 1),
                  "sh0w-1=" + sshape[i] + "|" + at(lower, i - 1),
                  "sh0w+1=" + sshape[i] + "|" + at(lower, i + 1)]
        out.append(f)
    return out


# ---------------------------------------------------------------------------------------------
# Our components in-process, spaCy configs with spacy train

_TRAIN_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+[-\d.]+\s")
_TRAIN_HEADER = re.compile(r"^\s*E\s+#\s+")


def train_epochs(nlp, examples: Sequence, epochs: int, *, seed: int = 0, update: Optional[Callable] = None,
                 before: Optional[Callable] = None, after: Optional[Callable] = None) -> float:
    """In-process training: ``nlp.initialize`` on ``examples``, then ``epochs`` passes (numbered
    from 1), each over a fresh shuffle (``random.Random(seed)``) in batches of about 1,000 words
    (the distributed trainer's ``batches_by_words``), through
    ``update`` (default ``nlp.update``); ``before(epoch)`` opens a pass (inside its timing),
    ``after(epoch, losses, seconds)`` follows it. Returns the seconds of initialization and passes."""
    import random

    from spacy_structperc.distributed.train import batches_by_words

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


def config_reads_documents(config: Path, corpus: str = "train") -> bool:
    """Whether a config's corpus (``[corpora.<corpus>]``) reads whole documents (``documents =
    true``, e.g. configs/ner.cfg's CoNLL-2003 reader) rather than one Doc per sentence."""
    from thinc.api import Config

    cfg = Config().from_disk(Path(config), interpolate=False)
    return bool(cfg["corpora"][corpus].get("documents"))


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
