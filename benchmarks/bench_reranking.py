"""Benchmark k-best reranking (collins2001) on top of the beam parser and the chunker.

Stages (each cached under ``benchmarks/.work/rerank/``, so learners can be iterated without
re-training or re-parsing):

1. ``base``: jackknifed base pipelines (structperc_tagger + structperc_parser,
   ``configs/parser_beam.cfg``) trained with ``spacy train`` on all but one of ``--folds`` folds
   of UD English EWT train, and one on all of train (for dev and test);
2. ``kbest``: each training sentence parsed by the pipeline that did not see its fold, dev and
   test by the full pipeline (predicted tags throughout); the k-best lists of the beam are cached;
3. ``rerank``: global features, each learner trained on the jackknifed lists, evaluated on test.

Example (from the repo root)::

    python benchmarks/bench_reranking.py --only base      # the heavy part, in the background
    python benchmarks/bench_reranking.py                  # everything that is not cached yet
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_parser import prepare_data  # noqa: E402  (the same EWT DocBins as the parser benchmark)

DATASET = "ud_en_ewt"
OURS = "structperc_parser"
BASE_CONFIG = "parser_beam.cfg"
NOTES = [
    "UD English EWT r2.16 test, gold tokenization, one Doc per sentence, tags predicted by the "
    "pipeline's structperc_tagger; dep_uas / dep_las: spaCy's parser scorer (punctuation excluded).",
    "Base pipelines: spacy train configs/parser_beam.cfg with max_epochs 4 and beam_width 8 (the "
    "CPU budget; the config's own setting is 15 epochs at beam 16), model-last. Training "
    "candidates are jackknifed: each training sentence is tagged and parsed by a pipeline trained "
    "on the other folds (round robin over sentences).",
    "k-best lists: the k best distinct trees of a beam of width 16 (smaller k are prefixes); the "
    "oracle is the list's candidate with the fewest wrong heads + wrong labelled arcs.",
    "train_seconds: the learner alone on cached lists; rerank_seconds: scoring the cached test "
    "lists (features extracted beforehand); predict_seconds of the 1-best row: nlp.pipe of the "
    "tagger + parser on test. The machine was shared (load averages in details).",
]


def fold_of(i: int, n_folds: int) -> int:
    """The fold of the i-th training sentence: round robin, so every fold mixes all genres."""
    return i % n_folds


def write_folds(train_path: str, out_dir: Path, n_folds: int) -> List[str]:
    """DocBins of the training sentences outside each fold (what fold f's base model trains on)."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    out_dir.mkdir(parents=True, exist_ok=True)
    docs = C.load_docs(Path(train_path), Vocab())
    paths = []
    for f in range(n_folds):
        path = out_dir / f"train-without-fold{f}-of{n_folds}.spacy"
        if not path.exists():
            DocBin(docs=[d for i, d in enumerate(docs) if fold_of(i, n_folds) != f],
                   store_user_data=False).to_disk(path)
        paths.append(str(path))
    return paths


def train_base(paths: Dict[str, str], work: Path, n_folds: int, overrides: List[str]) -> Dict[str, Any]:
    """Train the fold pipelines and the full one (skipping any already trained)."""
    config = C.REPO_ROOT / "configs" / BASE_CONFIG
    folds = write_folds(paths["train"], work / "folds", n_folds)
    runs = {}
    jobs = [(f"fold{f}of{n_folds}", fp) for f, fp in enumerate(folds)] + [("full", paths["train"])]
    for name, train in jobs:
        out = work / "base" / name
        if (out / "model" / "model-best").exists() or (out / "model" / "model-last").exists():
            print(f"  base {name}: cached", flush=True)
            continue
        print(f"  base {name}: training on {train}", flush=True)
        runs[name] = C.spacy_train(config, out / "model", train, paths["dev"],
                                   overrides=overrides, log_path=out / "train.log")
        C.write_json(out / "run.json", runs[name]) if hasattr(C, "write_json") else \
            (out / "run.json").write_text(__import__("json").dumps(runs[name], indent=1))
        print(f"  base {name}: {runs[name]['seconds']:.0f}s", flush=True)
    return runs


def _model_dir(work: Path, name: str) -> Path:
    return work / "base" / name / "model" / "model-last"


def _candidates_for(nlp, gold_docs, k: int, width: int, feats) -> Dict[str, Any]:
    """Tag and k-best parse un-annotated copies of gold_docs; return the raw lists (for scoring
    choices) and the CandidateLists (features, loss, trees)."""
    import numpy
    from spacy_structperc.reranking import CandidateLists

    parser = nlp.get_pipe("parser")
    docs = C.unannotated_copies(gold_docs, nlp.vocab)
    with nlp.select_pipes(enable=["tagger"]):
        docs = list(nlp.pipe(docs, batch_size=1000))
    values = parser._label_values
    from spacy_structperc.pipeline.nonproj import undecorated
    plain = numpy.array([nlp.vocab.strings.add(undecorated(nlp.vocab.strings[int(v)])) for v in values],
                        dtype=numpy.uint64)
    sentences, raw = [], []
    with C.Timer() as t:
        kb = [parser.kbest(doc, k, width) for doc in docs]
    for doc, gold, spans in zip(docs, gold_docs, kb):
        words = doc.to_array("LOWER").astype(numpy.uint64)
        tags = doc.to_array("TAG").astype(numpy.uint64)
        gh = numpy.array([tok.head.i if tok.head.i != tok.i else -1 for tok in gold])
        gl = numpy.array([tok.dep for tok in gold], dtype=numpy.uint64)
        punct = numpy.array([tok.pos_ == "PUNCT" for tok in gold])
        (start, end, cands), = spans    # one span per Doc: the benchmark's Docs are sentences
        out = []
        for score, heads, classes in cands:
            labels = values[classes]
            wrong_head = (heads != gh) & ~punct
            wrong_label = (wrong_head | (plain[classes] != gl)) & ~punct
            nodes = feats_node(tags, labels)
            out.append({"base": score, "loss": float(wrong_head.sum() + wrong_label.sum()),
                        "keys": feats(words, tags, heads, labels), "heads": heads, "nodes": nodes})
        sentences.append(out)
        raw.append([(heads, classes) for _, heads, classes in cands])
    return {"lists": CandidateLists.build(sentences), "raw": raw, "kbest_seconds": t.seconds,
            "n_words": C.count_tokens(gold_docs)}


def feats_node(tags, labels):
    """A tree-kernel node label: the tag and the arc label together."""
    import numpy
    from spacy_structperc.rerank_features import hash_rows
    return hash_rows(numpy.stack([tags, labels], axis=1))


def kbest_stage(paths: Dict[str, str], work: Path, n_folds: int, k: int, width: int,
                splits: Sequence[str] = ("train", "dev", "test")) -> None:
    """Cache the k-best lists: train sentences from the fold models, dev / test from the full one."""
    import numpy
    import spacy
    import srsly

    import spacy_structperc  # noqa: F401
    from spacy_structperc.rerank_features import TreeFeatures

    feats = TreeFeatures()
    out_dir = work / "kbest"
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(f"train-fold{f}", f"fold{f}of{n_folds}", "train", f) for f in range(n_folds)]
    jobs += [("dev", "full", "dev", None), ("test", "full", "test", None)]
    for name, model, split, fold in jobs:
        if split not in splits:
            continue
        target = out_dir / f"{name}-k{k}-w{width}.npz"
        if target.exists():
            print(f"  kbest {name}: cached", flush=True)
            continue
        nlp = spacy.load(_model_dir(work, model))
        gold = C.load_docs(Path(paths[split]), nlp.vocab)
        if fold is not None:
            gold = [d for i, d in enumerate(gold) if fold_of(i, n_folds) == fold]
        res = _candidates_for(nlp, gold, k, width, feats)
        res["lists"].save(target)
        raw = res["raw"]
        sizes = numpy.array([len(r) for r in raw])
        numpy.savez(out_dir / f"{name}-k{k}-w{width}-raw.npz", sizes=sizes,
                    heads=numpy.concatenate([h for r in raw for h, _ in r]),
                    classes=numpy.concatenate([c for r in raw for _, c in r]))
        srsly.write_json(out_dir / f"{name}-k{k}-w{width}.json",
                         {"kbest_seconds": res["kbest_seconds"], "n_words": res["n_words"],
                          "model": model, "fold": fold})
        print(f"  kbest {name}: {len(gold)} sentences, {res['kbest_seconds']:.0f}s", flush=True)


