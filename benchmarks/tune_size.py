"""Model-size settings (precision, prune_below) of a trained tagger + parser, measured on dev.

Takes one trained pipeline (e.g. ``spacy train configs/parser.cfg`` output), re-saves it under
each setting and measures, each in a fresh child process: bytes on disk per component,
``spacy.load`` wall time and RSS after it (``VmRSS``; ``VmHWM`` for the peak), dev accuracy
(XPOS tag_acc, UAS, LAS, on the pipeline's own dev corpus reader) and the share of dev tokens
whose tag / (head, label) agree with the reference (the pipeline as given, float32 unless it
was saved otherwise). Rows go to ``benchmarks/results/size_tuning.json``.

    python benchmarks/tune_size.py --model training/parser/model-best --dev corpus/dev.spacy
    python benchmarks/tune_size.py ... --settings "float32 0;int8 0;float16 0;int8 0.5"
    python benchmarks/tune_size.py ... --settings "float16 0;float16 1" --pipes parser --speed-passes 10

A setting is "PRECISION PRUNE_BELOW", applied to the components named by --pipes (default: all);
"reference" is the pipeline as given (no re-save). With --speed-passes, one more child process
loads every pipeline and times ``nlp.pipe`` on the dev split's gold words, the pipelines' passes
alternated, and keeps each one's best pass (words_per_second).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "size_tuning.json"
DEFAULT_SETTINGS = "float32 0;float16 0;int8 0;int8 0.25;int8 0.5;int8 1"

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import spacy
import spacy_structperc  # noqa: F401  (registered anyway; imported here so its import is not in the load time)
t1 = time.perf_counter()
nlp = spacy.load(sys.argv[1])
t2 = time.perf_counter()
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
out = {"load_seconds": t2 - t1, "import_seconds": t1 - t0, "rss_after_load_mb": status("VmRSS"),
       "peak_rss_load_mb": status("VmHWM")}
if len(sys.argv) > 3 and sys.argv[3] == "load-only":
    print(json.dumps(out))
    sys.exit(0)
from spacy.util import resolve_dot_names
config = nlp.config.copy()
config["paths"]["dev"] = sys.argv[2]
config["paths"]["train"] = sys.argv[2]
(dev_corpus,) = resolve_dot_names(config.interpolate(), ["corpora.dev"])
examples = list(dev_corpus(nlp))
scores = nlp.evaluate(examples)
out.update({k: scores.get(k) for k in ("tag_acc", "dep_uas", "dep_las")})
pred = [nlp(eg.predicted.copy()) for eg in examples]
out["predictions"] = [[(t.tag_, t.head.i, t.dep_) for t in doc] for doc in pred]
print(json.dumps(out))
"""


SPEED_CHILD = r"""
import json, sys, time
import spacy
import spacy_structperc  # noqa: F401
from spacy.tokens import Doc, DocBin
dev, passes, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
nlps = [spacy.load(d) for d in dirs]
gold = list(DocBin().from_disk(dev).get_docs(nlps[0].vocab))
n_words = sum(len(doc) for doc in gold)
best = [0.0] * len(dirs)
for _ in range(passes):
    for i, nlp in enumerate(nlps):
        docs = [Doc(nlp.vocab, words=[t.text for t in g], spaces=[bool(t.whitespace_) for t in g]) for g in gold]
        t = time.perf_counter()
        for _doc in nlp.pipe(docs, batch_size=1000):
            pass
        best[i] = max(best[i], n_words / (time.perf_counter() - t))
print(json.dumps(best))
"""


def measure_speed(dirs: list, dev: Path, passes: int) -> list:
    """words/s of each pipeline in `dirs` (package as it is), one child process, passes alternated."""
    proc = subprocess.run([sys.executable, "-c", SPEED_CHILD, str(dev), str(passes)] + [str(d) for d in dirs],
                          capture_output=True, text=True, env=C.child_env(), cwd=C.REPO_ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(model_dir: Path, dev: Path, code: Optional[Path] = None, load_only: bool = False) -> dict:
    """Measure in a child process; `code`: another checkout's package (the code before a change)."""
    env = C.child_env({"PYTHONPATH": str(code)} if code else None)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), str(dev)] + (["load-only"] if load_only else []),
                          capture_output=True, text=True, env=env, cwd=code or C.REPO_ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def resave(model_dir: Path, out_dir: Path, precision: str, prune_below: float,
           pipes: Optional[Sequence[str]] = None) -> None:
    import spacy
    nlp = spacy.load(model_dir)
    for name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if hasattr(model, "precision") and (pipes is None or name in pipes):
            model.precision = precision
            model.prune_below = prune_below
    nlp.to_disk(out_dir)


