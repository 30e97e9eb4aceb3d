"""Benchmark the latent-variable perceptron NER against a CRFsuite CRF and spaCy's `ner`.

One run, on two corpora (one Doc per sentence, gold tokenization):

- ``jnlpba``: JNLPBA 2004 / GENIA 3.02 (train ``Genia4ERtask1.iob2``, test ``Genia4EReval1.iob2``,
  IOB2, words only). It has no development split: tuning uses the last 1,000 training sentences
  (the reader's ``part="heldout"``);
- ``conll2003``: CoNLL-2003 English (train ``eng.train``, dev ``eng.testa``, test ``eng.testb``,
  IOB1, with the file's POS tags in ``token.tag_``);

and three systems, each in its own child process:

1. ours (structperc_ner) in the settings of STRUCTPERC_SETTINGS below (n_latent 4 with modified
   averaging, and 1 with plain averaging): trained in-process (``_common.train_epochs``,
   ``start_epoch`` called before each pass) on the whole training file (JNLPBA: all 18,546
   sentences; CoNLL: eng.train), for the number of epochs in the table;
2. CRFsuite, first order, L-BFGS, with the observation features of
   ``spacy-structperc.ner_features.v1`` (the Brown clusters excepted), trained on the training file;
3. spaCy's built-in ``ner`` (CPU efficiency config from ``spacy init config``) trained with
   ``spacy train`` on the training data with a dev set (CoNLL: eng.testa; JNLPBA: all but the last
   1,000 training sentences, with those as dev), ``gold_preproc`` on, ``--spacy-max-steps`` steps;

recording test ``ents_f/p/r`` (``Scorer.score_spans(examples, "ents")``, fractions),
``train_seconds``, ``predict_wps`` (test words / seconds of the fastest of ``--predict-repeats``
``nlp.pipe`` calls, batch_size 1000, over copies of the test Docs without entities) and
``peak_rss_mb`` in ``benchmarks/results/ner.json`` (component "ner"; rows merged with the
file's: only what was re-run is replaced, and the synthetic-data rows of ``bench_synthetic.py``
are kept).

Retired, being finished (their rows, curves and figure stay; docs/benchmarks.md): the latent
sweep, its plot ``ner_latent.png``, and ``--tune`` (the dev curves of ``ner_tune.json``).

Examples (from the repo root)::

    python benchmarks/bench_ner.py --quick                     # smoke run on slices
    python benchmarks/bench_ner.py                             # everything, both corpora
    python benchmarks/bench_ner.py --only spacy_ner,crfsuite   # the peers only
    python benchmarks/bench_ner.py --only "structperc_ner:n_latent 1" --datasets jnlpba

The data root defaults to ``$STRUCTPERC_DATA``, else ``../shared/data`` (``jnlpba/``,
``conll2003/`` under it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "ner"
OURS = "structperc_ner"
SYSTEMS = ("spacy_ner", "crfsuite", OURS)
HELDOUT = 1000  # JNLPBA: the last 1,000 training sentences are the tuning split

IOB2_READER = "spacy-structperc.iob2_reader.v1"
CONLL2003_READER = "spacy-structperc.conll2003_reader.v1"

# Corpora: paths under the data root. "dev": a file of its own, or None to hold out the last
# HELDOUT training sentences. "pos": read the file's POS tags into token.tag_.
DATASETS: Dict[str, Dict[str, Any]] = {
    "jnlpba": {"reader": IOB2_READER, "train": "jnlpba/train/Genia4ERtask1.iob2", "dev": None,
               "test": "jnlpba/test/Genia4EReval1.iob2", "pos": False, "context": False},
    "conll2003": {"reader": CONLL2003_READER, "train": "conll2003/eng.train",
                  "dev": "conll2003/eng.testa", "test": "conll2003/eng.testb", "pos": True,
                  "context": True},
}

# Our settings, per corpus: "config" goes to nlp.add_pipe("structperc_ner", config=...) over the
# factory defaults; "epochs" is the number of passes over the training data. Chosen on the dev
# splits (JNLPBA: the last 1,000 training sentences; CoNLL-2003: eng.testa) with
# runs of 10-12 epochs:
# - JNLPBA, words only: the paper's all-latent features were best (dev F1 0.7769 at n_latent 4
#   vs 0.7734 for n_latent 1; label-level copies 0.7693; context features and window 3 no gain);
#   second order (history 2, order 2) with n_latent 2 reached 0.7795.
# - CoNLL-2003: all-latent features lost to n_latent 1 (0.8964 vs 0.9055); a few latent
#   templates plus label-level copies of all of them (latent "core", label_level) recovered it
#   (0.9063), and the context features added half a point (0.9113).
# - Dev F1 peaked at 10-11 passes on both; reset_every 4 (k=2 was no better on JNLPBA).
JNLPBA_FEATURES = {"@misc": "spacy-structperc.ner_features.v1", "pos": False, "clusters": True,
                   "affixes": 4, "history": 1}
CONLL_FEATURES = {"@misc": "spacy-structperc.ner_features.v1", "pos": True, "clusters": True,
                  "affixes": 4, "history": 1, "latent": "core", "label_level": True, "context": True}


def _model(features: Dict[str, Any], **changes) -> Dict[str, Any]:
    return {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "features": dict(features, **changes)}


def _settings(features: Dict[str, Any], epochs: int) -> List[Dict[str, Any]]:
    """default (n_latent 4, modified averaging) and n_latent 1 (the plain perceptron, plain
    averaging, as configs/ner.cfg trains)."""
    return [{"setting": "default", "epochs": epochs,
             "config": {"model": _model(features), "n_latent": 4, "reset_every": 4}},
            {"setting": "n_latent 1", "epochs": epochs,
             "config": {"model": _model(features), "n_latent": 1, "reset_every": 0}}]


STRUCTPERC_SETTINGS: Dict[str, List[Dict[str, Any]]] = {
    "jnlpba": _settings(JNLPBA_FEATURES, 11), "conll2003": _settings(CONLL_FEATURES, 10)}

CRF_PARAMS = {"algorithm": "lbfgs", "c1": 0.0, "c2": 1.0, "max_iterations": 100}
SPACY_MAX_STEPS = 4000

QUICK_LIMITS = {"train": 1000, "test": 500}
QUICK_EPOCHS = 2
QUICK_CRF_ITERATIONS = 30
QUICK_SPACY_STEPS = 200

NOTES = [
    "jnlpba: JNLPBA 2004 (GENIA 3.02, 5 entity types), train Genia4ERtask1.iob2 (18,546 sentences, "
    "492,551 tokens), test Genia4EReval1.iob2 (3,856 sentences, 101,039 tokens), IOB2, words only. "
    "No dev split: tuning (ours, the retired --tune) and spaCy's dev set use the last 1,000 training "
    "sentences; the final models of ours and CRFsuite train on all 18,546, spaCy's ner on the "
    "first 17,546.",
    "conll2003: CoNLL-2003 English (4 types), train eng.train, dev eng.testa (tuning; spaCy's dev "
    "set), test eng.testb; IOB1 read into doc.ents; the file's POS tags in token.tag_ (ours and "
    "CRFsuite use them; spaCy's efficiency config does not). Nobody trains on eng.testa.",
    "ents_f/p/r: spaCy's Scorer.score_spans(examples, 'ents') on the test set (exact type and "
    "boundaries, as conlleval), as fractions.",
    "train_seconds: ours: initialize + the epochs of nlp.update (Python loop, batches of ~1,000 "
    "words, shuffled each epoch); crfsuite: feature extraction + L-BFGS; spaCy ner: the whole "
    "spacy train command (including its dev evaluations).",
    "predict_wps: test words / wall seconds of the fastest of --predict-repeats nlp.pipe calls "
    "(batch_size 1000, one process, one thread) over copies of the test Docs without entities "
    "(words, and POS tags for CoNLL); for crfsuite the timed loop extracts features, tags and "
    "writes doc.ents.",
    "crfsuite: first order, the observation features of spacy-structperc.ner_features.v1 (words and "
    "lowercase words in a window of 2 and their bigrams, POS in a window of 2 with bigrams and "
    "trigrams for CoNLL, word shapes, prefixes and suffixes of 1-4 characters, and for CoNLL the "
    "context features: neighbours' affixes and more word bigrams) WITHOUT the Brown "
    "clusters our settings use; IOB2 tags; L-BFGS c1=0, c2=1, 100 iterations (not tuned), trained "
    "on the training file only.",
    "spacy_ner: `spacy init config --pipeline ner --optimize efficiency` (CPU, no vectors), "
    "gold_preproc, max_steps as in the setting name; the model spaCy saves as model-best.",
    "All children run with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS=1.",
]


# ---------------------------------------------------------------------------------------------
# Data and evaluation


def _docs(ds: Dict[str, Any], which: str, limit: int, vocab):
    """Gold Docs of one split. which: "train" (the whole training file), "tune_train" (the
    training data when a dev set is needed: JNLPBA all but the last HELDOUT sentences, CoNLL
    eng.train), "dev" (CoNLL eng.testa, JNLPBA the held-out sentences) or "test"."""
    from spacy_structperc.readers import ner_docs

    paths, kw = ds["paths"], {"reader": ds["reader"], "limit": limit, "pos": ds["pos"]}
    held = {} if paths["dev"] else {"heldout": HELDOUT}  # no dev file: the last training sentences
    if which in ("train", "test"):
        return ner_docs(vocab, paths[which], part="all", **kw)
    if which == "tune_train":
        return ner_docs(vocab, paths["train"], part="train" if held else "all", **held, **kw)
    if which == "dev":
        return ner_docs(vocab, paths["dev"] or paths["train"], part="heldout" if held else "all", **held, **kw)
    raise ValueError(f"unknown split {which!r}")


def _inputs(gold_docs, vocab, pos: bool):
    from spacy_structperc.readers import ner_predicted_copy

    return [ner_predicted_copy(vocab, d, pos=pos) for d in gold_docs]


def _score(pred_docs, gold_docs):
    """(ents_f/p/r for rows, per-type scores for the details)."""
    from spacy.scorer import Scorer

    s = Scorer.score_spans(C.examples(pred_docs, gold_docs), "ents")
    return {k: s[k] for k in ("ents_f", "ents_p", "ents_r")}, s.get("ents_per_type")


def _time_pipe(nlp, gold_docs, repeats: int, pos: bool):
    return C.time_pipe_best_of(nlp, lambda: _inputs(gold_docs, nlp.vocab, pos), C.count_tokens(gold_docs), repeats)


# ---------------------------------------------------------------------------------------------
# Systems (each runs in a child process)


def run_structperc(ds: Dict[str, Any], config: Dict[str, Any], epochs: int, limits: Dict[str, int],
                   predict_repeats: int = 1, seed: int = 0) -> Dict[str, Any]:
    import spacy
    from spacy.training import Example

    import spacy_structperc  # noqa: F401

    nlp = spacy.blank("en")
    ner = nlp.add_pipe(OURS, config=config)
    train_gold = _docs(ds, "train", limits.get("train", 0), nlp.vocab)
    eval_gold = _docs(ds, "test", limits.get("test", 0), nlp.vocab)
    examples = [Example(p, g) for p, g in zip(_inputs(train_gold, nlp.vocab, ds["pos"]), train_gold)]
    resets = []

    def before(epoch):
        if ner.start_epoch(epoch - 1):
            resets.append(epoch)

    def after(epoch, losses, seconds):
        print(f"[{OURS}] epoch {epoch}: loss {losses.get(OURS, 0):.0f}, {seconds:.1f}s"
              + (" (weights reset to averages)" if resets and resets[-1] == epoch else ""), flush=True)

    train_seconds = C.train_epochs(nlp, examples, epochs, seed=seed, before=before, after=after)
    preds, wps, seconds = _time_pipe(nlp, eval_gold, predict_repeats, ds["pos"])
    metrics, per_type = _score(preds, eval_gold)
    metrics.update({"train_seconds": train_seconds, "predict_wps": wps})
    return {"metrics": metrics,
            "details": {"config": config, "epochs": epochs, "resets_at_pass": resets,
                        "predict_seconds": seconds, "train_sentences": len(examples),
                        "ents_per_type": per_type, "model_bytes": len(ner.to_bytes())}}


def crf_token_features(doc, pos: bool, window: int = 2, affixes: int = 4,
                       context: bool = False) -> List[List[str]]:
    """The observation features of spacy-structperc.ner_features.v1 (clusters excepted): the
    label history is the CRF's own first-order transition. Positions outside the sentence read
    as <s> / </s>, as the core's padding does; a prefix/suffix longer than the word is absent."""
    from spacy_structperc.atoms import _shape, _short_shape

    words = [t.text for t in doc]
    lower = [w.lower() for w in words]
    shape = [_shape(w) for w in words]
    sshape = [_short_shape(w) for w in words]
    tags = [t.tag_ for t in doc] if pos else None
    n = len(words)

    def at(seq, i):
        return seq[i] if 0 <= i < n else ("<s>" if i < 0 else "</s>")

    out = []
    for i in range(n):
        f = ["b", "o0=" + words[i], "w0=" + lower[i]]
        for k in range(1, window + 1):
            f += [f"w-{k}=" + at(lower, i - k), f"w+{k}=" + at(lower, i + k)]
        f += ["w-1w0=" + at(lower, i - 1) + "|" + lower[i], "w0w+1=" + lower[i] + "|" + at(lower, i + 1)]
        if pos:
            f.append("p0=" + tags[i])
            for k in range(1, window + 1):
                f += [f"p-{k}=" + at(tags, i - k), f"p+{k}=" + at(tags, i + k)]
            for a, b in ((-2, -1), (-1, 0), (0, 1), (1, 2)):
                f.append(f"p{a:+d}p{b:+d}=" + at(tags, i + a) + "|" + at(tags, i + b))
            for a in (-2, -1, 0):
                f.append(f"p{a:+d}3=" + "|".join(at(tags, i + a + j) for j in range(3)))
        f.append("sh0=" + shape[i])
        for k in range(1, window + 1):
            f += [f"sh-{k}=" + at(sshape, i - k), f"sh+{k}=" + at(sshape, i + k)]
        for a, b in ((-2, -1), (-1, 0), (0, 1), (1, 2)):
            f.append(f"sh{a:+d}sh{b:+d}=" + at(sshape, i + a) + "|" + at(sshape, i + b))
        w = words[i]
        for k in range(1, affixes + 1):
            if len(w) >= k:
                f += [f"p{k}=" + w[:k], f"s{k}=" + w[-k:]]
        if context:   # ner_features.v1 with context = true
            for d in (-1, 1):
                if 0 <= i + d < n:
                    v = words[i + d]
                    f += [f"s3{d:+d}=" + v[-3:]] if len(v) >= 3 else []
                    f += [f"s4{d:+d}=" + v[-4:]] if len(v) >= 4 else []
                    f += [f"p3{d:+d}=" + v[:3]] if len(v) >= 3 else []
            f += ["w-2w-1=" + at(lower, i - 2) + "|" + at(lower, i - 1),
                  "w+1w+2=" + at(lower, i + 1) + "|" + at(lower, i + 2),
                  "w-1w+1=" + at(lower, i - 1) + "|" + at(lower, i + 1),
                  "sh0w-1=" + sshape[i] + "|" + at(lower, i - 1),
                  "sh0w+1=" + sshape[i] + "|" + at(lower, i + 1)]
        out.append(f)
    return out


