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
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

DATASET = "ud_en_ewt"
OURS = "structperc_parser"
BASE_CONFIG = "parser_beam.cfg"
SPLIT_FILES = {"train": "*-ud-train.conllu", "dev": "*-ud-dev.conllu", "test": "*-ud-test.conllu"}
QUICK_LIMITS = {"train": 800, "dev": 200, "test": 300}


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


def kbest_stage(paths: Dict[str, str], work: Path, n_folds: int, k: int, width: int) -> None:
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
        kbest_stage(paths, work, args.folds, args.k, args.width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
