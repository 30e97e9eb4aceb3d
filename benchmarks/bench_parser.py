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
3. ``averaged``: ``configs/parser.cfg`` trained with seeds 0 and 1 (every parser row kept), the
   copies' weights averaged (``python -m spacy_structperc average``) and the parser saved with the
   config's ``prune_below``; training seconds are both copies' and the averaging's.
Metrics: ``dep_uas`` / ``dep_las`` (spaCy's parser scorer: punctuation excluded),
``train_seconds`` (wall: ``spacy train``), ``predict_wps`` (test words / seconds of one
``nlp.pipe`` call, batch 1000, one process: the whole tagger + parser pipeline),
``peak_rss_mb``. The levers and averaged parts add ``dev_*`` (the dev split's scores of model-best),
``test_tag_acc`` / ``test_pos_acc`` and ``parser_mb`` (the parser's folder on disk).

The finished grids (lookahead depths 0-3 and beam widths x updates on gold tags, tsuruoka2011
Table 4 and huang2012 Figs. 5-6) and the PTB sample run are retired; their rows stay in
``parser.json`` and docs/benchmarks.md says how to bring the code back.

Examples (from the repo root)::

    python benchmarks/bench_parser.py --quick                 # smoke run on slices
    python benchmarks/bench_parser.py                         # everything
    python benchmarks/bench_parser.py --only spacy,default
    python benchmarks/bench_parser.py --only levers --levers "parser.cfg;label sets"
    python benchmarks/bench_parser.py --only averaged
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "parser"
DATASET = "ud_en_ewt"
OURS = "structperc_parser"
SPLIT_FILES = {"train": "*-ud-train.conllu", "dev": "*-ud-dev.conllu", "test": "*-ud-test.conllu"}
PARTS = ("spacy", "default", "beam", "levers", "averaged")
BEAM_CONFIG = "parser_beam.cfg"   # the most accurate setting: configs/parser.cfg with a beam

# The levers of accuracy, each alone on configs/parser.cfg (tagger + parser, the parser on the
# tagger's predicted tags), at one budget of passes (--lever-epochs): what each gives on dev.
# Most were measured on the config before it trained with exploration (the static oracle, and
# updates only to features seen twice along the gold derivations): `before(...)` spells that
# base out, so each lever means what it meant when its row was measured.
BEFORE = {"oracle": "static", "explore": "0.0", "explore_after": "0", "min_feature_freq": "2"}


def before(**settings: str) -> List[str]:
    """Overrides of configs/parser.cfg: the config before exploration, then `settings`
    (component settings; "model.features.X" for feature settings, written model__features__X)."""
    merged = {**BEFORE, **{k.replace("__", "."): v for k, v in settings.items()}}
    return [x for k, v in merged.items() for x in (f"--components.parser.{k}", v)]


HYBRID = {"transition_system": "arc-hybrid", "model__features__arc_hybrid": "true"}
HYBRID_DYNAMIC = {**HYBRID, "oracle": "dynamic", "explore": "0.9"}
STANDARD_DYNAMIC = {"oracle": "dynamic", "explore": "0.9", "explore_after": "2"}
LEVERS: Dict[str, List[str]] = {
    "parser.cfg": [],
    "static oracle": before(),
    "upos features": before(model__features__upos="true"),
    "label sets": before(model__features__label_sets="true"),
    "arc-hybrid, static oracle": before(**HYBRID),
    "arc-hybrid, dynamic oracle, explore 0.9": before(**HYBRID_DYNAMIC),
    "arc-hybrid, dynamic oracle, explore 0.9 after 2 passes": before(**HYBRID_DYNAMIC, explore_after="2"),
    # tsuruoka2011 Table 4 on top of exploration: does lookahead help such a parser?
    "arc-hybrid, dynamic oracle, explore 0.9 after 2 passes, lookahead 1":
        before(**HYBRID_DYNAMIC, explore_after="2", lookahead_depth="1"),
    # arc-standard with its own dynamic oracle (Goldberg, Sartorio and Satta 2014), and with lookahead.
    "dynamic oracle, explore 0.9 after 2 passes": before(**STANDARD_DYNAMIC),
    "dynamic oracle, explore 0.9 after 2 passes, lookahead 1": before(**STANDARD_DYNAMIC, lookahead_depth="1"),
    # Updates touch only features seen twice along the gold derivations (min_feature_freq 2):
    # exploration's states off them then learn through fewer features. With every feature
    # (configs/parser.cfg since):
    "dynamic oracle, explore 0.9 after 2 passes, every feature": before(**STANDARD_DYNAMIC, min_feature_freq="1"),
    "dynamic oracle, explore 0.9 after 2 passes, lookahead 1, every feature":
        before(**STANDARD_DYNAMIC, lookahead_depth="1", min_feature_freq="1"),
    # Word dropout on configs/parser.cfg as it is: a share of the training tokens' words hidden
    # at every pass, so the parser learns to attach from tags and clusters as it must for words
    # it never saw.
    "word dropout 0.1": ["--components.parser.word_dropout", "0.1"],
    "word dropout 0.25": ["--components.parser.word_dropout", "0.25"],
    # tsuruoka2011 Table 4 with the static oracle, at the same budget.
    "lookahead 1": before(lookahead_depth="1"),
    # tsuruoka2011's margin perceptron, as the tagger uses it (margin 40).
    "margin 10": before(margin="10.0"),
    "margin 40": before(margin="40.0"),
    # Koo, Carreras and Collins (2008): cluster-prefix pairs along the arcs a transition makes.
    "cluster pairs": before(model__features__cluster_pairs="true"),
    # Beam search (max-violation) on configs/parser.cfg as it is: beam training follows the gold
    # derivation, so the oracle is static; every feature updatable, as the greedy default.
    "beam 4, every feature": ["--components.parser.decoder", "beam", "--components.parser.beam_width", "4",
                              "--components.parser.label_candidates", "2",
                              "--components.parser.oracle", "static", "--components.parser.explore", "0.0"],
    "beam 8, every feature": ["--components.parser.decoder", "beam", "--components.parser.beam_width", "8",
                              "--components.parser.label_candidates", "2",
                              "--components.parser.oracle", "static", "--components.parser.explore", "0.0"],
    # Where a sentence ends (the BREAK decision in a Doc without sentence starts): configs/parser.cfg
    # reads the word and tag before the buffer's front and q0's shape (parser_features.v1's
    # boundary); this lever is the config without them.
    "no boundary features": ["--components.parser.model.features.boundary", "false"],
    # The share of q0's occurrences in general text that are capitalised (atoms.CASING_ATOMS), with
    # its shape, the word before it and s0's tag: whether a capital at the buffer's front starts a
    # sentence or a name.
    "parser casing": ["--components.parser.model.features.casing", "true"],
    # configs/parser.cfg's tagger reads the casing atoms too; this lever is the config without them.
    "no tagger casing": ["--components.tagger.model.features.casing", "false"],
    # Candidates for the accurate setting: beam search with Zhang and Nivre's non-local features.
    "beam 8, label sets, upos": before(decoder="beam", beam_width="8", model__features__label_sets="true",
                                       model__features__upos="true"),
}
LEVER_EPOCHS = 6
# The averaged part: configs/parser.cfg trained with these seeds (every parser row kept), the
# copies' weights averaged and the parser saved with the config's prune_below (1.0).
AVERAGED_SEEDS = (0, 1)
QUICK_LIMITS = {"train": 800, "dev": 200, "test": 300}
QUICK_EPOCHS = 2

NOTES = [
    "UD English EWT r2.16, gold tokenization, one Doc per sentence; test split unless stated.",
    "dep_uas / dep_las: spacy.pipeline.dep_parser.parser_score (punctuation excluded), fractions.",
    "default: spacy train configs/parser.cfg (tagger + parser; parser trained on the tagger's "
    "predicted tags via annotating_components); test with predicted tags. 'default, gold tags': "
    "the same model with the tagger disabled on gold-tagged test Docs.",
    "Grid settings (lookahead N, beam W, UPDATE; retired): parser alone, trained in-process on "
    "gold tags for a fixed number of epochs (stated in details); tested with the tags predicted "
    "by the default run's structperc_tagger, and with gold tags ('..., gold tags').",
    "Levers (..., N passes): configs/parser.cfg with one change, N passes; dev_* are the dev "
    "split's scores of model-best, the rest test. Most levers change the config as it was before "
    "it trained with exploration (the 'static oracle' lever; LEVERS in the script says which).",
    "averaged (parser.cfg, seeds ... averaged): the config trained once per seed, every parser row "
    "kept, the weights averaged and the parser saved with prune_below 1.0; train_seconds is both "
    "trainings' and the averaging's; dev_* scored on the averaged model (documents of ten sentences).",
    "spacy: spaCy's tagger + parser, efficiency config, steps in the setting; predict_wps for "
    "spacy and default is the whole tagger + parser pipeline.",
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
    """Words, tags and universal POS (gold, or those of `tags`) of `docs`; with `sentences`, each Doc is marked
    as one sentence (so the parser parses it as given, with no BREAK)."""
    from spacy.tokens import Doc

    return [Doc(vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d],
                tags=[t.tag_ for t in (tags[i] if tags is not None else d)],
                pos=[t.pos_ for t in (tags[i] if tags is not None else d)],
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
                setting: str = "default", predict_repeats: int = 1,
                other_widths: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    """The config trained and scored; other_widths ({row setting: beam width}): the same model
    also parses with each width (predict_beam_width), each an extra row (dev UAS / LAS from the
    model's own dev pass, test scores and words/s)."""
    out = Path(out_dir)
    run = C.spacy_train(Path(config), out / "model", paths["train"], paths["dev"],
                        overrides=list(overrides), log_path=out / "train.log")
    result = _evaluate(paths, run["model_dir"], run, run.get("model_dev_scores") or {}, overrides,
                       setting, predict_repeats)
    for row, width in (other_widths or {}).items():
        result["extra_rows"][row] = _at_width(paths, run["model_dir"], width, predict_repeats)
    return result


def _at_width(paths: Dict[str, str], model_dir: str, width: int, predict_repeats: int) -> Dict[str, Any]:
    """Dev and test scores and test words/s of a beam model parsing with `width` hypotheses."""
    import spacy

    import spacy_structperc  # noqa: F401

    nlp = spacy.load(model_dir)
    parser = nlp.get_pipe("parser")
    parser.cfg["predict_beam_width"] = width
    dev_gold = C.load_docs(Path(paths["dev"]), nlp.vocab)
    dev = _score(list(nlp.pipe(C.unannotated_copies(dev_gold, nlp.vocab), batch_size=1000)), dev_gold)
    gold = C.load_docs(Path(paths["test"]), nlp.vocab)
    preds, wps = _time_parse(nlp, lambda: C.unannotated_copies(gold, nlp.vocab), predict_repeats)
    metrics = _score(preds, gold)
    metrics.update({"dev_dep_uas": dev["dep_uas"], "dev_dep_las": dev["dep_las"], "predict_wps": wps})
    return metrics


def run_averaged(paths: Dict[str, str], out_dir: str, config: str, overrides: Sequence[str],
                 seeds: Sequence[int], prune_below: float, setting: str, predict_repeats: int = 1
                 ) -> Dict[str, Any]:
    """The config trained once per seed with every parser row kept, the copies' weights averaged
    (`python -m spacy_structperc average`) and the parser saved with `prune_below`; dev scored
    as the config scores it (documents of ten sentences)."""
    import spacy

    from spacy_structperc.averaging import average_pipeline_dirs
    from spacy_structperc.documents import create_documents_corpus

    out = Path(out_dir)
    runs = [C.spacy_train(Path(config), out / f"seed{seed}", paths["train"], paths["dev"],
                          overrides=list(overrides) + ["--system.seed", str(seed),
                                                       "--components.parser.model.prune_below", "0"],
                          log_path=out / f"train.seed{seed}.log") for seed in seeds]
    with C.Timer() as t:
        average_pipeline_dirs(out / "averaged", [r["model_dir"] for r in runs], prune_below={"parser": prune_below})

    def scores(model_dir):
        nlp = spacy.load(model_dir)
        dev = nlp.evaluate(list(create_documents_corpus(paths["dev"], sentences_per_doc=10)(nlp)))
        test = nlp.evaluate(list(create_documents_corpus(paths["test"], sentences_per_doc=1)(nlp)))
        return dev, {f"test_{k}": test[k] for k in ("dep_uas", "dep_las", "tag_acc")}

    # Each copy as the config would save it (the parser within prune_below left out), scored as
    # the average is: what one training gives.
    for seed, r in zip(seeds, runs):
        nlp = spacy.load(r["model_dir"])
        nlp.get_pipe("parser").model.prune_below = prune_below
        nlp.to_disk(out / f"seed{seed}-pruned")
        dev_copy, test_copy = scores(out / f"seed{seed}-pruned")
        r["pruned_scores"] = {**{f"dev_{k}": dev_copy[k] for k in ("dep_uas", "dep_las", "sents_f")}, **test_copy}
    dev, test = scores(out / "averaged")
    run = {"seconds": sum(r["seconds"] for r in runs) + t.seconds, "model_dir": str(out / "averaged"),
           "copies": runs, "average_seconds": t.seconds, "scored_as_the_copies": test}
    return _evaluate(paths, run["model_dir"], run, dev, overrides, setting, predict_repeats)


def _evaluate(paths: Dict[str, str], model_dir: str, run: Dict[str, Any], dev: Dict[str, Any],
              overrides: Sequence[str], setting: str, predict_repeats: int) -> Dict[str, Any]:
    import spacy

    import spacy_structperc  # noqa: F401

    nlp = spacy.load(model_dir)
    gold = C.load_docs(Path(paths["test"]), nlp.vocab)
    preds, wps = _time_parse(nlp, lambda: C.unannotated_copies(gold, nlp.vocab), predict_repeats)
    metrics = _score(preds, gold)
    tag_acc = C.score_token_attrs(preds, gold, ["tag"])["tag_acc"]
    for key in ("dep_uas", "dep_las", "tag_acc", "pos_acc", "sents_f"):
        if dev.get(key) is not None:
            metrics[f"dev_{key}"] = dev[key]
    metrics["test_tag_acc"] = tag_acc
    pos_acc = C.score_token_attrs(preds, gold, ["pos"]).get("pos_acc")
    if pos_acc is not None:
        metrics["test_pos_acc"] = pos_acc
    metrics["parser_mb"] = C.dir_bytes(Path(model_dir) / "parser") / 1e6
    with nlp.select_pipes(disable=["tagger"]):
        gold_tag_preds = list(nlp.pipe(_tagged_copies(gold, nlp.vocab), batch_size=1000))
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps})
    return {"metrics": metrics, "extra_rows": {f"{setting}, gold tags": _score(gold_tag_preds, gold)},
            "details": {"train": run, "test_tag_acc": tag_acc, "overrides": list(overrides)}}


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None, help="UD English EWT folder")
    C.add_run_args(p, predict_repeats=2)
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {PARTS}")
    p.add_argument("--default-config", type=Path, default=None,
                   help="config of the 'default' part (default configs/parser.cfg)")
    p.add_argument("--default-setting", default="default",
                   help="setting name of the 'default' part's rows (to compare config variants)")
    p.add_argument("--spacy-max-steps", type=int, default=4000)
    p.add_argument("--levers", default=None, help=f"levers to run, ';'-separated (default all): {list(LEVERS)}")
    p.add_argument("--lever-epochs", type=int, default=LEVER_EPOCHS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    data_dir = args.data or C.default_data_dir(DATASET)
    bench = C.Bench.start(COMPONENT, __file__, args, argv, lambda results, out: [], OURS, data=data_dir)
    if bench is None:
        return 0
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown part(s) {sorted(unknown)}; choose from {PARTS}")
    paths = prepare_data(Path(data_dir), bench.work_dir, args.quick)
    run_dir = bench.run_dir
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

        beam_parser = load_config(beam_config)["components"]["parser"]
        width, predict_width = beam_parser["beam_width"], beam_parser.get("predict_beam_width")
        beam_setting = base_setting = f"parser.cfg with beam {width}, max-violation"
        narrower = bool(predict_width) and predict_width != width
        if narrower:
            beam_setting += f", parsing with beam {predict_width}"
        jobs.append(job(OURS, beam_setting, "run_default",
                        {"paths": paths, "out_dir": str(run_dir / C.slug(beam_setting)),
                         "setting": beam_setting, "config": str(beam_config),
                         "overrides": gold_preproc + quick_train,
                         # the same model parsing with the width it was trained with, side by side
                         "other_widths": {f"{base_setting}, parsing with beam {width}": width} if narrower else {}}))
    if "levers" in parts:
        wanted = [x.strip() for x in args.levers.split(";")] if args.levers else list(LEVERS)
        for name in wanted:
            setting = f"{name}, {args.lever_epochs} passes"
            jobs.append(job(OURS, setting, "run_default",
                            {"paths": paths, "out_dir": str(run_dir / C.slug(setting)), "setting": setting,
                             "config": str(C.REPO_ROOT / "configs" / "parser.cfg"),
                             "overrides": gold_preproc + (quick_train or [
                                 "--training.max_epochs", str(args.lever_epochs)]) + LEVERS[name]}))
    if "averaged" in parts:
        setting = f"parser.cfg, seeds {' and '.join(map(str, AVERAGED_SEEDS))} averaged"
        jobs.append(job(OURS, setting, "run_averaged",
                        {"paths": paths, "out_dir": str(run_dir / C.slug(setting)), "setting": setting,
                         "config": str(C.REPO_ROOT / "configs" / "parser.cfg"),
                         "overrides": gold_preproc + quick_train, "seeds": list(AVERAGED_SEEDS),
                         "prune_below": 1.0}))
    bench.run(jobs)
    return bench.finish(notes=NOTES)


if __name__ == "__main__":
    sys.exit(main())
