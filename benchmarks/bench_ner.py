"""Benchmark structperc_ner against a CRFsuite CRF and spaCy's `ner`, on JNLPBA and CoNLL-2003.

One run, on two corpora (gold tokenization):

- ``jnlpba``: JNLPBA 2004 / GENIA 3.02 (train ``Genia4ERtask1.iob2``, test ``Genia4EReval1.iob2``,
  IOB2, words only). It has no development split: the last 1,000 training sentences are held out
  (the reader's ``part="heldout"``);
- ``conll2003``: CoNLL-2003 English (train ``eng.train``, dev ``eng.testa``, test ``eng.testb``,
  IOB1, with the file's POS tags in ``token.tag_``);

and these systems, each in its own child process:

1. ``structperc_ner:config``, what a user gets: the committed config (``configs/ner.cfg``,
   ``configs/ner_jnlpba.cfg``) trained with ``python -m spacy train`` as project.yml's train-ner
   and train-ner-jnlpba do (the config's own max_epochs unless --epochs), model-best scored on
   test as evaluate-ner does: CoNLL-2003 read as -DOCSTART- documents (ner.cfg's reader reads
   documents), so its timed pass runs over documents too; row setting ``configs/<file>``;
2. the sentence-level baseline: ours trained in-process on one Doc per sentence in the settings
   of STRUCTPERC_SETTINGS (``default``: n_latent 4, modified averaging; ``n_latent 1``), the whole
   training file, ``start_epoch`` before each pass (``_common.train_epochs``);
3. ``crfsuite``: first order, L-BFGS, the observation features of ``ner_features.v1`` (the Brown
   clusters excepted), trained on the training file;
4. ``spacy_ner``: spaCy's CPU efficiency config trained with ``spacy train`` (gold_preproc,
   ``--spacy-max-steps`` steps) with a dev set (CoNLL: eng.testa; JNLPBA: the held-out sentences);

recording test ``ents_f/p/r`` and ``f_<TYPE>`` (fractions), ``train_seconds``, ``predict_wps``
(the fastest of ``--predict-repeats`` ``nlp.pipe`` calls), ``peak_rss_mb`` and ``model_mb`` in
``benchmarks/results/ner.json`` (NOTES says how; rows merged with the file's: only what was re-run
is replaced, and the synthetic-data rows of ``bench_synthetic.py`` are kept). --quick writes to
the work dir's quick-results, never to benchmarks/results.

Retired (rows, curves and figure stay; docs/benchmarks.md): the latent sweep, ``ner_latent.png``
and ``--tune`` (``ner_tune.json``).

Examples (from the repo root)::

    python benchmarks/bench_ner.py --quick --only "structperc_ner:config"     # smoke run on slices
    python benchmarks/bench_ner.py --only "spacy_ner,crfsuite,structperc_ner:config"
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
CONFIG = "config"  # --only "structperc_ner:config": the committed config of each corpus (spacy train)
HELDOUT = 1000  # JNLPBA: the last 1,000 training sentences are the tuning split

IOB2_READER = "spacy-structperc.iob2_reader.v1"
CONLL2003_READER = "spacy-structperc.conll2003_reader.v1"

# Corpora: paths under the data root. "dev": a file of its own, or None to hold out the last
# HELDOUT training sentences. "pos": read the file's POS tags into token.tag_. "config": the
# committed config under configs/ (project.yml's train-ner, train-ner-jnlpba).
DATASETS: Dict[str, Dict[str, Any]] = {
    "jnlpba": {"reader": IOB2_READER, "train": "jnlpba/train/Genia4ERtask1.iob2", "dev": None,
               "test": "jnlpba/test/Genia4EReval1.iob2", "pos": False, "context": False,
               "config": "ner_jnlpba.cfg"},
    "conll2003": {"reader": CONLL2003_READER, "train": "conll2003/eng.train",
                  "dev": "conll2003/eng.testa", "test": "conll2003/eng.testb", "pos": True,
                  "context": True, "config": "ner.cfg"},
}

# The sentence-level baseline (in-process, one Doc per sentence), per corpus: "config" goes to
# nlp.add_pipe("structperc_ner", config=...) over the factory defaults, for "epochs" passes.
# Chosen on the dev splits with runs of 10-12 passes: on JNLPBA the paper's all-latent features
# (dev F1 0.7769 at n_latent 4, 0.7734 at 1; second order with n_latent 2 0.7795); on CoNLL-2003
# a few latent templates with label-level copies of all of them and the context features (0.9113;
# all-latent 0.8964). Dev F1 peaked at 10-11 passes on both; reset_every 4.
JNLPBA_FEATURES = {"@misc": "spacy-structperc.ner_features.v1", "pos": False, "clusters": True,
                   "affixes": 4, "history": 1}
CONLL_FEATURES = {"@misc": "spacy-structperc.ner_features.v1", "pos": True, "clusters": True,
                  "affixes": 4, "history": 1, "latent": "core", "label_level": True, "context": True}


def _settings(features: Dict[str, Any], epochs: int) -> List[Dict[str, Any]]:
    """default (n_latent 4, modified averaging) and n_latent 1 (the plain perceptron, plain
    averaging): the sentence-level baseline."""
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "features": features}
    return [{"setting": "default", "epochs": epochs, "config": {"model": model, "n_latent": 4, "reset_every": 4}},
            {"setting": "n_latent 1", "epochs": epochs, "config": {"model": model, "n_latent": 1, "reset_every": 0}}]


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
    "No dev split: tuning (ours, the retired --tune) and the dev set of spacy train use the last "
    "1,000 training sentences; the in-process rows and CRFsuite train on all 18,546, spaCy's ner "
    "and configs/ner_jnlpba.cfg on the first 17,546.",
    "conll2003: CoNLL-2003 English (4 types), train eng.train, dev eng.testa (tuning; the dev "
    "set of spacy train), test eng.testb; IOB1 read into doc.ents; the file's POS tags in "
    "token.tag_ (ours and CRFsuite use them; spaCy's efficiency config does not). Nobody trains "
    "on eng.testa.",
    "structperc_ner 'configs/...' rows: the committed config as a user trains it, `python -m spacy "
    "train CONFIG --paths.train TRAIN --paths.dev DEV` (project.yml's train-ner, train-ner-jnlpba; "
    "for JNLPBA DEV is the training file, whose last 1,000 sentences the config holds out), for "
    "the config's max_epochs unless the setting names other passes; model-best (the best of "
    "spacy train's dev evaluations) scored on test. configs/ner.cfg reads CoNLL-2003 as "
    "-DOCSTART- documents (gazetteers from the training entities, document features, two-stage "
    "aggregation), and so does this test: one Doc per document of eng.testb, its sentences marked, "
    "for scoring and for the timed nlp.pipe pass ('documents' in the setting), as evaluate-ner "
    "(scripts/evaluate_corpus.py --documents) reads it.",
    "The sentence-level baseline, structperc_ner 'default' and 'n_latent 1' (and the retired "
    "sweep's rows): trained in-process (nlp.update, not spacy train) and tested on one Doc per "
    "sentence, with the features of STRUCTPERC_SETTINGS and none of the configs' BILOU, "
    "gazetteers, document features or two-stage aggregation.",
    "ents_f/p/r, f_<TYPE>: spaCy's Scorer.score_spans(examples, 'ents') on the test set (exact "
    "type and boundaries, as conlleval), as fractions; the config rows use the pipeline's own "
    "scorer as nlp.evaluate does (the same figures on fully annotated gold).",
    "train_seconds: in-process rows: initialize + the epochs of nlp.update (Python loop, batches of "
    "~1,000 words, shuffled each epoch); crfsuite: feature extraction + L-BFGS; config rows and "
    "spaCy ner: the whole spacy train command (including its dev evaluations).",
    "predict_wps: test words / wall seconds of the fastest of --predict-repeats nlp.pipe calls "
    "(batch_size 1000, one process, one thread) over copies of the test Docs without entities "
    "(words, POS tags for CoNLL, sentence starts for documents); for crfsuite the timed loop "
    "extracts features, tags and writes doc.ents.",
    "model_mb: the folders of the saved pipeline's components (config rows: ner; spacy_ner: "
    "tok2vec and ner), the CRFsuite model file, or the serialized component (in-process rows).",
    "crfsuite: first order, the observation features of spacy-structperc.ner_features.v1 (words and "
    "lowercase words in a window of 2 and their bigrams, POS in a window of 2 with bigrams and "
    "trigrams for CoNLL, word shapes, prefixes and suffixes of 1-4 characters, and for CoNLL the "
    "context features: neighbours' affixes and more word bigrams) WITHOUT the Brown "
    "clusters our settings use; IOB2 tags; L-BFGS c1=0, c2=1, 100 iterations (not tuned), trained "
    "on the training file only.",
    "spacy_ner: `spacy init config --pipeline ner --optimize efficiency` (CPU, no vectors), "
    "gold_preproc, one Doc per sentence, max_steps as in the setting name; model-best.",
    "All children run with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS=1.",
]


# ---------------------------------------------------------------------------------------------
# Data and evaluation


def _docs(ds: Dict[str, Any], which: str, limit: int, vocab, documents: bool = False):
    """Gold Docs of one split. which: "train" (the whole training file), "tune_train" (the
    training data when a dev set is needed: JNLPBA all but the last HELDOUT sentences, CoNLL
    eng.train), "dev" (CoNLL eng.testa, JNLPBA the held-out sentences) or "test". documents:
    one Doc per -DOCSTART- document (CoNLL-2003), its sentences marked."""
    from spacy_structperc.readers import ner_docs

    paths = ds["paths"]
    kw = {"reader": ds["reader"], "limit": limit, "pos": ds["pos"], "documents": documents}
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


def _score(pred_docs, gold_docs, nlp=None):
    """(ents_f/p/r and f_<TYPE> for rows, per-type scores for the details); with ``nlp``, by
    its own scorers, as nlp.evaluate scores."""
    from spacy.scorer import Scorer

    egs = C.examples(pred_docs, gold_docs)
    s = Scorer(nlp).score(egs) if nlp is not None else Scorer.score_spans(egs, "ents")
    return dict({k: s[k] for k in ("ents_f", "ents_p", "ents_r")}, **C.per_type_f(s.get("ents_per_type"))), \
        s.get("ents_per_type")


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
    metrics.update({"train_seconds": train_seconds, "predict_wps": wps, "model_mb": len(ner.to_bytes()) / 1e6})
    return {"metrics": metrics,
            "details": {"config": config, "epochs": epochs, "resets_at_pass": resets,
                        "predict_seconds": seconds, "train_sentences": len(examples),
                        "ents_per_type": per_type}}


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
        return C.crf_ner_features(doc, ds["pos"], context=ds["context"])

    def write(doc, tags):
        doc.ents = [Span(doc, s, e, label) for s, e, label in iob_to_chunks(tags)]

    train_seconds = C.crf_fit(((featurize(doc), doc_ner_tags(doc, "IOB2")) for doc in train),
                              out / "ner.crfsuite", params)
    print(f"[crfsuite] trained in {train_seconds:.0f}s", flush=True)
    gold = _docs(ds, "test", limits.get("test", 0), vocab)
    preds, best = C.crf_tag(out / "ner.crfsuite", lambda: _inputs(gold, vocab, ds["pos"]), featurize, write,
                            repeats=predict_repeats)
    metrics, per_type = _score(preds, gold)
    metrics.update({"train_seconds": train_seconds, "predict_wps": C.count_tokens(gold) / best,
                    "model_mb": C.dir_bytes(out / "ner.crfsuite") / 1e6})
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
    metrics, details = _test_trained(run, ds, limits, predict_repeats)
    return {"setting": f"efficiency cfg, {run['steps']} steps", "metrics": metrics,
            "details": dict(details, overrides=run["overrides"], docs=sizes)}


def run_config(ds: Dict[str, Any], out_dir: str, epochs: int, documents: bool, limits: Dict[str, int],
               extra_overrides: Sequence[str] = (), predict_repeats: int = 1) -> Dict[str, Any]:
    """The committed config as project.yml trains it (spacy train; JNLPBA's dev is the training
    file, whose held-out sentences the config reads), model-best tested as evaluate-ner does."""
    paths, out = ds["paths"], Path(out_dir)
    overrides = ["--training.max_epochs", str(epochs)] if epochs else []
    if limits:   # --quick: slices of the corpora, as the other systems read them
        overrides += ["--corpora.train.limit", str(limits["train"]), "--corpora.dev.limit", str(limits["test"])]
    run = C.spacy_train(C.REPO_ROOT / "configs" / ds["config"], out / "model", paths["train"],
                        paths["dev"] or paths["train"], overrides=overrides + list(extra_overrides),
                        log_path=out / "train.log")
    print(f"[{OURS}] configs/{ds['config']}: {run['steps']} steps in {run['seconds']:.0f}s", flush=True)
    metrics, details = _test_trained(run, ds, limits, predict_repeats, documents=documents, own_scorer=True)
    return {"metrics": metrics, "details": dict(details, config=f"configs/{ds['config']}", epochs=epochs,
                                                documents=documents)}


def _test_trained(run: Dict[str, Any], ds: Dict[str, Any], limits: Dict[str, int], predict_repeats: int,
                  documents: bool = False, own_scorer: bool = False):
    """(metrics, details) of a pipeline spacy train saved: its test scores, the timed pass, the
    size of its components' folders (spaCy's ner: tok2vec and ner), the training's seconds."""
    import spacy

    import spacy_structperc  # noqa: F401

    nlp = spacy.load(run["model_dir"])
    gold = _docs(ds, "test", limits.get("test", 0), nlp.vocab, documents=documents)
    preds, wps, seconds = _time_pipe(nlp, gold, predict_repeats, ds["pos"])
    metrics, per_type = _score(preds, gold, nlp if own_scorer else None)
    model = Path(run["model_dir"])
    metrics.update({"train_seconds": run["seconds"], "predict_wps": wps,
                    "model_mb": sum(C.dir_bytes(model / name) for name in nlp.pipe_names) / 1e6})
    return metrics, {"train": run, "predict_seconds": seconds, "test_docs": len(gold), "ents_per_type": per_type,
                     "test_words": C.count_tokens(gold), "model_dir_mb": C.dir_bytes(model) / 1e6}


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
                   + f"; or '{OURS}:SETTING[;SETTING]' (last), SETTING '{CONFIG}' (the committed configs) "
                   "or a name of STRUCTPERC_SETTINGS")
    p.add_argument("--epochs", type=int, default=None,
                   help="override every setting's epochs (the configs': their max_epochs)")
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
    known = {CONFIG} | {s["setting"] for settings in STRUCTPERC_SETTINGS.values() for s in settings}
    systems, ours_settings = C.parse_only(args.only, SYSTEMS, OURS, known)
    spacy_steps = args.spacy_max_steps or (QUICK_SPACY_STEPS if args.quick else SPACY_MAX_STEPS)
    jobs = []
    for dataset, ds in datasets.items():
        ddir = bench.run_dir / dataset
        common = {"ds": ds, "limits": limits, "predict_repeats": args.predict_repeats}
        if OURS in systems and (ours_settings is None or CONFIG in ours_settings):
            documents = C.config_reads_documents(C.REPO_ROOT / "configs" / ds["config"], "dev")
            epochs = args.epochs or (QUICK_EPOCHS if args.quick else None)
            setting = f"configs/{ds['config']}" + (", documents" if documents else "") + \
                (f", {epochs} passes" if epochs else "")
            jobs.append(C.Job(f"{dataset} | {OURS} | {setting}", OURS, "run_config",
                              dict(common, out_dir=str(ddir / "config"), epochs=epochs, documents=documents,
                                   extra_overrides=["--training.eval_frequency", "10"] if args.quick else []),
                              setting=setting, dataset=dataset))
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
