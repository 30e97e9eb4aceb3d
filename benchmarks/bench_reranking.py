"""Benchmark k-best reranking (collins2001) on top of the beam parser and the chunker.

Stages (each cached under ``benchmarks/.work/rerank/``, so learners can be iterated without
re-training or re-parsing):

1. ``base``: jackknifed base pipelines (structperc_tagger + structperc_parser,
   ``configs/parser_beam.cfg``) trained with ``spacy train`` on all but one of ``--folds`` folds
   of UD English EWT train, and one on all of train (for dev and test);
2. ``kbest``: each training sentence parsed by the pipeline that did not see its fold, dev and
   test by the full pipeline (predicted tags throughout); the k-best lists of the beam are cached;
3. ``rerank``: global features, each learner trained on the jackknifed lists, evaluated on test;
4. ``lists``: the jackknife check, the 1-best and oracle of the training lists beside dev's and
   test's; ``ensemble``: a diagnostic of how far the lists' base scores can be improved at all
   (dev and test candidates rescored by the fold models, see ensemble_stage).

Example (from the repo root)::

    python benchmarks/bench_reranking.py --only base      # the heavy part, in the background
    python benchmarks/bench_reranking.py                  # everything that is not cached yet
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
from bench_parser import prepare_data  # noqa: E402  (the same EWT DocBins as the parser benchmark)

# The feature groups of the runs: rerank_features.v1's eight, which did best on held-out
# jackknifed lists (k = 8, perceptron: 1.37% fewer errors than the 1-best, against 1.15% with
# edges, lexical and consensus added, 0.89% with edges and lexical); see --features.
GROUP_NAMES = ("arcs", "grandparent", "siblings", "children", "coordination", "paths", "spans",
               "valency")

DATASET = "ud_en_ewt"
OURS = "structperc_parser"
BASE_CONFIG = "parser_beam.cfg"
NOTES = [
    "UD English EWT r2.16 test, gold tokenization, one Doc per sentence, tags predicted by the "
    "pipeline's structperc_tagger; dep_uas / dep_las: spaCy's parser scorer (punctuation excluded).",
    "Base pipelines: spacy train configs/parser_beam.cfg with max_epochs 8 and beam_width 8 (the "
    "CPU budget; the config's own setting is 15 epochs at beam 16), model-last. Training "
    "candidates are jackknifed: each training sentence is tagged and parsed by a pipeline trained "
    "on the other folds (round robin over sentences).",
    "k-best lists: the k best distinct trees of a beam of width 16 (smaller k are prefixes); the "
    "oracle is the list's candidate with the fewest wrong heads + wrong labelled arcs.",
    "Chunker rows (--only chunker): structperc_chunker beam 8, max-violation, edges, 12 epochs, "
    "jackknifed in-process on 4 folds of CoNLL-2000 train without its last 1,000 sentences "
    "(dev); k-best lists of a width-16 beam; loss = wrong + missed chunks.",
    "train_seconds: the learner alone on cached lists; rerank_seconds: scoring the cached test "
    "lists (features extracted beforehand); predict_seconds of the 1-best row: nlp.pipe of the "
    "tagger + parser on test. The machine was shared (load averages in details).",
    "Rows '... (beam 16 widened to 16)': configs/parser_bidirectional.cfg at the config's full "
    "budget (--epochs 15 --train-beam 16: 15 epochs at beam 16, model-last), one spacy train of "
    "the parser with its right-to-left model; base_* metrics are the same pipeline without the "
    "reranker block.",
    "Rows 'bidirectional + graph ...': the same config with its second-order graph model "
    "(reranker block graph > 0, trained on each sentence's first 5 visits); the reversed and the "
    "graph model's weights chosen together on dev by wrong heads over the lists "
    "(dev_head_accuracy_of_the_lists), then dev and test parsed by the pipeline with that block.",
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


def train_base(paths: Dict[str, str], work: Path, n_folds: int, overrides: List[str],
               full_only: bool = False) -> Dict[str, Any]:
    """Train the fold pipelines and the full one (skipping any already trained); with
    `full_only`, the full one alone (enough for the 1-best and oracle rows of dev and test)."""
    config = C.REPO_ROOT / "configs" / BASE_CONFIG
    folds = [] if full_only else write_folds(paths["train"], work / "folds", n_folds)
    runs = {}
    jobs = [(f"fold{f}of{n_folds}", fp) for f, fp in enumerate(folds)] + [("full", paths["train"])]
    for name, train in jobs:
        run = _train_pipeline(config, work, name, train, paths["dev"], overrides)
        if run is not None:
            runs[name] = run
    return runs


def _train_pipeline(config: Path, work: Path, name: str, train: str, dev: str,
                    overrides: List[str]) -> Any:
    """spacy train of one base pipeline into work/base/<name> (None when already trained)."""
    import json

    out = work / "base" / name
    if (out / "model" / "model-best").exists() or (out / "model" / "model-last").exists():
        print(f"  base {name}: cached", flush=True)
        return None
    print(f"  base {name}: training on {train}", flush=True)
    run = C.spacy_train(config, out / "model", train, dev, overrides=overrides, log_path=out / "train.log")
    (out / "run.json").write_text(json.dumps(run, indent=1))
    print(f"  base {name}: {run['seconds']:.0f}s", flush=True)
    return run


def _model_dir(work: Path, name: str) -> Path:
    return work / "base" / name / "model" / "model-last"


def _candidates_for(nlp, gold_docs, k: int, width: int) -> Dict[str, Any]:
    """Tag and k-best parse un-annotated copies of gold_docs; the raw candidates as flat arrays
    (features are extracted later, so feature sets can be compared on the same lists)."""
    import numpy

    from spacy_structperc.parser.nonproj import undecorated

    parser = nlp.get_pipe("parser")
    docs = C.unannotated_copies(gold_docs, nlp.vocab)
    with nlp.select_pipes(enable=["tagger"]):
        docs = list(nlp.pipe(docs, batch_size=1000))
    values = parser._label_values
    plain = numpy.array([nlp.vocab.strings.add(undecorated(nlp.vocab.strings[int(v)])) for v in values],
                        dtype=numpy.uint64)
    with C.Timer() as t:
        kb = [parser.kbest(doc, k, width) for doc in docs]
    sizes, n_tok, scores, heads, classes, labels, words, tags, loss = [], [], [], [], [], [], [], [], []
    for doc, gold, spans in zip(docs, gold_docs, kb):
        gh = numpy.array([tok.head.i if tok.head.i != tok.i else -1 for tok in gold])
        gl = numpy.array([tok.dep for tok in gold], dtype=numpy.uint64)
        punct = numpy.array([tok.pos_ == "PUNCT" for tok in gold])
        (start, end, cands), = spans    # one span per Doc: the benchmark's Docs are sentences
        sizes.append(len(cands))
        n_tok.append(len(doc))
        words.append(doc.to_array("LOWER").astype(numpy.uint64))
        tags.append(doc.to_array("TAG").astype(numpy.uint64))
        for score, h, c in cands:
            wrong_head = (h != gh) & ~punct
            wrong_label = (wrong_head | (plain[c] != gl)) & ~punct
            scores.append(score)
            heads.append(h)
            classes.append(c)
            labels.append(values[c])
            loss.append(float(wrong_head.sum() + wrong_label.sum()))
    cat = numpy.concatenate
    return {"raw": {"sizes": numpy.array(sizes), "n_tok": numpy.array(n_tok), "scores": numpy.array(scores),
                    "heads": cat(heads), "classes": cat(classes), "labels": cat(labels),
                    "words": cat(words), "tags": cat(tags), "loss": numpy.array(loss)},
            "kbest_seconds": t.seconds, "n_words": C.count_tokens(gold_docs)}


def lists_from_raw(raw: Dict[str, Any], feats, trees: bool = False, k: int = 0):
    """CandidateLists of cached raw candidates (the first k of each list; 0: all), features by
    `feats` (a TreeFeatures or ChunkFeatures)."""
    import numpy

    from spacy_structperc.reranking import CandidateLists, TreeFeatures, node_labels

    sizes, n_tok = raw["sizes"], raw["n_tok"]
    tok_start = numpy.concatenate([[0], numpy.cumsum(n_tok)])
    cand_len = numpy.repeat(n_tok, sizes)
    cand_start = numpy.concatenate([[0], numpy.cumsum(cand_len)])
    first = numpy.concatenate([[0], numpy.cumsum(sizes)])
    is_tree = isinstance(feats, TreeFeatures)
    offsets, key_ptr, keys, rows = [0], [numpy.zeros((1,), dtype=numpy.int64)], [], []
    tree_ptr, heads, nodes = [0], [], []
    n_keys = 0
    for i in range(len(sizes)):
        m = int(sizes[i]) if not k else min(k, int(sizes[i]))
        n = int(n_tok[i])
        w = raw["words"][tok_start[i]:tok_start[i + 1]]
        t = raw["tags"][tok_start[i]:tok_start[i + 1]]
        a, b = cand_start[first[i]], cand_start[first[i] + m]
        if is_tree:
            H = raw["heads"][a:b].reshape(m, n)
            L = raw["labels"][a:b].reshape(m, n)
            ptr, kk = feats.batch(w, t, H, L)
            if trees:
                for j in range(m):
                    heads.append(H[j])
                    nodes.append(node_labels(t, L[j]))
                    tree_ptr.append(tree_ptr[-1] + n)
        else:
            ptr, kk = feats.batch(w, t, raw["classes"][a:b].reshape(m, n))
        key_ptr.append(ptr[1:] + n_keys)
        n_keys += len(kk)
        keys.append(kk)
        rows.append(numpy.arange(first[i], first[i] + m))
        offsets.append(offsets[-1] + m)
    rows = numpy.concatenate(rows)
    lists = CandidateLists(offsets, raw["scores"][rows], raw["loss"][rows], numpy.concatenate(key_ptr),
                           numpy.concatenate(keys) if keys else numpy.zeros((0,), dtype=numpy.uint64))
    if trees:
        lists.tree_ptr = numpy.asarray(tree_ptr, dtype=numpy.int64)
        lists.heads = numpy.concatenate(heads).astype(numpy.int32)
        lists.nodes = numpy.concatenate(nodes)
    return lists


def kbest_stage(paths: Dict[str, str], work: Path, n_folds: int, k: int, width: int,
                splits: Sequence[str] = ("train", "dev", "test")) -> None:
    """Cache the raw k-best lists: train sentences from the fold models, dev / test from the
    full one."""
    import numpy
    import spacy
    import srsly

    import spacy_structperc  # noqa: F401

    out_dir = work / "kbest"
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(f"train-fold{f}", f"fold{f}of{n_folds}", "train", f) for f in range(n_folds)]
    jobs += [("dev", "full", "dev", None), ("test", "full", "test", None)]
    for name, model, split, fold in jobs:
        if split not in splits:
            continue
        target = out_dir / f"{name}-k{k}-w{width}-raw.npz"
        if target.exists():
            print(f"  kbest {name}: cached", flush=True)
            continue
        if not (work / "base" / model / "run.json").exists():   # written when training ends
            print(f"  kbest {name}: base model {model} not trained yet, skipped", flush=True)
            continue
        nlp = spacy.load(_model_dir(work, model))
        gold = C.load_docs(Path(paths[split]), nlp.vocab)
        if fold is not None:
            gold = [d for i, d in enumerate(gold) if fold_of(i, n_folds) == fold]
        res = _candidates_for(nlp, gold, k, width)
        numpy.savez(target, **res["raw"])
        srsly.write_json(out_dir / f"{name}-k{k}-w{width}.json",
                         {"kbest_seconds": res["kbest_seconds"], "n_words": res["n_words"],
                          "model": model, "fold": fold, "load_avg": C.load_average()})
        print(f"  kbest {name}: {len(gold)} sentences, {res['kbest_seconds']:.0f}s", flush=True)


def _perceptron_default():
    from spacy_structperc.reranking.pipes import LEARNER_DEFAULTS

    return dict(LEARNER_DEFAULTS["perceptron"])


LEARNER_SETTINGS = {
    # "perceptron" is what a parser's reranker block trains inside `spacy train`
    # (reranking/pipes.py LEARNER_DEFAULTS): the base score's weight and the epochs chosen on
    # every 4th jackknifed training list ("select": "holdout", no dev lists), each list's base
    # scores divided by its own spread. "perceptron dev" chooses them on the full model's dev
    # lists instead (the same grid), which the pipeline cannot do.
    "perceptron": {"learner": "perceptron", "select": "holdout", **_perceptron_default()},
    "perceptron dev": {"learner": "perceptron", "select": "dev",
                       **{**_perceptron_default(), "holdout": 0}},
    # The base score's weight learned with the features (no grid, 8 epochs, no selection).
    "perceptron learned": {"learner": "perceptron", "select": "holdout",
                           **{**_perceptron_default(), "base_weights": None, "holdout": 0}},
    "boosting": {"learner": "boosting", "rounds": 1500, "min_count": 2, "eval_every": 50},
    "svm": {"learner": "svm", "C": 0.05, "min_count": 2},
    "dual poly": {"learner": "dual", "kernel": "poly", "degree": 2, "max_sentences": 2000},
    "dual tree": {"learner": "dual", "kernel": "tree", "lambda_": 0.5, "base_weight": 1.0,
                  "max_sentences": 1000},
}


def _lists_tag(width: int) -> str:
    """The settings' mark of lists from a beam other than the default width 16 (--width)."""
    return "" if width == 16 else f", width-{width} lists"


