"""Benchmark the assembled English pipeline (configs/pipeline_en.cfg) on raw text.

1. Trains the chunker (configs/chunker.cfg, CoNLL-2000), the clause identifier (configs/clauses.cfg,
   ptb_clauses, over that chunker) and the NER (configs/ner.cfg, CoNLL-2003)
   for ``--epochs`` each, and the universal POS tagger (configs/pos.cfg, its own 10 epochs, on
   tags jackknifed over five folds of configs/tagger.cfg taggers) behind the tagger of ``--tagger-parser`` (a pipeline trained with configs/parser.cfg, e.g. by
   bench_sents.py; trained here when absent), and assembles them with configs/pipeline_en.cfg.
2. Accuracy on the EWT test split, gold tokens, one Doc per sentence (as ``spacy evaluate
   --gold-preproc``): ``token.tag_``, ``token.pos_``, heads and labels as the assembled pipeline
   sets them (``ud_en_ewt_tag_acc``, ``_pos_acc``, ``_uas``, ``_las``).
3. Robustness: ``nlp(text)`` on the README's example texts and on the raw text of the first
   ``--n-sentences`` (1,000) sentences of the EWT test split, the CoNLL-2000 test file and the
   CoNLL-2003 testb file: the number of errors (the target is 0) and of Docs missing an
   annotation (tags, POS, heads, sentences, chunks, entity IOB).
4. Speed against an ``en_core_web_sm``-style spaCy pipeline trained here: one shared CNN tok2vec
   with tagger, parser and ner (``spacy init config --pipeline tagger,parser,ner --optimize
   efficiency``), trained for ``--spacy-max-steps`` on EWT documents (tags, trees) and CoNLL-2003
   (entities) together, each Doc annotated for its own task only. Both are timed on raw text:
   ``nlp.pipe`` over the EWT test split merged into documents of ten sentences (tokenizer
   included, one process, best of ``--repeats``), and with ``spacy benchmark speed`` on the same
   documents (which times the pipeline's components on pre-tokenized Docs).

5. Load: ``spacy.load`` of each pipeline in a fresh process (_speed.py's ``measure_load``),
   ours and spaCy's alternately, ``--load-repeats`` times each: the best load time (imports
   apart), the median RSS right after the load, and the pipeline's size on disk.

``--pipeline DIR`` benchmarks an assembled pipeline instead of training one (the one
``spacy project run all`` builds: training/pipeline_en).

    python benchmarks/bench_pipeline.py --quick
    python benchmarks/bench_pipeline.py --pipeline training/pipeline_en
    python benchmarks/bench_pipeline.py --tagger-parser benchmarks/.work/runs/full/sents/structperc/model/model-best
"""
from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import _speed as S  # noqa: E402

COMPONENT = "pipeline"
DATASET = "ud_en_ewt+conll2000+conll2003"
README_TEXTS = [
    "I went home. Then I slept.",
    "Apple is looking at buying a U.K. startup for $1 billion, the company said in London on Monday.",
    "The quick brown fox jumped over the lazy dog.",
    "Confidence in the pound is widely expected to take another sharp dive if trade figures fail to show a substantial improvement.",
]


def corpus_texts(data_root: Path, n: int) -> Dict[str, List[str]]:
    """The raw text of the first n sentences of each corpus's test split (CoNLL files: words
    joined by spaces)."""
    from spacy_structperc.readers import read_conll2000, read_conll2003

    sys.path.insert(0, str(C.REPO_ROOT / "tests"))
    from conllu_data import read_conllu

    ewt = read_conllu(C.find_split_file(data_root / "ud_en_ewt", "test", "*-ud-test.conllu"), limit=n)
    return {
        "ud_en_ewt": [d.text for d in ewt],
        "conll2000": [" ".join(words) for words, _, _ in read_conll2000(data_root / "conll2000" / "test.txt")[:n]],
        "conll2003": [" ".join(s.words) for s in read_conll2003(data_root / "conll2003" / "eng.testb")[:n]],
    }


