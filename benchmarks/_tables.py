"""The Markdown tables of ``benchmarks/results/*.json``, for make_readme_tables.py.

A results file's rows ``{system, setting, dataset, split, metric, value}`` become one table line
per (system, setting), one column per metric (``build_table``; the pivoted rows of
PIVOT_PREFIXES and the reranking file get layouts of their own, and a file of CONFIG_ROWS leads
with the rows of our committed configs beside the peers); a ``<component>_tune.json`` file
its curves' best dev scores (``build_tune_table``); several files together the README's table of
the components (``build_summary_table``, from a spec of where each cell comes from). The speed
page's tables are in _speed_tables.py.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from _results import runs_of

# Known metrics: column header and formatter. Others are shown as they come, after these.
METRICS: Dict[str, Tuple[str, Any]] = {
    "tag_acc": ("XPOS acc.", lambda v: f"{100 * v:.2f}"),
    "label_acc": ("label acc.", lambda v: f"{100 * v:.2f}"),
    "pos_acc": ("UPOS acc.", lambda v: f"{100 * v:.2f}"),
    # bench_tagger.py: the XPOS model on the Penn Treebank's WSJ sample (text of another domain)
    "wsj_tag_acc": ("WSJ XPOS acc.", lambda v: f"{100 * v:.2f}"),
    "dev_xpos_acc": ("dev XPOS acc.", lambda v: f"{100 * v:.2f}"),
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
    "model_mb": ("model (MB)", lambda v: f"{v:,.1f}"),
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


# F1 of one entity type ("f_PER", from _corpus.per_type_f): a column headed by the type.
PER_TYPE = "f_"


def format_value(metric: str, value: Any) -> str:
    if value is None:
        return "–"
    if metric in METRICS:
        return METRICS[metric][1](value)
    if metric.startswith(PER_TYPE) and isinstance(value, float) and value <= 1.0:
        return f"{100 * value:.2f}"
    if metric.endswith(("_acc", "_f", "_p", "_r", "_uas", "_las")) and isinstance(value, float) \
            and value <= 1.0:
        return f"{100 * value:.2f}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def header(metric: str) -> str:
    if metric in METRICS:
        return METRICS[metric][0]
    return metric[len(PER_TYPE):] if metric.startswith(PER_TYPE) else metric


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
        values = [format_value(metric, cells[(system, setting)].get(c)) for c in columns]
        lines.append("| " + " | ".join([system_cell, setting] + values) + " |")
    info = data.get("synthetic") or {}
    cfg = info.get("config") or {}
    foot = [f"{header(metric)} on {prefix.split()[0]} data, {split}"]
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
    table of its pivoted rows (PIVOT_PREFIXES), if any. A file of CONFIG_ROWS with rows of a
    committed config leads with those beside the peers (_build_config_tables)."""
    if data.get("component") == "reranking":
        return build_reranking_table(data, split)
    pivot = build_pivot_table(data, split)
    main = _build_config_tables(data, split) or _build_main_table(data, split)
    if main is None or pivot is None:
        return main if pivot is None else pivot
    return main + "\n\n" + pivot


# Results files whose table, once they hold rows of our committed configs, leads with those beside
# the peers, one table per dataset with every metric (F1 per type included), before the rest of
# ours: component -> (the setting prefix of those rows, caption of the lead, caption of the rest).
CONFIG_ROWS: Dict[str, Tuple[str, str, str]] = {
    "ner": ("configs/",
            "The committed configs as a user trains them (`spacy train`, model-best) beside the peers; "
            "the columns after R are the F1 of each entity type:",
            "The sentence-level baseline (ours trained in-process and tested on one Doc per sentence, "
            "without the configs' gazetteers, document features and two-stage aggregation: `default`, "
            "`n_latent 1`) and the retired latent sweep:"),
}