def _load_raw(path: Path) -> Dict[str, Any]:
    import numpy

    with numpy.load(path) as f:
        return {k: f[k] for k in f.files}


def _concat_raw(raws: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    import numpy

    return {k: numpy.concatenate([r[k] for r in raws]) for k in raws[0]}


def _raw(work: Path, name: str, k: int, width: int) -> Dict[str, Any]:
    return _load_raw(work / "kbest" / f"{name}-k{k}-w{width}-raw.npz")


def _global_rows(raw: Dict[str, Any], lists, chosen) -> Any:
    """Rows of the raw candidates for rows chosen in lists built from raw (any prefix k)."""
    import numpy

    first = numpy.concatenate([[0], numpy.cumsum(raw["sizes"])])[:-1]
    return first + (numpy.asarray(chosen) - lists.offsets[:-1])


def _score_choice(nlp, gold_docs, raw, rows) -> Dict[str, float]:
    """UAS / LAS of the raw candidates at `rows` (one per sentence) set on the tagged docs."""
    import numpy

    sizes, heads, classes = raw["sizes"], raw["heads"], raw["classes"]
    n_tok = numpy.array([len(d) for d in gold_docs])
    # Candidate j of sentence i starts at token offset sum over earlier candidates' lengths.
    cand_len = numpy.repeat(n_tok, sizes)
    start = numpy.concatenate([[0], numpy.cumsum(cand_len)])
    return _score_trees(nlp, gold_docs, [(heads[start[j]:start[j + 1]], classes[start[j]:start[j + 1]])
                                         for j in rows])


def _score_trees(nlp, gold_docs, trees) -> Dict[str, float]:
    """UAS / LAS of one tree per sentence, (heads with -1 for a root, the parser's classes), set
    on the docs as the pipeline tags them, by the parser (which restores lifted arcs)."""
    import numpy
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    parser = nlp.get_pipe("parser")
    docs = C.unannotated_copies(gold_docs, nlp.vocab)
    with nlp.select_pipes(enable=["tagger"]):
        docs = list(nlp.pipe(docs, batch_size=1000))
    preds = []
    for doc, (h, c) in zip(docs, trees):
        h = numpy.where(h >= 0, h, numpy.arange(len(doc)))
        preds.append((h.astype(numpy.int64), numpy.asarray(c).astype(numpy.int64)))
    parser.set_annotations(docs, preds)
    sc = parser_score([Example(p, g) for p, g in zip(docs, gold_docs)])
    return {"dep_uas": sc["dep_uas"], "dep_las": sc["dep_las"]}


def fit_learner(name: str, train, dev, quick: bool = False, **overrides):
    from spacy_structperc.reranking import make_reranker

    settings = {**LEARNER_SETTINGS[name], **overrides}
    if quick:
        settings = {**settings, **({"epochs": 2} if "epochs" in settings else {}),
                    **({"rounds": 200} if "rounds" in settings else {})}
    learner = settings.pop("learner")
    select = settings.pop("select", "dev")
    with C.Timer() as t:
        model = make_reranker(learner, **settings).fit(train, dev if select == "dev" else None)
    return model, t.seconds


def _model_info(name: str, model, dev) -> Dict[str, Any]:
    info: Dict[str, Any] = {"settings": LEARNER_SETTINGS[name],
                            "dev_loss": float(dev.loss[model.choose(dev)].sum())}
    for attr in ("curve", "dev_curve", "chosen_rounds", "chosen_epoch", "dev_losses", "w0", "scale",
                 "base_norm", "chosen_base_weight", "selection"):
        if hasattr(model, attr):
            info[attr] = getattr(model, attr)
    if hasattr(model, "loss_curve"):
        info["exp_loss_every_100"] = model.loss_curve[::100]
    return info


def _row_adder(rows: List[Dict[str, Any]]):
    """add(setting, metrics): test rows of the parser appended to `rows`, and printed."""
    def add(setting: str, metrics: Dict[str, float]) -> None:
        for metric, value in metrics.items():
            rows.append(C.make_row(OURS, setting, metric, float(value), dataset=DATASET, split="test"))
        print(f"  {setting}: " + ", ".join(f"{m}={v:.4f}" for m, v in metrics.items()), flush=True)
    return add


def _save_parser_rows(results: Path, rows: List[Dict[str, Any]], key: str, details: Dict[str, Any]) -> None:
    """Merge the parser rows of a run into the results file (replacing its settings' earlier
    rows), with the run's details under `key`."""
    new_settings = {r["setting"] for r in rows}
    details["load_avg_now"] = C.load_average()
    C.save_results(results, "reranking", list(rows), details={key: dict(details)},
                   replace=lambda r: r["setting"] in new_settings and r["system"] == OURS,
                   errors={}, command=" ".join(["python"] + sys.argv), notes=NOTES)


def rerank_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                 learners: List[str], ks: List[int], results: Path, quick: bool,
                 groups: Sequence[str]) -> None:
    import json

    import numpy
    import spacy

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking import TreeFeatures

    nlp = spacy.load(_model_dir(work, "full"))
    gold = {s: C.load_docs(Path(paths[s]), nlp.vocab) for s in ("dev", "test")}
    feats = TreeFeatures(groups)
    trees = any(name == "dual tree" for name in learners)
    # The learners need the jackknifed training lists; the base and oracle rows only dev's and test's.
    train_raw = _concat_raw([_raw(work, f"train-fold{f}", k_max, width) for f in range(n_folds)]) if learners else None
    dev_raw, test_raw = _raw(work, "dev", k_max, width), _raw(work, "test", k_max, width)
    with C.Timer() as t_feats:
        test_all = lists_from_raw(test_raw, feats)
    # One details entry per set of list sizes, so a run at other k keeps the k = 8 run's; a run
    # of some learners only keeps the other learners' details of an earlier run.
    key = ("ud_en_ewt" if ks == [8] else f"ud_en_ewt k={','.join(map(str, ks))}") + _lists_tag(width) \
        if learners else "ud_en_ewt base and oracle rows" + _lists_tag(width)
    earlier = {}
    if results.exists():
        earlier = json.loads(results.read_text()).get("details", {}).get(key, {})
    rows, details = [], {**{n: v for n, v in earlier.items() if n.startswith("rerank ")},
                         "load_avg_before": C.load_average(), "width": width, "folds": n_folds,
                         "feature_groups": list(feats.groups),
                         "feature_seconds_test": t_feats.seconds}
    # The row of this run's base model: a run for lists of another width has it under its own name.
    setting_base = "1-best (pipeline, beam 8)" + _lists_tag(width)

    add = _row_adder(rows)

    def save():
        # After every system, so a long learner cannot cost the rows of the others.
        _save_parser_rows(results, rows, key, details)

    # The pipeline's own 1-best (beam 8, as trained) and its prediction time.
    docs_factory = lambda: C.unannotated_copies(gold["test"], nlp.vocab)
    C.materialize_averages(nlp)
    with C.Timer() as t:
        base_preds = list(nlp.pipe(docs_factory(), batch_size=1000))
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example
    sc = parser_score([Example(p, g) for p, g in zip(base_preds, gold["test"])])
    add(setting_base, {"dep_uas": sc["dep_uas"], "dep_las": sc["dep_las"], "predict_seconds": t.seconds})
    first = _score_choice(nlp, gold["test"], test_raw, test_all.first())
    # The dev figures of the list's first tree: what the rerankers' dev UAS compare with.
    dev_first = _score_choice(nlp, gold["dev"], dev_raw, numpy.concatenate([[0], numpy.cumsum(dev_raw["sizes"])])[:-1])
    first.update({"dev_uas": dev_first["dep_uas"], "dev_las": dev_first["dep_las"]})
    add(f"1-best of the width-{width} beam", first)
    for k in sorted(set([4, 8, 16, 32] + ks)):
        if k > k_max:
            continue
        lists = test_all.head(k)
        add(f"oracle k={k}{_lists_tag(width)}", _score_choice(nlp, gold["test"], test_raw,
                                           _global_rows(test_raw, lists, lists.oracle())))
    save()
    curves = _saved_boosting_curves(results)
    for k in ks if learners else []:
        with C.Timer() as t_feats:
            train = lists_from_raw(train_raw, feats, trees, k)
            dev = lists_from_raw(dev_raw, feats, trees, k)
            test = lists_from_raw(test_raw, feats, trees, k)
        details[f"k={k}"] = {"train_sentences": train.n_sentences, "train_candidates": len(train),
                             "train_oracle_in_first": float((train.oracle() == train.first()).mean()),
                             "feature_seconds": t_feats.seconds}
        for name in learners:
            try:
                model, train_seconds = fit_learner(name, train, dev, quick)
            except ImportError as e:
                print(f"  {name}: skipped ({e})", flush=True)
                continue
            with C.Timer() as tp:
                chosen = model.choose(test)
            metrics = _score_choice(nlp, gold["test"], test_raw, _global_rows(test_raw, test, chosen))
            dev_metrics = _score_choice(nlp, gold["dev"], dev_raw, _global_rows(dev_raw, dev, model.choose(dev)))
            metrics.update({"train_seconds": train_seconds, "rerank_seconds": tp.seconds,
                            "dev_uas": dev_metrics["dep_uas"], "dev_las": dev_metrics["dep_las"]})
            add(f"rerank {name} k={k}{_lists_tag(width)}", metrics)
            details[f"rerank {name} k={k}{_lists_tag(width)}"] = _model_info(name, model, dev)
            if name == "boosting":
                curves[k] = model.dev_curve
                _plot_boosting(curves, results.with_name("reranking_boosting.png"))
            save()