def missing_annotation(doc) -> List[str]:
    if not len(doc):
        return []
    out = [a for a in ("TAG", "POS", "DEP", "SENT_START", "ENT_IOB") if not doc.has_annotation(a)]
    if "chunks" not in doc.spans:
        out.append("chunks")
    return out


def ewt_documents(data_root: Path, out: Path, vocab) -> Path:
    from spacy.tokens import DocBin

    from spacy_structperc.documents import merge_sentences

    sys.path.insert(0, str(C.REPO_ROOT / "tests"))
    from conllu_data import read_conllu

    docs = list(merge_sentences(read_conllu(C.find_split_file(data_root / "ud_en_ewt", "test", "*-ud-test.conllu")), 10))
    DocBin(docs=docs).to_disk(out)
    return out


def benchmark_speed_cli(model: str, data: Path) -> float:
    """Mean words/s that `spacy benchmark speed` reports."""
    run = subprocess.run([sys.executable, "-m", "spacy", "benchmark", "speed", model, str(data), "--batch-size", "16", "--batches", "30",
                          "--warmup", "1"], capture_output=True, text=True, env=C.child_env(), cwd=C.REPO_ROOT)
    if run.returncode != 0:
        raise RuntimeError(run.stdout + run.stderr)
    match = re.search(r"Mean:\s*([\d.,]+)\s*words/s", run.stdout.replace("\x1b", ""))
    if not match:
        raise RuntimeError("no 'Mean: ... words/s' in: " + run.stdout)
    return float(match.group(1).replace(",", ""))


def time_raw(nlp, texts: List[str], n_words: int, repeats: int) -> float:
    C.materialize_averages(nlp)
    list(nlp.pipe(texts[:20]))
    best = float("inf")
    for _ in range(repeats):
        with C.Timer() as t:
            for _ in nlp.pipe(texts, batch_size=256):
                pass
        best = min(best, t.seconds)
    return n_words / best


def run_structperc(data_root: str, out_dir: str, tagger_parser: str, epochs: int, n_sentences: int,
                   repeats: int, quick: bool, pipeline: str = "") -> Dict[str, Any]:
    import spacy

    import spacy_structperc  # noqa: F401

    root, out = Path(data_root), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs: Dict[str, Any] = {}
    if pipeline:
        model_dir = Path(pipeline)
    else:
        model_dir = out / "assembled"
        runs = train_and_assemble(root, out, tagger_parser, epochs, quick, model_dir)
    nlp = spacy.load(model_dir)
    texts = corpus_texts(root, n_sentences)
    texts["readme"] = README_TEXTS
    metrics: Dict[str, Any] = {}
    failures: Dict[str, List[str]] = {}
    for name, batch in texts.items():
        errors = missing = 0
        for text in batch:
            try:
                doc = nlp(text)
            except Exception as e:  # counted: the target is none
                errors += 1
                failures.setdefault(name, []).append(f"{type(e).__name__}: {e}"[:300])
                continue
            missing += bool(missing_annotation(doc))
        metrics[f"{name}_texts"] = len(batch)
        metrics[f"{name}_errors"] = errors
        metrics[f"{name}_missing_annotation"] = missing
    metrics.update(ewt_accuracy(nlp, root, out))
    docs_path = ewt_documents(root, out / "ewt_test_docs.spacy", nlp.vocab)
    gold = C.load_docs(docs_path, nlp.vocab)
    n_words = C.count_tokens(gold)
    metrics["raw_wps"] = time_raw(nlp, [d.text for d in gold], n_words, repeats)
    metrics["benchmark_speed_wps"] = benchmark_speed_cli(str(model_dir), docs_path)
    return {"metrics": metrics, "details": {"train": runs, "model_dir": str(model_dir), "failures": failures,
                                            "pipe_names": nlp.pipe_names}}