def run_crfsuite(ds: Dict[str, Any], out_dir: str, params: Dict[str, Any], limits: Dict[str, int],
                 predict_repeats: int = 1) -> Dict[str, Any]:
    from spacy.tokens import Span
    from spacy.vocab import Vocab

    from spacy_structperc.readers import doc_ner_tags
    from spacy_structperc.scorers import iob_to_chunks

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = Vocab()
    train = _docs(ds, "train", limits.get("train", 0), vocab)

    def featurize(doc):
        return crf_token_features(doc, ds["pos"], context=ds["context"])

    def write(doc, tags):
        doc.ents = [Span(doc, s, e, label) for s, e, label in iob_to_chunks(tags)]

    train_seconds = C.crf_fit(((featurize(doc), doc_ner_tags(doc, "IOB2")) for doc in train),
                              out / "ner.crfsuite", params)
    print(f"[crfsuite] trained in {train_seconds:.0f}s", flush=True)
    gold = _docs(ds, "test", limits.get("test", 0), vocab)
    preds, best = C.crf_tag(out / "ner.crfsuite", lambda: _inputs(gold, vocab, ds["pos"]), featurize, write,
                            repeats=predict_repeats)
    metrics, per_type = _score(preds, gold)
    metrics.update({"train_seconds": train_seconds, "predict_wps": C.count_tokens(gold) / best})
    return {"setting": C.crf_setting(params), "metrics": metrics,
            "details": {"params": params, "ents_per_type": per_type, "predict_seconds": best,
                        "train_sentences": len(train)}}