def pipeline_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                   learner: str, k: int, results: Path, groups: Sequence[str]) -> None:
    """The product path: the full pipeline's parser given a reranker block and the learner fitted
    on the cached jackknifed lists; nlp.pipe on test (tagger, k-best with the parser's own beam
    widened to k, features, scoring), timed against the same pipeline without the reranker."""
    import spacy
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking import TreeFeatures

    nlp = spacy.load(_model_dir(work, "full"))
    parser = nlp.get_pipe("parser")
    gold = C.load_docs(Path(paths["test"]), nlp.vocab)
    feats = TreeFeatures(groups)
    trees = learner == "dual tree"
    train_raw = _concat_raw([_raw(work, f"train-fold{f}", k_max, width) for f in range(n_folds)])
    train = lists_from_raw(train_raw, feats, trees, k)
    dev = lists_from_raw(_raw(work, "dev", k_max, width), feats, trees, k)
    model, train_seconds = fit_learner(learner, train, dev)
    C.materialize_averages(nlp)

    def run():
        docs = C.unannotated_copies(gold, nlp.vocab)
        with C.Timer() as t:
            preds = list(nlp.pipe(docs, batch_size=1000))
        sc = parser_score([Example(p, g) for p, g in zip(preds, gold)])
        return sc, t.seconds

    load_before = C.load_average()
    settings = LEARNER_SETTINGS[learner]
    block = {"learner": settings["learner"], "k": k, "folds": n_folds,
             "kernel": settings.get("kernel", "poly"), "features": list(feats.groups), "settings": {}}
    timings = []
    for _ in range(3):   # alternate, so a change of load hits both sides alike
        parser.cfg["reranker"] = None
        parser._reset_reranker()
        base_sc, base_s = run()
        parser.cfg["reranker"] = block
        parser._reset_reranker()
        parser._reranking.model = model
        rr_sc, rr_s = run()
        timings.append((base_s, rr_s))
    base_s = min(b for b, _ in timings)
    rr_s = min(r for _, r in timings)
    setting = f"rerank {learner} k={k}{_lists_tag(width)}, in the pipeline (beam {parser.cfg['beam_width']} widened to {max(k, parser.cfg['beam_width'])})"
    rows = [C.make_row(OURS, setting, m, float(v), dataset=DATASET, split="test") for m, v in
            (("dep_uas", rr_sc["dep_uas"]), ("dep_las", rr_sc["dep_las"]), ("predict_seconds", rr_s),
             ("base_predict_seconds", base_s), ("time_ratio", rr_s / base_s),
             ("base_dep_uas", base_sc["dep_uas"]), ("train_seconds", train_seconds))]
    print(f"  {setting}: UAS {rr_sc['dep_uas']:.4f} LAS {rr_sc['dep_las']:.4f} {rr_s:.1f}s vs base "
          f"{base_s:.1f}s (UAS {base_sc['dep_uas']:.4f}): x{rr_s / base_s:.2f}", flush=True)
    C.save_results(results, "reranking", rows,
                   details={f"ud_en_ewt pipeline {learner}{_lists_tag(width)}": {
                       "settings": settings, "feature_groups": list(feats.groups),
                       "load_avg_before": load_before, "load_avg_after": C.load_average(),
                       "timings_base_rerank": timings,
                       "chosen_rounds": getattr(model, "chosen_rounds", None)}},
                   replace=lambda r: r["setting"] == setting, errors={})


def lists_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                results: Path) -> None:
    """The jackknife check: the 1-best and oracle UAS / LAS of the training lists (each from the
    fold model that did not see its sentence) beside those of the dev and test lists (the full
    model), the share of lists whose oracle is their first tree, and the base score's spread.
    Rows of split "train" and "dev" (setting "k-best lists: ..."); all three in the details."""
    import numpy
    import spacy
    import srsly

    import spacy_structperc  # noqa: F401

    nlp = spacy.load(_model_dir(work, "full"))
    train_gold = C.load_docs(Path(paths["train"]), nlp.vocab)
    rows: List[Dict[str, Any]] = []
    details: Dict[str, Any] = {"load_avg_before": C.load_average(), "width": width}
    for split in ("train", "dev", "test"):
        if split == "train":
            names = [f"train-fold{f}" for f in range(n_folds)]
            raw = _concat_raw([_raw(work, n, k_max, width) for n in names])
            gold = [d for f in range(n_folds) for i, d in enumerate(train_gold) if fold_of(i, n_folds) == f]
            raw["classes"] = _classes_of(nlp, raw)   # fold models number their labels their own way
        else:
            names = [split]
            raw = _raw(work, split, k_max, width)
            gold = C.load_docs(Path(paths[split]), nlp.vocab)
        made_by = [srsly.read_json(work / "kbest" / f"{n}-k{k_max}-w{width}.json").get("model")
                   for n in names]
        lists = _plain_lists(raw)
        metrics: Dict[str, float] = {}
        sc = _score_choice(nlp, gold, raw, lists.first())
        metrics.update({"uas_1best": sc["dep_uas"], "las_1best": sc["dep_las"]})
        for k in (4, 8, 16):
            if k > k_max:
                continue
            head = lists.head(k)
            sc = _score_choice(nlp, gold, raw, _global_rows(raw, head, head.oracle()))
            metrics.update({f"uas_oracle_k{k}": sc["dep_uas"], f"las_oracle_k{k}": sc["dep_las"]})
            if k == 8:
                metrics["oracle_is_first_k8"] = float((head.oracle() == head.first()).mean())
                rel = head.relative_base()
                metrics["base_gap_k8"] = float(-rel[rel < 0].mean())
                metrics["list_size_k8"] = float(numpy.diff(head.offsets).mean())
        metrics["tokens_per_sentence"] = float(raw["n_tok"].mean())
        details[split] = {"lists_from": made_by, "sentences": int(len(raw["sizes"])),
                          **{m: round(float(v), 6) for m, v in metrics.items()}}
        if split != "test":   # test's 1-best and oracles are rows of the rerank part already
            setting = "k-best lists: " + ("jackknifed (fold models)" if split == "train" else "full model") + \
                _lists_tag(width)
            rows += [C.make_row(OURS, setting, m, float(v), dataset=DATASET, split=split)
                     for m, v in metrics.items()]
        print(f"  {split} ({', '.join(made_by)}): " + ", ".join(f"{m}={v:.4f}" for m, v in metrics.items()),
              flush=True)
    details["load_avg_after"] = C.load_average()
    C.save_results(results, "reranking", rows, details={"ud_en_ewt lists" + _lists_tag(width): details},
                   replace=lambda r: r["setting"].startswith("k-best lists: ") and r["system"] == OURS,
                   errors={}, command=" ".join(["python"] + sys.argv), notes=NOTES)


def _plain_lists(raw: Dict[str, Any]):
    """CandidateLists of cached raw candidates with their base scores and losses, no features."""
    import numpy

    from spacy_structperc.reranking import CandidateLists

    first = numpy.concatenate([[0], numpy.cumsum(raw["sizes"])])
    return CandidateLists(first, raw["scores"], raw["loss"],
                          numpy.zeros((len(raw["scores"]) + 1,), dtype=numpy.int64),
                          numpy.zeros((0,), dtype=numpy.uint64))


def _classes_of(nlp, raw: Dict[str, Any]) -> Any:
    """The full pipeline parser's classes of cached candidates' labels (their string ids)."""
    import numpy

    parser = nlp.get_pipe("parser")
    index = {int(v): i for i, v in enumerate(parser._label_values)}
    root = len(parser.cfg["labels"])
    found = numpy.array([index.get(int(v), -1) for v in raw["labels"]], dtype=numpy.int64)
    if ((found < 0) & (raw["heads"] >= 0)).any():
        raise ValueError("a fold model's label is unknown to the full model")
    return numpy.where(raw["heads"] >= 0, found, root)


ENSEMBLE_LAMBDAS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


def _fold_scores(work: Path, n_folds: int, split: str, gold_path: str, raw: Dict[str, Any], k_max: int,
                 width: int):
    """(n_folds, N): every cached candidate of `split` scored by each fold model (the score of its
    path under that model's weights; NaN where the model lacks one of the tree's labels), cached."""
    import numpy
    import spacy

    target = work / "kbest" / f"{split}-fold-scores-k{k_max}-w{width}.npz"
    if target.exists():
        with numpy.load(target) as f:
            return f["scores"]
    full = spacy.load(_model_dir(work, "full"))
    gold = C.load_docs(Path(gold_path), full.vocab)
    docs = C.unannotated_copies(gold, full.vocab)
    with full.select_pipes(enable=["tagger"]):
        docs = list(full.pipe(docs, batch_size=1000))   # the tags the candidates were parsed with
    sizes, n_tok = raw["sizes"], raw["n_tok"]
    cstart = numpy.concatenate([[0], numpy.cumsum(numpy.repeat(n_tok, sizes))])
    first = numpy.concatenate([[0], numpy.cumsum(sizes)])
    out = numpy.full((n_folds, len(raw["scores"])), numpy.nan)
    for f in range(n_folds):
        nlp = spacy.load(_model_dir(work, f"fold{f}of{n_folds}"))
        C.materialize_averages(nlp)
        parser = nlp.get_pipe("parser")
        parser.begin_predict()
        system = parser.system
        label_of = {int(nlp.vocab.strings.add(l)): i for i, l in enumerate(parser.cfg["labels"])}
        for i, doc in enumerate(docs):
            atoms = parser.model.atoms(doc)
            spans, allow_break = parser._spans(doc)
            (s0, e0), = spans
            for j in range(first[i], first[i + 1]):
                h = raw["heads"][cstart[j]:cstart[j + 1]].astype(numpy.int32)
                lab = raw["labels"][cstart[j]:cstart[j + 1]]
                cls = [-1 if h[x] < 0 else label_of.get(int(lab[x]), -3) for x in range(len(h))]
                if -3 in cls:
                    continue
                system.set_sentence(atoms[s0:e0], h, numpy.asarray(cls, dtype=numpy.int32), allow_break)
                path = system.oracle_path()
                if path is not None:
                    out[f, j] = system.score_path(path)
    numpy.savez(target, scores=out)
    return out


def ensemble_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int, k: int,
                   results: Path) -> None:
    """A diagnostic of the lists' ceiling, not a learner: each dev / test candidate scored by the
    full model (its beam score) plus lambda times the mean score of the fold models, lambda chosen
    on dev (ENSEMBLE_LAMBDAS). The fold models never saw dev or test; they did see most training
    sentences, so this cannot be trained on the jackknifed lists and is not a product setting."""
    import numpy
    import spacy

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking import choose

    nlp = spacy.load(_model_dir(work, "full"))
    load_before = C.load_average()
    chosen_rows, dev_curve = {}, {}
    for split in ("dev", "test"):
        raw = _raw(work, split, k_max, width)
        with C.Timer() as t:
            folds = _fold_scores(work, n_folds, split, paths[split], raw, k_max, width)
        first = numpy.concatenate([[0], numpy.cumsum(raw["sizes"])])
        lists = _plain_lists(raw).head(k)
        keep = numpy.concatenate([numpy.arange(first[i], first[i] + min(k, raw["sizes"][i]))
                                  for i in range(len(raw["sizes"]))])
        with numpy.errstate(all="ignore"):
            mean = numpy.nanmean(folds[:, keep], axis=0)
        mean = numpy.where(numpy.isnan(mean), -numpy.inf, mean)
        chosen_rows[split] = {lam: _global_rows(raw, lists, choose(lists, lists.base + lam * mean))
                              for lam in ENSEMBLE_LAMBDAS}
        dev_curve[split] = {str(lam): float(raw["loss"][r].sum()) for lam, r in chosen_rows[split].items()}
        print(f"  fold scores {split}: {t.seconds:.0f}s; loss by lambda {dev_curve[split]}", flush=True)
    lam = min(ENSEMBLE_LAMBDAS, key=lambda x: (dev_curve["dev"][str(x)], x))
    gold = {s: C.load_docs(Path(paths[s]), nlp.vocab) for s in ("dev", "test")}
    dev_sc = _score_choice(nlp, gold["dev"], _raw(work, "dev", k_max, width), chosen_rows["dev"][lam])
    test_sc = _score_choice(nlp, gold["test"], _raw(work, "test", k_max, width), chosen_rows["test"][lam])
    setting = f"diagnostic: full + fold models' scores k={k}{_lists_tag(width)}"
    metrics = {"dep_uas": test_sc["dep_uas"], "dep_las": test_sc["dep_las"], "dev_uas": dev_sc["dep_uas"],
               "dev_las": dev_sc["dep_las"], "lambda": lam}
    rows = [C.make_row(OURS, setting, m, float(v), dataset=DATASET, split="test") for m, v in metrics.items()]
    print(f"  {setting}: lambda {lam}, " + ", ".join(f"{m}={v:.4f}" for m, v in metrics.items()), flush=True)
    C.save_results(results, "reranking", rows,
                   details={f"ud_en_ewt ensemble diagnostic k={k}{_lists_tag(width)}": {
                       "loss_by_lambda": dev_curve, "lambda": lam, "load_avg_before": load_before,
                       "load_avg_after": C.load_average()}},
                   replace=lambda r: r["setting"] == setting, errors={},
                   command=" ".join(["python"] + sys.argv), notes=NOTES)


# ---------------------------------------------------------------------------------------------
# A second opinion of another model family: the arc-factored graph-based model (reranking/graph.py)

