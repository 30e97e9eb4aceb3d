"""Rewrite the benchmark tables in README.md and docs/*.md from ``benchmarks/results/*.json``.

For every results file ``benchmarks/results/<component>.json`` the block between

    <!-- bench:<component>:start -->
    <!-- bench:<component>:end -->

in whichever page holds it (README.md or a page of docs/) is replaced by a Markdown table: one
line per (system, setting), one column per metric, rows of one split (default ``test``).
``speed.json`` (bench_speed.py) gets tables of its own, ours beside spaCy per task with the
issue-14 targets (and our figures from ``speed_baseline.json`` when present), and its plot
``speed.png``. ``<!-- bench:summary:... -->`` (the README's component table) is built from
several files (SUMMARY). A results file whose markers are in no page is printed instead.

    python benchmarks/make_readme_tables.py            # rewrite the pages, print what changed
    python benchmarks/make_readme_tables.py --check    # exit 1 if a page is out of date
    python benchmarks/make_readme_tables.py --print    # print the tables, touch nothing
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent

# Known metrics: column header and formatter. Others are shown as they come, after these.
METRICS: Dict[str, Tuple[str, Any]] = {
    "tag_acc": ("XPOS acc.", lambda v: f"{100 * v:.2f}"),
    "label_acc": ("label acc.", lambda v: f"{100 * v:.2f}"),
    "pos_acc": ("UPOS acc.", lambda v: f"{100 * v:.2f}"),
    "ents_f": ("F1", lambda v: f"{100 * v:.2f}"),
    "ents_p": ("P", lambda v: f"{100 * v:.2f}"),
    "ents_r": ("R", lambda v: f"{100 * v:.2f}"),
    "chunk_f": ("F1", lambda v: f"{100 * v:.2f}"),
    "spans_chunks_f": ("F1", lambda v: f"{100 * v:.2f}"),
    "spans_chunks_p": ("P", lambda v: f"{100 * v:.2f}"),
    "spans_chunks_r": ("R", lambda v: f"{100 * v:.2f}"),
    "clauses_f": ("F1", lambda v: f"{100 * v:.2f}"),
    "clauses_p": ("P", lambda v: f"{100 * v:.2f}"),
    "clauses_r": ("R", lambda v: f"{100 * v:.2f}"),
    "dep_uas": ("UAS", lambda v: f"{100 * v:.2f}"),
    "dep_las": ("LAS", lambda v: f"{100 * v:.2f}"),
    "invalid_update_share": ("invalid updates", lambda v: f"{100 * v:.1f}%"),
    "train_seconds": ("train (s)", lambda v: f"{v:,.0f}"),
    "predict_wps": ("words/s", lambda v: f"{v:,.0f}"),
    "peak_rss_mb": ("peak RSS (MB)", lambda v: f"{v:,.0f}"),
    # bench_parser.py --only levers: the dev split's scores beside the test ones, and the model
    "dev_dep_uas": ("dev UAS", lambda v: f"{100 * v:.2f}"),
    "dev_dep_las": ("dev LAS", lambda v: f"{100 * v:.2f}"),
    "dev_sents_f": ("dev sents F", lambda v: f"{100 * v:.2f}"),
    "test_tag_acc": ("tags", lambda v: f"{100 * v:.2f}"),
    "parser_mb": ("parser (MB)", lambda v: f"{v:,.1f}"),
    # bench_distributed.py
    "seconds_per_epoch": ("s / epoch", lambda v: f"{v:,.1f}"),
    "speedup": ("speed-up", lambda v: f"{v:.2f}x"),
    "speedup_vs_1_worker": ("vs 1 worker", lambda v: f"{v:.2f}x"),
    "est_idle_speedup": ("est. speed-up, idle cores", lambda v: f"{v:.2f}x"),
    "speedup_vs_pipe_n2": ("vs n_process=2", lambda v: f"{v:.2f}x"),
    "worker_peak_rss_mb": ("worker peak RSS (MB)", lambda v: f"{v:,.0f}"),
    "worker_rss_vs_serial": ("worker RSS / serial", lambda v: f"{v:.2f}"),
    # bench_kernel.py (held-out accuracy of the averaged and the voted prediction)
    "accuracy": ("accuracy", lambda v: f"{100 * v:.2f}"),
    "voted_accuracy": ("voted accuracy", lambda v: f"{100 * v:.2f}"),
    "us_per_query_averaged": ("us / item, averaged", lambda v: f"{v:,.1f}" if v < 100 else f"{v:,.0f}"),
    "us_per_query_voted": ("us / item, voted", lambda v: f"{v:,.0f}"),
}


# Kept in the results files, left out of the tables: the tagger's dev scores beside each parser
# lever (the same tagger in every row; the tagger's own table shows them).
HIDDEN = {"dev_tag_acc", "dev_pos_acc", "test_pos_acc"}


def _fmt(metric: str, value: Any) -> str:
    if value is None:
        return "–"
    if metric in METRICS:
        return METRICS[metric][1](value)
    if metric.endswith(("_acc", "_f", "_p", "_r", "_uas", "_las")) and isinstance(value, float) \
            and value <= 1.0:
        return f"{100 * value:.2f}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def _header(metric: str) -> str:
    return METRICS[metric][0] if metric in METRICS else metric


# Datasets named "<prefix><value>" (e.g. "synthetic P=0.9" from bench_synthetic.py) get a table of
# their own, after the main one: one line per (system, setting), one column per value.
PIVOT_PREFIXES = ("synthetic P=",)


def _pivoted(row: Dict[str, Any]) -> bool:
    return str(row.get("dataset", "")).startswith(PIVOT_PREFIXES)


def build_pivot_table(data: Dict[str, Any], split: str = "test") -> Optional[str]:
    """The table of the pivoted rows (one metric, e.g. label_acc), or None if there are none."""
    rows = [r for r in data.get("rows", []) if r.get("split") == split and _pivoted(r)]
    if not rows:
        return None
    prefix = next(p for p in PIVOT_PREFIXES if rows[0]["dataset"].startswith(p))
    rows = [r for r in rows if r["dataset"].startswith(prefix)]
    metric = rows[0]["metric"]
    rows = [r for r in rows if r["metric"] == metric]

    def value_key(dataset: str):
        v = dataset[len(prefix):]
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)

    columns = sorted(dict.fromkeys(r["dataset"] for r in rows), key=value_key)
    systems = list(dict.fromkeys(r["system"] for r in rows))
    ours = [s for s in systems if s.startswith("structperc")]
    systems = ours + [s for s in systems if s not in ours]
    cells: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for r in rows:
        cells.setdefault((r["system"], r["setting"]), {})[r["dataset"]] = r["value"]
    order = sorted(cells, key=lambda k: systems.index(k[0]))  # stable within a system
    head = ["system", "setting"] + [c if i == 0 else c[len(prefix):] for i, c in enumerate(columns)]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * 2 + ["---:"] * len(columns)) + "|"]
    for system, setting in order:
        system_cell = f"**{system}**" if system in ours else system
        lines.append("| " + " | ".join([system_cell, setting] + [_fmt(metric, cells[(system, setting)].get(c))
                                                              for c in columns]) + " |")
    info = data.get("synthetic") or {}
    cfg = info.get("config") or {}
    foot = [f"{_header(metric)} on {prefix.split()[0]} data, {split}"]
    if cfg:
        foot.append(f"{cfg.get('n_train')} training / {cfg.get('n_test')} test sequences of "
                    f"{cfg.get('length')} tokens, {cfg.get('epochs')} epochs, reset_every "
                    f"{cfg.get('reset_every')}, mean of {cfg.get('seeds')} seed" + ("" if cfg.get("seeds") == 1 else "s"))
    if info.get("date"):
        foot.append(str(info["date"])[:10])
    if info.get("quick"):
        foot.append("QUICK SMOKE RUN, not real figures")
    lines.append("")
    lines.append(f"<sub>{'; '.join(foot)}. In %; generated from "
                 f"`benchmarks/results/{data.get('component', '')}.json` by "
                 f"`benchmarks/make_readme_tables.py`; rerun with "
                 f"`python benchmarks/bench_synthetic.py`.</sub>")
    return "\n".join(lines)


# Reranking (bench_reranking.py): one compact table over the parser (UD EWT) and the chunker
# (CoNLL-2000) rows: the main score, LAS, the score on dev, the learner's training time and the
# reranked pipeline's prediction time as a multiple of the base pipeline's.
RERANKING_COLUMNS = (("UAS / F1", ("dep_uas", "spans_chunks_f")), ("LAS", ("dep_las",)),
                     ("dev UAS / F1", ("dev_uas", "dev_f")), ("train (s)", ("train_seconds",)),
                     ("x base time", ("time_ratio",)))


def build_reranking_table(data: Dict[str, Any], split: str = "test") -> Optional[str]:
    rows = [r for r in data.get("rows", []) if r.get("split") == split]
    if not rows:
        return None
    cells: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["system"], r["setting"]), {})[r["metric"]] = r["value"]

    def cell(values: Dict[str, Any], metrics) -> str:
        for m in metrics:
            if m in values:
                v = values[m]
                if m == "time_ratio":
                    return f"{v:.2f}x"
                if m == "train_seconds":
                    return f"{v:,.0f}"
                return f"{100 * v:.2f}"
        return "–"

    def rank(key: Tuple[str, str, str]) -> Tuple[int, int]:
        dataset, _, setting = key
        kind = 0 if setting.startswith("1-best") else 1 if setting.startswith("oracle") else \
            3 if "in the pipeline" in setting else 2
        return (0 if dataset == "ud_en_ewt" else 1, kind)

    lines = ["| dataset | system | setting | " + " | ".join(h for h, _ in RERANKING_COLUMNS) + " |",
             "|---|---|---|" + "---:|" * len(RERANKING_COLUMNS)]
    for (dataset, system, setting), values in sorted(cells.items(), key=lambda kv: rank(kv[0])):
        lines.append(f"| {dataset} | {system} | {setting} | " +
                     " | ".join(cell(values, ms) for _, ms in RERANKING_COLUMNS) + " |")
    machine = data.get("machine") or {}
    foot = [f"{split} splits", ", ".join(b for b in (machine.get("cpu"), f"{machine.get('cpu_count')} cores",
                                                      f"Python {machine.get('python')}") if b)]
    if data.get("date"):
        foot.append(str(data["date"])[:10])
    lines.append("")
    lines.append(f"<sub>{'; '.join(foot)}. Accuracies in %; generated from "
                 f"`benchmarks/results/reranking.json` by `benchmarks/make_readme_tables.py`; "
                 f"rerun with `python benchmarks/bench_reranking.py`.</sub>")
    return "\n".join(lines)


def build_table(data: Dict[str, Any], split: str = "test") -> Optional[str]:
    """The Markdown table of one results file, or None if it has no rows for ``split``; then the
    table of its pivoted rows (PIVOT_PREFIXES), if any."""
    if data.get("component") == "reranking":
        return build_reranking_table(data, split)
    pivot = build_pivot_table(data, split)
    main = _build_main_table(data, split)
    if main is None or pivot is None:
        return main if pivot is None else pivot
    return main + "\n\n" + pivot


def _build_main_table(data: Dict[str, Any], split: str = "test") -> Optional[str]:
    rows = [r for r in data.get("rows", []) if r.get("split") == split and not _pivoted(r)]
    if not rows:
        return None
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    component = data.get("component", "")
    # Our own system(s) first (named after the component, e.g. structperc_tagger), then peers.
    systems = list(dict.fromkeys(r["system"] for r in rows))
    ours = [s for s in systems if s.startswith("structperc")]
    systems = ours + [s for s in systems if s not in ours]
    metrics_seen = [m for m in dict.fromkeys(r["metric"] for r in rows) if m not in HIDDEN]
    metrics = [m for m in METRICS if m in metrics_seen] + \
              [m for m in metrics_seen if m not in METRICS]
    cells: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    order: List[Tuple[str, str, str]] = []
    for r in rows:
        key = (r["dataset"], r["system"], r["setting"])
        if key not in cells:
            cells[key] = {}
            order.append(key)
        cells[key][r["metric"]] = r["value"]
    order.sort(key=lambda k: (datasets.index(k[0]), systems.index(k[1])))  # stable within

    head = (["dataset"] if len(datasets) > 1 else []) + ["system", "setting"] + \
        [_header(m) for m in metrics]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * (len(head) - len(metrics)) + ["---:"] * len(metrics)) + "|"]
    for key in order:
        dataset, system, setting = key
        system_cell = f"**{system}**" if system in ours else system
        line = ([dataset] if len(datasets) > 1 else []) + [system_cell, setting] + \
            [_fmt(m, cells[key].get(m)) for m in metrics]
        lines.append("| " + " | ".join(line) + " |")

    foot = []
    if len(datasets) == 1:
        foot.append(f"{datasets[0]} {split}")
    machine = data.get("machine") or {}
    if machine:
        bits = [machine.get("cpu"), f"{machine['cpu_count']} cores" if machine.get("cpu_count")
                else None, f"Python {machine['python']}" if machine.get("python") else None,
                f"spaCy {machine['spacy']}" if machine.get("spacy") else None]
        foot.append(", ".join(b for b in bits if b))
    if data.get("date"):
        foot.append(str(data["date"])[:10])
    if data.get("quick"):
        foot.append("QUICK SMOKE RUN, not real figures")
    script = f"benchmarks/bench_{component}.py" if component else "benchmarks/"
    lines.append("")
    lines.append(f"<sub>{'; '.join(foot)}. Accuracies in %, words/s from one process; "
                 f"generated from `benchmarks/results/{component}.json` by "
                 f"`benchmarks/make_readme_tables.py`; rerun with `python {script}`.</sub>")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# speed.json (bench_speed.py): ours beside spaCy's peer per task, with the issue-14 targets.

SPEED_TASKS = ["tagger", "tagger+parser", "chunker (with tagger)", "ner (with tagger)", "pipeline_en"]
ACCURACY = {"tagger": "tag_acc", "tagger+parser": "dep_las", "chunker (with tagger)": "chunks_f",
            "ner (with tagger)": "ents_f", "pipeline_en": "dep_las"}
# Issue 14's targets: words/s ratio to the peer (and absolute words/s), size, load and memory.
SPEED_TARGETS = {"tagger": ">= 30x, >= 500k", "tagger+parser": ">= 12x", "chunker (with tagger)": ">= 15x",
                 "ner (with tagger)": ">= 15x"}
SIZE_TARGETS = {"tagger+parser": "<= 40 MB, <= 1.0 s, <= 250 MB"}
TRAIN_TARGETS = {"parser.cfg": "<= 1,024 MB"}


def speed_task(setting: str) -> str:
    """The task of a bench_speed.py setting: "tagger+parser (ours)" -> "tagger+parser"."""
    return setting.rsplit(" (", 1)[0]


def _speed_cells(data: Dict[str, Any], split: str = "test") -> Dict[Tuple[str, str], Dict[str, Any]]:
    """(system, task) -> {metric: value} of the measured rows (training rows left out)."""
    cells: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for r in data.get("rows", []):
        if r.get("split") == split and not r["setting"].startswith("train "):
            cells.setdefault((r["system"], speed_task(r["setting"])), {})[r["metric"]] = r["value"]
    return cells


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.1f}x" if a and b else "–"


def _num(v: Optional[float], fmt: str = "{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def build_speed_table(data: Dict[str, Any], baseline: Optional[Dict[str, Any]] = None,
                      split: str = "test") -> Optional[str]:
    """Four tables from speed.json: words/s, size/load/memory, training memory, and the per-stage
    profile of our predict path; with ``baseline`` (speed_baseline.json), our figures before the
    speed work beside today's."""
    cells = _speed_cells(data, split)
    if not cells:
        return None
    # Our figures before the speed work, when speed_baseline.json is from other code than speed.json
    # measured on the same CPU model (words/s of different machines are not comparable).
    cpu = lambda d: (d.get("machine") or {}).get("cpu")  # noqa: E731
    base = (_speed_cells(baseline, split) if baseline and baseline.get("code") != data.get("code")
            and cpu(baseline) == cpu(data) else {})
    tasks = [t for t in SPEED_TASKS if any(k[1] == t for k in cells)]
    tasks += sorted({k[1] for k in cells} - set(tasks))
    ours = lambda t: cells.get(("structperc", t), {})  # noqa: E731
    peer = lambda t: cells.get(("spacy", t), {})  # noqa: E731
    was = lambda t: base.get(("structperc", t), {})  # noqa: E731
    b_col = ["ours before"] if base else []
    lines = ["| task | " + " | ".join(b_col + ["ours", "spaCy", "ratio", "ours, raw text", "spaCy, raw text",
                                               "ratio", "target", "accuracy ours / spaCy"]
                                      + (["accuracy ours before"] if base else [])) + " |",
             "|---|" + "---:|" * (6 + len(b_col)) + "---|---|" + ("---:|" if base else "")]
    for t in tasks:
        o, p, acc = ours(t), peer(t), ACCURACY.get(t, "")
        row = [t] + ([_num(was(t).get("wps_gold_words"))] if base else []) + [
            _num(o.get("wps_gold_words")), _num(p.get("wps_gold_words")),
            _ratio(o.get("wps_gold_words"), p.get("wps_gold_words")),
            _num(o.get("wps_raw_text")), _num(p.get("wps_raw_text")),
            _ratio(o.get("wps_raw_text"), p.get("wps_raw_text")), SPEED_TARGETS.get(t, ""),
            f"{_fmt(acc, o.get(acc))} / {_fmt(acc, p.get(acc))} ({acc})" if acc else ""] + (
            [_fmt(acc, was(t).get(acc)) if acc else ""] if base else [])
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| task | " + " | ".join(["on disk (MB) ours / spaCy", "spacy.load (s) ours / spaCy",
                                            "RSS after load (MB) ours / spaCy", "target"]) + " |",
              "|---|---:|---:|---:|---|"]
    for t in tasks:
        o, p = ours(t), peer(t)
        pair = lambda m, f: f"{_num(o.get(m), f)} / {_num(p.get(m), f)}"  # noqa: E731
        lines.append(f"| {t} | {pair('disk_mb', '{:,.1f}')} | {pair('load_seconds', '{:.2f}')} | "
                     f"{pair('rss_after_load_mb', '{:,.0f}')} | {SIZE_TARGETS.get(t, '')} |")
    train = [r for r in data.get("rows", []) if r["setting"].startswith("train ") and r.get("split") == split]
    if train:
        tcells: Dict[Tuple[str, str], Dict[str, Any]] = {}
        for r in train:
            tcells.setdefault((r["system"], r["setting"]), {})[r["metric"]] = r["value"]
        lines += ["", "| system | training | seconds | peak RSS (MB) | target |", "|---|---|---:|---:|---|"]
        for (system, setting), m in sorted(tcells.items(), key=lambda kv: kv[0][0] != "structperc"):
            target = next((v for k, v in TRAIN_TARGETS.items() if system == "structperc" and k in setting), "")
            lines.append(f"| {system} | {setting[len('train '):]} | {_num(m.get('train_seconds'))} | "
                         f"{_num(m.get('train_peak_rss_mb'))} | {target} |")
    prof = {t: {m[len("profile:"):]: v for m, v in ours(t).items() if m.startswith("profile:")} for t in tasks}
    if any(prof.values()):
        stages = list(dict.fromkeys(k.split(":", 1)[1] for p in prof.values() for k in p))
        lines += ["", "| task | our component | " + " | ".join(st.replace("_", " ") for st in stages)
                  + " |", "|---|---|" + "---:|" * len(stages)]
        for t in tasks:
            for comp in dict.fromkeys(k.split(":", 1)[0] for k in prof[t]):
                lines.append(f"| {t} | {comp} | " + " | ".join(
                    _num(prof[t].get(f"{comp}:{st}"), "{:.2f}") if f"{comp}:{st}" in prof[t] else ""
                    for st in stages) + " |")
        lines.append("")
        lines.append("<sub>Microseconds per word of our predict path by stage: atoms (reading the Doc), "
                     "decode, write (set_annotations), total; the tokenizer's total is on the raw text. "
                     "decode cold / cached: the decode of the first ten sentences right after the rest "
                     "of the split / back to back, everything they read then in the CPU's caches (a floor "
                     "for memory-layout work).</sub>")
    info = [data.get("code") or "", str(data.get("date", ""))[:10]]
    machine = data.get("machine") or {}
    if machine.get("cpu"):
        info.append(f"{machine['cpu']}, {machine.get('cpu_count')} cores (shared)")
    loads = [v for (s, _), m in cells.items() for k, v in m.items() if k == "load_avg" and v is not None]
    if loads:
        info.append(f"load average {min(loads):.1f}-{max(loads):.1f} during the timings")
    if data.get("quick"):
        info.append("QUICK SMOKE RUN, not real figures")
    if base:
        info.append(f"'ours before': {baseline.get('code', '')} ({str(baseline.get('date', ''))[:10]})")
    lines += ["", f"<sub>{'; '.join(i for i in info if i)}. Words/s of `nlp.pipe` in one process on the test "
                  "split's gold words (raw text: the same sentences' text, tokenizer included), best of "
                  "several runs; load and RSS in a fresh process; accuracy in %. Generated from "
                  "`benchmarks/results/speed.json` by `benchmarks/make_readme_tables.py`; rerun with "
                  "`python benchmarks/bench_speed.py`.</sub>"]
    return "\n".join(lines)