def sizes(model_dir: Path) -> dict:
    out = {}
    for comp in ("tagger", "parser"):
        path = model_dir / comp / "model"
        if path.exists():
            out[f"{comp}_model_mb"] = path.stat().st_size / 1e6
    out["pipeline_mb"] = sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file()) / 1e6
    return out


def train_log_metrics(log: Path) -> dict:
    """Peak RSS (MB), wall seconds and the last epoch's dev scores from a `/usr/bin/time -v
    python -m spacy train` log."""
    text = log.read_text(errors="replace")
    out = {"train_peak_rss_mb": int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024}
    h, m, sec = ([0, 0] + re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
                 .group(1).split(":"))[-3:]
    out["train_seconds"] = int(h) * 3600 + int(m) * 60 + float(sec)
    header = [line.replace("LOSS ", "LOSS_").split() for line in text.splitlines() if line.lstrip().startswith("E ")][-1]
    last = [line.split() for line in text.splitlines() if re.match(r"^\s*\d+\s+\d+\s", line)][-1]
    for name, value in zip(header, last):
        if name in ("TAG_ACC", "DEP_UAS", "DEP_LAS"):
            out[f"last_epoch_{name.lower()}"] = float(value) / 100
    return out


def agreement(pred, ref) -> dict:
    n = same_tag = same_arc = 0
    for a_doc, b_doc in zip(pred, ref):
        for a, b in zip(a_doc, b_doc):
            n += 1
            same_tag += a[0] == b[0]
            same_arc += a[1:] == b[1:]
    return {"agree_tag": same_tag / n, "agree_arc": same_arc / n}