GRAPH_EPOCHS = 5          # the held-out fold 0 UAS peaks at epoch 5 (83.05, all words; 82.91 at 10)
GRAPH_NAMES = {1: "arc-factored", 2: "second-order graph"}   # settings' names by the model's order
GRAPH_LAMBDAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
GRAPH_GROUPS = ("rank", "gap", "disagree", "arcs")   # arcs: dev 87.21 / 87.25 against 87.18 without (perceptron, perceptron dev)


def _gold_heads(docs) -> List[Any]:
    import numpy

    return [numpy.array([t.head.i if t.head.i != t.i else -1 for t in d], dtype=numpy.int32) for d in docs]


def _graph_uas(pred, gold_docs) -> float:
    """Unlabelled attachment of flat heads against gold, words with a punct label left out (as
    spaCy's parser scorer does)."""
    import numpy

    gold = numpy.concatenate(_gold_heads(gold_docs))
    keep = numpy.array([t.dep_ not in ("p", "punct") for d in gold_docs for t in d])
    return float((numpy.asarray(pred)[keep] == gold[keep]).mean())


def _sentences(raw: Dict[str, Any]):
    """(words, tags, sent_ptr, cand_sent) of cached raw candidates."""
    import numpy

    n_tok = raw["n_tok"]
    ptr = numpy.concatenate([[0], numpy.cumsum(n_tok)]).astype(numpy.int64)
    cand_sent = numpy.repeat(numpy.arange(len(n_tok)), raw["sizes"]).astype(numpy.int64)
    return raw["words"], raw["tags"], ptr, cand_sent


def _disagreements(raw: Dict[str, Any], best) -> Any:
    """(disagree, ptr, atoms) of every candidate against the graph model's best tree of its
    sentence (reranking/graph.py disagreement_atoms)."""
    import numpy

    from spacy_structperc.reranking.graph import disagreement_atoms

    n_tok, sizes = raw["n_tok"], raw["sizes"]
    tok_start = numpy.concatenate([[0], numpy.cumsum(n_tok)])
    cand_len = numpy.repeat(n_tok, sizes)
    sent = numpy.repeat(numpy.arange(len(n_tok)), sizes)
    # each candidate word's index among its sentence's words
    at = numpy.repeat(tok_start[sent], cand_len) + numpy.arange(int(cand_len.sum())) - \
        numpy.repeat(numpy.concatenate([[0], numpy.cumsum(cand_len)])[:-1], cand_len)
    return disagreement_atoms(raw["heads"], numpy.asarray(best)[at], raw["tags"][at], cand_len)


def graph_models(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                 epochs: int, order: int = 1) -> Dict[str, Dict[str, Any]]:
    """The arc-factored model's score of every cached candidate and its own best tree, per
    list file: a training fold's from the graph model trained on the other folds (their
    sentences with the tags their lists carry, gold heads), dev's and test's from the one
    trained on all of train. Cached under work/graph/."""
    import json

    import numpy
    from spacy.vocab import Vocab

    from spacy_structperc.reranking.graph import GraphScorer

    out_dir = work / "graph"
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = f"k{k_max}-w{width}-e{epochs}" + ("" if order == 1 else f"-o{order}")
    names = [f"train-fold{f}" for f in range(n_folds)] + ["dev", "test"]
    got: Dict[str, Dict[str, Any]] = {}
    if all((out_dir / f"{n}-{tag}.npz").exists() for n in names):
        for n in names:
            with numpy.load(out_dir / f"{n}-{tag}.npz") as f:
                got[n] = {k: f[k] for k in f.files}
        return got
    train_docs = C.load_docs(Path(paths["train"]), Vocab())
    heads = _gold_heads(train_docs)
    raws = {f: _raw(work, f"train-fold{f}", k_max, width) for f in range(n_folds)}
    fold_heads = {f: numpy.concatenate([h for i, h in enumerate(heads) if fold_of(i, n_folds) == f])
                  for f in range(n_folds)}
    info: Dict[str, Any] = {"epochs": epochs, "order": order, "load_avg_before": C.load_average()}

    def corpus(folds):
        rs = [raws[f] for f in folds]
        n_tok = numpy.concatenate([r["n_tok"] for r in rs])
        return (numpy.concatenate([r["words"] for r in rs]), numpy.concatenate([r["tags"] for r in rs]),
                numpy.concatenate([[0], numpy.cumsum(n_tok)]).astype(numpy.int64),
                numpy.concatenate([fold_heads[f] for f in folds]))

    def run(name, raw, scorer):
        words, tags, ptr, cand_sent = _sentences(raw)
        with C.Timer() as t:
            scores = scorer.score(words, tags, ptr, cand_sent, raw["heads"])
            best, best_scores = scorer.decode(words, tags, ptr)
        res = {"scores": scores, "best": best, "disagree": _disagreements(raw, best)[0]}
        numpy.savez(out_dir / f"{name}-{tag}.npz", **res)
        got[name] = res
        return t.seconds

    for f in range(n_folds):
        rest = [g for g in range(n_folds) if g != f]
        with C.Timer() as t:
            scorer = GraphScorer(epochs, order=order).fit(*corpus(rest), heldout=corpus([f]) if f == 0 else None)
        s = run(f"train-fold{f}", raws[f], scorer)
        info[f"fold{f}"] = {"train_seconds": t.seconds, "score_seconds": s, "curve": scorer.curve,
                            "heldout_uas_all_words": float((got[f"train-fold{f}"]["best"] == fold_heads[f]).mean())}
        print(f"  graph fold {f}: {t.seconds:.0f}s, held-out fold UAS (all words) "
              f"{info[f'fold{f}']['heldout_uas_all_words']:.4f}", flush=True)
        del scorer
    with C.Timer() as t:
        scorer = GraphScorer(epochs, order=order).fit(*corpus(list(range(n_folds))))
    info["full"] = {"train_seconds": t.seconds, "curve": scorer.curve}
    for split in ("dev", "test"):
        info["full"][f"score_seconds_{split}"] = run(split, _raw(work, split, k_max, width), scorer)
    info["load_avg_after"] = C.load_average()
    (out_dir / f"info-{tag}.json").write_text(json.dumps(info, indent=1))
    print(f"  graph full: {t.seconds:.0f}s", flush=True)
    return got


def graph_stage(paths: Dict[str, str], work: Path, n_folds: int, k_max: int, width: int,
                ks: List[int], results: Path, groups: Sequence[str], epochs: int = GRAPH_EPOCHS,
                graph_groups: Sequence[str] = GRAPH_GROUPS, learners: Sequence[str] = ("perceptron", "perceptron dev"),
                baselines: bool = True, order: int = 1) -> None:
    """The arc-factored model as a second opinion: its own UAS, a diagnostic (each candidate's
    base score plus lambda times its graph score, both list-normalized, lambda chosen on dev),
    and the perceptron rerankers with the graph features (reranking/graph.py graph_keys) added
    to the global ones, trained on the jackknifed lists; test reported, everything chosen on
    dev or on held-out training lists."""
    import json

    import numpy
    import spacy

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking import CandidateLists, TreeFeatures, choose
    from spacy_structperc.reranking.graph import graph_keys, with_keys

    graph = graph_models(paths, work, n_folds, k_max, width, epochs, order)
    gname = GRAPH_NAMES[order]
    nlp = spacy.load(_model_dir(work, "full"))
    gold = {s: C.load_docs(Path(paths[s]), nlp.vocab) for s in ("dev", "test")}
    feats = TreeFeatures(groups)
    raws = {"train": _concat_raw([_raw(work, f"train-fold{f}", k_max, width) for f in range(n_folds)]),
            "dev": _raw(work, "dev", k_max, width), "test": _raw(work, "test", k_max, width)}
    g_all = {"train": {k: numpy.concatenate([graph[f"train-fold{f}"][k] for f in range(n_folds)])
                       for k in ("scores", "disagree", "best")},
             "dev": graph["dev"], "test": graph["test"]}
    tag = f"k{k_max}-w{width}-e{epochs}" + ("" if order == 1 else f"-o{order}")
    gi = json.loads((work / "graph" / f"info-{tag}.json").read_text())
    rows: List[Dict[str, Any]] = []
    details: Dict[str, Any] = {"load_avg_before": C.load_average(), "graph_epochs": epochs, "graph_order": order,
                               "graph_groups": list(graph_groups), "feature_groups": list(feats.groups),
                               "graph_training": gi}

    add = _row_adder(rows)

    def save():
        _save_parser_rows(results, rows, f"ud_en_ewt {gname}" + _lists_tag(width), details)

    own = {s: _graph_uas(graph[s]["best"], gold[s]) for s in ("dev", "test")}
    add(f"{gname} model (Eisner{', siblings' if order == 2 else ''}, averaged perceptron), its own 1-best",
        {"dep_uas": own["test"], "dev_uas": own["dev"], "epochs": epochs,
         "train_seconds": gi["full"]["train_seconds"]})

    def score(split, lists, chosen):
        return _score_choice(nlp, gold[split], raws[split], _global_rows(raws[split], lists, chosen))

    for k in ks:
        lists, rowsel = {}, {}
        for split in ("train", "dev", "test"):
            raw = raws[split]
            first = numpy.concatenate([[0], numpy.cumsum(raw["sizes"])])
            rowsel[split] = numpy.concatenate([numpy.arange(first[i], first[i] + min(k, raw["sizes"][i]))
                                               for i in range(len(raw["sizes"]))])
            base = lists_from_raw(raw, feats, False, k)
            dis, aptr, atoms = _disagreements(raw, g_all[split]["best"])
            sel = rowsel[split]
            alen = numpy.diff(aptr)[sel]
            aptr_k = numpy.concatenate([[0], numpy.cumsum(alen)]).astype(numpy.int64)
            atoms_k = atoms[numpy.repeat(aptr[sel], alen) + numpy.arange(int(alen.sum())) - numpy.repeat(aptr_k[:-1], alen)]
            ptr, keys = graph_keys(base.offsets, g_all[split]["scores"][sel], dis[sel], graph_groups,
                                   aptr_k, atoms_k)
            lists[split] = (base, with_keys(base, ptr, keys))
        # The diagnostic: no learner, base + lambda * graph (both list-normalized).
        curve, chosen = {}, {}
        for split in ("dev", "test"):
            base = lists[split][0]
            g = CandidateLists(base.offsets, g_all[split]["scores"][rowsel[split]], base.loss,
                               numpy.zeros((len(base) + 1,), dtype=numpy.int64), numpy.zeros((0,), dtype=numpy.uint64))
            b_rel, g_rel = base.list_relative_base(), g.list_relative_base()
            chosen[split] = {lam: choose(base, b_rel + lam * g_rel) for lam in GRAPH_LAMBDAS}
            curve[split] = {str(lam): float(base.loss[c].sum()) for lam, c in chosen[split].items()}
        lam = min(GRAPH_LAMBDAS, key=lambda x: (curve["dev"][str(x)], x))
        m = score("test", lists["test"][0], chosen["test"][lam])
        d = score("dev", lists["dev"][0], chosen["dev"][lam])
        add(f"diagnostic: base + {gname} score k={k}{_lists_tag(width)}",
            {"dep_uas": m["dep_uas"], "dep_las": m["dep_las"], "dev_uas": d["dep_uas"], "dev_las": d["dep_las"],
             "lambda": lam})
        details[f"diagnostic k={k}"] = {"loss_by_lambda": curve, "lambda": lam}
        save()
        for name in learners:
            for with_graph in ((False, True) if baselines else (True,)):
                tr, dv, te = (lists[s][1 if with_graph else 0] for s in ("train", "dev", "test"))
                model, train_seconds = fit_learner(name, tr, dv)
                mt = score("test", te, model.choose(te))
                md = score("dev", dv, model.choose(dv))
                metrics = {"dep_uas": mt["dep_uas"], "dep_las": mt["dep_las"], "dev_uas": md["dep_uas"],
                           "dev_las": md["dep_las"], "train_seconds": train_seconds}
                if with_graph:
                    setting = f"rerank {name} + {gname} k={k}{_lists_tag(width)}"
                    add(setting, metrics)
                else:   # the same learner without the graph in this run: its details only
                    setting = f"rerank {name} k={k}{_lists_tag(width)} (this run)"
                    print(f"  {setting}: " + ", ".join(f"{a}={v:.4f}" for a, v in metrics.items()), flush=True)
                details[setting] = {**_model_info(name, model, dv), **metrics}
                save()