LEARNER_SETTINGS = {
    "perceptron": {"learner": "perceptron", "epochs": 5, "min_count": 2},
    "boosting": {"learner": "boosting", "rounds": 1500, "min_count": 2, "eval_every": 50},
    "svm": {"learner": "svm", "C": 0.05, "min_count": 2},
    "dual poly": {"learner": "dual", "kernel": "poly", "degree": 2, "max_sentences": 2000},
    "dual tree": {"learner": "dual", "kernel": "tree", "lambda_": 0.5, "base_weight": 1.0,
                  "max_sentences": 1000},
}


def _load_lists(work: Path, name: str, k: int, width: int):
    import numpy
    from spacy_structperc.reranking import CandidateLists

    d = work / "kbest"
    lists = CandidateLists.load(d / f"{name}-k{k}-w{width}.npz")
    with numpy.load(d / f"{name}-k{k}-w{width}-raw.npz") as f:
        sizes, heads, classes = f["sizes"], f["heads"], f["classes"]
    return lists, (sizes, heads, classes)


def _score_choice(nlp, gold_docs, raw, rows) -> Dict[str, float]:
    """UAS / LAS of the candidates at `rows` (global candidate rows) set on the tagged docs."""
    import numpy
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    sizes, heads, classes = raw
    n_tok = numpy.array([len(d) for d in gold_docs])
    # Candidate j of sentence i starts at token offset sum over earlier candidates' lengths.
    cand_len = numpy.repeat(n_tok, sizes)
    start = numpy.concatenate([[0], numpy.cumsum(cand_len)])
    parser = nlp.get_pipe("parser")
    docs = C.unannotated_copies(gold_docs, nlp.vocab)
    with nlp.select_pipes(enable=["tagger"]):
        docs = list(nlp.pipe(docs, batch_size=1000))
    preds = []
    for doc, j in zip(docs, rows):
        h = heads[start[j]:start[j + 1]].copy()
        c = classes[start[j]:start[j + 1]]
        n = len(doc)
        h = numpy.where(h >= 0, h, numpy.arange(n))
        preds.append((h.astype(numpy.int64), c.astype(numpy.int64)))
    parser.set_annotations(docs, preds)
    sc = parser_score([Example(p, g) for p, g in zip(docs, gold_docs)])
    return {"dep_uas": sc["dep_uas"], "dep_las": sc["dep_las"]}


