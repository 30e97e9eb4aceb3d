"""Benchmark structperc_clauses (carreras2003 Table 1 and Fig. 1 shapes) against spaCy's spancat.

One run:

1. upstream: structperc_tagger and structperc_chunker (factory defaults) trained on CoNLL-2000
   (WSJ sections 15-18 and 20: no overlap with ptb_clauses, which is sections 00-01) tag and chunk
   ptb_clauses train/dev/test; a structperc_tagger trained on UD English EWT tags EWT, and the
   same chunker chunks it. Every clause system below reads these predicted tags and chunks;
2. ours: FR-Perceptron, CO-VP and CB-VP, each primal (averaged perceptron) and dual (voted
   kernel perceptron, degree-2 polynomial kernel), trained on ptb_clauses train for --epochs
   (primal) / --dual-epochs, evaluated on dev after every epoch (F1, in the JSON details); the
   best dev epoch's model is evaluated on test (Table 1);
3. peer: spaCy's spancat (`spacy init config --pipeline spancat`, efficiency; TAG added to the
   tok2vec's attributes so it sees the same predicted tags; n-gram suggester of 1-40 tokens,
   which covers 97% of the training clauses) trained with `spacy train` for --spancat-steps;
4. EWT: clauses derived from UD English EWT by the UD rule (spacy_structperc.clauses.ud),
   FR-Perceptron (primal and dual) with predicted tags and chunks, best dev epoch, test F1.

Rows go to benchmarks/results/clauses.json (metrics clauses_p/r/f, train_seconds, predict_wps,
peak_rss_mb; "setting": "default" is the component's default: FR, primal).

Retired, being finished (the curves and figure stay; docs/benchmarks.md): the Fig. 1 filter
measurements per dev epoch and their plot ``clauses_fig1.png``.

    python benchmarks/bench_clauses.py              # everything
    python benchmarks/bench_clauses.py --quick      # smoke run on slices
    python benchmarks/bench_clauses.py --only ours,ewt
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "clauses"
OURS = "structperc_clauses"
DATASET = "ptb_clauses"
METHODS = {"fr": "FR-Perceptron", "co": "CO-VP", "cb": "CB-VP"}
FORMS = {"primal": "primal", "dual": "dual, poly degree 2"}
QUICK = {"train": 400, "dev": 100, "test": 100, "conll2000": 1000, "ewt": 500}
NOTES = [
    "ptb_clauses: CoNLL-2001 clause rules applied to the Penn Treebank sample (WSJ 00-01); train "
    "3,183 / dev 326 / test 405 sentences. Not the CoNLL-2001 data (not available): carreras2003's "
    "85.03 F1 is on a different, larger corpus.",
    "Predicted tags and chunks everywhere: structperc_tagger and structperc_chunker trained on "
    "CoNLL-2000 (no overlap with ptb_clauses); EWT: a structperc_tagger trained on EWT train, the same chunker.",
    "clauses_p/r/f: exact-span clause precision / recall / F1 (the CoNLL-2001 measure), as fractions.",
    "Ours: best epoch on dev (Table 1's T), scored on test; train_seconds: the whole training loop "
    "(all epochs run, without the per-epoch dev evaluations); predict_wps: test words / seconds of "
    "the clause component alone (nlp.pipe, one process, batch 1000) on tagged and chunked Docs.",
    "spancat: spaCy's efficiency config with TAG in the tok2vec, n-gram suggester 1-40, bounded "
    "steps (stated in the setting); train_seconds is the whole spacy train command.",
    "Children run with one thread; the machine is shared (load averages in details).",
]


# ---------------------------------------------------------------------------------------------
# Upstream: tagger + chunker, and the annotated corpora


def _train_pipe(factory: str, examples, epochs: int, config=None):
    import spacy
    nlp = spacy.blank("en")
    nlp.add_pipe(factory, config=config or {})
    C.train_epochs(nlp, examples, epochs)
    return nlp


def prepare(data: Dict[str, str], out_dir: str, limits: Dict[str, int], tagger_epochs: int,
            chunker_epochs: int) -> Dict[str, Any]:
    """Train the upstream tagger and chunker; write tagged and chunked ptb_clauses / EWT DocBins
    (predicted tags and chunks, gold clauses in doc.spans["clauses"])."""
    import spacy
    from spacy.tokens import Doc, DocBin, Span
    from spacy.training import Example

    from spacy_structperc.clauses.conll2001 import conll2001_docs
    from spacy_structperc.clauses.ud import conllu_clause_docs
    from spacy_structperc.readers import conll2000_docs, predicted_copy

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("en").vocab
    conll = conll2000_docs(vocab, data["conll2000"], limit=limits.get("conll2000", 0))
    words_only = lambda d: Doc(vocab, words=[t.text for t in d])
    details: Dict[str, Any] = {}
    with C.Timer() as t:
        tagger = _train_pipe("structperc_tagger", [Example(words_only(d), d) for d in conll], tagger_epochs)
        chunker = _train_pipe("structperc_chunker", [Example(predicted_copy(vocab, d), d) for d in conll],
                              chunker_epochs)
    details["wsj_upstream_seconds"] = t.seconds
    ewt_gold = {}
    for split in ("train", "dev", "test"):
        ewt_gold[split] = conllu_clause_docs(vocab, data[f"ewt_{split}"], limit=limits.get("ewt", 0))
    with C.Timer() as t:
        ewt_tagger = _train_pipe("structperc_tagger", [Example(words_only(d), d) for d in ewt_gold["train"]],
                                 tagger_epochs)
    details["ewt_tagger_seconds"] = t.seconds

    def annotate(golds, tag_nlp, name):
        inputs = [Doc(tag_nlp.vocab, words=[t.text for t in g], spaces=[bool(t.whitespace_) for t in g]) for g in golds]
        tagged = list(tag_nlp.pipe(inputs, batch_size=1000))
        chunked = list(chunker.pipe([Doc(chunker.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d])
                                     for d in tagged], batch_size=1000))
        db = DocBin(store_user_data=False)
        correct = total = 0
        for gold, doc in zip(golds, chunked):
            out_doc = Doc(vocab, words=[t.text for t in doc], tags=[t.tag_ for t in doc])
            out_doc.spans["chunks"] = [Span(out_doc, s.start, s.end, label=s.label_) for s in doc.spans["chunks"]]
            out_doc.spans["clauses"] = [Span(out_doc, s.start, s.end, label="S") for s in gold.spans["clauses"]]
            correct += sum(a.tag_ == b.tag_ for a, b in zip(doc, gold))
            total += len(doc)
            db.add(out_doc)
        db.to_disk(out / f"{name}.spacy")
        details[f"{name}_tag_acc"] = correct / max(1, total)
        details[f"{name}_clauses"] = sum(len(g.spans["clauses"]) for g in golds)

    for split in ("train", "dev", "test"):
        golds = conll2001_docs(vocab, data[f"ptb_{split}"], limit=limits.get(split, 0))
        annotate(golds, tagger, f"ptb_{split}")
        annotate(ewt_gold[split], ewt_tagger, f"ewt_{split}")
    return {"metrics": {}, "details": details}


# ---------------------------------------------------------------------------------------------
# Ours


def _inputs(docs, vocab):
    from spacy.tokens import Doc, Span
    out = []
    for d in docs:
        doc = Doc(vocab, words=[t.text for t in d], tags=[t.tag_ for t in d])
        doc.spans["chunks"] = [Span(doc, s.start, s.end, label=s.label_) for s in d.spans["chunks"]]
        out.append(doc)
    return out


def _score(preds, golds) -> Dict[str, float]:
    from spacy.training import Example
    from spacy_structperc.clauses.scorer import score_clauses
    s = score_clauses([Example(p, g) for p, g in zip(preds, golds)])
    return {"clauses_f": s["spans_clauses_f"], "clauses_p": s["spans_clauses_p"], "clauses_r": s["spans_clauses_r"]}


def _load(path, vocab):
    from spacy.tokens import DocBin
    return list(DocBin().from_disk(path).get_docs(vocab))


def run_structperc(work: str, corpus: str, method: str, form: str, epochs: int, predict_repeats: int = 1,
                   seed: int = 0) -> Dict[str, Any]:
    import spacy
    from spacy.training import Example

    import spacy_structperc  # noqa: F401

    nlp = spacy.blank("en")
    pipe = nlp.add_pipe(OURS, config={"method": method, "model": {"form": form}})
    train_gold = _load(Path(work) / f"{corpus}_train.spacy", nlp.vocab)
    dev_gold = _load(Path(work) / f"{corpus}_dev.spacy", nlp.vocab)
    test_gold = _load(Path(work) / f"{corpus}_test.spacy", nlp.vocab)
    examples = [Example(i, g) for i, g in zip(_inputs(train_gold, nlp.vocab), train_gold)]
    curve: List[Dict[str, Any]] = []
    best: Dict[str, Any] = {}

    def after(epoch, losses, seconds):   # dev F1 after every pass; the best pass's model is kept
        preds = list(pipe.pipe(_inputs(dev_gold, nlp.vocab), batch_size=1000))
        curve.append({"epoch": epoch, **_score(preds, dev_gold), "errors": losses.get(OURS, 0.0),
                      "epoch_seconds": seconds})
        print(f"[{OURS} {method}/{form}] epoch {epoch}: dev F1 {curve[-1]['clauses_f']:.4f} "
              f"({seconds:.1f}s)", flush=True)
        if not best or curve[-1]["clauses_f"] > best["point"]["clauses_f"]:
            best.update(point=curve[-1], bytes=pipe.to_bytes(exclude=["vocab"]))

    train_seconds = C.train_epochs(nlp, examples, epochs, seed=seed, update=pipe.update, after=after)
    pipe.from_bytes(best["bytes"], exclude=["vocab"])
    pipe.model.average()   # as a saved and loaded pipeline scores (C.materialize_averages sees one table)
    preds, wps, seconds = C.time_pipe_best_of(pipe, lambda: _inputs(test_gold, nlp.vocab),
                                              C.count_tokens(test_gold), predict_repeats)
    metrics = _score(preds, test_gold)
    metrics.update({"train_seconds": train_seconds, "predict_wps": wps})
    dev = {k: best["point"][k] for k in ("clauses_f", "clauses_p", "clauses_r")}
    return {"metrics": metrics, "dev": dev,
            "details": {"best_epoch": best["point"]["epoch"], "epochs": epochs, "curve": curve, "dev": dev,
                        "model_bytes": len(best["bytes"]), "predict_seconds": seconds}}


# ---------------------------------------------------------------------------------------------
# spaCy spancat


def run_spancat(work: str, out_dir: str, steps: int, max_size: int = 40, predict_repeats: int = 1) -> Dict[str, Any]:
    import subprocess

    import spacy
    from spacy.tokens import DocBin, Span

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("en").vocab
    for split in ("train", "dev"):
        db = DocBin()
        for doc in _load(Path(work) / f"ptb_{split}.spacy", vocab):
            doc.spans["sc"] = list(doc.spans["clauses"])
            del doc.spans["chunks"]
            db.add(doc)
        db.to_disk(out / f"{split}.spacy")
    config = out / "config.cfg"
    subprocess.run([sys.executable, "-m", "spacy", "init", "config", str(config), "--lang", "en",
                    "--pipeline", "spancat", "--optimize", "efficiency", "--force"],
                   check=True, stdout=subprocess.DEVNULL, env=C.child_env())
    cfg = spacy.util.load_config(config)
    embed = cfg["components"]["tok2vec"]["model"]["embed"]
    embed["attrs"] = list(embed["attrs"]) + ["TAG"]
    embed["rows"] = list(embed["rows"]) + [1000]
    cfg["components"]["spancat"]["suggester"] = {"@misc": "spacy.ngram_range_suggester.v1",
                                                 "min_size": 1, "max_size": max_size}
    cfg.to_disk(config)
    overrides = ["--corpora.train.gold_preproc", "true", "--corpora.dev.gold_preproc", "true",
                 "--training.max_steps", str(steps), "--training.eval_frequency", str(max(100, steps // 5))]
    run = C.spacy_train(config, out / "model", out / "train.spacy", out / "dev.spacy", overrides=overrides,
                        log_path=out / "train.log")
    nlp = spacy.load(run["model_dir"])
    test_gold = _load(Path(work) / "ptb_test.spacy", nlp.vocab)

    def inputs():
        from spacy.tokens import Doc
        return [Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]) for d in test_gold]

    preds, wps, seconds = C.time_pipe_best_of(nlp, inputs, C.count_tokens(test_gold), predict_repeats)
    for doc in preds:
        doc.spans["clauses"] = [Span(doc, s.start, s.end, label="S") for s in doc.spans.get("sc", [])]
    metrics = _score(preds, test_gold)
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps})
    return {"setting": f"efficiency cfg + TAG, ngrams 1-{max_size}, {run['steps']} steps", "metrics": metrics,
            "details": {"train": run, "overrides": overrides}}


# ---------------------------------------------------------------------------------------------
# Main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", type=Path, default=None, help="folder of corpora (default ../shared/data)")
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="ours,spancat,ewt", help="comma-separated: ours, spancat, ewt")
    p.add_argument("--epochs", type=int, default=20, help="primal epochs (best on dev is kept)")
    p.add_argument("--dual-epochs", type=int, default=10)
    p.add_argument("--tagger-epochs", type=int, default=5)
    p.add_argument("--chunker-epochs", type=int, default=8)
    p.add_argument("--spancat-steps", type=int, default=1500)
    p.add_argument("--predict-repeats", type=int, default=3)
    p.add_argument("--methods", default="fr,co,cb", help="ours: which of fr, co, cb")
    p.add_argument("--forms", default="primal,dual", help="ours and EWT: primal, dual")
    p.add_argument("--reuse-prepared", action="store_true", help="keep the tagged corpora of an earlier run")
    args = p.parse_args(argv)
    root = args.data_root or C.default_data_root()
    data = {"conll2000": str(root / "conll2000" / "train.txt")}
    for split in ("train", "dev", "test"):
        data[f"ptb_{split}"] = str(root / "ptb_clauses" / f"{split}.txt")
        data[f"ewt_{split}"] = str(root / "ud_en_ewt" / f"en_ewt-ud-{split}.conllu")
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    limits = dict(QUICK) if args.quick else {}
    epochs, dual_epochs = (2, 2) if args.quick else (args.epochs, args.dual_epochs)
    steps = 100 if args.quick else args.spancat_steps
    run_dir = args.work_dir.resolve() / "runs" / ("quick" if args.quick else "full") / COMPONENT
    work = run_dir / "corpus"
    results_dir = (args.work_dir.resolve() / "quick-results") if args.quick else C.RESULTS_DIR
    results_path = results_dir / f"{COMPONENT}.json"
    me = Path(__file__).resolve()
    command = "python benchmarks/bench_clauses.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    t_start = time.time()
    errors: Dict[str, str] = {}
    new_rows, details = [], {}

    prepared = run_dir / "logs" / "prepare.out.json"
    if args.reuse_prepared and (work / "ewt_test.spacy").exists() and prepared.exists():
        import json
        details["upstream"] = json.loads(prepared.read_text())["details"]
        print(f"[prepare] reusing {work}: {details['upstream']}", flush=True)
    else:
        print("[prepare] upstream tagger + chunker", flush=True)
        res = C.run_job(me, "prepare", {"data": data, "out_dir": str(work), "limits": limits,
                                        "tagger_epochs": args.tagger_epochs, "chunker_epochs": args.chunker_epochs},
                        "prepare", run_dir / "logs" / "prepare.log", errors)
        if res is None:
            return 1
        details["upstream"] = res["details"]
        print(f"  {res['details']}", flush=True)

    def save(rows, run_details, run_errors):
        # After every job: a run cut short keeps what it measured.
        done = {(r["system"], r["setting"]) for r in rows}
        C.save_results(results_path, COMPONENT, rows, run_details, lambda r: (r["system"], r["setting"]) in done,
                       run_errors, command=command, quick=bool(args.quick), notes=NOTES,
                       epochs={"primal": epochs, "dual": dual_epochs}, spancat_steps=steps,
                       upstream_epochs={"tagger": args.tagger_epochs, "chunker": args.chunker_epochs})

    jobs = []
    if "ours" in only:
        for form, n_epochs in (("primal", epochs), ("dual", dual_epochs)):
            if form not in args.forms.split(","):
                continue
            for method in (m for m in METHODS if m in args.methods.split(",")):
                jobs.append((OURS, f"{METHODS[method]}, {FORMS[form]}", "ptb", "run_structperc",
                             {"work": str(work), "corpus": "ptb", "method": method, "form": form,
                              "epochs": n_epochs, "predict_repeats": args.predict_repeats}))
    ewt = [(OURS, f"EWT-derived, {METHODS['fr']}, {FORMS[form]}", "ewt", "run_structperc",
            {"work": str(work), "corpus": "ewt", "method": "fr", "form": form, "epochs": n_epochs,
             "predict_repeats": 1})
           for form, n_epochs in (("primal", epochs), ("dual", dual_epochs))
           if form in args.forms.split(",")] if "ewt" in only else []
    # The slowest job (dual on EWT) last.
    jobs += ewt[:1]
    if "spancat" in only:
        jobs.append(("spacy_spancat", None, "ptb", "run_spancat",
                     {"work": str(work), "out_dir": str(run_dir / "spancat"), "steps": steps,
                      "predict_repeats": 1}))
    jobs += ewt[1:]
    for n, (system, setting, corpus, func, kwargs) in enumerate(jobs, 1):
        label = f"{system} | {setting or func}"
        print(f"[{n}/{len(jobs)}] {label}", flush=True)
        res = C.run_job(me, func, kwargs, label, run_dir / "logs" / f"{C.slug(label)}.log", errors)
        if res is None:
            continue
        setting = setting or res["setting"]
        dataset = "ud_en_ewt (UD-rule clauses)" if corpus == "ewt" else DATASET
        settings = [setting] + (["default"] if setting == f"{METHODS['fr']}, {FORMS['primal']}" else [])
        for s in settings:
            for metric, value in res["metrics"].items():
                new_rows.append(C.make_row(system, s, metric, value, dataset=dataset, split="test"))
            for metric, value in (res.get("dev") or {}).items():
                new_rows.append(C.make_row(system, s, metric, value, dataset=dataset, split="dev"))
        details[label] = dict(res.get("details", {}), corpus=corpus, setting=setting, date=C.now_iso(),
                              load_avg_before=res["load_avg_before"], load_avg_after=res["load_avg_after"])
        C.show_metrics(setting, res["metrics"], res["seconds"])
        save(new_rows, details, errors)

    print(f"done in {time.time() - t_start:.0f}s" + (f"; failed: {sorted(errors)}" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