# ---------------------------------------------------------------------------------------------
# The other direction: the base pipeline trained on reversed sentences (reranking/reverse.py)

REVERSE_NAME = "reverse"
REVERSE_LAMBDAS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)


def reverse_data(paths: Dict[str, str], work: Path) -> Dict[str, str]:
    """Reversed copies of train and dev: every sentence's words last to first, arcs mirrored."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    from spacy_structperc.reranking.reverse import reversed_doc

    out = {}
    for split in ("train", "dev"):
        path = work / REVERSE_NAME / f"{split}.spacy"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            docs = C.load_docs(Path(paths[split]), Vocab())
            DocBin(docs=[reversed_doc(d, gold=True) for d in docs], store_user_data=False).to_disk(path)
        out[split] = str(path)
    return out


def _union_candidates(full, rev, gold_docs, raw, k_max: int, width: int) -> List[Dict[str, Any]]:
    """Per sentence: the union of the forward list's k_max candidates (cached raw lists) and the
    reversed pipeline's k_max best (beam of `width`), forward ones first, with each tree's
    forward score (the beam's for the forward list's trees, the canonical path's for the rest),
    its reversed-model score (canonical path), its loss (as the cached lists': wrong heads + wrong
    labelled arcs, punctuation left out), the forward parser's classes and each list's rank of it."""
    import numpy

    from spacy_structperc.parser.nonproj import undecorated
    from spacy_structperc.reranking.reverse import TreeScorer, union

    fwd, bwd = TreeScorer(full), TreeScorer(rev, reverse=True)
    strings = full.vocab.strings
    plain = {int(v): strings.add(undecorated(strings[int(v)])) for v in fwd.label_values}
    docs = C.unannotated_copies(gold_docs, full.vocab)
    with full.select_pipes(enable=["tagger"]):
        docs = list(full.pipe(docs, batch_size=1000))   # the tags the forward lists were parsed with
    sizes, n_tok = raw["sizes"], raw["n_tok"]
    cstart = numpy.concatenate([[0], numpy.cumsum(numpy.repeat(n_tok, sizes))])
    first = numpy.concatenate([[0], numpy.cumsum(sizes)])
    out = []
    for i, (doc, gold) in enumerate(zip(docs, gold_docs)):
        gh = numpy.array([t.head.i if t.head.i != t.i else -1 for t in gold])
        gl = numpy.array([t.dep for t in gold], dtype=numpy.uint64)
        punct = numpy.array([t.pos_ == "PUNCT" for t in gold])
        rows = range(first[i], first[i] + min(k_max, sizes[i]))
        forward = [(raw["heads"][cstart[j]:cstart[j + 1]], raw["labels"][cstart[j]:cstart[j + 1]]) for j in rows]
        backward = [(h, lab) for _, h, lab in bwd.kbest(doc, k_max, width)]
        trees, source = union(forward, backward)
        # the forward list's trees are the union's first ones, all distinct
        base = numpy.concatenate([raw["scores"][list(rows)].astype(float), fwd.score(doc, trees[len(forward):])])
        keys = {h.tobytes() + lab.tobytes(): r for r, (h, lab) in enumerate(trees)}
        loss, classes = [], []
        for h, lab in trees:
            wrong_head = (h != gh) & ~punct
            labels = numpy.array([plain.get(int(v), int(v)) for v in lab], dtype=numpy.uint64)
            loss.append(float(wrong_head.sum() + ((wrong_head | (labels != gl)) & ~punct).sum()))
            classes.append(numpy.array([fwd.root_class if x < 0 else fwd.class_of.get(int(v), -1)
                                        for x, v in zip(h, lab)]))
        out.append({"trees": trees, "classes": classes, "base": base, "reverse": bwd.score(doc, trees),
                    "loss": numpy.array(loss),
                    "forward_rank": [keys[h.tobytes() + lab.tobytes()] for h, lab in forward],
                    "backward_rank": [keys[h.tobytes() + lab.tobytes()] for h, lab in backward]})
    return out


def _reverse_choice(sent: Dict[str, Any], k: int, both: bool, lam: float) -> int:
    """The candidate base + lam * reversed score picks among the forward list's first k (and with
    `both`, the reversed list's first k too)."""
    import numpy

    rows = sent["forward_rank"][:k] + (sent["backward_rank"][:k] if both else [])
    with numpy.errstate(invalid="ignore"):   # 0 * -inf: a tree one model cannot score
        scores = sent["base"][rows] + lam * sent["reverse"][rows]
    return rows[int(numpy.argmax(numpy.where(numpy.isnan(scores), -numpy.inf, scores)))]


def reverse_stage(paths: Dict[str, str], work: Path, k_max: int, width: int, ks: Sequence[int],
                  overrides: List[str], results: Path) -> None:
    """The forward lists' candidates (and the reversed pipeline's own k-best) rescored by
    base + lambda * the reversed pipeline's score, lambda chosen on dev (REVERSE_LAMBDAS). The
    reversed pipeline never saw dev or test; the training lists would need reversed fold
    models too, so this is a diagnostic of the combination, not a learner. reverse_seconds: the
    reversed pipeline's k-best and both models' scores of the union on test (a Python loop over
    the trees, not the Cython path a component would take)."""
    import json

    import numpy
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example

    import spacy_structperc  # noqa: F401
    from spacy_structperc.reranking.reverse import reversed_doc

    rpaths = reverse_data(paths, work)
    _train_pipeline(C.REPO_ROOT / "configs" / BASE_CONFIG, work, REVERSE_NAME, rpaths["train"], rpaths["dev"],
                    overrides)
    full = spacy.load(_model_dir(work, "full"))
    rev = spacy.load(_model_dir(work, REVERSE_NAME))
    load_before = C.load_average()
    gold = {s: C.load_docs(Path(paths[s]), full.vocab) for s in ("dev", "test")}
    rows: List[Dict[str, Any]] = []
    add = _row_adder(rows)
    own = {}
    for split in ("dev", "test"):
        egs = [Example(Doc(rev.vocab, words=[t.text for t in reversed(g)]), reversed_doc(g, rev.vocab, gold=True))
               for g in gold[split]]
        own[split] = rev.evaluate(egs)
    add("right-to-left pipeline (parser_beam.cfg on reversed sentences), its own 1-best",
        {"dep_uas": own["test"]["dep_uas"], "dep_las": own["test"]["dep_las"],
         "dev_uas": own["dev"]["dep_uas"], "dev_las": own["dev"]["dep_las"]})
    data, seconds = {}, {}
    for split in ("dev", "test"):
        with C.Timer() as t:
            data[split] = _union_candidates(full, rev, gold[split], _raw(work, split, k_max, width), max(ks), width)
        seconds[split] = t.seconds
        print(f"  reverse {split}: {t.seconds:.0f}s", flush=True)
    curves = {}
    for k in ks:
        for both in (False, True):
            union_tag = ", both directions' k-best" if both else ""
            setting = f"diagnostic: base + right-to-left score{union_tag} k={k}{_lists_tag(width)}"
            curve = {split: {str(lam): float(sum(s["loss"][_reverse_choice(s, k, both, lam)] for s in data[split]))
                             for lam in REVERSE_LAMBDAS} for split in ("dev", "test")}
            lam = min(REVERSE_LAMBDAS, key=lambda x: (curve["dev"][str(x)], x))
            got = {split: _score_trees(full, gold[split], [
                (s["trees"][r][0], s["classes"][r]) for s in data[split] for r in [_reverse_choice(s, k, both, lam)]])
                for split in ("dev", "test")}
            metrics = {"dep_uas": got["test"]["dep_uas"], "dep_las": got["test"]["dep_las"],
                       "dev_uas": got["dev"]["dep_uas"], "dev_las": got["dev"]["dep_las"], "lambda": lam,
                       "reverse_seconds": seconds["test"]}
            if both:
                metrics["list_size"] = float(numpy.mean([len(set(s["forward_rank"][:k] + s["backward_rank"][:k]))
                                                         for s in data["test"]]))
                best = [min(set(s["forward_rank"][:k] + s["backward_rank"][:k]), key=lambda r: (s["loss"][r], r))
                        for s in data["test"]]
                metrics["oracle_uas"] = _score_trees(full, gold["test"], [
                    (s["trees"][r][0], s["classes"][r]) for s, r in zip(data["test"], best)])["dep_uas"]
            add(setting, metrics)
            curves[setting] = curve
    run = work / "base" / REVERSE_NAME / "run.json"
    settings = {r["setting"] for r in rows}
    C.save_results(results, "reranking", rows,
                   details={f"ud_en_ewt right-to-left{_lists_tag(width)}": {
                       "loss_by_lambda": curves, "seconds": seconds, "load_avg_before": load_before,
                       "load_avg_after": C.load_average(),
                       "train": json.loads(run.read_text()) if run.exists() else None}},
                   replace=lambda r: r["setting"] in settings, errors={},
                   command=" ".join(["python"] + sys.argv), notes=NOTES)


COMBINE_TEMPERATURES = (2.0, 10.0, 50.0, 100.0, 200.0)
COMBINE_SHARES = (0.2, 0.35, 0.5)


def _softmax(x: Any, temperature: float) -> Any:
    import numpy

    x = numpy.where(numpy.isfinite(x), x, -numpy.inf)
    e = numpy.exp((x - x.max()) / temperature)
    return e / e.sum()


def _arc_posteriors(sent: Dict[str, Any], rows: Sequence[int], weights: Any) -> Any:
    """(n + 1) x n matrix: entry [h + 1, d] sums the weights of the candidates (rows of the
    union) where word d's head is h (row 0: the root)."""
    import numpy

    n = len(sent["trees"][0][0])
    mu = numpy.zeros((n + 1, n))
    for r, w in zip(rows, weights):
        h = sent["trees"][r][0]
        mu[numpy.where(h >= 0, h + 1, 0), numpy.arange(n)] += w
    return mu


def _mbr_choice(sent: Dict[str, Any], k: int, lam: float, temperature: float) -> int:
    """The union candidate (both directions' first k) with the most expected correct heads under
    the posterior softmax((base + lam * reversed) / temperature) over the union."""
    import numpy

    rows = list(dict.fromkeys(sent["forward_rank"][:k] + sent["backward_rank"][:k]))
    with numpy.errstate(invalid="ignore"):
        weights = _softmax(sent["base"][rows] + lam * sent["reverse"][rows], temperature)
    mu = _arc_posteriors(sent, rows, weights)
    gain = [mu[numpy.where(h >= 0, h + 1, 0), numpy.arange(len(h))].sum()
            for h in (sent["trees"][r][0] for r in rows)]
    return rows[int(numpy.argmax(gain))]


def _reparse(sent: Dict[str, Any], k: int, share: float, temperature: float):
    """Arc voting (Sagae and Lavie 2006) over both directions' k-best: each model's own list as a
    posterior softmax(score / temperature), weighted 1 - share (forward) and share (reversed);
    the best projective tree of the arc posteriors (Eisner); each word's label from the most
    probable candidate with its head. (heads with -1 for a root, the forward parser's classes;
    Eisner may give the root several children)."""
    import numpy

    from spacy_structperc._core.eisner import eisner

    fwd, bwd = sent["forward_rank"][:k], sent["backward_rank"][:k]
    weights = numpy.concatenate([(1 - share) * _softmax(sent["base"][fwd], temperature),
                                 share * _softmax(sent["reverse"][bwd], temperature)])
    rows = fwd + bwd
    mu = _arc_posteriors(sent, rows, weights)
    heads = eisner(numpy.vstack([numpy.zeros((1, mu.shape[0])), mu.T]).T)[0][1:].astype(numpy.int64) - 1
    classes = numpy.zeros(len(heads), dtype=numpy.int64)
    for d, h in enumerate(heads):
        # (an arc no candidate has, which projectivity can force: the most probable candidate's)
        best = max([(w, r) for r, w in zip(rows, weights) if sent["trees"][r][0][d] == h]
                   or [(w, r) for r, w in zip(rows, weights)])[1]
        classes[d] = sent["classes"][best][d]
    return heads, classes


def combine_stage(paths: Dict[str, str], work: Path, k_max: int, width: int, ks: Sequence[int],
                  results: Path) -> None:
    """Other ways to combine the forward and the right-to-left pipelines' k-best (--only reverse
    trains both): minimum Bayes risk choice among the union (the candidate with the most
    expected correct heads under the combined score's posterior) and arc-voting reparsing (a new
    tree, not reranking), each with its temperature (and weight) chosen on dev, beside the
    linear choice of --only reverse. A diagnostic on the cached lists, as that stage."""
    import spacy

    import spacy_structperc  # noqa: F401

    full = spacy.load(_model_dir(work, "full"))
    rev = spacy.load(_model_dir(work, REVERSE_NAME))
    gold = {s: C.load_docs(Path(paths[s]), full.vocab) for s in ("dev", "test")}
    data = {s: _union_candidates(full, rev, gold[s], _raw(work, s, k_max, width), max(ks), width)
            for s in ("dev", "test")}
    rows: List[Dict[str, Any]] = []
    add = _row_adder(rows)
    curves: Dict[str, Any] = {}
    for k in ks:
        setting = f"diagnostic: minimum Bayes risk over both directions' k-best k={k}{_lists_tag(width)}"
        grid = [(lam, t) for lam in (0.3, 0.6, 1.0) for t in COMBINE_TEMPERATURES]
        loss = {f"{lam},{t}": float(sum(s["loss"][_mbr_choice(s, k, lam, t)] for s in data["dev"]))
                for lam, t in grid}
        lam, t = min(grid, key=lambda g: (loss[f"{g[0]},{g[1]}"], g))
        got = {split: _score_trees(full, gold[split], [(s["trees"][r][0], s["classes"][r]) for s in data[split]
                                                      for r in [_mbr_choice(s, k, lam, t)]])
               for split in ("dev", "test")}
        add(setting, {"dep_uas": got["test"]["dep_uas"], "dep_las": got["test"]["dep_las"],
                      "dev_uas": got["dev"]["dep_uas"], "lambda": lam, "temperature": t})
        curves[setting] = loss
        setting = f"diagnostic: arc-voting reparse (Eisner) of both directions' k-best k={k}{_lists_tag(width)}"
        grid = [(share, t) for share in COMBINE_SHARES for t in COMBINE_TEMPERATURES]
        dev_uas = {f"{a},{t}": _score_trees(full, gold["dev"], [_reparse(s, k, a, t) for s in data["dev"]])["dep_uas"]
                   for a, t in grid}
        share, t = max(grid, key=lambda g: (dev_uas[f"{g[0]},{g[1]}"], -g[0], -g[1]))
        got = _score_trees(full, gold["test"], [_reparse(s, k, share, t) for s in data["test"]])
        add(setting, {"dep_uas": got["dep_uas"], "dep_las": got["dep_las"],
                      "dev_uas": dev_uas[f"{share},{t}"], "share": share, "temperature": t})
        curves[setting] = dev_uas
    _save_parser_rows(results, rows, f"ud_en_ewt combination rules{_lists_tag(width)}",
                      {"dev_loss_or_uas_by_setting": curves})


BIDIRECTIONAL_CONFIG = "parser_bidirectional.cfg"


GRAPH_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0)