def rerank_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                 learners: List[str], ks: List[int], results: Path, quick: bool) -> None:
    import numpy
    import spacy

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking import CandidateLists, make_reranker

    nlp = spacy.load(_model_dir(work, "full"))
    gold = {s: C.load_docs(Path(paths[s]), nlp.vocab) for s in ("dev", "test")}
    train_all = CandidateLists.concat([_load_lists(work, f"train-fold{f}", k_max, width)[0]
                                       for f in range(n_folds)])
    dev_all, dev_raw = _load_lists(work, "dev", k_max, width)
    test_all, test_raw = _load_lists(work, "test", k_max, width)
    rows, details = [], {"load_avg_before": C.load_average(), "width": width, "folds": n_folds}
    setting_base = "1-best (pipeline, beam 8)"

    def add(setting, metrics):
        for metric, value in metrics.items():
            rows.append(C.make_row(OURS, setting, metric, float(value), dataset=DATASET, split="test"))
        print(f"  {setting}: " + ", ".join(f"{m}={v:.4f}" for m, v in metrics.items()), flush=True)

    def save(curves=None):
        # After every system, so a long learner cannot cost the rows of the others.
        new_settings = {r["setting"] for r in rows}
        details["load_avg_now"] = C.load_average()
        key = "ud_en_ewt" if learners else "ud_en_ewt base and oracle rows"
        C.save_results(results, "reranking", list(rows), details={key: dict(details)},
                       replace=lambda r: r["setting"] in new_settings, errors={},
                       command=" ".join(["python"] + sys.argv), notes=NOTES)

    # The pipeline's own 1-best (beam 8, as trained) and its prediction time.
    docs_factory = lambda: C.unannotated_copies(gold["test"], nlp.vocab)
    C.materialize_averages(nlp)
    with C.Timer() as t:
        base_preds = list(nlp.pipe(docs_factory(), batch_size=1000))
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example
    sc = parser_score([Example(p, g) for p, g in zip(base_preds, gold["test"])])
    base_seconds = t.seconds
    add(setting_base, {"dep_uas": sc["dep_uas"], "dep_las": sc["dep_las"], "predict_seconds": base_seconds})
    add(f"1-best of the width-{width} beam", _score_choice(nlp, gold["test"], test_raw, test_all.first()))
    for k in sorted(set([4, 8, 16, 32] + ks)):
        if k > k_max:
            continue
        lists = test_all.head(k)
        # Rows of the head(k) lists map back to the full lists' rows by sentence and rank.
        oracle_local = lists.oracle() - lists.offsets[:-1]
        add(f"oracle k={k}", _score_choice(nlp, gold["test"], test_raw, test_all.offsets[:-1] + oracle_local))
    wide = work / "kbest" / "test-k32-w32.npz"
    if wide.exists():   # made by: --only kbest --k 32 --width 32 --kbest-splits test
        lists32, raw32 = _load_lists(work, "test", 32, 32)
        add("1-best of the width-32 beam", _score_choice(nlp, gold["test"], raw32, lists32.first()))
        add("oracle k=32", _score_choice(nlp, gold["test"], raw32, lists32.oracle()))
    save()
    curves = {}
    for k in ks:
        train, dev, test = train_all.head(k), dev_all.head(k), test_all.head(k)
        details[f"k={k}"] = {"train_sentences": train.n_sentences, "train_candidates": len(train),
                             "train_oracle_in_first": float((train.oracle() == train.first()).mean())}
        for name in learners:
            settings = dict(LEARNER_SETTINGS[name])
            if quick:
                settings = {**settings, **({"epochs": 2} if "epochs" in settings else {}),
                            **({"rounds": 200} if "rounds" in settings else {})}
            model = make_reranker(settings.pop("learner"), **settings)
            try:
                with C.Timer() as tt:
                    model.fit(train, dev)
            except ImportError as e:
                print(f"  {name}: skipped ({e})", flush=True)
                continue
            with C.Timer() as tp:
                chosen = model.choose(test)
            dev_loss = float(dev.loss[model.choose(dev)].sum())
            local = chosen - test.offsets[:-1]
            metrics = _score_choice(nlp, gold["test"], test_raw, test_all.offsets[:-1] + local)
            dev_metrics = _score_choice(nlp, gold["dev"], dev_raw,
                                        dev_all.offsets[:-1] + (model.choose(dev) - dev.offsets[:-1]))
            metrics.update({"train_seconds": tt.seconds, "rerank_seconds": tp.seconds,
                            "dev_uas": dev_metrics["dep_uas"], "dev_las": dev_metrics["dep_las"]})
            add(f"rerank {name} k={k}", metrics)
            info = {"settings": LEARNER_SETTINGS[name], "dev_loss": dev_loss}
            for attr in ("curve", "dev_curve", "chosen_rounds"):
                if hasattr(model, attr):
                    info[attr] = getattr(model, attr)
            if hasattr(model, "loss_curve"):
                info["exp_loss_every_100"] = model.loss_curve[::100]
            details[f"rerank {name} k={k}"] = info
            if name == "boosting":
                curves[k] = model.dev_curve
                _plot_boosting(curves, results.with_name("reranking_boosting.png"))
            save()


