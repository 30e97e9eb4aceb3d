"""Benchmark sentence segmentation on raw text: structperc_parser against spaCy's parser and senter.

One run, on UD English EWT, each system in its own child process:

1. ``structperc_parser`` / ``parser.cfg``: ``spacy train configs/parser.cfg`` (structperc_tagger +
   structperc_parser), which trains on documents of ten consecutive sentences with gold tokens
   (``spacy-structperc.documents_corpus.v1``), so the parser learns to end sentences;
2. ``structperc_parser`` / ``parser.cfg without boundary features``: the same without the
   templates that read the word before the buffer's front and q0's shape
   (``parser_features.v1``'s ``boundary``);
3. ``structperc_parser`` / ``parser.cfg, one sentence per doc``: the same with
   ``sentences_per_doc = 1``, the training data before this benchmark existed (the parser never
   sees a sentence end inside a Doc);
4. ``spacy`` / ``parser``: spaCy's tagger + parser (``spacy init config --pipeline
   tagger,parser --optimize efficiency``) trained on the same documents for ``--spacy-max-steps``;
5. ``spacy`` / ``senter``: spaCy's senter (efficiency config) trained on the same documents.

Every system is evaluated on the EWT test split merged into documents of ten consecutive
sentences (``--test-sentences-per-doc``), from raw text: ``nlp(doc.text)`` with the pipeline's own
tokenizer, scored against the gold Doc with spaCy's scorer (``sents_p/r/f``; the parsers also
``dep_uas/dep_las``, which tokenization errors lower). ``predict_wps``: gold words per second of
``nlp.pipe`` over the test texts (tokenizer included, one process).

    python benchmarks/bench_sents.py --quick        # smoke run on slices
    python benchmarks/bench_sents.py                # everything; JSON to benchmarks/results/sents.json
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_parser import prepare_data  # noqa: E402  (EWT one sentence per Doc, as bench_parser reads it)

COMPONENT = "sents"
DATASET = "ud_en_ewt"
PARTS = ("structperc", "structperc_no_boundary", "structperc_one", "spacy_parser", "spacy_senter")
READER = "spacy-structperc.documents_corpus.v1"


def evaluate_raw(nlp, test_path: str, sentences_per_doc: int) -> Dict[str, float]:
    """sents_p/r/f (and dep_uas/las when the pipeline parses) on documents of
    `sentences_per_doc` test sentences, from their text; gold words per second of nlp.pipe."""
    from spacy.training import Example

    from spacy_structperc.documents import merge_sentences

    gold = list(merge_sentences(C.load_docs(Path(test_path), nlp.vocab), sentences_per_doc))
    texts = [d.text for d in gold]
    C.materialize_averages(nlp)
    with C.Timer() as t:
        preds = list(nlp.pipe(texts, batch_size=256))
    scorer_examples = [Example(p, g) for p, g in zip(preds, gold)]
    from spacy.scorer import Scorer

    scores = Scorer.score_spans(scorer_examples, "sents", has_annotation=lambda d: d.has_annotation("SENT_START"))
    metrics = {"sents_p": scores["sents_p"], "sents_r": scores["sents_r"], "sents_f": scores["sents_f"],
               "predict_wps": C.count_tokens(gold) / t.seconds, "test_docs": len(gold)}
    if "parser" in nlp.pipe_names:
        from spacy.pipeline.dep_parser import parser_score

        dep = parser_score(scorer_examples)
        metrics.update(dep_uas=dep["dep_uas"], dep_las=dep["dep_las"])
    return metrics


def run_structperc(paths: Dict[str, str], out_dir: str, config: str, overrides: Sequence[str],
                   test_sentences_per_doc: int) -> Dict[str, Any]:
    import spacy

    import spacy_structperc  # noqa: F401

    out = Path(out_dir)
    run = C.spacy_train(Path(config), out / "model", paths["train"], paths["dev"],
                        overrides=list(overrides), log_path=out / "train.log")
    nlp = spacy.load(run["model_dir"])
    metrics = evaluate_raw(nlp, paths["test"], test_sentences_per_doc)
    metrics["train_seconds"] = run["seconds"]
    return {"metrics": metrics, "details": {"train": run, "overrides": list(overrides)}}


def run_spacy(paths: Dict[str, str], out_dir: str, pipeline: str, max_steps: int,
              sentences_per_doc: int, test_sentences_per_doc: int, extra: Sequence[str]) -> Dict[str, Any]:
    import subprocess

    import spacy
    from thinc.api import Config

    import spacy_structperc  # noqa: F401  (the documents reader)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.cfg"
    subprocess.run([sys.executable, "-m", "spacy", "init", "config", str(config_path), "--lang", "en",
                    "--pipeline", pipeline, "--optimize", "efficiency", "--force"],
                   check=True, stdout=subprocess.DEVNULL, env=C.child_env())
    config = Config().from_disk(config_path, interpolate=False)
    for split in ("train", "dev"):
        config["corpora"][split] = {"@readers": READER, "path": f"${{paths.{split}}}",
                                    "sentences_per_doc": sentences_per_doc, "limit": 0,
                                    "gold_preproc": True}
    config.to_disk(config_path)
    overrides = ["--training.max_steps", str(max_steps)] + list(extra)
    run = C.spacy_train(config_path, out / "model", paths["train"], paths["dev"], overrides=overrides,
                        log_path=out / "train.log")
    nlp = spacy.load(run["model_dir"])
    metrics = evaluate_raw(nlp, paths["test"], test_sentences_per_doc)
    metrics["train_seconds"] = run["seconds"]
    return {"setting": f"{pipeline.split(',')[-1]}, efficiency cfg, {run['steps']} steps",
            "metrics": metrics, "details": {"train": run, "overrides": overrides}}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=None, help="UD English EWT folder (default: shared data)")
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--results-dir", type=Path, default=None)
    p.add_argument("--quick", action="store_true", help="slices of the data and a few steps: a smoke test")
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {PARTS}")
    p.add_argument("--epochs", type=int, default=8, help="max_epochs of the structperc runs")
    p.add_argument("--spacy-max-steps", type=int, default=2000)
    p.add_argument("--sentences-per-doc", type=int, default=10, help="training documents")
    p.add_argument("--test-sentences-per-doc", type=int, default=10)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    data_dir = args.data or C.default_data_dir(DATASET)
    work_dir = args.work_dir.resolve()
    results_dir = (args.results_dir or (work_dir / "quick-results" if args.quick else C.RESULTS_DIR)).resolve()
    results_path = results_dir / f"{COMPONENT}.json"
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown part(s) {sorted(unknown)}; choose from {PARTS}")
    t_start = time.time()
    paths = prepare_data(Path(data_dir), work_dir, args.quick)
    run_dir = work_dir / "runs" / ("quick" if args.quick else "full") / COMPONENT
    me = Path(__file__).resolve()
    command = "python benchmarks/bench_sents.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    config = str(C.REPO_ROOT / "configs" / "parser.cfg")
    n = args.sentences_per_doc
    epochs = 2 if args.quick else args.epochs
    train_common = ["--training.max_epochs", str(epochs)] + (["--training.eval_frequency", "50"] if args.quick else [])
    test_n = args.test_sentences_per_doc
    jobs = []
    # Our parts: (setting, training sentences per Doc, overrides besides).
    ours = {"structperc": (f"parser.cfg, {n} sentences per doc", n, []),
            "structperc_no_boundary": (f"parser.cfg without boundary features, {n} sentences per doc", n,
                                       ["--components.parser.model.features.boundary=false"]),
            "structperc_one": ("parser.cfg, one sentence per doc", 1, [])}
    for part, (setting, per_doc, more) in ours.items():
        if part in parts:
            jobs.append(("structperc_parser", f"{setting}, {epochs} epochs", "run_structperc",
                         {"paths": paths, "out_dir": str(run_dir / part), "config": config,
                          "overrides": train_common + [f"--corpora.train.sentences_per_doc={per_doc}",
                                                       f"--corpora.dev.sentences_per_doc={per_doc}"] + more,
                          "test_sentences_per_doc": test_n}))
    steps = 100 if args.quick else args.spacy_max_steps
    extra = ["--training.eval_frequency", "50"] if args.quick else ["--training.eval_frequency", "500"]
    for part, pipeline in (("spacy_parser", "tagger,parser"), ("spacy_senter", "senter")):
        if part in parts:
            jobs.append(("spacy", None, "run_spacy",
                         {"paths": paths, "out_dir": str(run_dir / part), "pipeline": pipeline,
                          "max_steps": steps, "sentences_per_doc": n, "test_sentences_per_doc": test_n,
                          "extra": extra}))
    rows: List[Dict[str, Any]] = []
    details: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    for system, setting, func, kwargs in jobs:
        label = f"{system} | {setting or func + ' ' + kwargs.get('pipeline', '')}"
        print(f"{label}", flush=True)
        res = C.run_job(me, func, kwargs, label, run_dir / f"{C.slug(label)}.log", errors)
        if res is None:
            continue
        setting = setting or res["setting"]
        C.show_metrics(setting, res["metrics"], res["seconds"])
        for metric, value in res["metrics"].items():
            if value is not None:
                rows.append(C.make_row(system, setting, metric, value, dataset=DATASET))
        details[f"{system} | {setting}"] = dict(res.get("details", {}), setting=setting,
                                                load_avg_before=res["load_avg_before"],
                                                load_avg_after=res["load_avg_after"],
                                                child_seconds=res["child_seconds"])
    C.save_results(results_path, COMPONENT, rows, details, replace=lambda r: False, errors=errors,
                   command=command, quick=args.quick,
                   notes=["raw text: nlp(text) of EWT test documents of "
                          f"{test_n} consecutive sentences, spaCy's tokenizer; sents_p/r/f by spaCy's scorer",
                          "training documents: consecutive EWT train sentences merged "
                          f"{n} at a time, gold tokens (spacy-structperc.documents_corpus.v1), the same for every system",
                          "predict_wps: gold words per second of nlp.pipe over the test texts, one process; "
                          "the machine is shared: see load_avg_* in the details"])
    print(f"done in {time.time() - t_start:.0f}s", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