def _rescored_lists(nlp, gold_docs, k: int) -> List[Dict[str, Any]]:
    """Per sentence of `gold_docs` (tagged by the pipeline's tagger): the forward list's size
    and, for the union of the forward and reversed k best, the three models' scores of each
    tree (ParserReranker.rescored) and its wrong heads (punctuation left out, as spaCy's UAS)."""
    import numpy

    parser = nlp.get_pipe("parser")
    rr = parser._reranking
    width = max(k, parser.cfg["beam_width"])
    out = []
    for doc, atoms, allow_break, words, tags, a, b, ref, punct in _tagged_spans(nlp, gold_docs):
        cands = parser._span_kbest(parser.system, atoms[a:b], allow_break, k, width)
        trees, scores = rr.rescored(words[a:b], tags[a:b], atoms[a:b], allow_break, cands, k, width)
        errors = [int(((h != ref) & ~punct).sum()) for h, _ in trees]
        out.append({"n_forward": len(cands), "scores": scores, "errors": numpy.array(errors),
                    "words": int((~punct).sum())})
    return out


def _tagged_spans(nlp, gold_docs):
    """Each span the pipeline's parser parses of `gold_docs`, tagged by its tagger: (doc,
    atoms, allow_break, words, tags, start, end, gold heads relative to the span with -1 for a
    root, punctuation mask of the span)."""
    import numpy

    parser = nlp.get_pipe("parser")
    docs = C.unannotated_copies(gold_docs, nlp.vocab)
    with nlp.select_pipes(enable=["tagger"]):
        docs = list(nlp.pipe(docs, batch_size=1000))
    for doc, gold in zip(docs, gold_docs):
        if not len(doc):
            continue
        atoms = parser.model.atoms(doc, parser.name)
        spans, allow_break = parser._spans(doc)
        words, tags = doc.to_array("LOWER"), doc.to_array("TAG")
        gh = numpy.array([t.head.i if t.head.i != t.i else -1 for t in gold])
        punct = numpy.array([t.dep_ in ("p", "punct") for t in gold])
        for a, b in spans:
            yield (doc, atoms, allow_break, words, tags, a, b, numpy.where(gh[a:b] >= 0, gh[a:b] - a, -1),
                   punct[a:b])


def _rescored_errors(lists: List[Dict[str, Any]], union: bool, weights: Sequence[float]) -> int:
    """Wrong heads of the trees the weighted sum of scores picks (ParserReranker.choose)."""
    import numpy

    total = 0
    w = numpy.asarray(weights, dtype=numpy.float64)
    for sent in lists:
        n = len(sent["errors"]) if union else sent["n_forward"]
        with numpy.errstate(invalid="ignore"):
            sc = sent["scores"][:n] @ w
        total += int(sent["errors"][int(numpy.argmax(numpy.where(numpy.isnan(sc), -numpy.inf, sc)))])
    return total


def _alternated(run, base, chosen, rounds: int):
    """`run("test", base)` and `run("test", chosen)` alternated `rounds` times, so that a change
    of load hits both sides alike: (base scores, chosen scores, base's best seconds, chosen's
    best seconds, the (base, chosen) seconds of each round)."""
    timings = []
    for _ in range(rounds):
        base_sc, base_s = run("test", base)
        sc, s = run("test", chosen)
        timings.append((base_s, s))
    return base_sc, sc, min(b for b, _ in timings), min(c for _, c in timings), timings


def bidirectional_stage(paths: Dict[str, str], work: Path, overrides: List[str], results: Path,
                        k: Optional[int] = None, rounds: int = 2) -> None:
    """The product path of the other models' rescoring: `spacy train
    configs/parser_bidirectional.cfg` (the parser, its right-to-left model and its graph model
    trained together; the block's k, or `k`: another list size, a prediction setting). Each dev
    and test sentence's forward and reversed k best are scored by the three models once
    (_rescored_lists; dev_head_accuracy_of_the_lists: the chosen weights' share of right heads
    among non-punctuation words, close to the pipeline's dev_uas, which is spaCy's F-score that
    also leaves out arcs predicted as punctuation). For the forward list alone and for the
    union, the reversed model's weight (REVERSE_LAMBDAS), with the graph model's at 0 and then
    chosen too (GRAPH_WEIGHTS), are chosen on dev by wrong heads; then nlp.pipe on dev and test with each chosen block, on
    test against the same pipeline without the block, alternated `rounds` times."""
    import json

    import spacy
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    import spacy_structperc  # noqa: F401

    name = "bidirectional"
    _train_pipeline(C.REPO_ROOT / "configs" / BIDIRECTIONAL_CONFIG, work, name, paths["train"], paths["dev"],
                    overrides)
    nlp = spacy.load(_model_dir(work, name))
    parser = nlp.get_pipe("parser")
    block = dict(parser.cfg["reranker"])
    if k is not None:
        block["k"] = k   # the list size is a prediction setting: the same trained models
    models = parser._reranking.reverse_model, parser._reranking.graph_model   # as loaded
    if models[0] is None or models[1] is None:
        raise RuntimeError(f"{_model_dir(work, name)} holds no reversed or no graph model")
    gold = {s: C.load_docs(Path(paths[s]), nlp.vocab) for s in ("dev", "test")}

    def use(reranker):
        parser.cfg["reranker"] = reranker
        parser._reset_reranker()
        if reranker is not None:
            parser._reranking.reverse_model, parser._reranking.graph_model = models

    def run(split, reranker):
        use(reranker)
        docs = C.unannotated_copies(gold[split], nlp.vocab)
        with C.Timer() as t:
            preds = list(nlp.pipe(docs, batch_size=1000))
        sc = parser_score([Example(p, g) for p, g in zip(preds, gold[split])])
        return sc, t.seconds

    load_before = C.load_average()
    use({**block, "union": True, "reverse": 1.0, "graph": 1.0})   # every column; weights come later
    lists, list_seconds = {}, {}
    for split in ("dev", "test"):
        with C.Timer() as t:
            lists[split] = _rescored_lists(nlp, gold[split], block["k"])
        list_seconds[split] = t.seconds
        print(f"  bidirectional {split}: lists in {t.seconds:.0f}s", flush=True)
    base_dev = run("dev", None)[0]["dep_uas"]
    rows: List[Dict[str, Any]] = []
    details: Dict[str, Any] = {}
    run_json = work / "base" / name / "run.json"
    train = json.loads(run_json.read_text()) if run_json.exists() else {}
    for graph in (False, True):
        for union in (False, True):
            # the union needs the reversed model's k best, so a weight > 0 for it (the block's rule)
            grid = [(lam, g) for lam in REVERSE_LAMBDAS for g in (GRAPH_WEIGHTS if graph else (0.0,))
                    if lam > 0 or (g > 0 and not union)]
            dev_errors = {f"{lam} {g}": _rescored_errors(lists["dev"], union, (1.0, lam, g)) for lam, g in grid}
            lam, g = min(grid, key=lambda x: (dev_errors[f"{x[0]} {x[1]}"], x[1], x[0]))
            chosen = {**block, "reverse": lam, "graph": g, "union": union}
            dev_sc = run("dev", chosen)[0]
            base_sc, bi_sc, base_s, bi_s, timings = _alternated(run, None, chosen, rounds)
            setting = (f"bidirectional{' + graph' if graph else ''} k={block['k']}{', union' if union else ''}, "
                       f"in the pipeline (beam {parser.cfg['beam_width']} widened to "
                       f"{max(block['k'], parser.cfg['beam_width'])})")
            print(f"  {setting}: weights {lam} / {g}, dev {dev_sc['dep_uas']:.4f}, test {bi_sc['dep_uas']:.4f}",
                  flush=True)
            n_dev = sum(x["words"] for x in lists["dev"])
            metrics = {"dep_uas": bi_sc["dep_uas"], "dep_las": bi_sc["dep_las"], "dev_uas": dev_sc["dep_uas"],
                       "dev_head_accuracy_of_the_lists": 1.0 - dev_errors[f"{lam} {g}"] / n_dev,
                       "dev_las": dev_sc["dep_las"], "weight": lam, "graph_weight": g, "predict_seconds": bi_s,
                       "base_predict_seconds": base_s, "time_ratio": bi_s / base_s,
                       "base_dep_uas": base_sc["dep_uas"], "base_dep_las": base_sc["dep_las"],
                       "base_dev_uas": base_dev}
            if train.get("seconds"):
                metrics["train_seconds"] = train["seconds"]
            for part in ("model", "reranker"):   # the forward parser's file; the other models'
                metrics[f"disk_mb:parser/{part}"] = (_model_dir(work, name) / "parser" / part).stat().st_size / 1e6
            _row_adder(rows)(setting, metrics)
            details[f"ud_en_ewt pipeline {setting}"] = {
                "block": chosen, "dev_errors_by_weights": dev_errors, "timings_base_bidirectional": timings}
    use(block)
    details["ud_en_ewt pipeline bidirectional"] = {"load_avg_before": load_before, "list_seconds": list_seconds,
                                                   "load_avg_after": C.load_average(), "train": train}
    settings = {r["setting"] for r in rows}
    C.save_results(results, "reranking", rows, details=details, replace=lambda r: r["setting"] in settings,
                   errors={}, command=" ".join(["python"] + sys.argv), notes=NOTES)


