"""Benchmark the assembled English pipeline (configs/pipeline_en.cfg) on raw text.

1. Trains the chunker (configs/chunker.cfg, CoNLL-2000), the clause identifier (configs/clauses.cfg,
   ptb_clauses, over that chunker) and the NER (configs/ner.cfg, CoNLL-2003)
   for ``--epochs`` each, and takes the tagger + parser from ``--tagger-parser`` (a pipeline
   trained with configs/parser.cfg, e.g. by bench_sents.py; trained here when absent), and
   assembles them with configs/pipeline_en.cfg.
2. Robustness: ``nlp(text)`` on the README's example texts and on the raw text of the first
   ``--n-sentences`` (1,000) sentences of the EWT test split, the CoNLL-2000 test file and the
   CoNLL-2003 testb file: the number of errors (the target is 0) and of Docs missing an
   annotation (tags, POS, heads, sentences, chunks, entity IOB).
3. Speed against an ``en_core_web_sm``-style spaCy pipeline trained here: one shared CNN tok2vec
   with tagger, parser and ner (``spacy init config --pipeline tagger,parser,ner --optimize
   efficiency``), trained for ``--spacy-max-steps`` on EWT documents (tags, trees) and CoNLL-2003
   (entities) together, each Doc annotated for its own task only. Both are timed on raw text:
   ``nlp.pipe`` over the EWT test split merged into documents of ten sentences (tokenizer
   included, one process, best of ``--repeats``), and with ``spacy benchmark speed`` on the same
   documents (which times the pipeline's components on pre-tokenized Docs).

    python benchmarks/bench_pipeline.py --quick
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
                   repeats: int, quick: bool) -> Dict[str, Any]:
    import spacy
    from spacy.util import load_config, load_model_from_config

    import spacy_structperc  # noqa: F401

    root, out = Path(data_root), Path(out_dir)
    train_args = ["--training.max_epochs", str(epochs)] + (["--corpora.train.limit", "300", "--corpora.dev.limit", "100"] if quick else [])
    runs = {}
    if not tagger_parser or not Path(tagger_parser).exists():
        ewt = out / "ewt"
        ewt.mkdir(parents=True, exist_ok=True)
        paths = {}
        for split in ("train", "dev"):
            src = C.find_split_file(root / "ud_en_ewt", split, f"*-ud-{split}.conllu")
            paths[split] = ewt / f"{split}.spacy"
            C.conllu_to_docbins(src, {"gold": paths[split]}, limit=1000 if quick else 0)
        runs["tagger_parser"] = C.spacy_train(C.REPO_ROOT / "configs" / "parser.cfg", out / "tagger_parser",
                                              paths["train"], paths["dev"], overrides=train_args)
        tagger_parser = runs["tagger_parser"]["model_dir"]
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
        "paths.tagger_parser": str(tagger_parser), "paths.chunker": runs["chunker"]["model_dir"],
        "paths.clauses": runs["clauses"]["model_dir"], "paths.ner": runs["ner"]["model_dir"]})
    nlp = load_model_from_config(config, auto_fill=True)
    nlp.to_disk(out / "assembled")
    nlp = spacy.load(out / "assembled")
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
    docs_path = ewt_documents(root, out / "ewt_test_docs.spacy", nlp.vocab)
    gold = C.load_docs(docs_path, nlp.vocab)
    n_words = C.count_tokens(gold)
    metrics["raw_wps"] = time_raw(nlp, [d.text for d in gold], n_words, repeats)
    metrics["benchmark_speed_wps"] = benchmark_speed_cli(str(out / "assembled"), docs_path)
    return {"metrics": metrics, "details": {"train": runs, "tagger_parser": str(tagger_parser),
                                            "failures": failures, "pipe_names": nlp.pipe_names}}


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
            "metrics": metrics, "details": {"train": run}}


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
    args = p.parse_args(argv)
    root = (args.data_root or C.default_data_root()).resolve()
    work = args.work_dir.resolve()
    results_dir = (args.results_dir or (work / "quick-results" if args.quick else C.RESULTS_DIR)).resolve()
    run_dir = work / "runs" / ("quick" if args.quick else "full") / COMPONENT
    me = Path(__file__).resolve()
    command = "python benchmarks/bench_pipeline.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    t0 = time.time()
    jobs = [("structperc", "configs/pipeline_en.cfg: tagger, parser, chunker, clauses, ner", "run_structperc",
             {"data_root": str(root), "out_dir": str(run_dir / "structperc"),
              "tagger_parser": "" if args.quick else args.tagger_parser, "epochs": 1 if args.quick else args.epochs,
              "n_sentences": 50 if args.quick else args.n_sentences, "repeats": 1 if args.quick else args.repeats,
              "quick": args.quick}),
            ("spacy", None, "run_spacy",
             {"data_root": str(root), "out_dir": str(run_dir / "spacy"),
              "max_steps": 50 if args.quick else args.spacy_max_steps, "repeats": 1 if args.quick else args.repeats,
              "quick": args.quick})]
    rows, details, errors = [], {}, {}
    for system, setting, func, kwargs in jobs:
        label = f"{system} | {setting or func}"
        print(label, flush=True)
        res = C.run_job(me, func, kwargs, label, run_dir / f"{C.slug(label)}.log", errors)
        if res is None:
            continue
        setting = setting or res["setting"]
        C.show_metrics(setting, res["metrics"], res["seconds"])
        rows += [C.make_row(system, setting, k, v, dataset=DATASET) for k, v in res["metrics"].items() if v is not None]
        details[f"{system} | {setting}"] = dict(res.get("details", {}), load_avg_before=res["load_avg_before"],
                                                load_avg_after=res["load_avg_after"])
    C.save_results(results_dir / f"{COMPONENT}.json", COMPONENT, rows, details, replace=lambda r: False,
                   errors=errors, command=command, quick=args.quick,
                   notes=["raw_wps: gold words per second of nlp.pipe over the raw text of the EWT test split "
                          "in documents of ten sentences (tokenizer included, one process, best of repeats)",
                          "benchmark_speed_wps: the mean of `spacy benchmark speed` on the same documents "
                          "(components only: spaCy's benchmark tokenizes before timing)",
                          "*_errors / *_missing_annotation: over nlp(text) of the first n test sentences of each corpus "
                          "and the README's examples",
                          "the machine is shared (2 cores): see load_avg_* in the details; ratios in one run are fair"])
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
