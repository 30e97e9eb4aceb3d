"""Benchmark the structured-perceptron chunker against a CRFsuite CRF and spaCy's `ner`.

One run, on CoNLL-2000 (gold POS tags from the data, one Doc per sentence):

1. our chunker (structperc_chunker): the factory default (greedy, Brown clusters), on all chunks
   and on base NPs only, trained in-process (``_common.train_epochs``) on the whole training
   file for the number of epochs chosen on the held-out split (the last 1,000 training sentences);
2. CRFsuite, first order, with the same observation features (the label-history conjunctions
   excepted, which a first-order CRF cannot have), without and with the Brown-cluster features;
3. spaCy's built-in `ner` (CPU efficiency config from `spacy init config`) trained with
   `spacy train` on the chunks as entities: all but the last 1,000 training sentences, with
   those as its dev set (spaCy needs one);

and records test spans_chunks_f/p/r (conlleval counts, spacy_structperc.scorers), train_seconds,
predict_wps (over copies of the test Docs that keep the POS tags) and peak_rss_mb in
``benchmarks/results/chunker.json``. How every script runs and merges its rows: docs/benchmarks.md.

Examples (from the repo root)::

    python benchmarks/bench_chunker.py --quick            # smoke run on slices
    python benchmarks/bench_chunker.py                    # everything
    python benchmarks/bench_chunker.py --only crfsuite,structperc_chunker

Retired, being finished (their rows and figure stay; docs/benchmarks.md): the decoder and
feature grid, its plot ``chunker_lookahead.png``, and the held-out curves (``--tune``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "chunker"
DATASET = "conll2000"
OURS = "structperc_chunker"
SYSTEMS = ("spacy_ner", "crfsuite", OURS)
HELDOUT = 1000

# Our settings: "config" is passed to nlp.add_pipe over the factory defaults (greedy, margin 40,
# words + POS + Brown clusters). The retired grid's settings, chosen on the held-out split (the
# last 1,000 training sentences, 12 epochs; F1 there):
# - greedy decoding plateaus whatever is added: 0.9431 (no clusters, margin 40, the best margin
#   of 0/10/40/100 at depths 0 and 1), 0.9439 with clusters, 0.9442 with clusters at margin 100,
#   0.941-0.943 with edges, more window, word/POS conjunctions or suffixes;
# - the global (beam) update makes the clusters pay: beam 4 0.9422 -> 0.9460 with clusters,
#   beam 3 with clusters 0.9463 (faster than beam 4, same F1);
# - edges (t-1 x neighbours' words and POS) add ~0.15 with wide beams or Viterbi: beam 8
#   0.9458 -> 0.9475, Viterbi order 2 0.9461 -> 0.9476 (beam 16 0.9484 at 10 epochs), but
#   nothing at beam 4 (0.9460 -> 0.9461); greedy depth 1 with clusters 0.9466, with edges 0.9461.
STRUCTPERC_SETTINGS: List[Dict[str, Any]] = [
    {"setting": "default", "config": {}},
    # NP chunking (base NPs only: the other chunks read as O), the task of sun2009 §5.2 and of
    # the 94.37 / 94.38 (Sha & Pereira 2003) figures; same data, features and epochs.
    {"setting": "NP chunks only: default", "config": {}, "types": ["NP"]},
]
DEFAULT_EPOCHS = 12

CRF_PARAMS = {"algorithm": "lbfgs", "c1": 0.0, "c2": 1.0, "max_iterations": 150}

QUICK_LIMITS = {"train": 1000, "test": 500}
QUICK_EPOCHS = 2
QUICK_CRF_ITERATIONS = 30
QUICK_SPACY_STEPS = 200

NOTES = [
    "CoNLL-2000 chunking (WSJ sections 15-18 train, 8,936 sentences; section 20 test, 2,012 "
    "sentences), POS tags as given in the data (token.tag_), one Doc per sentence.",
    "spans_chunks_f/p/r: chunk F1/precision/recall counted as conlleval counts (a chunk is correct "
    "when its type and both boundaries match), as fractions.",
    "CoNLL-2000 has no development split: epochs, margins and CRF settings were chosen on the last "
    "1,000 training sentences (held out), and the final models of ours and CRFsuite train on all "
    "8,936; spaCy's ner trains on the first 7,936 with the last 1,000 as its dev set.",
    "train_seconds: ours: wall time of the training loop (initialize + epochs of nlp.update); "
    "crfsuite: feature extraction + L-BFGS; spaCy ner: the whole spacy train command.",
    "predict_wps: test words / wall seconds of one nlp.pipe call (batch_size 1000, one process, "
    "one thread) over un-annotated copies of the test Docs (words and POS tags); for crfsuite the "
    "timed loop extracts features, tags and writes the chunks as spans.",
    "All children run with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS=1.",
]


# ---------------------------------------------------------------------------------------------
# Data and evaluation


def _docs(path: str, part: str, limit: int, vocab, types: Optional[Sequence[str]] = None):
    """Gold Docs; with `types`, only chunks of those types (the rest of the tokens are O)."""
    from spacy_structperc.readers import conll2000_docs

    docs = conll2000_docs(vocab, path, part=part, heldout=HELDOUT, limit=limit)
    if types is not None:
        for doc in docs:
            doc.spans["chunks"] = [s for s in doc.spans["chunks"] if s.label_ in types]
    return docs


def _inputs(gold_docs, vocab):
    from spacy_structperc.readers import predicted_copy

    return [predicted_copy(vocab, d) for d in gold_docs]


def _score(pred_docs, gold_docs) -> Dict[str, float]:
    from spacy.training import Example

    from spacy_structperc.scorers import score_chunks

    s = score_chunks([Example(p, g) for p, g in zip(pred_docs, gold_docs)])
    return {k: s[k] for k in ("spans_chunks_f", "spans_chunks_p", "spans_chunks_r")}


def _time_pipe(nlp, gold_docs, repeats: int):
    return C.time_pipe_best_of(nlp, lambda: _inputs(gold_docs, nlp.vocab), C.count_tokens(gold_docs), repeats)


# ---------------------------------------------------------------------------------------------
# Systems (each runs in a child process)


def run_structperc(data: Dict[str, str], config: Dict[str, Any], epochs: int, limits: Dict[str, int],
                   predict_repeats: int = 1, seed: int = 0, types: Optional[List[str]] = None) -> Dict[str, Any]:
    import spacy
    from spacy.training import Example

    import spacy_structperc  # noqa: F401

    nlp = spacy.blank("en")
    chunker = nlp.add_pipe(OURS, config=config)
    train_gold = _docs(data["train"], "all", limits.get("train", 0), nlp.vocab, types)
    eval_gold = _docs(data["test"], "all", limits.get("test", 0), nlp.vocab, types)
    examples = [Example(p, g) for p, g in zip(_inputs(train_gold, nlp.vocab), train_gold)]

    def after(epoch, losses, seconds):
        print(f"[{OURS}] epoch {epoch}: {losses.get(OURS, 0):.0f} wrong tokens, {seconds:.1f}s", flush=True)

    train_seconds = C.train_epochs(nlp, examples, epochs, seed=seed, after=after)
    preds, wps, seconds = _time_pipe(nlp, eval_gold, predict_repeats)
    metrics = _score(preds, eval_gold)
    metrics.update({"train_seconds": train_seconds, "predict_wps": wps})
    return {"metrics": metrics,
            "details": {"config": config, "types": types, "epochs": epochs, "predict_seconds": seconds,
                        "train_sentences": len(examples), "model_bytes": len(chunker.to_bytes())}}


def _crf_clusters() -> Dict[int, int]:
    from spacy_structperc.model import _nonzero_clusters

    return _nonzero_clusters("en")


def crf_token_features(doc, clusters: Optional[Dict[int, int]] = None) -> List[List[str]]:
    """The observation features of spacy-structperc.chunker_features.v1 (pos = true); with
    `clusters` (word hash -> Brown cluster), also its cluster features (clusters = true)."""
    words = [t.text.lower() for t in doc]
    tags = [t.tag_ for t in doc]
    n = len(words)

    def w(i):
        return words[i] if 0 <= i < n else ("<s>" if i < 0 else "</s>")

    def p(i):
        return tags[i] if 0 <= i < n else ("<s>" if i < 0 else "</s>")

    if clusters is not None:
        # As AtomExtractor.cluster_of: the word's cluster, else its lowercase form's.
        from spacy.strings import hash_string

        def cluster(text):
            c = clusters.get(hash_string(text)) or clusters.get(hash_string(text.lower()), 0)
            return bin(c)[2:] if c else ""

        bits = [cluster(t.text) for t in doc]

        def bits_at(i):
            return bits[i] if 0 <= i < n else ""

    seq = []
    for i in range(n):
        f = ["b", "w0=" + w(i), "w-1=" + w(i - 1), "w+1=" + w(i + 1), "w-2=" + w(i - 2),
             "w+2=" + w(i + 2), "w-1w0=" + w(i - 1) + "|" + w(i), "w0w+1=" + w(i) + "|" + w(i + 1),
             "p0=" + p(i), "p-1=" + p(i - 1), "p+1=" + p(i + 1), "p-2=" + p(i - 2), "p+2=" + p(i + 2),
             "p-2p-1=" + p(i - 2) + "|" + p(i - 1), "p-1p0=" + p(i - 1) + "|" + p(i),
             "p0p+1=" + p(i) + "|" + p(i + 1), "p+1p+2=" + p(i + 1) + "|" + p(i + 2),
             "p-2p-1p0=" + "|".join((p(i - 2), p(i - 1), p(i))),
             "p-1p0p+1=" + "|".join((p(i - 1), p(i), p(i + 1))),
             "p0p+1p+2=" + "|".join((p(i), p(i + 1), p(i + 2)))]
        if clusters is not None:
            f.extend(f"c{k}_0=" + bits[i][:k] for k in (4, 6, 10, 20) if bits[i])
            f.extend(f"{name}=" + value for name, value in (
                ("cl0", bits[i]), ("c6-1", bits_at(i - 1)[:6]), ("cl-1", bits_at(i - 1)),
                ("c6+1", bits_at(i + 1)[:6]), ("cl+1", bits_at(i + 1))) if value)
        seq.append(f)
    return seq


def _iob(doc) -> List[str]:
    from spacy_structperc.scorers import chunks_to_iob

    return chunks_to_iob(len(doc), [(s.start, s.end, s.label_) for s in doc.spans["chunks"]])


def run_crfsuite(data: Dict[str, str], out_dir: str, params: Dict[str, Any], limits: Dict[str, int],
                 predict_repeats: int = 1) -> Dict[str, Any]:
    from spacy.tokens import Span
    from spacy.vocab import Vocab

    from spacy_structperc.scorers import iob_to_chunks

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = Vocab()
    train = _docs(data["train"], "all", limits.get("train", 0), vocab)
    clusters = _crf_clusters() if params.get("clusters") else None
    train_seconds = C.crf_fit(((crf_token_features(doc, clusters), _iob(doc)) for doc in train),
                              out / "chunks.crfsuite", params)
    print(f"[crfsuite] trained in {train_seconds:.0f}s", flush=True)
    gold = _docs(data["test"], "all", limits.get("test", 0), vocab)

    def write(doc, tags):
        doc.spans["chunks"] = [Span(doc, s, e, label) for s, e, label in iob_to_chunks(tags)]

    preds, seconds = C.crf_tag(out / "chunks.crfsuite", lambda: _inputs(gold, vocab),
                               lambda doc: crf_token_features(doc, clusters), write, repeats=predict_repeats)
    metrics = _score(preds, gold)
    metrics.update({"train_seconds": train_seconds, "predict_wps": C.count_tokens(gold) / seconds})
    setting = C.crf_setting(params) + (", Brown clusters" if params.get("clusters") else "")
    return {"setting": setting, "metrics": metrics, "details": {"params": params}}


def run_spacy_ner(data: Dict[str, str], out_dir: str, max_steps: Optional[int], limits: Dict[str, int],
                  extra_overrides: Sequence[str] = (), predict_repeats: int = 1) -> Dict[str, Any]:
    import spacy
    from spacy.tokens import DocBin, Span

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nlp = spacy.blank("en")
    for part, name in (("train", "train"), ("heldout", "dev")):
        db = DocBin()
        for doc in _docs(data["train"], part, limits.get("train", 0) if part == "train" else
                         min(limits.get("test", 0) or HELDOUT, HELDOUT), nlp.vocab):
            doc.ents = list(doc.spans["chunks"])
            db.add(doc)
        db.to_disk(out / f"{name}.spacy")
    run = C.train_spacy_peer(out, "ner", out / "train.spacy", out / "dev.spacy", max_steps=max_steps,
                             extra_overrides=extra_overrides)
    overrides = run["overrides"]
    print(f"[spacy_ner] {run['steps']} steps in {run['seconds']:.0f}s", flush=True)
    ner = spacy.load(run["model_dir"])
    gold = _docs(data["test"], "all", limits.get("test", 0), ner.vocab)
    preds, wps, seconds = _time_pipe(ner, gold, predict_repeats)
    for doc in preds:
        doc.spans["chunks"] = [Span(doc, e.start, e.end, e.label_) for e in doc.ents]
    metrics = _score(preds, gold)
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps})
    return {"setting": f"efficiency cfg, {run['steps']} steps", "metrics": metrics,
            "details": {"train": run, "overrides": overrides, "predict_seconds": seconds}}


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None)
    C.add_run_args(p)
    p.add_argument("--only", default=None, help="comma-separated systems out of " + ",".join(SYSTEMS)
                   + "; or 'structperc_chunker:SETTING[;SETTING]' (last)")
    p.add_argument("--epochs", type=int, default=None, help=f"our epochs (default {DEFAULT_EPOCHS})")
    p.add_argument("--spacy-max-steps", type=int, default=None)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    data_dir = Path(args.data or C.default_data_dir(DATASET))
    bench = C.Bench.start(COMPONENT, __file__, args, argv, lambda results, out: [], OURS, data=data_dir)
    if bench is None:
        return 0
    data = {"train": str(data_dir / "train.txt"), "test": str(data_dir / "test.txt")}
    limits = dict(QUICK_LIMITS) if args.quick else {}
    epochs = args.epochs or (QUICK_EPOCHS if args.quick else DEFAULT_EPOCHS)

    systems, ours_settings = C.parse_only(args.only, SYSTEMS, OURS, [s["setting"] for s in STRUCTPERC_SETTINGS])
    jobs = []
    common = {"data": data, "limits": limits, "predict_repeats": args.predict_repeats}
    if OURS in systems:
        for s in STRUCTPERC_SETTINGS:
            if ours_settings is None or s["setting"] in ours_settings:
                jobs.append(C.Job(f"{OURS} | {s['setting']}", OURS, "run_structperc",
                                  dict(common, config=s["config"], epochs=epochs, types=s.get("types")),
                                  setting=s["setting"], dataset=DATASET))
    if "crfsuite" in systems:
        for clusters in (False, True):
            params = dict(CRF_PARAMS, clusters=clusters)
            if args.quick:
                params["max_iterations"] = QUICK_CRF_ITERATIONS
            name = "crfsuite-clusters" if clusters else "crfsuite"
            jobs.append(C.Job(name, "crfsuite", "run_crfsuite",
                              dict(common, out_dir=str(bench.run_dir / name), params=params), dataset=DATASET))
    if "spacy_ner" in systems:
        steps = args.spacy_max_steps or (QUICK_SPACY_STEPS if args.quick else None)
        extra = ["--training.eval_frequency", "100"] if args.quick else []
        jobs.append(C.Job("spacy_ner", "spacy_ner", "run_spacy_ner",
                          dict(common, out_dir=str(bench.run_dir / "spacy_ner"), max_steps=steps,
                               extra_overrides=extra), dataset=DATASET))
    bench.run(jobs)
    return bench.finish(epochs=epochs, data={"dir": str(data_dir), "heldout": HELDOUT}, notes=NOTES)


if __name__ == "__main__":
    sys.exit(main())