def _build_config_tables(data: Dict[str, Any], split: str = "test") -> Optional[str]:
    spec = CONFIG_ROWS.get(data.get("component", ""))
    if spec is None:
        return None
    prefix, lead_caption, rest_caption = spec
    rows = [r for r in data.get("rows", []) if r.get("split") == split and not _pivoted(r)]
    ours = [r["system"].startswith("structperc") for r in rows]
    with_config = {r["dataset"] for r, o in zip(rows, ours) if o and r["setting"].startswith(prefix)}
    if not with_config:
        return None
    lead = [r["dataset"] in with_config and (not o or r["setting"].startswith(prefix)) for r, o in zip(rows, ours)]
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))  # the order of the whole table
    parts = [lead_caption]
    for dataset in (d for d in datasets if d in with_config):
        parts.append(f"{dataset}, {split}:")
        parts.append(_build_main_table(data, split, [r for r, x in zip(rows, lead) if x and r["dataset"] == dataset],
                                       foot=False, per_type=True))
    rest = [r for r, x in zip(rows, lead) if not x]
    if rest:
        parts += [rest_caption, _build_main_table(data, split, rest, datasets=datasets)]
    else:
        parts.append(_foot(data, split, []))
    return "\n\n".join(parts)


def _build_main_table(data: Dict[str, Any], split: str = "test", rows: Optional[List[Dict[str, Any]]] = None,
                      foot: bool = True, datasets: Sequence[str] = (), per_type: bool = False) -> Optional[str]:
    """One line per (dataset, system, setting) of ``rows`` (default: the file's rows of ``split``),
    datasets in the order of ``datasets`` or of their first row, ours first within each; the F1 of
    each type (PER_TYPE metrics) only with ``per_type`` (a table of one dataset)."""
    if rows is None:
        rows = [r for r in data.get("rows", []) if r.get("split") == split and not _pivoted(r)]
    if not rows:
        return None
    present = set(r["dataset"] for r in rows)
    datasets = [d for d in datasets if d in present] or list(dict.fromkeys(r["dataset"] for r in rows))
    # Our own system(s) first (named after the component, e.g. structperc_tagger), then peers.
    systems = list(dict.fromkeys(r["system"] for r in rows))
    ours = [s for s in systems if s.startswith("structperc")]
    systems = ours + [s for s in systems if s not in ours]
    metrics_seen = [m for m in dict.fromkeys(r["metric"] for r in rows) if m not in HIDDEN]
    metrics = [m for m in METRICS if m in metrics_seen] + \
              [m for m in metrics_seen if m not in METRICS and not m.startswith(PER_TYPE)]
    types = sorted(m for m in metrics_seen if m.startswith(PER_TYPE)) if per_type else []
    if types:  # after the overall scores
        at = max((metrics.index(m) + 1 for m in ("ents_f", "ents_p", "ents_r") if m in metrics), default=0)
        metrics[at:at] = types
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
        [header(m) for m in metrics]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * (len(head) - len(metrics)) + ["---:"] * len(metrics)) + "|"]
    for key in order:
        dataset, system, setting = key
        system_cell = f"**{system}**" if system in ours else system
        line = ([dataset] if len(datasets) > 1 else []) + [system_cell, setting] + \
            [format_value(m, cells[key].get(m)) for m in metrics]
        lines.append("| " + " | ".join(line) + " |")
    if foot:
        lines += ["", _foot(data, split, datasets)]
    return "\n".join(lines)


def run_label(run: Dict[str, Any]) -> str:
    """A run as a footnote names it: its date and git revision ("up to" them for rows kept from
    before a file recorded its runs)."""
    label = ", ".join(b for b in (str(run.get("date") or "")[:10], str(run.get("git") or "").replace("git ", "")) if b)
    return f"up to {label}" if run.get("up_to") and label else label


def _foot(data: Dict[str, Any], split: str, datasets: Sequence[str]) -> str:
    """The line under a results file's table: split, machine, date, where it comes from."""
    component = data.get("component", "")
    foot = []
    if len(datasets) == 1:
        foot.append(f"{datasets[0]} {split}")
    machine = data.get("machine") or {}
    if machine:
        bits = [machine.get("cpu"), f"{machine['cpu_count']} cores" if machine.get("cpu_count")
                else None, f"Python {machine['python']}" if machine.get("python") else None,
                f"spaCy {machine['spacy']}" if machine.get("spacy") else None]
        foot.append(", ".join(b for b in bits if b))
    runs = runs_of(data)
    if len(runs) > 1:
        foot.append(f"rows from {len(runs)} runs: " + ", ".join(run_label(run) for run in runs))
    elif data.get("date"):
        foot.append(str(data["date"])[:10])
    if data.get("quick"):
        foot.append("QUICK SMOKE RUN, not real figures")
    script = f"benchmarks/bench_{component}.py" if component else "benchmarks/"
    return (f"<sub>{'; '.join(foot)}. Accuracies in %, words/s from one process; "
            f"generated from `benchmarks/results/{component}.json` by "
            f"`benchmarks/make_readme_tables.py`; rerun with `python {script}`.</sub>")




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