def make_speed_plot(data: Dict[str, Any], path: Path, split: str = "test") -> Optional[Path]:
    """speed.png: words/s (gold words, log scale) and RSS after load per task, ours and spaCy."""
    cells = _speed_cells(data, split)
    tasks = [t for t in SPEED_TASKS if ("structperc", t) in cells or ("spacy", t) in cells]
    if not tasks:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = [("wps_gold_words", "words/s (gold words, log scale)", True),
              ("disk_mb", "on disk (MB)", False), ("rss_after_load_mb", "RSS after spacy.load (MB)", False)]
    width = 0.38
    xs = list(range(len(tasks)))
    for ax, (metric, title, log) in zip(axes, panels):
        for i, (system, colour) in enumerate((("structperc", "tab:blue"), ("spacy", "tab:orange"))):
            vals = [cells.get((system, t), {}).get(metric) or 0 for t in tasks]
            bars = ax.bar([x + (i - 0.5) * width for x in xs], vals, width, color=colour,
                          label="ours" if system == "structperc" else "spaCy (efficiency cfg)")
            if metric == "wps_gold_words":
                for b, v in zip(bars, vals):
                    if v:
                        ax.text(b.get_x() + b.get_width() / 2, v, f"{v / 1000:.0f}k", ha="center",
                                va="bottom", fontsize=7)
        if log:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xticks(xs)
        ax.set_xticklabels([t.replace(" (with tagger)", "\n+ tagger") for t in tasks], fontsize=8, rotation=20)
    axes[0].legend(fontsize=8)
    loads = [m["load_avg"] for m in cells.values() if m.get("load_avg") is not None]
    fig.suptitle(f"{data.get('code', '')} ({str(data.get('date', ''))[:10]}"
                 + (f"; shared 2-core machine, load average {min(loads):.0f}-{max(loads):.0f})" if loads else ")")
                 + (" QUICK SMOKE RUN" if data.get("quick") else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def build_tune_table(curves: List[Dict[str, Any]]) -> Optional[str]:
    """A <component>_tune.json file (dev curves, one per dataset and setting): the best dev F1 of
    each curve and the pass it came at; the best of each dataset in bold."""
    if not curves:
        return None
    best = [max(c["curve"], key=lambda e: e["ents_f"]) for c in curves]
    top: Dict[str, float] = {}
    for c, b in zip(curves, best):
        top[c["dataset"]] = max(top.get(c["dataset"], 0.0), b["ents_f"])
    lines = ["| dataset | setting | best dev F1 | at pass | passes | train (s) |", "|---|---|---|---|---|---|"]
    for c, b in zip(curves, best):
        f = f"{100 * b['ents_f']:.2f}"
        if b["ents_f"] == top[c["dataset"]]:
            f = f"**{f}**"
        lines.append(f"| {c['dataset']} | {c['setting']} | {f} | {b['epoch']} | {c['epochs']} | "
                     f"{c['train_seconds']:.0f} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The README's component table: one row per component, each cell from the results file that
# measured it. A source is (results file, system, setting, dataset); setting "x*" matches any
# setting starting with "x", None any setting; dataset None any dataset. The first source that
# has every metric of the cell wins, so a row regenerates from newer files as they appear.

Source = Tuple[str, str, Optional[str], Optional[str]]

SPEED_OURS = "structperc"
SUMMARY: List[Dict[str, Any]] = [
    {"name": "`structperc_tagger`", "writes": "`token.tag_` (XPOS)",
     "paper": "Collins 2002; Tsuruoka et al. 2011", "corpus": "UD English EWT", "metrics": ["tag_acc"],
     "ours": [("speed", SPEED_OURS, "tagger (ours)", None), ("tagger", "structperc_tagger", "default", None)],
     "spacy": [("tagger", "spacy", None, None)],
     "published": "97.28 (WSJ; Tsuruoka et al. 2011, Table 1)",
     "wps": [("speed", SPEED_OURS, "tagger (ours)", None), ("speed", "spacy", "tagger (*", None)]},
    {"name": "`structperc_tagger`", "writes": "`token.pos_` (universal POS)",
     "paper": "", "corpus": "UD English EWT", "metrics": ["pos_acc"],
     "ours": [("speed", SPEED_OURS, "tagger (ours)", None), ("tagger", "structperc_tagger", "default", None)],
     "spacy": [("tagger", "spacy", None, None)], "published": "", "wps": []},
    {"name": "`structperc_parser`", "writes": "`token.head`, `token.dep_`, sentences",
     "paper": "Nivre 2004; Huang et al. 2012; Collins 2001 (reranking)", "corpus": "UD English EWT",
     "metrics": ["dep_uas", "dep_las"],
     "ours": [("speed", SPEED_OURS, "tagger+parser (ours)", None)],
     "spacy": [("parser", "spacy", None, None)],
     "published": "92.18 UAS (WSJ, unlabelled; Huang et al. 2012)",
     "wps": [("speed", SPEED_OURS, "tagger+parser (ours)", None), ("speed", "spacy", "tagger+parser (*", None)]},
    {"name": "`structperc_chunker`", "writes": "`doc.spans[\"chunks\"]`",
     "paper": "Tsuruoka et al. 2011 (Sha & Pereira 2003 features)", "corpus": "CoNLL-2000",
     "metrics": ["spans_chunks_f"],
     "ours": [("chunker", "structperc_chunker", "default", None)],
     "spacy": [("chunker", "spacy_ner", None, None)],
     "published": "93.81 (CoNLL-2000; Tsuruoka et al. 2011, Table 2)",
     "wps": [("speed", SPEED_OURS, "chunker (with tagger) (ours)", None),
             ("speed", "spacy", "chunker (with tagger) (*", None)]},
    {"name": "`structperc_clauses`", "writes": "`doc.spans[\"clauses\"]`",
     "paper": "Carreras & Màrquez 2003", "corpus": "ptb_clauses", "metrics": ["clauses_f"],
     "ours": [("clauses", "structperc_clauses", "default", "ptb_clauses")],
     "spacy": [("clauses", "spacy_spancat", None, "ptb_clauses")],
     "published": "85.03 (CoNLL-2001; Carreras & Màrquez 2003, Table 1)",
     "wps": [("clauses", "structperc_clauses", "default", "ptb_clauses"),
             ("clauses", "spacy_spancat", None, "ptb_clauses")]},
    {"name": "`structperc_ner`", "writes": "`doc.ents`",
     "paper": "Sun et al. 2009", "corpus": "CoNLL-2003", "metrics": ["ents_f"],
     "ours": [("speed", SPEED_OURS, "ner (with tagger) (ours)", None)],
     "spacy": [("ner", "spacy_ner", None, "conll2003")],
     "published": "72.28 (JNLPBA; Tsuruoka et al. 2011, Table 3; ours {jnlpba})",
     "published_ours": {"jnlpba": ("ner", "structperc_ner", "default", "jnlpba", "ents_f")},
     "wps": [("speed", SPEED_OURS, "ner (with tagger) (ours)", None),
             ("speed", "spacy", "ner (with tagger) (*", None)]},
]
# Metrics that name one figure under several keys (the clause rows say spans_clauses_f or clauses_f).
METRIC_ALIASES = {"clauses_f": ("clauses_f", "spans_clauses_f"), "spans_chunks_f": ("spans_chunks_f", "chunks_f"),
                  "wps": ("wps_gold_words", "predict_wps")}


def _source_values(results: Dict[str, Any], source: Source, metrics: Sequence[str],
                   split: str = "test") -> Optional[Tuple[List[float], Dict[str, Any]]]:
    """The values of ``metrics`` in the first matching (system, setting, dataset) of a source,
    and that row's identity; None if the file or a metric is missing."""
    name, system, setting, dataset = source
    data = results.get(name)
    if not isinstance(data, dict):
        return None
    groups: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for r in data.get("rows", []):
        if r.get("split") != split or r.get("system") != system:
            continue
        if dataset is not None and r.get("dataset") != dataset:
            continue
        if setting is not None and not (r["setting"].startswith(setting[:-1]) if setting.endswith("*")
                                        else r["setting"] == setting):
            continue
        groups.setdefault((r["system"], r["setting"], r["dataset"]), {})[r["metric"]] = r["value"]
    for (sys_, sett, ds), values in groups.items():
        found = []
        for m in metrics:
            v = next((values[a] for a in METRIC_ALIASES.get(m, (m,)) if a in values), None)
            if v is None:
                break
            found.append(v)
        else:
            return found, {"file": name, "system": sys_, "setting": sett, "dataset": ds}
    return None


def _first(results, sources, metrics, split="test"):
    for source in sources:
        hit = _source_values(results, source, metrics, split)
        if hit:
            return hit
    return None, None


def build_summary_table(results: Dict[str, Any], split: str = "test") -> Optional[str]:
    """The README's table of the components (SUMMARY) from the loaded results files."""
    lines = ["| component | writes | method | test score: ours / spaCy | best published | "
             "words/s: ours / spaCy |", "|---|---|---|---|---|---|"]
    used: Dict[str, Dict[str, Any]] = {}
    notes: List[str] = []
    for spec in SUMMARY:
        ours, o_src = _first(results, spec["ours"], spec["metrics"], split)
        peer, p_src = _first(results, spec["spacy"], spec["metrics"], split)
        score = "–"
        if ours:
            score = ", ".join(f"**{100 * o:.2f}** / " + (f"{100 * peer[i]:.2f}" if peer else "–") + f" {_header(m)}"
                              for i, (m, o) in enumerate(zip(spec["metrics"], ours)))
            score += f" ({spec['corpus']})"
        published = spec["published"]
        for key, (name, system, setting, dataset, metric) in spec.get("published_ours", {}).items():
            hit = _source_values(results, (name, system, setting, dataset), [metric], split)
            published = published.replace("{" + key + "}", f"{100 * hit[0][0]:.2f}" if hit else "–")
            if hit:
                used.setdefault(name, results[name])
        wps = "–"
        if spec["wps"]:
            o = _source_values(results, spec["wps"][0], ["wps"], split)
            p = _source_values(results, spec["wps"][1], ["wps"], split)
            if o:
                wps = f"{o[0][0]:,.0f} / " + (f"{p[0][0]:,.0f} ({o[0][0] / p[0][0]:.0f}x)" if p else "–")
                used.setdefault(o[1]["file"], results[o[1]["file"]])
        lines.append(f"| {spec['name']} | {spec['writes']} | {spec['paper'] or '–'} | {score} | "
                     f"{published or '–'} | {wps} |")
        if o_src:
            used.setdefault(o_src["file"], results[o_src["file"]])
            note = f"{spec['writes'].split(' (')[0]}: ours `{o_src['file']}.json` ({o_src['setting']})"
            if p_src:
                used.setdefault(p_src["file"], results[p_src["file"]])
                note += f", spaCy `{p_src['file']}.json` ({p_src['setting']})"
            notes.append(note)
    if not notes:
        return None
    runs = []
    for name in sorted(used):
        data = used[name]
        bits = [str(data.get("date", ""))[:10], str(data.get("git") or "").replace("git ", "")]
        runs.append(f"`{name}.json` " + ", ".join(b for b in bits if b))
    lines.append("")
    lines.append(f"<sub>{split} splits; accuracies in %; words/s of `nlp.pipe` in one process, the chunker "
                 f"and NER behind our tagger. Sources: {'; '.join(notes)}. Runs: {'; '.join(runs)}. "
                 "Generated from `benchmarks/results/` by `benchmarks/make_readme_tables.py`.</sub>")
    return "\n".join(lines)


def replace_block(readme: str, component: str, table: str) -> Optional[str]:
    """A page's text with the component's block replaced, or None if the markers are missing."""
    start = f"<!-- bench:{component}:start -->"
    end = f"<!-- bench:{component}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        return None
    return pattern.sub(lambda _: f"{start}\n{table}\n{end}", readme, count=1)


def default_pages() -> List[Path]:
    """README.md and every page of docs/: where the markers may be."""
    return [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").glob("*.md"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results",
                   help="folder of <component>.json files")
    p.add_argument("--page", "--readme", dest="pages", type=Path, action="append", default=None,
                   help="a page to rewrite (repeatable; default README.md and docs/*.md)")
    p.add_argument("--split", default="test")
    p.add_argument("--component", action="append", default=None,
                   help="only these components (repeatable)")
    p.add_argument("--check", action="store_true", help="exit 1 if a page would change")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the tables, leave the pages alone")
    args = p.parse_args(argv)

    files = sorted(args.results.glob("*.json"))
    if not files:
        print(f"no results in {args.results}", file=sys.stderr)
        return 1
    pages = {path: path.read_text(encoding="utf8") for path in (args.pages or default_pages())
             if path.exists()}
    new_pages = dict(pages)
    results: Dict[str, Any] = {}
    tables: List[Tuple[str, Optional[str], str]] = []  # (component, table, file name)
    for path in files:
        data = json.loads(path.read_text(encoding="utf8"))
        component = (data.get("component") if isinstance(data, dict) else None) or path.stem
        results[path.stem] = data
        if args.component and component not in args.component:
            continue
        if component == "speed_baseline":  # shown inside the speed table
            continue
        if component == "speed":
            base_path = path.with_name("speed_baseline.json")
            baseline = json.loads(base_path.read_text(encoding="utf8")) if base_path.exists() else None
            table = build_speed_table(data, baseline, args.split)
            if table is not None and not (args.print_only or args.check):
                print(f"wrote {make_speed_plot(data, path.with_suffix('.png'), args.split)}")
        elif component.endswith("_tune"):
            table = build_tune_table(data)
        else:
            table = build_table(data, args.split)
        tables.append((component, table, path.name))
    if not args.component or "summary" in args.component:
        tables.append(("summary", build_summary_table(results, args.split), "several files"))

    for component, table, name in tables:
        if table is None:
            print(f"{name}: no {args.split} rows")
            continue
        where = [page for page, text in new_pages.items() if f"<!-- bench:{component}:start -->" in text]
        if args.print_only or not where:
            if not args.print_only:
                print(f"{component}: no <!-- bench:{component}:start/end --> markers in "
                      f"{', '.join(pg.name for pg in pages) or 'any page'}; table not written:")
            print(f"\n### {component}\n\n{table}\n")
            continue
        for page in where:
            replaced = replace_block(new_pages[page], component, table)
            state = "up to date" if replaced == new_pages[page] else "updated"
            print(f"{component}: table {state} in {page.relative_to(REPO_ROOT) if page.is_relative_to(REPO_ROOT) else page}")
            new_pages[page] = replaced
    changed = [page for page in pages if new_pages[page] != pages[page]]
    if args.print_only or not changed:
        return 0
    if args.check:
        for page in changed:
            print(f"{page} is out of date: run python benchmarks/make_readme_tables.py")
        return 1
    for page in changed:
        page.write_text(new_pages[page], encoding="utf8")
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