TAG_FLIPS = (1, 2, 3, 5)
TAG_WEIGHTS = (4.0, 6.0, 8.0, 12.0, 16.0)


def _tag_variant_lists(nlp, gold_docs, weights: Sequence[float]) -> List[Dict[str, Any]]:
    """Per span of `gold_docs` (tagged by the pipeline's tagger with its alternatives): for each
    tag variant (ParserReranker.tag_variants, up to max(TAG_FLIPS) flips) the weighted
    rescored score, the wrong heads of each tree, the variant's cost and rank."""
    import numpy

    parser = nlp.get_pipe("parser")
    rr = parser._reranking
    k = rr.block["k"]
    width = max(k, parser.cfg["beam_width"])
    w = numpy.asarray(weights, dtype=numpy.float64)
    out = []
    for doc, atoms, allow_break, words, tags, a, b, ref, punct in _tagged_spans(nlp, gold_docs):
        alternatives = rr.tag_alternatives(doc, tags)
        variants = []
        for vtags, vatoms, cost, rank in rr.tag_variants(tags[a:b], atoms[a:b], alternatives, a, max(TAG_FLIPS)):
            cands = parser._span_kbest(parser.system, vatoms, allow_break, k, width)
            trees, scores = rr.rescored(words[a:b], vtags, vatoms, allow_break, cands, k, width)
            with numpy.errstate(invalid="ignore"):
                total = scores @ w
            variants.append({"total": numpy.where(numpy.isnan(total), -numpy.inf, total), "cost": cost,
                             "rank": rank, "errors": numpy.array([int(((h != ref) & ~punct).sum()) for h, _ in trees])})
        out.append({"variants": variants, "words": int((~punct).sum())})
    return out


def _tag_variant_errors(lists: List[Dict[str, Any]], flips: int, weight: float) -> int:
    """Wrong heads of the trees ParserReranker.rescored_choice picks with tag_flips = `flips`
    and tag_weight = `weight`."""
    import numpy

    total = 0
    for span in lists:
        best, errors = -numpy.inf, None
        for v in span["variants"]:
            if v["rank"] > flips:
                continue
            t = v["total"] - weight * v["cost"]
            j = int(numpy.argmax(t))
            if errors is None or t[j] > best:
                best, errors = t[j], int(v["errors"][j])
        total += errors
    return total


def tag_flips_stage(paths: Dict[str, str], work: Path, overrides: List[str], results: Path, k: int,
                    rounds: int = 2) -> None:
    """Tag variants in the reranked pipeline: the trained parser_bidirectional.cfg pipeline (as
    bidirectional_stage, cached), its tagger with alternatives on (set_alternatives), the block
    at list size `k` with the union, the reversed and graph models' weights chosen on dev (as
    bidirectional_stage), then tag_flips (TAG_FLIPS) and tag_weight (TAG_WEIGHTS) chosen on dev
    by wrong heads from each dev span's variant lists (_tag_variant_lists), and nlp.pipe on dev
    and test with the chosen block, on test against the same pipeline without the block,
    alternated `rounds` times (configure_reranker switches the block; the base is the parser
    with its block's models left out)."""
    import json

    import spacy
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example

    import spacy_structperc  # noqa: F401

    name = "bidirectional"
    _train_pipeline(C.REPO_ROOT / "configs" / BIDIRECTIONAL_CONFIG, work, name, paths["train"], paths["dev"],
                    overrides)
    nlp = spacy.load(_model_dir(work, name))
    nlp.get_pipe("tagger").set_alternatives(True)
    parser = nlp.get_pipe("parser")
    block = dict(parser.cfg["reranker"])
    gold = {s: C.load_docs(Path(paths[s]), nlp.vocab) for s in ("dev", "test")}

    def run(split, with_block):
        chosen = parser.cfg["reranker"]
        if not with_block:
            parser.cfg["reranker"] = None   # predict parses the 1-best without a block
        try:
            docs = C.unannotated_copies(gold[split], nlp.vocab)
            with C.Timer() as t:
                preds = list(nlp.pipe(docs, batch_size=1000))
        finally:
            parser.cfg["reranker"] = chosen
        return parser_score([Example(p, g) for p, g in zip(preds, gold[split])]), t.seconds

    load_before = C.load_average()
    parser.configure_reranker(k=k, union=True, reverse=1.0, graph=1.0, tag_flips=0)
    with C.Timer() as t:
        lists = _rescored_lists(nlp, gold["dev"], k)
    grid = [(lam, g) for lam in REVERSE_LAMBDAS if lam > 0 for g in GRAPH_WEIGHTS]
    weight_errors = {f"{lam} {g}": _rescored_errors(lists, True, (1.0, lam, g)) for lam, g in grid}
    lam, g = min(grid, key=lambda x: (weight_errors[f"{x[0]} {x[1]}"], x[1], x[0]))
    print(f"  tag flips: weights {lam} / {g} ({t.seconds:.0f}s)", flush=True)
    parser.configure_reranker(reverse=lam, graph=g)
    with C.Timer() as t:
        variants = _tag_variant_lists(nlp, gold["dev"], (1.0, lam, g))
    flip_errors = {f"{f} {w}": _tag_variant_errors(variants, f, w) for f in (0,) + TAG_FLIPS for w in TAG_WEIGHTS}
    f, w = min(((f, w) for f in TAG_FLIPS for w in TAG_WEIGHTS), key=lambda x: (flip_errors[f"{x[0]} {x[1]}"], x))
    print(f"  tag flips: {f} at weight {w} ({t.seconds:.0f}s); dev wrong heads {flip_errors[f'{f} {w}']} "
          f"against {flip_errors[f'0 {w}']} without", flush=True)
    parser.configure_reranker(tag_flips=f, tag_weight=w)
    base_dev = run("dev", False)[0]
    dev_sc = run("dev", True)[0]
    base_sc, sc, base_s, flips_s, timings = _alternated(run, False, True, rounds)
    setting = (f"bidirectional + graph k={k}, union, tag flips, in the pipeline (beam {parser.cfg['beam_width']} "
               f"widened to {max(k, parser.cfg['beam_width'])})")
    print(f"  {setting}: dev {dev_sc['dep_uas']:.4f}, test {sc['dep_uas']:.4f} / {sc['dep_las']:.4f}", flush=True)
    run_json = work / "base" / name / "run.json"
    train = json.loads(run_json.read_text()) if run_json.exists() else {}
    n_dev = sum(x["words"] for x in variants)
    metrics = {"dep_uas": sc["dep_uas"], "dep_las": sc["dep_las"], "dev_uas": dev_sc["dep_uas"],
               "dev_las": dev_sc["dep_las"], "dev_head_accuracy_of_the_lists": 1.0 - flip_errors[f"{f} {w}"] / n_dev,
               "weight": lam, "graph_weight": g, "tag_flips": f, "tag_weight": w, "predict_seconds": flips_s,
               "base_predict_seconds": base_s, "time_ratio": flips_s / base_s, "base_dep_uas": base_sc["dep_uas"],
               "base_dep_las": base_sc["dep_las"], "base_dev_uas": base_dev["dep_uas"]}
    if train.get("seconds"):
        metrics["train_seconds"] = train["seconds"]
    rows: List[Dict[str, Any]] = []
    _row_adder(rows)(setting, metrics)
    details = {f"ud_en_ewt pipeline {setting}": {
        "block": parser.cfg["reranker"], "dev_errors_by_weights": weight_errors,
        "dev_errors_by_flips_and_tag_weight": flip_errors, "timings_base_flips": timings,
        "load_avg_before": load_before, "load_avg_after": C.load_average(), "train": train}}
    parser.cfg["reranker"] = block
    C.save_results(results, "reranking", rows, details=details, replace=lambda r: r["setting"] == setting,
                   errors={}, command=" ".join(["python"] + sys.argv), notes=NOTES)


# ---------------------------------------------------------------------------------------------
# The chunker (CoNLL-2000): jackknifed k-best BIO sequences, chunk-level global features

CHUNK_DATASET = "conll2000"
CHUNK_OURS = "structperc_chunker"
# The most accurate beam setting of bench_chunker.py (beam 8, max-violation, edges: 94.03 F1).
CHUNK_BASE = {"decoder": "beam", "beam_width": 8, "update": "max-violation",
              "model": {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "n_buckets": 1048576,
                        "features": {"@misc": "spacy-structperc.chunker_features.v1", "clusters": True,
                                     "edges": True}}}
CHUNK_LEARNERS = {
    "perceptron": {"learner": "perceptron", "epochs": 10, "min_count": 2,
                   "base_weights": [None, 1.0, 2.0, 4.0, 8.0]},
    "boosting": {"learner": "boosting", "rounds": 1500, "min_count": 2, "eval_every": 50},
}


def _train_chunker(train_gold, epochs: int, seed: int = 0):
    import random

    import spacy
    from spacy.training import Example

    from spacy_structperc.readers import predicted_copy

    nlp = spacy.blank("en")
    chunker = nlp.add_pipe(CHUNK_OURS, config=CHUNK_BASE)
    examples = [Example(predicted_copy(nlp.vocab, g), g) for g in train_gold]
    nlp.initialize(lambda: examples)
    rng = random.Random(seed)
    for _ in range(epochs):
        order = list(examples)
        rng.shuffle(order)
        for batch in C.batches_by_words(order):
            nlp.update(batch)
    C.materialize_averages(nlp)
    return nlp, chunker


def _chunk_candidates(nlp, chunker, gold_docs, k: int, width: int) -> Dict[str, Any]:
    """The raw k-best chunkings of gold_docs (words and given POS tags), with their losses
    (wrong chunks + missed chunks against gold)."""
    import numpy

    from spacy_structperc.pipeline.bio import classes_to_chunks
    from spacy_structperc.readers import predicted_copy

    hashes = chunker._label_hashes
    sizes, n_tok, scores, classes, words, tags, loss = [], [], [], [], [], [], []
    with C.Timer() as t:
        for gold in gold_docs:
            doc = predicted_copy(nlp.vocab, gold)
            cands = chunker.kbest(doc, k, width)
            want = {(sp.start, sp.end, sp.label) for sp in gold.spans["chunks"]}
            sizes.append(len(cands))
            n_tok.append(len(doc))
            words.append(doc.to_array("LOWER").astype(numpy.uint64))
            tags.append(doc.to_array("TAG").astype(numpy.uint64))
            for score, path in cands:
                got = {(a, b, hashes[c]) for a, b, c in classes_to_chunks(path)}
                scores.append(score)
                classes.append(numpy.asarray(path, dtype=numpy.int64))
                loss.append(float(len(got - want) + len(want - got)))
    cat = numpy.concatenate
    return {"sizes": numpy.array(sizes), "n_tok": numpy.array(n_tok), "scores": numpy.array(scores),
            "classes": cat(classes) if classes else numpy.zeros((0,), dtype=numpy.int64),
            "words": cat(words), "tags": cat(tags), "loss": numpy.array(loss)}


def _chunk_f1(nlp, chunker, gold_docs, raw, rows) -> Dict[str, float]:
    import numpy
    from spacy.training import Example

    from spacy_structperc.readers import predicted_copy
    from spacy_structperc.scorers import score_chunks

    cand_len = numpy.repeat(raw["n_tok"], raw["sizes"])
    start = numpy.concatenate([[0], numpy.cumsum(cand_len)])
    docs = [predicted_copy(nlp.vocab, g) for g in gold_docs]
    chunker.set_annotations(docs, [raw["classes"][start[j]:start[j + 1]] for j in rows])
    sc = score_chunks([Example(p, g) for p, g in zip(docs, gold_docs)])
    return {"spans_chunks_f": sc["spans_chunks_f"], "spans_chunks_p": sc["spans_chunks_p"],
            "spans_chunks_r": sc["spans_chunks_r"]}


