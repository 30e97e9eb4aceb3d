"""Benchmark the lookahead arc-standard parser against spaCy's tagger + parser.

One run, on UD English EWT (gold tokenization, one Doc per sentence), each system in its own
child process (peak RSS of that child alone):

1. ``spacy``: spaCy's built-in tagger + parser, ``spacy init config --pipeline tagger,parser
   --optimize efficiency``, trained with ``spacy train`` (gold tokens; ``--spacy-max-steps``,
   default 4,000 as in the issue), evaluated on test with its own predicted tags;
2. ``structperc_parser`` / ``default``: ``spacy train configs/parser.cfg`` (structperc_tagger +
   structperc_parser, the parser trained on the tagger's predicted tags), evaluated on test with
   the pipeline's predicted tags; ``default, gold tags`` is the same model on gold tags;
   ``beam``: the same with ``configs/parser_beam.cfg`` (beam search, max-violation), the most
   accurate setting (``parser.cfg with beam W, max-violation``);
3. the grid, trained in-process (no ``spacy train``) so that every epoch is evaluated on dev:
   lookahead depth 0-3 (tsuruoka2011 Table 4) and beam widths x update methods (huang2012
   Figs. 5-6). These parsers train on gold tags and are evaluated on test twice: with the tags
   of the default run's structperc_tagger (the setting name as is) and with gold tags
   (``..., gold tags``). Per-epoch dev curves and, for beams, the share of invalid updates are
   kept in the JSON details and drawn to ``parser_beam.png`` / ``parser_lookahead.png``;
4. ``ptb_sample_dep``: unlabelled UAS on the NLTK Penn Treebank WSJ sample (gold POS from the
   files): train on wsj_0001-wsj_0179, test on wsj_0180-wsj_0199.

Metrics: ``dep_uas`` / ``dep_las`` (spaCy's parser scorer: punctuation excluded),
``train_seconds`` (wall: ``spacy train`` for 1-2, the update loop for 3-4), ``predict_wps``
(test words / seconds of one ``nlp.pipe`` call, batch 1000, one process: the whole tagger +
parser pipeline for 1-2, the parser alone on tagged Docs for 3-4), ``peak_rss_mb``.

Examples (from the repo root)::

    python benchmarks/bench_parser.py --quick                 # smoke run on slices
    python benchmarks/bench_parser.py                         # everything
    python benchmarks/bench_parser.py --only spacy,default
    python benchmarks/bench_parser.py --only grid --grid "lookahead 0;beam 8, early"
    python benchmarks/bench_parser.py --plots-only
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "parser"
DATASET = "ud_en_ewt"
PTB = "ptb_sample_dep"
OURS = "structperc_parser"
SPLIT_FILES = {"train": "*-ud-train.conllu", "dev": "*-ud-dev.conllu", "test": "*-ud-test.conllu"}
PARTS = ("spacy", "default", "beam", "grid", "ptb", "levers")
BEAM_CONFIG = "parser_beam.cfg"   # the most accurate setting: configs/parser.cfg with a beam

GRID: List[Dict[str, Any]] = (
    [{"setting": f"lookahead {d}", "cfg": {"decoder": "greedy", "lookahead_depth": d}} for d in (0, 1, 2, 3)]
    + [{"setting": f"beam {w}, {u}", "cfg": {"decoder": "beam", "beam_width": w, "update": u,
                                            "label_candidates": 2}}
       for u in ("early", "max-violation", "standard") for w in (1, 4, 8)]
    # The standard rows above collapse through BREAK (closing a sentence early, which a Doc
    # without sentence boundaries allows); with the boundaries given there is no BREAK, as in
    # huang2012, whose sentences are given.
    + [{"setting": "beam 8, standard, sentences given", "sentences": True,
        "cfg": {"decoder": "beam", "beam_width": 8, "update": "standard", "label_candidates": 2}}]
)
# The levers of accuracy, each alone on configs/parser.cfg (tagger + parser, the parser on the
# tagger's predicted tags), at one budget of passes (--lever-epochs): what each gives on dev.
HYBRID = ["--components.parser.transition_system", "arc-hybrid",
          "--components.parser.model.features.arc_hybrid", "true"]
DYNAMIC = HYBRID + ["--components.parser.oracle", "dynamic", "--components.parser.explore", "0.9"]
LEVERS: Dict[str, List[str]] = {
    "parser.cfg": [],
    "upos features": ["--components.parser.model.features.upos", "true"],
    "label sets": ["--components.parser.model.features.label_sets", "true"],
    "arc-hybrid, static oracle": HYBRID,
    "arc-hybrid, dynamic oracle, explore 0.9": DYNAMIC,
    "arc-hybrid, dynamic oracle, explore 0.9 after 2 passes": DYNAMIC + ["--components.parser.explore_after", "2"],
    # tsuruoka2011 Table 4 on top of exploration: does lookahead help such a parser?
    "arc-hybrid, dynamic oracle, explore 0.9 after 2 passes, lookahead 1":
        DYNAMIC + ["--components.parser.explore_after", "2", "--components.parser.lookahead_depth", "1"],
}
LEVER_EPOCHS = 6
GRID_EPOCHS = 8
QUICK_LIMITS = {"train": 800, "dev": 200, "test": 300}
QUICK_EPOCHS = 2
PTB_TEST_FROM = 180   # wsj_0180 .. wsj_0199 are the test files

NOTES = [
    "UD English EWT r2.16, gold tokenization, one Doc per sentence; test split unless stated.",
    "dep_uas / dep_las: spacy.pipeline.dep_parser.parser_score (punctuation excluded), fractions.",
    "default: spacy train configs/parser.cfg (tagger + parser; parser trained on the tagger's "
    "predicted tags via annotating_components); test with predicted tags. 'default, gold tags': "
    "the same model with the tagger disabled on gold-tagged test Docs.",
    "Grid settings (lookahead N, beam W, UPDATE): parser alone, trained in-process on gold tags "
    "for a fixed number of epochs (stated in details); tested with the tags predicted by the "
    "default run's structperc_tagger, and with gold tags ('..., gold tags'). predict_wps for "
    "them is the parser alone on tagged Docs.",
    "spacy: spaCy's tagger + parser, efficiency config, steps in the setting; predict_wps for "
    "spacy and default is the whole tagger + parser pipeline.",
    "ptb_sample_dep: unlabelled (one label), gold PTB POS tags, train wsj_0001-0179, test "
    "wsj_0180-0199; lookahead 1.",
    "All children run with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS=1; the machine was shared, see "
    "load averages in details.",
]


# ---------------------------------------------------------------------------------------------
# Data


def prepare_data(data_dir: Path, work_dir: Path, quick: bool) -> Dict[str, str]:
    out_dir = work_dir / "data" / "parser" / ("quick" if quick else "full")
    paths = {}
    for split, pattern in SPLIT_FILES.items():
        src = C.find_split_file(data_dir, split, pattern)
        out = out_dir / f"{split}.spacy"
        info = C.conllu_to_docbins(src, {"gold": out}, limit=QUICK_LIMITS[split] if quick else 0)
        if info.get("converted"):
            print(f"  converted {src.name}: {info['docs']} docs, {info['tokens']} tokens", flush=True)
        paths[split] = str(out)
    return paths


def _tagged_copies(docs, vocab, tags=None, sentences: bool = False):
    """Words and tags (gold, or those of `tags`) of `docs`; with `sentences`, each Doc is marked
    as one sentence (so the parser parses it as given, with no BREAK)."""
    from spacy.tokens import Doc

    return [Doc(vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d],
                tags=[t.tag_ for t in (tags[i] if tags is not None else d)],
                sent_starts=[True] + [False] * (len(d) - 1) if sentences and len(d) else None)
            for i, d in enumerate(docs)]


def _score(preds, gold) -> Dict[str, float]:
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    s = parser_score([Example(p, g) for p, g in zip(preds, gold)])
    return {"dep_uas": s["dep_uas"], "dep_las": s["dep_las"]}


def _time_parse(nlp, docs_factory, repeats: int):
    C.materialize_averages(nlp)
    best, first = float("inf"), None
    for _ in range(max(1, repeats)):
        docs = docs_factory()
        n = C.count_tokens(docs)
        with C.Timer() as t:
            preds = list(nlp.pipe(docs, batch_size=1000))
        best = min(best, t.seconds)
        first = preds if first is None else first
    return first, n / best


# ---------------------------------------------------------------------------------------------
# Systems (each runs in a child via C.run_child)


def run_spacy(paths: Dict[str, str], out_dir: str, max_steps: int, extra: Sequence[str],
              predict_repeats: int = 1) -> Dict[str, Any]:
    import spacy

    run = C.train_spacy_peer(Path(out_dir), "tagger,parser", paths["train"], paths["dev"],
                             max_steps=max_steps, extra_overrides=extra)
    overrides = run["overrides"]
    nlp = spacy.load(run["model_dir"])
    gold = C.load_docs(Path(paths["test"]), nlp.vocab)
    preds, wps = _time_parse(nlp, lambda: C.unannotated_copies(gold, nlp.vocab), predict_repeats)
    metrics = _score(preds, gold)
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps})
    return {"setting": f"efficiency cfg, {run['steps']} steps", "metrics": metrics,
            "details": {"train": run, "overrides": overrides}}


def run_default(paths: Dict[str, str], out_dir: str, config: str, overrides: Sequence[str],
                setting: str = "default", predict_repeats: int = 1) -> Dict[str, Any]:
    import spacy

    import spacy_structperc  # noqa: F401

    out = Path(out_dir)
    run = C.spacy_train(Path(config), out / "model", paths["train"], paths["dev"],
                        overrides=list(overrides), log_path=out / "train.log")
    nlp = spacy.load(run["model_dir"])
    gold = C.load_docs(Path(paths["test"]), nlp.vocab)
    preds, wps = _time_parse(nlp, lambda: C.unannotated_copies(gold, nlp.vocab), predict_repeats)
    metrics = _score(preds, gold)
    tag_acc = C.score_token_attrs(preds, gold, ["tag"])["tag_acc"]
    dev = run.get("model_dev_scores") or {}
    for key in ("dep_uas", "dep_las", "tag_acc", "pos_acc", "sents_f"):
        if key in dev:
            metrics[f"dev_{key}"] = dev[key]
    metrics["test_tag_acc"] = tag_acc
    pos_acc = C.score_token_attrs(preds, gold, ["pos"]).get("pos_acc")
    if pos_acc is not None:
        metrics["test_pos_acc"] = pos_acc
    metrics["parser_mb"] = C.dir_bytes(Path(run["model_dir"]) / "parser") / 1e6
    with nlp.select_pipes(disable=["tagger"]):
        gold_tag_preds = list(nlp.pipe(_tagged_copies(gold, nlp.vocab), batch_size=1000))
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps})
    return {"metrics": metrics, "extra_rows": {f"{setting}, gold tags": _score(gold_tag_preds, gold)},
            "details": {"train": run, "test_tag_acc": tag_acc, "overrides": list(overrides)}}


def _train_loop(nlp, parser, train, dev_docs, epochs: int, seed: int = 0, sentences: bool = False):
    """Online passes over `train` (Examples), dev scores after each epoch (gold tags)."""
    import random

    from spacy.tokens import Doc  # noqa: F401

    rng = random.Random(seed)
    curve, seconds = [], 0.0
    order = list(train)
    for epoch in range(epochs):
        rng.shuffle(order)
        losses: Dict[str, float] = {}
        with C.Timer() as t:
            for i in range(0, len(order), 100):
                parser.update(order[i:i + 100], losses=losses)
        seconds += t.seconds
        preds = list(parser.pipe(_tagged_copies(dev_docs, nlp.vocab, sentences=sentences), batch_size=1000))
        point = {"epoch": epoch + 1, "seconds": round(seconds, 1), **_score(preds, dev_docs),
                 "updates": losses.get(f"{OURS}_updates", 0.0), "loss": losses.get(OURS, 0.0)}
        if f"{OURS}_invalid_updates" in losses:
            point["invalid_updates"] = losses[f"{OURS}_invalid_updates"]
            point["invalid_share"] = losses[f"{OURS}_invalid_updates"] / max(1.0, point["updates"])
        curve.append(point)
        print(f"  epoch {epoch + 1}: {point}", flush=True)
    return curve, seconds


def _make_parser(cfg: Dict[str, Any], clusters: bool):
    import spacy

    import spacy_structperc  # noqa: F401

    nlp = spacy.blank("en")
    model = {"@architectures": "spacy-structperc.ParserPerceptron.v1",
             "features": {"@misc": "spacy-structperc.parser_features.v1", "clusters": clusters}}
    parser = nlp.add_pipe(OURS, config={**cfg, "model": model})
    return nlp, parser


def run_grid_point(paths: Dict[str, str], setting: str, cfg: Dict[str, Any], epochs: int,
                   tagger_model: Optional[str], clusters: bool = True,
                   predict_repeats: int = 1, sentences: bool = False) -> Dict[str, Any]:
    from spacy.training import Example

    nlp, parser = _make_parser(cfg, clusters)
    vocab = nlp.vocab
    train_docs = C.load_docs(Path(paths["train"]), vocab)
    dev_docs = C.load_docs(Path(paths["dev"]), vocab)
    test_docs = C.load_docs(Path(paths["test"]), vocab)
    train = [Example(d2, d) for d, d2 in zip(train_docs, _tagged_copies(train_docs, vocab, sentences=sentences))]
    nlp.initialize(lambda: train)
    curve, seconds = _train_loop(nlp, parser, train, dev_docs, epochs, sentences=sentences)
    gold_tagged = lambda: _tagged_copies(test_docs, vocab, sentences=sentences)  # noqa: E731
    preds, wps = _time_parse(parser, gold_tagged, predict_repeats)
    gold_scores = _score(preds, test_docs)
    metrics = dict(gold_scores)
    extra_rows = {}
    if tagger_model and not Path(tagger_model).exists():   # the default part of this run trains it
        print(f"no tagger model at {tagger_model}: grid tested on gold tags only", flush=True)
        tagger_model = None
    if tagger_model:
        import spacy

        tagger_nlp = spacy.load(tagger_model, vocab=vocab, exclude=["parser"])
        tagged = list(tagger_nlp.pipe(C.unannotated_copies(test_docs, vocab), batch_size=1000))
        pred_tag_docs = _tagged_copies(test_docs, vocab, tags=tagged, sentences=sentences)
        metrics = _score(list(parser.pipe(pred_tag_docs, batch_size=1000)), test_docs)
        extra_rows[f"{setting}, gold tags"] = gold_scores
    metrics.update({"train_seconds": seconds, "predict_wps": wps})
    if curve and "invalid_share" in curve[-1]:
        metrics["invalid_update_share"] = sum(p["invalid_updates"] for p in curve) / \
            max(1.0, sum(p["updates"] for p in curve))
    return {"metrics": metrics, "extra_rows": extra_rows,
            "details": {"cfg": cfg, "epochs": epochs, "dev_curve": curve,
                        "tags": "predicted (default run's tagger)" if tagger_model else "gold"}}


def read_ptb(folder: Path, vocab):
    from spacy.tokens import Doc

    train, test = [], []
    for path in sorted(folder.glob("wsj_*.dp")):
        target = test if int(path.stem.split("_")[1]) >= PTB_TEST_FROM else train
        for block in path.read_text(encoding="utf8").strip().split("\n\n"):
            rows = [line.split("\t") for line in block.splitlines() if line.strip()]
            heads = [int(r[2]) - 1 for r in rows]
            target.append(Doc(vocab, words=[r[0] for r in rows], tags=[r[1] for r in rows],
                              heads=[h if h >= 0 else i for i, h in enumerate(heads)],
                              deps=["dep" if h >= 0 else "ROOT" for h in heads]))
    return train, test


def run_ptb(folder: str, epochs: int, predict_repeats: int = 1) -> Dict[str, Any]:
    from spacy.training import Example

    nlp, parser = _make_parser({"lookahead_depth": 1}, clusters=True)
    train_docs, test_docs = read_ptb(Path(folder), nlp.vocab)
    train = [Example(d2, d) for d, d2 in zip(train_docs, _tagged_copies(train_docs, nlp.vocab))]
    nlp.initialize(lambda: train)
    curve, seconds = _train_loop(nlp, parser, train, test_docs[:0] or test_docs, epochs)
    preds, wps = _time_parse(parser, lambda: _tagged_copies(test_docs, nlp.vocab), predict_repeats)
    metrics = {"dep_uas": _score(preds, test_docs)["dep_uas"], "train_seconds": seconds,
               "predict_wps": wps}
    return {"setting": f"lookahead 1, gold POS, {epochs} epochs", "metrics": metrics,
            "details": {"train_sentences": len(train_docs), "test_sentences": len(test_docs),
                        "split": f"train wsj_0001-{PTB_TEST_FROM - 1:04d}, test wsj_{PTB_TEST_FROM:04d}-0199",
                        "curve_on_test": curve}}


# ---------------------------------------------------------------------------------------------
# Plots


_BEAM = re.compile(r"^beam (\d+), (early|max-violation|standard)$")
_LOOKAHEAD = re.compile(r"^lookahead (\d+)$")


def make_plots(results_path: Path, out_dir: Path) -> List[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = C.load_results(results_path)
    details = data.get("details", {})
    rows = data.get("rows", [])
    written = []
    curves = {}
    for key, det in details.items():
        m = _BEAM.match(det.get("setting", ""))
        if m and det.get("dev_curve"):
            curves[(int(m.group(1)), m.group(2))] = det["dev_curve"]
    if curves:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        low = []
        for (width, update), curve in sorted(curves.items()):
            style = {"early": "-", "max-violation": "--", "standard": ":"}[update]
            if max(p["dep_las"] for p in curve) < 0.7:   # collapsed runs would flatten the rest
                low.append(f"beam {width}, {update}: {100 * curve[-1]['dep_las']:.1f}")
                if update == "standard":
                    axes[1].plot([p["epoch"] for p in curve],
                                 [100 * p.get("invalid_share", 0) for p in curve],
                                 marker="o", label=f"beam {width}")
                continue
            axes[0].plot([p["epoch"] for p in curve], [100 * p["dep_las"] for p in curve], style,
                         marker="o", markersize=3, label=f"beam {width}, {update}")
            if update == "standard":
                axes[1].plot([p["epoch"] for p in curve], [100 * p.get("invalid_share", 0) for p in curve],
                             marker="o", label=f"beam {width}")
        axes[0].set_xlabel("epoch")
        axes[0].set_ylabel("dev LAS (%)")
        axes[0].set_title("dev LAS per epoch (cf. huang2012 Fig. 6)")
        if low:
            axes[0].text(0.02, 0.02, "off the scale (last epoch LAS %):\n" + "\n".join(low),
                         transform=axes[0].transAxes, fontsize=7, va="bottom")
        axes[0].legend(fontsize=7)
        axes[0].grid(alpha=0.3)
        axes[1].set_xlabel("epoch")
        axes[1].set_ylabel("invalid standard updates (%)")
        axes[1].set_title("share of invalid updates (cf. huang2012 Fig. 5)")
        axes[1].legend(fontsize=7)
        axes[1].grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / "parser_beam.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    pts = []
    for r in rows:
        m = _LOOKAHEAD.match(r["setting"])
        if m and r["system"] == OURS and r["dataset"] == DATASET and r["split"] == "test":
            pts.append((int(m.group(1)), r["metric"], r["value"]))
    if pts:
        depths = sorted({p[0] for p in pts})
        val = {(d, m): v for d, m, v in pts}
        fig, ax = plt.subplots(figsize=(5.5, 4))
        ax.plot(depths, [100 * val.get((d, "dep_uas"), float("nan")) for d in depths], marker="o", label="UAS")
        ax.plot(depths, [100 * val.get((d, "dep_las"), float("nan")) for d in depths], marker="s", label="LAS")
        ax.set_xlabel("lookahead depth")
        ax.set_ylabel("test accuracy (%), predicted tags")
        ax.set_xticks(depths)
        ax2 = ax.twinx()
        ax2.plot(depths, [val.get((d, "predict_wps"), float("nan")) for d in depths], "k--", marker="^",
                 label="words/s")
        ax2.set_yscale("log")
        ax2.set_ylabel("parser words/s (log)")
        ax.set_title(f"{OURS}: lookahead (cf. tsuruoka2011 Table 4)")
        ax.legend(loc="lower left")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / "parser_lookahead.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None, help="UD English EWT folder")
    p.add_argument("--ptb", type=Path, default=None, help="ptb_sample_dep folder")
    C.add_run_args(p, predict_repeats=2)
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {PARTS}")
    p.add_argument("--grid", default=None, help="grid settings to run, ';'-separated (default all)")
    p.add_argument("--grid-epochs", type=int, default=GRID_EPOCHS)
    p.add_argument("--epochs-for", default="lookahead 3=4",
                   help="per-setting epochs, 'SETTING=N;...' (depth 3 is slow)")
    p.add_argument("--default-config", type=Path, default=None,
                   help="config of the 'default' part (default configs/parser.cfg)")
    p.add_argument("--default-setting", default="default",
                   help="setting name of the 'default' part's rows (to compare config variants)")
    p.add_argument("--spacy-max-steps", type=int, default=4000)
    p.add_argument("--levers", default=None, help=f"levers to run, ';'-separated (default all): {list(LEVERS)}")
    p.add_argument("--lever-epochs", type=int, default=LEVER_EPOCHS)
    p.add_argument("--tagger-model", default=None,
                   help="pipeline whose tagger tags the grid's test Docs (default: the default "
                        "run's model-best)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    data_dir = args.data or C.default_data_dir(DATASET)
    ptb_dir = args.ptb or C.default_data_dir(PTB)
    bench = C.Bench.start(COMPONENT, __file__, args, argv, make_plots, OURS, data=data_dir)
    if bench is None:
        return 0
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown part(s) {sorted(unknown)}; choose from {PARTS}")
    paths = prepare_data(Path(data_dir), bench.work_dir, args.quick)
    run_dir = bench.run_dir
    default_model = str(run_dir / "default" / "model" / "model-best")
    epochs = QUICK_EPOCHS if args.quick else args.grid_epochs
    per_setting = dict(x.split("=") for x in args.epochs_for.split(";") if "=" in x)
    quick_train = ["--training.max_epochs", str(QUICK_EPOCHS), "--training.eval_frequency", "20"] if args.quick else []
    gold_preproc = ["--corpora.train.gold_preproc", "true", "--corpora.dev.gold_preproc", "true"]

    def job(system, setting, func, kwargs, dataset=DATASET):
        return C.Job(f"{system} | {setting or func} | {dataset}", system, func,
                     dict(kwargs, predict_repeats=args.predict_repeats), setting=setting, dataset=dataset)

    jobs = []
    if "spacy" in parts:
        jobs.append(job("spacy", None, "run_spacy",
                        {"paths": paths, "out_dir": str(run_dir / "spacy"),
                         "max_steps": 300 if args.quick else args.spacy_max_steps,
                         "extra": ["--training.eval_frequency", "100"] if args.quick else []}))
    if "default" in parts:
        jobs.append(job(OURS, args.default_setting, "run_default",
                        {"paths": paths, "out_dir": str(run_dir / C.slug(args.default_setting)),
                         "setting": args.default_setting,
                         "config": str(args.default_config or C.REPO_ROOT / "configs" / "parser.cfg"),
                         "overrides": gold_preproc + quick_train}))
    if "beam" in parts:
        beam_config = C.REPO_ROOT / "configs" / BEAM_CONFIG
        from spacy.util import load_config

        width = load_config(beam_config)["components"]["parser"]["beam_width"]
        beam_setting = f"parser.cfg with beam {width}, max-violation"
        jobs.append(job(OURS, beam_setting, "run_default",
                        {"paths": paths, "out_dir": str(run_dir / C.slug(beam_setting)),
                         "setting": beam_setting, "config": str(beam_config),
                         "overrides": gold_preproc + quick_train}))
    if "grid" in parts:
        wanted = {s.strip() for s in args.grid.split(";")} if args.grid else None
        for point in GRID:
            if wanted is not None and point["setting"] not in wanted:
                continue
            n_epochs = QUICK_EPOCHS if args.quick else int(per_setting.get(point["setting"], epochs))
            jobs.append(job(OURS, point["setting"], "run_grid_point",
                            {"paths": paths, "setting": point["setting"], "cfg": point["cfg"],
                             "epochs": n_epochs, "tagger_model": args.tagger_model or default_model,
                             "sentences": point.get("sentences", False)}))
    if "levers" in parts:
        wanted = [x.strip() for x in args.levers.split(";")] if args.levers else list(LEVERS)
        for name in wanted:
            setting = f"{name}, {args.lever_epochs} passes"
            jobs.append(job(OURS, setting, "run_default",
                            {"paths": paths, "out_dir": str(run_dir / C.slug(setting)), "setting": setting,
                             "config": str(C.REPO_ROOT / "configs" / "parser.cfg"),
                             "overrides": gold_preproc + (quick_train or [
                                 "--training.max_epochs", str(args.lever_epochs)]) + LEVERS[name]}))
    if "ptb" in parts:
        jobs.append(job(OURS, None, "run_ptb",
                        {"folder": str(ptb_dir), "epochs": QUICK_EPOCHS if args.quick else 10}, dataset=PTB))
    bench.run(jobs)
    return bench.finish(notes=NOTES)


if __name__ == "__main__":
    sys.exit(main())
