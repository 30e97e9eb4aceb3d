"""The speed page's tables and figure, from ``speed.json`` (bench_speed.py), for
make_readme_tables.py: ours beside spaCy's peer per task, with the issue-14 targets, and our
figures from ``speed_baseline.json`` (before the speed work) beside them when it is there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from _results import run_key, runs_of
from _tables import format_value, run_label


def _tasks_of(data: Dict[str, Any], run: Dict[str, Any]) -> List[str]:
    """The tasks (and trainings) whose rows of ours the run measured, in the file's order."""
    runs = data.get("runs") or {}
    out: List[str] = []
    for r in data.get("rows", []):
        if r["system"] == "structperc" and runs.get(run_key(r)) == run:
            task = r["setting"].replace(" (ours)", "")
            if task not in out:
                out.append(task)
    return out

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
            f"{format_value(acc, o.get(acc))} / {format_value(acc, p.get(acc))} ({acc})" if acc else ""] + (
            [format_value(acc, was(t).get(acc)) if acc else ""] if base else [])
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
    runs = runs_of(data)
    if len(runs) > 1:
        # Which run timed each task (its rows of ours: the peer's come from the same run).
        info = ["; ".join(f"{run_label(run)}: " + ", ".join(_tasks_of(data, run)) for run in runs)]
    else:
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