def chunker_stage(data_dir: Path, work: Path, n_folds: int, k_max: int, width: int, epochs: int,
                  learners: List[str], ks: List[int], results: Path, quick: bool) -> None:
    """Jackknifed chunkers on the training part of CoNLL-2000 train (all but the last 1,000
    sentences, which are dev), k-best lists, chunk features, learners; F1 on test."""
    import numpy

    import spacy_structperc  # noqa: F401
    from spacy.vocab import Vocab

    from spacy_structperc.readers import conll2000_docs
    from spacy_structperc.reranking import ChunkFeatures, make_reranker

    out = work / "chunker"
    out.mkdir(parents=True, exist_ok=True)
    limit = 1200 if quick else 0
    vocab = Vocab()
    train_gold = conll2000_docs(vocab, data_dir / "train.txt", part="train", limit=limit)
    gold = {"dev": conll2000_docs(vocab, data_dir / "train.txt", part="heldout", limit=limit // 4),
            "test": conll2000_docs(vocab, data_dir / "test.txt", part="all", limit=limit // 2)}
    epochs = 2 if quick else epochs
    raw: Dict[str, Dict[str, Any]] = {}
    info: Dict[str, Any] = {"load_avg_before": C.load_average(), "folds": n_folds, "width": width,
                            "base": CHUNK_BASE, "base_epochs": epochs}
    jobs = [(f"train-fold{f}", [d for i, d in enumerate(train_gold) if i % n_folds != f],
             [d for i, d in enumerate(train_gold) if i % n_folds == f]) for f in range(n_folds)]
    full_nlp = None
    for name, fit_on, parse in jobs + [("full", train_gold, None)]:
        targets = [name] if parse is not None else ["dev", "test"]
        paths = {t: out / f"{t}-k{k_max}-w{width}{'-quick' if quick else ''}.npz" for t in targets}
        if parse is not None and paths[name].exists():
            raw[name] = _load_raw(paths[name])
            continue
        with C.Timer() as t:
            nlp, chunker = _train_chunker(fit_on, epochs)
        info[f"train_seconds {name}"] = t.seconds
        print(f"  chunker {name}: trained in {t.seconds:.0f}s", flush=True)
        if parse is None:
            full_nlp = (nlp, chunker)
            for split in targets:
                raw[split] = _chunk_candidates(nlp, chunker, gold[split], k_max, width)
                numpy.savez(paths[split], **raw[split])
        else:
            raw[name] = _chunk_candidates(nlp, chunker, parse, k_max, width)
            numpy.savez(paths[name], **raw[name])
    nlp, chunker = full_nlp
    rows: List[Dict[str, Any]] = []

    def add(setting, metrics):
        for metric, value in metrics.items():
            rows.append(C.make_row(CHUNK_OURS, setting, metric, float(value), dataset=CHUNK_DATASET,
                                   split="test"))
        print(f"  chunker {setting}: " + ", ".join(f"{m}={v:.4f}" for m, v in metrics.items()), flush=True)

    def save():
        info["load_avg_now"] = C.load_average()
        C.save_results(results, "reranking", list(rows), details={"conll2000": dict(info)},
                       replace=lambda r: r["system"] == CHUNK_OURS, errors={})

    from spacy_structperc.readers import predicted_copy
    from spacy_structperc.scorers import score_chunks
    from spacy.training import Example
    with C.Timer() as t:
        preds = list(nlp.pipe([predicted_copy(nlp.vocab, g) for g in gold["test"]], batch_size=1000))
    sc = score_chunks([Example(p, g) for p, g in zip(preds, gold["test"])])
    add("1-best (beam 8)", {"spans_chunks_f": sc["spans_chunks_f"], "predict_seconds": t.seconds})
    feats = ChunkFeatures()
    info["feature_groups"] = list(feats.groups)
    train_raw = _concat_raw([raw[f"train-fold{f}"] for f in range(n_folds)])
    test_all = lists_from_raw(raw["test"], feats)
    add(f"1-best of the width-{width} beam", _chunk_f1(nlp, chunker, gold["test"], raw["test"],
                                                       _global_rows(raw["test"], test_all, test_all.first())))
    for k in sorted(set([4, 8, 16] + ks)):
        if k <= k_max:
            lists = test_all.head(k)
            add(f"oracle k={k}", _chunk_f1(nlp, chunker, gold["test"], raw["test"],
                                           _global_rows(raw["test"], lists, lists.oracle())))
    save()
    for k in ks:
        train = lists_from_raw(train_raw, feats, k=k)
        dev = lists_from_raw(raw["dev"], feats, k=k)
        test = lists_from_raw(raw["test"], feats, k=k)
        info[f"k={k}"] = {"train_sentences": train.n_sentences, "train_candidates": len(train),
                          "train_oracle_in_first": float((train.oracle() == train.first()).mean())}
        for name in learners:
            settings = dict(CHUNK_LEARNERS[name])
            if quick:
                settings.update({"epochs": 2} if "epochs" in settings else {"rounds": 200})
            learner = settings.pop("learner")
            with C.Timer() as tt:
                model = make_reranker(learner, **settings).fit(train, dev)
            chosen = model.choose(test)
            metrics = _chunk_f1(nlp, chunker, gold["test"], raw["test"], _global_rows(raw["test"], test, chosen))
            dev_m = _chunk_f1(nlp, chunker, gold["dev"], raw["dev"], _global_rows(raw["dev"], dev, model.choose(dev)))
            metrics.update({"train_seconds": tt.seconds, "dev_f": dev_m["spans_chunks_f"]})
            add(f"rerank {name} k={k}", metrics)
            info[f"rerank {name} k={k}"] = {"settings": CHUNK_LEARNERS[name], **{
                a: getattr(model, a) for a in ("curve", "dev_curve", "chosen_rounds", "chosen_epoch",
                                               "dev_losses") if hasattr(model, a)}}
            save()


def _saved_boosting_curves(results: Path) -> Dict[int, Any]:
    """Boosting's dev curves at every k already in the results file (so a run at other k
    plots them all)."""
    import json

    out: Dict[int, Any] = {}
    if not results.exists():
        return out
    details = json.loads(results.read_text()).get("details", {})
    for key, entry in details.items():
        if not key.startswith("ud_en_ewt") or not isinstance(entry, dict):
            continue
        for name, info in entry.items():
            if name.startswith("rerank boosting k=") and isinstance(info, dict) and info.get("dev_curve"):
                out[int(name.rsplit("=", 1)[1])] = info["dev_curve"]
    return out


def _plot_boosting(curves, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib missing: no plot)")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, curve in sorted(curves.items()):
        ax.plot([p["round"] for p in curve], [p["dev_loss"] for p in curve], label=f"k={k}")
    ax.set_xlabel("boosting round")
    ax.set_ylabel("dev loss (wrong heads + wrong labelled arcs)")
    ax.set_title("Ranking AdaBoost on UD EWT dev")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


LEARNERS_DEFAULT = "perceptron,perceptron dev,boosting,dual tree,dual poly,svm"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--folds", type=int, default=4)
    p.add_argument("--epochs", type=int, default=8, help="max_epochs of every base pipeline")
    p.add_argument("--train-beam", type=int, default=8, help="beam width the base parsers train with")
    p.add_argument("--only", default="base,kbest,rerank",
                   help="parts, comma-separated: base, kbest, rerank, lists (the jackknife check), "
                        "ensemble (the fold-model diagnostic, at each --rerank-k), graph (the "
                        "arc-factored model's scores as features, at each --rerank-k), reverse (a "
                        "right-to-left pipeline's scores and k-best, at each --rerank-k), bidirectional (the "
                        "same in a pipeline: configs/parser_bidirectional.cfg), combine (other rules over the "
                        "reverse stage's two k-best lists: minimum Bayes risk, arc-voting reparse), "
                        "tagflips (bidirectional with tag variants, at --rerank-k, default 32), "
                        "pipeline, chunker")
    p.add_argument("--k", type=int, default=16, help="k-best lists cached (k <= this are prefixes)")
    p.add_argument("--width", type=int, default=16, help="beam width of the k-best decoding")
    p.add_argument("--learners", default=LEARNERS_DEFAULT,
                   help="learners of --only rerank (of --only graph: perceptron, perceptron dev unless given)")
    p.add_argument("--rerank-k", default="8", help="list sizes the learners are trained on")
    p.add_argument("--results", type=Path, default=C.RESULTS_DIR / "reranking.json")
    p.add_argument("--pipeline-learner", default="perceptron")
    p.add_argument("--kbest-splits", default="train,dev,test")
    p.add_argument("--full-only", action="store_true",
                   help="--only base: train the full base pipeline only, not the fold ones (for the 1-best and "
                        "oracle rows: --only base,kbest,rerank --kbest-splits dev,test --learners '')")
    p.add_argument("--features", default=",".join(GROUP_NAMES), help="tree feature groups")
    p.add_argument("--graph-groups", default=",".join(GRAPH_GROUPS),
                   help="graph feature groups (reranking/graph.py graph_keys): rank, gap, disagree, arcs")
    p.add_argument("--no-baselines", action="store_true",
                   help="--only graph: skip the learners without the graph features")
    p.add_argument("--graph-order", type=int, default=1, choices=(1, 2),
                   help="1: arc-factored; 2: with adjacent siblings (McDonald and Pereira 2006)")
    p.add_argument("--graph-epochs", type=int, default=GRAPH_EPOCHS, help="epochs of the arc-factored models")
    p.add_argument("--chunker-learners", default="perceptron,boosting")
    p.add_argument("--chunker-epochs", type=int, default=12)
    args = p.parse_args(argv)
    data_dir = args.data or C.default_data_dir(DATASET)
    paths = prepare_data(data_dir, args.work_dir, args.quick)
    work = args.work_dir / "rerank" / ("quick" if args.quick else "full")
    results = args.results if not args.quick else args.results.with_name("reranking.quick.json")
    groups = [g for g in args.features.split(",") if g]
    # The CPU budget: (folds + 1) pipelines at --epochs and --train-beam instead of
    # parser_beam.cfg's 15 epochs at beam 16, and one evaluation at the end only (model-last is
    # the base model).
    overrides = ["--training.max_epochs", str(2 if args.quick else args.epochs),
                 "--components.parser.beam_width", str(args.train_beam),
                 "--training.eval_frequency", "100000",
                 "--corpora.train.gold_preproc", "true", "--corpora.dev.gold_preproc", "true"]
    only = set(args.only.split(","))
    if "base" in only:
        train_base(paths, work, args.folds, overrides, full_only=args.full_only)
    if "kbest" in only:
        kbest_stage(paths, work, args.folds, args.k, args.width, args.kbest_splits.split(","))
    if "rerank" in only:
        rerank_stage(paths, work, args.folds, args.k, args.width, [x for x in args.learners.split(",") if x],
                     [int(x) for x in args.rerank_k.split(",")], results, args.quick, groups)
    if "lists" in only:
        lists_stage(paths, work, args.folds, args.k, args.width, results)
    if "ensemble" in only:
        for k in [int(x) for x in args.rerank_k.split(",")]:
            ensemble_stage(paths, work, args.folds, args.k, args.width, k, results)
    if "pipeline" in only:
        pipeline_stage(paths, work, args.folds, args.k, args.width, args.pipeline_learner, 8, results, groups)
    if "graph" in only:
        graph_stage(paths, work, args.folds, args.k, args.width, [int(x) for x in args.rerank_k.split(",")],
                    results, groups, args.graph_epochs, [g for g in args.graph_groups.split(",") if g],
                    [x for x in args.learners.split(",") if x] if args.learners != LEARNERS_DEFAULT else
                    ["perceptron", "perceptron dev"], not args.no_baselines, args.graph_order)
    if "bidirectional" in only:
        for k in ([None] if args.rerank_k == "8" else [int(x) for x in args.rerank_k.split(",")]):
            bidirectional_stage(paths, work, overrides, results, k)
    if "tagflips" in only:
        for k in ([32] if args.rerank_k == "8" else [int(x) for x in args.rerank_k.split(",")]):
            tag_flips_stage(paths, work, overrides, results, k)
    if "reverse" in only:
        reverse_stage(paths, work, args.k, args.width, [int(x) for x in args.rerank_k.split(",")], overrides,
                      results)
    if "combine" in only:
        combine_stage(paths, work, args.k, args.width, [int(x) for x in args.rerank_k.split(",")], results)
    if "chunker" in only:
        chunker_stage(C.default_data_dir(CHUNK_DATASET) if args.data is None else args.data.parent / CHUNK_DATASET,
                      work, args.folds, args.k, args.width, args.chunker_epochs,
                      [x for x in args.chunker_learners.split(",") if x],
                      [int(x) for x in args.rerank_k.split(",")], results, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