def compare_loads(args) -> None:
    cases = {}
    for item in [x for x in args.load_compare.split(";") if x.strip()]:
        name, where = item.split("=", 1)
        path, _, code = where.partition("@")
        cases[name.strip()] = (Path(path), Path(code) if code else None)
    best: dict = {}
    for _ in range(max(args.load_repeats, 1)):
        for name, (path, code) in cases.items():
            m = measure(path, Path("-"), code, load_only=True)
            old = best.setdefault(name, m)
            for k in ("load_seconds", "rss_after_load_mb"):
                old[k] = min(old[k], m[k])
    rows = [C.make_row("structperc", f"load: {name}", k, best[name][k], dataset="ud_en_ewt", split="dev")
            for name in cases for k in ("load_seconds", "rss_after_load_mb")]
    for name in cases:
        print(name, best[name])
    C.save_results(RESULTS, "size_tuning", rows, details={}, replace=lambda r: r["setting"].startswith("load: "),
                   errors={}, load_average_load_compare=C.load_average(),
                   commands={**C.load_results(RESULTS).get("commands", {}), "load": " ".join(sys.argv)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="the trained pipeline (none: only --train-logs)")
    ap.add_argument("--dev", type=Path, default=None)
    ap.add_argument("--settings", default=DEFAULT_SETTINGS)
    ap.add_argument("--label", default="parser.cfg", help="the config the model was trained with")
    ap.add_argument("--reference-code", type=Path, default=None,
                    help="measure the reference with the package in this folder (the code before)")
    ap.add_argument("--load-repeats", type=int, default=3,
                    help="fresh processes per pipeline for the load time (the best is kept), taken in turns")
    ap.add_argument("--load-compare", default="",
                    help="'NAME=PIPELINE[@CODE];...': only spacy.load time and RSS of these pipelines (each "
                         "with the package in CODE, if given), best of --load-repeats fresh processes in turns")
    ap.add_argument("--pipes", default="",
                    help="comma-separated components the settings apply to (default: every one)")
    ap.add_argument("--speed-passes", type=int, default=0,
                    help="also time nlp.pipe on dev for every pipeline, passes alternated in one process")
    ap.add_argument("--train-logs", default="",
                    help="'SETTING=LOG;...': `/usr/bin/time -v spacy train` logs, for training peak RSS rows")
    args = ap.parse_args()
    rows, details = [], {}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.model is not None:
            results.append(("reference", measure(args.model, args.dev, args.reference_code), sizes(args.model)))
            ref = results[0][1]
        elif args.load_compare:
            compare_loads(args)
            return
        else:
            args.settings, args.load_repeats, args.label = "", 0, "training"
        dirs = {"reference": (args.model, args.reference_code)}
        for setting in [x.strip() for x in args.settings.split(";") if x.strip()]:
            precision, prune = setting.split()
            out_dir = Path(tmp) / setting.replace(" ", "_")
            t = time.perf_counter()
            resave(args.model, out_dir, precision, float(prune),
                   [x.strip() for x in args.pipes.split(",") if x.strip()] or None)
            save_seconds = time.perf_counter() - t
            m = measure(out_dir, args.dev)
            m["save_seconds"] = save_seconds
            results.append((f"{precision}, prune_below {prune}", m, sizes(out_dir)))
            dirs[results[-1][0]] = (out_dir, None)
        # Load times again, in turns, each pipeline in fresh processes: the best of the repeats
        # (and of the first measurement), as the machine is shared.
        for _ in range(args.load_repeats):
            for setting, m, _size in results:
                path, code = dirs[setting]
                again = measure(path, args.dev, code, load_only=True)
                m["load_seconds"] = min(m["load_seconds"], again["load_seconds"])
                m["rss_after_load_mb"] = min(m["rss_after_load_mb"], again["rss_after_load_mb"])
        if args.speed_passes and results:
            speeds = measure_speed([dirs[setting][0] for setting, _m, _size in results], args.dev,
                                   args.speed_passes)
            for (_setting, m, _size), wps in zip(results, speeds):
                m["words_per_second"] = wps
    for item in [x for x in args.train_logs.split(";") if x.strip()]:
        setting, log = item.split("=", 1)
        rows.extend(C.make_row("structperc", setting.strip(), metric, value, dataset="ud_en_ewt", split="dev")
                    for metric, value in train_log_metrics(Path(log)).items())
    for setting, m, size in results:
        metrics = {**size, **{k: v for k, v in m.items() if k != "predictions"},
                   **agreement(m["predictions"], ref["predictions"])}
        print(setting, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()}))
        details[f"{args.label}: {setting}"] = metrics
        for metric, value in metrics.items():
            if isinstance(value, (int, float)):
                rows.append(C.make_row("structperc", f"{args.label}: {setting}", metric, value,
                                       dataset="ud_en_ewt", split="dev"))
    C.save_results(RESULTS, "size_tuning", rows, details=details,
                   replace=lambda r: r["setting"].startswith(f"{args.label}: "), errors={},
                   drop_detail=lambda k: k.startswith(f"{args.label}: ") or ":" not in k,
                   load_average=C.load_average(),
                   commands={**C.load_results(RESULTS).get("commands", {}), args.label: " ".join(sys.argv)},
                   notes=["Each setting re-saves one trained pipeline (float32, format 2, as the code "
                          "before issue 14 saved it) and measures it in a fresh process: model bytes, "
                          "spacy.load seconds (import excluded; best of the first measurement and "
                          "--load-repeats more, taken in turns), RSS after load, dev tag_acc / dep_uas / "
                          "dep_las, and agreement of tags and (head, label) with the reference.",
                          "reference: the pipeline as trained, measured with the code before the change "
                          "(--reference-code): the 'before' of every figure.",
                          "before/after training rows: `/usr/bin/time -v python -m spacy train CONFIG` "
                          "with the code before and after (peak RSS of the whole run, wall seconds under "
                          "the load average stated, last epoch's dev scores). The after-run trains to the "
                          "same weights: its per-epoch dev scores equal the before-run's.",
                          "Timings under a shared machine's load (load_average): compare within a run.",
                          "--pipes: the settings are applied to those components only, the others saved "
                          "as they were. words_per_second (--speed-passes): nlp.pipe on the dev split's "
                          "gold words with the package as it is, every pipeline in one process, their "
                          "passes alternated, the best pass of each.",
                          "Until commit 3ce9d6c ('Whole rows only'), saving from a trained model (not "
                          "from a loaded one in the same precision) also left out a kept row's weights "
                          "within prune_below: the 'parser.cfg: ... prune_below 0.25 / 0.5' rows were "
                          "measured so. Since, prune_below leaves out whole rows only, whichever way a "
                          "model is saved."])


if __name__ == "__main__":
    main()