def ewt_accuracy(nlp, root: Path, out: Path) -> Dict[str, float]:
    """The pipeline's tags, universal POS, heads and labels on the EWT test split: gold tokens,
    one Doc per sentence, in % (what `spacy evaluate --gold-preproc` reports)."""
    path = out / "ewt_test.spacy"
    C.conllu_to_docbins(C.find_split_file(root / "ud_en_ewt", "test", "*-ud-test.conllu"), {"gold": path})
    gold = C.load_docs(path, nlp.vocab)
    scores = nlp.evaluate(C.examples(C.unannotated_copies(gold, nlp.vocab), gold))
    return {f"ud_en_ewt_{name}": round(100 * scores[key], 2) for name, key in
            (("tag_acc", "tag_acc"), ("pos_acc", "pos_acc"), ("uas", "dep_uas"), ("las", "dep_las"))}


def train_and_assemble(root: Path, out: Path, tagger_parser: str, epochs: int, quick: bool,
                       model_dir: Path) -> Dict[str, Any]:
    """Train the chunker, clause identifier and NER (and the tagger + parser when tagger_parser
    is not a trained pipeline), the universal POS tagger behind that tagger, and assemble them
    with configs/pipeline_en.cfg in model_dir."""
    from spacy.util import load_config, load_model_from_config

    train_args = ["--training.max_epochs", str(epochs)] + (["--corpora.train.limit", "300", "--corpora.dev.limit", "100"] if quick else [])
    runs: Dict[str, Any] = {}
    # EWT train and dev, one Doc per sentence: for the tagger + parser when trained here, and pos.cfg.
    ewt = out / "ewt"
    splits = {}
    for split in ("train", "dev"):
        splits[split] = ewt / f"{split}.spacy"
        C.conllu_to_docbins(C.find_split_file(root / "ud_en_ewt", split, f"*-ud-{split}.conllu"),
                            {"gold": splits[split]}, limit=1000 if quick else 0)
    if not tagger_parser or not Path(tagger_parser).exists():
        runs["tagger_parser"] = C.spacy_train(C.REPO_ROOT / "configs" / "parser.cfg", out / "tagger_parser",
                                              splits["train"], splits["dev"], overrides=train_args)
        tagger_parser = runs["tagger_parser"]["model_dir"]
    # pos.cfg trains on the training split's tags jackknifed over five folds (as project.yml's
    # jackknife-tags makes them, with tagger.cfg's own budget here).
    jackknifed = ewt / "train.jackknifed.spacy"
    subprocess.run([sys.executable, "-m", "spacy_structperc", "jackknife", str(C.REPO_ROOT / "configs" / "tagger.cfg"),
                    str(splits["train"]), str(jackknifed), "--folds", "5", "--paths.dev", str(splits["dev"]),
                    *(train_args if quick else [])], check=True, env=C.child_env(), cwd=C.REPO_ROOT,
                   stdout=subprocess.DEVNULL)
    pos_args = ["--paths.tagger", str(tagger_parser)] + (train_args if quick else [])
    runs["pos"] = C.spacy_train(C.REPO_ROOT / "configs" / "pos.cfg", out / "pos", jackknifed, splits["dev"],
                                overrides=pos_args)
    runs["chunker"] = C.spacy_train(C.REPO_ROOT / "configs" / "chunker.cfg", out / "chunker",
                                    root / "conll2000" / "train.txt", root / "conll2000" / "train.txt",
                                    overrides=train_args)
    # clauses.cfg sources the chunker just trained; only its clause identifier is taken.
    runs["clauses"] = C.spacy_train(C.REPO_ROOT / "configs" / "clauses.cfg", out / "clauses",
                                    root / "ptb_clauses" / "train.txt", root / "ptb_clauses" / "dev.txt",
                                    overrides=train_args + ["--paths.chunker", runs["chunker"]["model_dir"]])
    runs["ner"] = C.spacy_train(C.REPO_ROOT / "configs" / "ner.cfg", out / "ner", root / "conll2003" / "eng.train",
                                root / "conll2003" / "eng.testa", overrides=train_args)
    config = load_config(C.REPO_ROOT / "configs" / "pipeline_en.cfg", interpolate=False, overrides={
        "paths.tagger_parser": str(tagger_parser), "paths.pos": runs["pos"]["model_dir"],
        "paths.chunker": runs["chunker"]["model_dir"],
        "paths.clauses": runs["clauses"]["model_dir"], "paths.ner": runs["ner"]["model_dir"]})
    load_model_from_config(config, auto_fill=True).to_disk(model_dir)
    runs["tagger_parser_dir"] = str(tagger_parser)
    return runs