def build_summary_table(results: Dict[str, Any], summary: Sequence[Dict[str, Any]],
                        split: str = "test") -> Optional[str]:
    """The README's table of the components from the loaded results files (``results``: file
    name -> contents): a row for each spec of ``summary`` (keys name, writes, paper, corpus,
    metrics, published, optionally published_ours: {key: Sources with a metric each}; ours, spacy and
    wps: lists of Sources)."""
    lines = ["| component | writes | method | test score: ours / spaCy | best published | "
             "words/s: ours / spaCy |", "|---|---|---|---|---|---|"]
    used: Dict[str, Dict[str, Any]] = {}
    picked: List[Dict[str, Any]] = []   # the rows' identities (file, system, setting, dataset)
    notes: List[str] = []
    for spec in summary:
        ours, o_src = _first(results, spec["ours"], spec["metrics"], split)
        peer, p_src = _first(results, spec["spacy"], spec["metrics"], split)
        score = "–"
        if ours:
            score = ", ".join(f"**{100 * o:.2f}** / " + (f"{100 * peer[i]:.2f}" if peer else "–") + f" {header(m)}"
                              for i, (m, o) in enumerate(zip(spec["metrics"], ours)))
            score += f" ({spec['corpus']})"
        published = spec["published"]
        for key, sources in spec.get("published_ours", {}).items():  # the first source that has it
            hit = next(filter(None, (_source_values(results, src[:4], [src[4]], split) for src in sources)), None)
            published = published.replace("{" + key + "}", f"{100 * hit[0][0]:.2f}" if hit else "–")
            if hit:
                used.setdefault(hit[1]["file"], results[hit[1]["file"]])
                picked.append(hit[1])
        wps = "–"
        if spec["wps"]:
            o = _source_values(results, spec["wps"][0], ["wps"], split)
            p = _source_values(results, spec["wps"][1], ["wps"], split)
            if o:
                wps = f"{o[0][0]:,.0f} / " + (f"{p[0][0]:,.0f} ({o[0][0] / p[0][0]:.0f}x)" if p else "–")
                used.setdefault(o[1]["file"], results[o[1]["file"]])
                picked.append(o[1])
        lines.append(f"| {spec['name']} | {spec['writes']} | {spec['paper'] or '–'} | {score} | "
                     f"{published or '–'} | {wps} |")
        if o_src:
            used.setdefault(o_src["file"], results[o_src["file"]])
            picked.append(o_src)
            note = f"{spec['writes'].split(' (')[0]}: ours `{o_src['file']}.json` ({o_src['setting']})"
            if p_src:
                used.setdefault(p_src["file"], results[p_src["file"]])
                picked.append(p_src)
                note += f", spaCy `{p_src['file']}.json` ({p_src['setting']})"
            notes.append(note)
    if not notes:
        return None
    runs = []
    for name in sorted(used):
        data = used[name]
        ids = {(p["system"], p["setting"], p["dataset"]) for p in picked if p["file"] == name}
        rows = [r for r in data.get("rows", []) if (r["system"], r["setting"], r["dataset"]) in ids]
        runs.append(f"`{name}.json` " + " and ".join(run_label(run) for run in runs_of(data, rows)))
    lines.append("")
    lines.append(f"<sub>{split} splits; accuracies in %; words/s of `nlp.pipe` in one process, the chunker "
                 f"and NER behind our tagger. Sources: {'; '.join(notes)}. Runs: {'; '.join(runs)}. "
                 "Generated from `benchmarks/results/` by `benchmarks/make_readme_tables.py`.</sub>")
    return "\n".join(lines)