def run_spacy_ner(ds: Dict[str, Any], out_dir: str, max_steps: int, limits: Dict[str, int],
                  extra_overrides: Sequence[str] = (), predict_repeats: int = 1) -> Dict[str, Any]:
    import spacy
    from spacy.tokens import DocBin

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nlp = spacy.blank("en")
    sizes = {}
    for which, name in (("tune_train", "train"), ("dev", "dev")):
        docs = _docs(ds, which, limits.get("train" if name == "train" else "test", 0), nlp.vocab)
        DocBin(docs=docs).to_disk(out / f"{name}.spacy")
        sizes[name] = len(docs)
    run = C.train_spacy_peer(out, "ner", out / "train.spacy", out / "dev.spacy", max_steps=max_steps,
                             extra_overrides=extra_overrides)
    print(f"[spacy_ner] {run['steps']} steps in {run['seconds']:.0f}s", flush=True)
    ner = spacy.load(run["model_dir"])
    gold = _docs(ds, "test", limits.get("test", 0), ner.vocab)
    preds, wps, seconds = _time_pipe(ner, gold, predict_repeats, ds["pos"])
    metrics, per_type = _score(preds, gold)
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps})
    return {"setting": f"efficiency cfg, {run['steps']} steps", "metrics": metrics,
            "details": {"train": run, "overrides": run["overrides"], "predict_seconds": seconds,
                        "docs": sizes, "ents_per_type": per_type}}


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None, help="data root (default: C.default_data_root())")
    p.add_argument("--datasets", type=C.csv(), default=list(DATASETS),
                   help="comma-separated, out of " + ",".join(DATASETS))
    C.add_run_args(p)
    p.add_argument("--only", default=None, help="comma-separated systems out of " + ",".join(SYSTEMS)
                   + "; or 'structperc_ner:SETTING[;SETTING]' (last)")
    p.add_argument("--epochs", type=int, default=None, help="override every setting's epochs")
    p.add_argument("--spacy-max-steps", type=int, default=None, help=f"default {SPACY_MAX_STEPS}")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    data_root = Path(args.data or C.default_data_root()).resolve()
    unknown = [d for d in args.datasets if d not in DATASETS]
    if unknown:
        print(f"unknown datasets {unknown}; choose from {list(DATASETS)}", file=sys.stderr)
        return 2
    datasets = {}
    for name in args.datasets:
        ds = dict(DATASETS[name])
        ds["paths"] = {k: (str(data_root / ds[k]) if ds[k] else None) for k in ("train", "dev", "test")}
        datasets[name] = ds
    bench = C.Bench.start(COMPONENT, __file__, args, argv, lambda results, out: [], OURS, data=data_root)
    if bench is None:
        return 0
    limits = dict(QUICK_LIMITS) if args.quick else {}
    systems, ours_settings = C.parse_only(args.only, SYSTEMS, OURS)
    spacy_steps = args.spacy_max_steps or (QUICK_SPACY_STEPS if args.quick else SPACY_MAX_STEPS)
    jobs = []
    for dataset, ds in datasets.items():
        ddir = bench.run_dir / dataset
        common = {"ds": ds, "limits": limits, "predict_repeats": args.predict_repeats}
        if OURS in systems:
            for s in STRUCTPERC_SETTINGS[dataset]:
                if ours_settings is None or s["setting"] in ours_settings:
                    epochs = args.epochs or (QUICK_EPOCHS if args.quick else s["epochs"])
                    jobs.append(C.Job(f"{dataset} | {OURS} | {s['setting']}", OURS, "run_structperc",
                                      dict(common, config=s["config"], epochs=epochs),
                                      setting=s["setting"], dataset=dataset))
        if "crfsuite" in systems:
            params = dict(CRF_PARAMS)
            if args.quick:
                params["max_iterations"] = QUICK_CRF_ITERATIONS
            jobs.append(C.Job(f"{dataset} | crfsuite", "crfsuite", "run_crfsuite",
                              dict(common, out_dir=str(ddir / "crfsuite"), params=params), dataset=dataset))
        if "spacy_ner" in systems:
            extra = ["--training.eval_frequency", "100"] if args.quick else []
            jobs.append(C.Job(f"{dataset} | spacy_ner", "spacy_ner", "run_spacy_ner",
                              dict(common, out_dir=str(ddir / "spacy_ner"), max_steps=spacy_steps,
                                   extra_overrides=extra), dataset=dataset))
    bench.run(jobs)
    return bench.finish(data={"root": str(data_root), "jnlpba_heldout": HELDOUT,
                              "datasets": {k: v["paths"] for k, v in datasets.items()}},
                        notes=NOTES)


if __name__ == "__main__":
    sys.exit(main())