def run_spacy(data_root: str, out_dir: str, max_steps: int, repeats: int, quick: bool) -> Dict[str, Any]:
    import spacy
    from spacy.tokens import DocBin

    from spacy_structperc.documents import merge_sentences
    from spacy_structperc.readers import ner_docs

    root, out = Path(data_root), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(C.REPO_ROOT / "tests"))
    from conllu_data import read_conllu

    nlp = spacy.blank("en")
    limit = 1000 if quick else None
    paths = {}
    for split, ner_part in (("train", "eng.train"), ("dev", "eng.testa")):
        ewt = read_conllu(C.find_split_file(root / "ud_en_ewt", split, f"*-ud-{split}.conllu"), limit=limit)
        # Entities only: no tags, heads or sentence starts, so the tagger and parser skip them.
        conll = ner_docs(nlp.vocab, root / "conll2003" / ner_part, reader="spacy-structperc.conll2003_reader.v1",
                         pos=False, limit=limit or 0)
        paths[split] = out / f"{split}.spacy"
        DocBin(docs=list(merge_sentences(ewt, 10)) + conll).to_disk(paths[split])
    config_path = out / "config.cfg"
    subprocess.run([sys.executable, "-m", "spacy", "init", "config", str(config_path), "--lang", "en",
                    "--pipeline", "tagger,parser,ner", "--optimize", "efficiency", "--force"],
                   check=True, stdout=subprocess.DEVNULL, env=C.child_env())
    run = C.spacy_train(config_path, out / "model", paths["train"], paths["dev"],
                        overrides=["--training.max_steps", str(max_steps), "--training.eval_frequency",
                                   str(max(50, max_steps // 4))])
    nlp = spacy.load(run["model_dir"])
    docs_path = ewt_documents(root, out / "ewt_test_docs.spacy", nlp.vocab)
    gold = C.load_docs(docs_path, nlp.vocab)
    metrics = {"raw_wps": time_raw(nlp, [d.text for d in gold], C.count_tokens(gold), repeats),
               "benchmark_speed_wps": benchmark_speed_cli(run["model_dir"], docs_path),
               "train_seconds": run["seconds"]}
    return {"setting": f"tagger+parser+ner, shared tok2vec, efficiency cfg, {run['steps']} steps",
            "metrics": metrics, "details": {"train": run, "model_dir": run["model_dir"]}}


def measure_loads(models: Dict[str, str], repeats: int, run_dir: Path, errors: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """spacy.load of each system's pipeline in fresh processes, the systems alternating:
    {system: {load_seconds (best), import_seconds (best), rss_after_load_mb (median), disk_mb}}."""
    loads: Dict[str, List[Dict[str, Any]]] = {system: [] for system in models}
    for i in range(repeats):
        for system, model_dir in models.items():
            label = f"load {system} ({i + 1})"
            res = C.run_job(S.SCRIPT, "measure_load", {"model_dir": model_dir, "plugin": system == "structperc"},
                            label, run_dir / f"{C.slug(label)}.log", errors)
            if res:
                loads[system].append(res["metrics"])
    return {system: dict(S.load_summary(rows), disk_mb=C.dir_bytes(Path(models[system])) / 1e6)
            for system, rows in loads.items() if rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", type=Path, default=None)
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--results-dir", type=Path, default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tagger-parser", default=str(C.DEFAULT_WORK_DIR / "runs" / "full" / "sents" / "structperc" / "model" / "model-best"))
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--spacy-max-steps", type=int, default=1000)
    p.add_argument("--n-sentences", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--load-repeats", type=int, default=3)
    p.add_argument("--pipeline", default="", help="an assembled pipeline to benchmark instead of training one")
    p.add_argument("--label", default="", help="how the rows name the --pipeline (e.g. how it was trained)")
    args = p.parse_args(argv)
    root = (args.data_root or C.default_data_root()).resolve()
    work = args.work_dir.resolve()
    results_dir = (args.results_dir or (work / "quick-results" if args.quick else C.RESULTS_DIR)).resolve()
    run_dir = work / "runs" / ("quick" if args.quick else "full") / COMPONENT
    me = Path(__file__).resolve()
    command = "python benchmarks/bench_pipeline.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    t0 = time.time()
    ours = "configs/pipeline_en.cfg: tagger, upos, parser, chunker, clauses, ner"
    if args.pipeline:
        ours += f" ({args.label or 'as given by --pipeline'})"
    jobs = [("structperc", ours, "run_structperc",
             {"data_root": str(root), "out_dir": str(run_dir / "structperc"),
              "tagger_parser": "" if args.quick else args.tagger_parser, "epochs": 1 if args.quick else args.epochs,
              "n_sentences": 50 if args.quick else args.n_sentences, "repeats": 1 if args.quick else args.repeats,
              "quick": args.quick, "pipeline": str(Path(args.pipeline).resolve()) if args.pipeline else ""}),
            ("spacy", None, "run_spacy",
             {"data_root": str(root), "out_dir": str(run_dir / "spacy"),
              "max_steps": 50 if args.quick else args.spacy_max_steps, "repeats": 1 if args.quick else args.repeats,
              "quick": args.quick})]
    rows, details, errors = [], {}, {}
    settings, models = {}, {}
    for system, setting, func, kwargs in jobs:
        label = f"{system} | {setting or func}"
        print(label, flush=True)
        res = C.run_job(me, func, kwargs, label, run_dir / f"{C.slug(label)}.log", errors)
        if res is None:
            continue
        setting = setting or res["setting"]
        settings[system], models[system] = setting, res["details"]["model_dir"]
        C.show_metrics(setting, res["metrics"], res["seconds"])
        rows += [C.make_row(system, setting, k, v, dataset=DATASET) for k, v in res["metrics"].items() if v is not None]
        details[f"{system} | {setting}"] = dict(res.get("details", {}), load_avg_before=res["load_avg_before"],
                                                load_avg_after=res["load_avg_after"])
    for system, metrics in measure_loads(models, 1 if args.quick else args.load_repeats, run_dir, errors).items():
        C.show_metrics(settings[system] + " (load)", metrics, 0.0)
        rows += [C.make_row(system, settings[system], k, v, dataset=DATASET) for k, v in metrics.items()]
    # Every run measures both systems again: it replaces the file's rows and details.
    C.save_results(results_dir / f"{COMPONENT}.json", COMPONENT, rows, details, replace=lambda r: True,
                   drop_detail=lambda k: True, errors=errors, command=command, quick=args.quick,
                   notes=["raw_wps: gold words per second of nlp.pipe over the raw text of the EWT test split "
                          "in documents of ten sentences (tokenizer included, one process, best of repeats)",
                          "benchmark_speed_wps: the mean of `spacy benchmark speed` on the same documents "
                          "(components only: spaCy's benchmark tokenizes before timing)",
                          "ud_en_ewt_{tag_acc,pos_acc,uas,las}: the pipeline on the EWT test split, gold tokens, "
                          "one Doc per sentence (spacy evaluate --gold-preproc), in %",
                          "*_errors / *_missing_annotation: over nlp(text) of the first n test sentences of each corpus "
                          "and the README's examples",
                          "load_seconds: spacy.load in a fresh process, best of --load-repeats, imports apart "
                          "(import_seconds); rss_after_load_mb: the median RSS right after it; disk_mb: the "
                          "pipeline directory",
                          "the machine is shared (2 cores): see load_avg_* in the details; ratios in one run are fair"])
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