def pipeline_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                   learner: str, k: int, results: Path, overrides: Dict[str, Any]) -> None:
    """The product path: the full pipeline's parser given a reranker block and the learner fitted
    on the cached jackknifed lists; nlp.pipe on test (tagger, k-best with the parser's own beam
    widened to k, features, scoring), timed against the same pipeline without the reranker."""
    import spacy
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking import CandidateLists, make_reranker

    nlp = spacy.load(_model_dir(work, "full"))
    parser = nlp.get_pipe("parser")
    gold = C.load_docs(Path(paths["test"]), nlp.vocab)
    train = CandidateLists.concat([_load_lists(work, f"train-fold{f}", k_max, width)[0]
                                   for f in range(n_folds)]).head(k)
    dev = _load_lists(work, "dev", k_max, width)[0].head(k)
    settings = dict(LEARNER_SETTINGS[learner])
    settings.update(overrides)
    name = settings.pop("learner")
    with C.Timer() as tt:
        model = make_reranker(name, **settings).fit(train, dev)
    C.materialize_averages(nlp)

    def run():
        docs = C.unannotated_copies(gold, nlp.vocab)
        with C.Timer() as t:
            preds = list(nlp.pipe(docs, batch_size=1000))
        sc = parser_score([Example(p, g) for p, g in zip(preds, gold)])
        return sc, t.seconds

    load_before = C.load_average()
    base_sc, base_s = min((run() for _ in range(2)), key=lambda x: x[1])
    from spacy_structperc.rerank_features import GROUPS
    parser.cfg["reranker"] = {"learner": name, "k": k, "folds": n_folds,
                              "kernel": settings.get("kernel", "poly"), "features": list(GROUPS),
                              "settings": {}}
    parser._reset_reranker()
    parser._reranker_model = model
    rr_sc, rr_s = min((run() for _ in range(2)), key=lambda x: x[1])
    setting = f"rerank {learner} k={k}, in the pipeline (beam {parser.cfg['beam_width']} widened to {max(k, parser.cfg['beam_width'])})"
    rows = [C.make_row(OURS, setting, m, float(v), dataset=DATASET, split="test") for m, v in
            (("dep_uas", rr_sc["dep_uas"]), ("dep_las", rr_sc["dep_las"]), ("predict_seconds", rr_s),
             ("base_predict_seconds", base_s), ("time_ratio", rr_s / base_s),
             ("train_seconds", tt.seconds))]
    print(f"  {setting}: UAS {rr_sc['dep_uas']:.4f} LAS {rr_sc['dep_las']:.4f} {rr_s:.1f}s vs base "
          f"{base_s:.1f}s (UAS {base_sc['dep_uas']:.4f}): x{rr_s / base_s:.2f}", flush=True)
    C.save_results(results, "reranking", rows,
                   details={f"ud_en_ewt pipeline {learner}": {
                       "settings": settings, "load_avg_before": load_before,
                       "load_avg_after": C.load_average(), "base_uas": base_sc["dep_uas"],
                       "chosen_rounds": getattr(model, "chosen_rounds", None)}},
                   replace=lambda r: r["setting"] == setting, errors={})


