"""Rewrite the benchmark tables in README.md from ``benchmarks/results/*.json``.

For every results file ``benchmarks/results/<component>.json`` the block between

    <!-- bench:<component>:start -->
    <!-- bench:<component>:end -->

in README.md is replaced by a Markdown table: one line per (system, setting), one column per
metric, rows of one split (default ``test``). A README without the markers for a component is left
alone and the table is printed instead.

    python benchmarks/make_readme_tables.py            # rewrite README.md, print what changed
    python benchmarks/make_readme_tables.py --check    # exit 1 if README.md is out of date
    python benchmarks/make_readme_tables.py --print    # print the tables, touch nothing
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

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
    # bench_distributed.py
    "seconds_per_epoch": ("s / epoch", lambda v: f"{v:,.1f}"),
    "speedup": ("speed-up", lambda v: f"{v:.2f}x"),
    "speedup_vs_1_worker": ("vs 1 worker", lambda v: f"{v:.2f}x"),
    "est_idle_speedup": ("est. speed-up, idle cores", lambda v: f"{v:.2f}x"),
    "speedup_vs_pipe_n2": ("vs n_process=2", lambda v: f"{v:.2f}x"),
    "worker_peak_rss_mb": ("worker peak RSS (MB)", lambda v: f"{v:,.0f}"),
    "worker_rss_vs_serial": ("worker RSS / serial", lambda v: f"{v:.2f}"),
}


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


def build_table(data: Dict[str, Any], split: str = "test") -> Optional[str]:
    """The Markdown table of one results file, or None if it has no rows for ``split``; then the
    table of its pivoted rows (PIVOT_PREFIXES), if any."""
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
    metrics_seen = list(dict.fromkeys(r["metric"] for r in rows))
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


def replace_block(readme: str, component: str, table: str) -> Optional[str]:
    """README text with the component's block replaced, or None if the markers are missing."""
    start = f"<!-- bench:{component}:start -->"
    end = f"<!-- bench:{component}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        return None
    return pattern.sub(lambda _: f"{start}\n{table}\n{end}", readme, count=1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results",
                   help="folder of <component>.json files")
    p.add_argument("--readme", type=Path, default=REPO_ROOT / "README.md")
    p.add_argument("--split", default="test")
    p.add_argument("--component", action="append", default=None,
                   help="only these components (repeatable)")
    p.add_argument("--check", action="store_true", help="exit 1 if README.md would change")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the tables, leave README.md alone")
    args = p.parse_args(argv)

    files = sorted(args.results.glob("*.json"))
    if not files:
        print(f"no results in {args.results}", file=sys.stderr)
        return 1
    readme = args.readme.read_text(encoding="utf8") if args.readme.exists() else None
    new_readme = readme
    for path in files:
        data = json.loads(path.read_text(encoding="utf8"))
        component = data.get("component") or path.stem
        if args.component and component not in args.component:
            continue
        table = build_table(data, args.split)
        if table is None:
            print(f"{path.name}: no {args.split} rows")
            continue
        replaced = replace_block(new_readme, component, table) if new_readme is not None else None
        if args.print_only or replaced is None:
            if not args.print_only:
                where = "README.md is missing" if readme is None else \
                    f"no <!-- bench:{component}:start/end --> markers in {args.readme.name}"
                print(f"{component}: {where}; table not written:")
            print(f"\n### {component}\n\n{table}\n")
            continue
        if replaced != new_readme:
            print(f"{component}: table updated")
        else:
            print(f"{component}: table up to date")
        new_readme = replaced
    if args.print_only or readme is None or new_readme == readme:
        return 0
    if args.check:
        print(f"{args.readme} is out of date: run python benchmarks/make_readme_tables.py")
        return 1
    args.readme.write_text(new_readme, encoding="utf8")
    print(f"wrote {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