def _plot_boosting(curves, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib missing: no plot)")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, curve in curves.items():
        ax.plot([p["round"] for p in curve], [p["dev_loss"] for p in curve], label=f"k={k}")
    ax.set_xlabel("boosting round")
    ax.set_ylabel("dev loss of the chosen trees (wrong heads + wrong labelled arcs)")
    ax.set_title("Ranking AdaBoost on UD EWT dev")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--folds", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4, help="max_epochs of every base pipeline")
    p.add_argument("--train-beam", type=int, default=8, help="beam width the base parsers train with")
    p.add_argument("--only", default="base,kbest,rerank")
    p.add_argument("--k", type=int, default=16, help="k-best lists cached (k <= this are prefixes)")
    p.add_argument("--width", type=int, default=16, help="beam width of the k-best decoding")
    p.add_argument("--learners", default="perceptron,boosting,dual tree,dual poly,svm")
    p.add_argument("--rerank-k", default="8", help="list sizes the learners are trained on")
    p.add_argument("--results", type=Path, default=C.RESULTS_DIR / "reranking.json")
    p.add_argument("--pipeline-learner", default="boosting")
    p.add_argument("--kbest-splits", default="train,dev,test")
    p.add_argument("--pipeline-rounds", type=int, default=1000)
    args = p.parse_args(argv)
    data_dir = args.data or C.default_data_dir(DATASET)
    paths = prepare_data(data_dir, args.work_dir, args.quick)
    work = args.work_dir / "rerank" / ("quick" if args.quick else "full")
    # The CPU budget: (folds + 1) pipelines; 4 epochs at beam 8 instead of parser_beam.cfg's 15 at
    # beam 16, and one evaluation at the end only (model-last is the base model).
    overrides = ["--training.max_epochs", str(2 if args.quick else args.epochs),
                 "--components.parser.beam_width", str(args.train_beam),
                 "--training.eval_frequency", "100000",
                 "--corpora.train.gold_preproc", "true", "--corpora.dev.gold_preproc", "true"]
    only = set(args.only.split(","))
    if "base" in only:
        train_base(paths, work, args.folds, overrides)
    if "kbest" in only:
        kbest_stage(paths, work, args.folds, args.k, args.width, args.kbest_splits.split(","))
    if "pipeline" in only:
        pipeline_stage(paths, work, args.folds, args.k, args.width, args.pipeline_learner, 8,
                       args.results if not args.quick else args.results.with_name("reranking.quick.json"),
                       {"rounds": args.pipeline_rounds} if args.pipeline_learner == "boosting" else {})
    if "rerank" in only:
        rerank_stage(paths, work, args.folds, args.k, args.width, [x for x in args.learners.split(",") if x],
                     [int(x) for x in args.rerank_k.split(",")],
                     args.results if not args.quick else args.results.with_name("reranking.quick.json"),
                     args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
