"""Benchmark the structured-perceptron tagger against spaCy's tagger and a CRFsuite CRF.

UD English EWT, gold tokenization, one Doc per sentence; the data is converted to
``*.xpos.spacy`` (XPOS in ``tag_``, UPOS in ``pos_``) and ``*.upos.spacy`` (UPOS in both, for
spaCy's ``tagger``, which only learns ``tag_``). Each system trains an XPOS and a UPOS model and
gets test ``tag_acc`` / ``pos_acc``, ``train_seconds`` and ``predict_wps`` of the XPOS model and
``peak_rss_mb``, in ``benchmarks/results/tagger.json``; and, as a check on text of another
domain, the XPOS model's accuracy on the Penn Treebank's WSJ sample (``wsj_tag_acc``;
``--wsj`` names its folder). How every script runs, merges its rows and finds its data:
docs/benchmarks.md.

    python benchmarks/bench_tagger.py --quick                  # smoke run on slices
    python benchmarks/bench_tagger.py                          # everything, full data
    python benchmarks/bench_tagger.py --only crfsuite,spacy    # peers only

Retired, being finished (their rows and figures stay; docs/benchmarks.md): the decoder grid and
its plots, the beam sweep on dev (``--beam-sweep``) and the CRF's (c1, c2) grid (``--crf-tune``).
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "tagger"
DATASET = "ud_en_ewt"
SYSTEMS = ("spacy", "crfsuite", "structperc_tagger")
OURS = "structperc_tagger"
PIPE_NAME = "tagger"  # our component's name in configs/tagger.cfg and configs/tagger_upos.cfg
SPLIT_FILES = {"train": "*-ud-train.conllu", "dev": "*-ud-dev.conllu", "test": "*-ud-test.conllu"}

# Our settings, as data. "setting" is what the results rows and the README show; "overrides" are
# component settings passed to `spacy train` as --components.tagger.KEY VALUE.
STRUCTPERC_SETTINGS: List[Dict[str, Any]] = [
    # configs/tagger.cfg: greedy, lookahead 1 among the labels within 60 of the best, margin 40
    {"setting": "default", "overrides": {}},
    # The fastest setting: no lookahead.
    {"setting": "lookahead 0", "overrides": {"lookahead_depth": 0}},
    # The default without the word-casing atoms (how each word is cased in general text).
    {"setting": "no casing features", "overrides": {"model.features.casing": False}},
]

# CRFsuite: L-BFGS with elastic-net regularization, all label transitions allowed, 100
# iterations. Chosen on dev with the retired --crf-tune (XPOS model, full train set), dev tag_acc for c1:c2 =
# 0.01:0.01 94.60, 0.02:0.01 94.56, 0.05:0.01 94.52, 0.1:0.01 94.46, 0.25:0.01 94.38,
# 0.1:0.001 94.36: flat (0.24 points, ~60 of 25k words), less L1 slightly better. The points are
# kept under "crf_tuning" in the JSON; the setting string of the crfsuite rows names the values.
CRF_PARAMS = {"algorithm": "lbfgs", "c1": 0.01, "c2": 0.01, "max_iterations": 100}

# --quick: slices of the corpus and short training, for a smoke run of the whole harness.
QUICK_LIMITS = {"train": 1000, "dev": 300, "test": 500}
QUICK_SPACY_STEPS = 300
QUICK_CRF_ITERATIONS = 30
QUICK_OURS_OVERRIDES = ["--training.max_epochs", "2", "--training.eval_frequency", "20"]

NOTES = [
    "UD English EWT, gold tokenization (syntactic words; multiword-token ranges and empty nodes "
    "dropped by spaCy's CoNLL-U converter), one Doc per sentence.",
    "tag_acc = XPOS accuracy, pos_acc = UPOS accuracy, as fractions, from "
    "spacy.scorer.Scorer.score_token_attr on Example(predicted, gold) over the test split.",
    "Each system trains two models: XPOS (tag_acc, train_seconds, predict_wps) and UPOS (pos_acc). "
    "spaCy's tagger learns UPOS from a copy of the data with UPOS in token.tag_; our UPOS model "
    "uses configs/tagger_upos.cfg (attr = pos).",
    "train_seconds: wall time of the XPOS training command (spacy train: including data loading, "
    "initialization and its periodic dev evaluations; crfsuite: feature extraction + L-BFGS).",
    "predict_wps: test words / wall seconds of a single nlp.pipe call (batch_size 1000, one "
    "process, one thread) over un-annotated copies of the test Docs; for crfsuite the timed loop "
    "extracts features from the Docs, tags and writes token.tag_.",
    "peak_rss_mb: ru_maxrss of the system's child process or of the largest subprocess it waited "
    "for (the spacy train runs), whichever is larger.",
    "Every spacy train run (spaCy's tagger and ours) gets --corpora.train.gold_preproc true "
    "--corpora.dev.gold_preproc true: training and dev evaluation on the gold tokens.",
    "All children run with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS=1.",
    "dev_xpos_acc: the XPOS model's tag_acc on the dev split as spacy train saved it (model-best).",
    "wsj_tag_acc: the XPOS model's tag accuracy on the Penn Treebank WSJ sample (NLTK's 10%: "
    "3,914 sentences, 94,084 words without the empty elements; 1989 newswire, which no system "
    "trained or was tuned on), the same words given as Docs. Where the two treebanks' guidelines "
    "differ every system errs alike (the PTB tags every 'to' TO, EWT the preposition IN; "
    "'--' is ':' in the PTB), so the column compares systems, not the guidelines.",
]


# ---------------------------------------------------------------------------------------------
# Data


def prepare_data(data_dir: Path, work_dir: Path, quick: bool, wsj_dir: Path) -> Dict[str, Any]:
    """Convert train/dev/test to DocBins: ``{split}.xpos.spacy`` and ``{split}.upos.spacy``; and
    the WSJ sample's trees in `wsj_dir` to ``wsj.xpos.spacy``."""

    def upos_as_tag(doc):
        doc = doc.copy()
        for token in doc:
            token.tag_ = token.pos_
        return doc

    out_dir = work_dir / "data" / ("quick" if quick else "full")
    paths: Dict[str, Any] = {}
    stats: Dict[str, Any] = {}
    for split, pattern in SPLIT_FILES.items():
        src = C.find_split_file(data_dir, split, pattern)
        outputs = {v: out_dir / f"{split}.{v}.spacy" for v in ("xpos", "upos")}
        info = C.conllu_to_docbins(src, outputs, limit=QUICK_LIMITS[split] if quick else 0,
                                   transforms={"upos": upos_as_tag})
        if info.get("converted"):
            print(f"  converted {src.name}: {info['docs']} docs, {info['tokens']} tokens", flush=True)
        for v, p in outputs.items():
            paths[f"{split}_{v}"] = str(p)
        stats[split] = str(src)
    paths["wsj_xpos"] = str(out_dir / "wsj.xpos.spacy")
    info = C.ptb_to_docbin(wsj_dir, Path(paths["wsj_xpos"]))
    if info.get("converted"):
        print(f"  converted {wsj_dir}: {info['docs']} docs, {info['tokens']} tokens", flush=True)
    stats["wsj"] = str(wsj_dir)
    return {"paths": paths, "sources": stats}


def corpus_counts(paths: Dict[str, str]) -> Dict[str, Dict[str, int]]:
    out = {}
    for split in SPLIT_FILES:
        docs = C.load_docs(Path(paths[f"{split}_xpos"]))
        out[split] = {"docs": len(docs), "tokens": C.count_tokens(docs)}
    return out


# ---------------------------------------------------------------------------------------------
# Systems: each runs in a child process via C.run_child and returns
# {"setting": str, "metrics": {metric: value}, "details": {...}}.


def _wsj_tag_acc(vocab, paths: Dict[str, str], tag: Callable[[list], list]) -> float:
    """Tag accuracy on the WSJ sample (see NOTES) of `tag`, which takes un-annotated Docs and
    returns them tagged."""
    gold = C.load_docs(Path(paths["wsj_xpos"]), vocab)
    return C.score_token_attrs(tag(C.unannotated_copies(gold, vocab)), gold, ["tag"])["tag_acc"]


def _pipe(nlp) -> Callable[[list], list]:
    return lambda docs: list(nlp.pipe(docs, batch_size=1000))


def _dev_acc(run: Dict[str, Any]) -> Optional[float]:
    return (run.get("model_dev_scores") or {}).get("tag_acc")


def _evaluate_tag_model(nlp, gold_docs, timed: bool, repeats: int = 1) -> Dict[str, Any]:
    if timed:
        preds, wps, seconds = C.time_pipe(nlp, gold_docs, batch_size=1000, repeats=repeats)
    else:
        preds = list(nlp.pipe(C.unannotated_copies(gold_docs, nlp.vocab), batch_size=1000))
        wps = seconds = None
    return {"preds": preds, "wps": wps, "seconds": seconds}


def run_spacy(paths: Dict[str, str], out_dir: str, max_steps: Optional[int],
              extra_overrides: Sequence[str], eval_split: str = "test",
              predict_repeats: int = 1) -> Dict[str, Any]:
    """spaCy's built-in tagger: efficiency config from `spacy init config`, trained twice."""
    import spacy

    runs = {}
    for variant in ("xpos", "upos"):
        print(f"[spacy] training {variant} model", flush=True)
        runs[variant] = C.train_spacy_peer(Path(out_dir) / variant, "tagger", paths[f"train_{variant}"],
                                           paths[f"dev_{variant}"], max_steps=max_steps,
                                           extra_overrides=extra_overrides)
        print(f"[spacy] {variant}: {runs[variant]['steps']} steps in "
              f"{runs[variant]['seconds']:.0f}s", flush=True)

    nlp_x = spacy.load(runs["xpos"]["model_dir"])
    gold = C.load_docs(Path(paths[f"{eval_split}_xpos"]), nlp_x.vocab)
    ev_x = _evaluate_tag_model(nlp_x, gold, timed=True, repeats=predict_repeats)
    nlp_u = spacy.load(runs["upos"]["model_dir"])
    ev_u = _evaluate_tag_model(nlp_u, gold, timed=False)
    for doc in ev_u["preds"]:
        for token in doc:
            token.pos_ = token.tag_  # the UPOS model predicts UPOS into tag_
    scores = C.score_token_attrs(ev_x["preds"], gold, ["tag"])
    scores.update(C.score_token_attrs(ev_u["preds"], gold, ["pos"]))

    steps_x, steps_u = runs["xpos"]["steps"], runs["upos"]["steps"]
    setting = f"efficiency cfg, {steps_x} steps"
    if steps_u != steps_x:
        setting += f" (UPOS {steps_u})"
    return {
        "setting": setting,
        "metrics": {"tag_acc": scores["tag_acc"], "pos_acc": scores["pos_acc"],
                    "dev_xpos_acc": _dev_acc(runs["xpos"]),
                    "wsj_tag_acc": _wsj_tag_acc(nlp_x.vocab, paths, _pipe(nlp_x)),
                    "train_seconds": runs["xpos"]["seconds"], "predict_wps": ev_x["wps"]},
        "details": {"train_xpos": runs["xpos"], "train_upos": runs["upos"],
                    "upos_train_seconds": runs["upos"]["seconds"],
                    "predict_seconds": ev_x["seconds"], "overrides": runs["xpos"]["overrides"]},
    }


def crf_token_features(doc) -> List[List[str]]:
    """Features comparable to a rich perceptron tagger's: word, affixes, shape, flags, a +-2
    word window and the bigrams with the neighbouring words."""
    words = [t.text for t in doc]
    lowers = [w.lower() for w in words]
    n = len(words)

    def low(i: int) -> str:
        if i < 0:
            return "<s>" if i == -1 else "<s2>"
        if i >= n:
            return "</s>" if i == n else "</s2>"
        return lowers[i]

    seq = []
    for i, token in enumerate(doc):
        w, lw = words[i], lowers[i]
        f = ["b", "w=" + lw, "sh=" + token.shape_]
        for k in range(1, 5):
            if len(lw) >= k:
                f.append(f"p{k}={lw[:k]}")
                f.append(f"s{k}={lw[-k:]}")
        if w.istitle():
            f.append("title")
        if w.isupper():
            f.append("upper")
        if w.isdigit():
            f.append("digit")
        if "-" in w:
            f.append("hyphen")
        f.append("w-2=" + low(i - 2))
        f.append("w-1=" + low(i - 1))
        f.append("w+1=" + low(i + 1))
        f.append("w+2=" + low(i + 2))
        f.append("w-1|w=" + low(i - 1) + "|" + lw)
        f.append("w|w+1=" + lw + "|" + low(i + 1))
        seq.append(f)
    return seq


def run_crfsuite(paths: Dict[str, str], out_dir: str, params: Dict[str, Any],
                 eval_split: str = "test", predict_repeats: int = 1) -> Dict[str, Any]:
    """First-order linear-chain CRF (python-crfsuite), one model for XPOS, one for UPOS."""
    from spacy.vocab import Vocab

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = Vocab()
    train = C.load_docs(Path(paths["train_xpos"]), vocab)
    print(f"[crfsuite] training XPOS model on {len(train)} sentences, {params}", flush=True)
    models = {"tag_": out / "xpos.crfsuite", "pos_": out / "upos.crfsuite"}
    secs = {attr: C.crf_fit(((crf_token_features(doc), [getattr(tok, attr) for tok in doc]) for doc in train),
                            path, params) for attr, path in models.items()}
    print(f"[crfsuite] trained in {secs['tag_']:.0f}s (XPOS) and {secs['pos_']:.0f}s (UPOS)", flush=True)
    del train
    gold = C.load_docs(Path(paths[f"{eval_split}_xpos"]), vocab)
    def writer(attr):
        def write(doc, labels):
            for token, label in zip(doc, labels):
                setattr(token, attr, label)
        return write

    preds = {}
    for attr in ("tag_", "pos_"):
        preds[attr], seconds = C.crf_tag(models[attr],
                                         lambda: C.unannotated_copies(gold, vocab), crf_token_features, writer(attr),
                                         repeats=predict_repeats if attr == "tag_" else 1)
        if attr == "tag_":
            pred_secs = seconds

    def tag_wsj(docs):
        return C.crf_tag(models["tag_"], lambda: docs, crf_token_features, writer("tag_"))[0]

    metrics = {"tag_acc": C.score_token_attrs(preds["tag_"], gold, ["tag"])["tag_acc"],
               "wsj_tag_acc": _wsj_tag_acc(vocab, paths, tag_wsj),
               "pos_acc": C.score_token_attrs(preds["pos_"], gold, ["pos"])["pos_acc"],
               "train_seconds": secs["tag_"], "predict_wps": C.count_tokens(gold) / pred_secs}
    return {"setting": C.crf_setting(params), "metrics": metrics,
            "details": {"params": params, "upos_train_seconds": secs["pos_"], "predict_seconds": pred_secs,
                        "model_bytes": models["tag_"].stat().st_size}}


def run_structperc(paths: Dict[str, str], out_dir: str, config: str, upos_config: Optional[str],
                   overrides: Sequence[str], eval_split: str = "test", predict_repeats: int = 1) -> Dict[str, Any]:
    """Our tagger: `spacy train CONFIG` with setting overrides, loaded from model-best.

    Both models train on the ``*.xpos.spacy`` files (gold XPOS in tag_, UPOS in pos_); the UPOS
    config's component reads and writes pos_.
    """
    import spacy

    import spacy_structperc  # noqa: F401

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"[structperc] training XPOS model: {config} {' '.join(overrides)}", flush=True)
    run_x = C.spacy_train(Path(config), out / "xpos", paths["train_xpos"], paths["dev_xpos"],
                          overrides=overrides, log_path=out / "xpos.train.log")
    print(f"[structperc] XPOS: {run_x['steps']} steps, {run_x['epochs']} epochs in "
          f"{run_x['seconds']:.0f}s", flush=True)
    nlp_x = spacy.load(run_x["model_dir"])
    gold = C.load_docs(Path(paths[f"{eval_split}_xpos"]), nlp_x.vocab)
    ev_x = _evaluate_tag_model(nlp_x, gold, timed=True, repeats=predict_repeats)
    metrics = {"tag_acc": C.score_token_attrs(ev_x["preds"], gold, ["tag"])["tag_acc"],
               "dev_xpos_acc": _dev_acc(run_x), "wsj_tag_acc": _wsj_tag_acc(nlp_x.vocab, paths, _pipe(nlp_x))}
    details: Dict[str, Any] = {"train_xpos": run_x, "predict_seconds": ev_x["seconds"],
                               "overrides": list(overrides)}
    del nlp_x
    if upos_config:
        print(f"[structperc] training UPOS model: {upos_config}", flush=True)
        run_u = C.spacy_train(Path(upos_config), out / "upos", paths["train_xpos"],
                              paths["dev_xpos"], overrides=overrides, log_path=out / "upos.train.log")
        nlp_u = spacy.load(run_u["model_dir"])
        ev_u = _evaluate_tag_model(nlp_u, gold, timed=False)
        metrics["pos_acc"] = C.score_token_attrs(ev_u["preds"], gold, ["pos"])["pos_acc"]
        details.update({"train_upos": run_u, "upos_train_seconds": run_u["seconds"]})
    metrics.update({"train_seconds": run_x["seconds"], "predict_wps": ev_x["wps"]})
    return {"metrics": metrics, "details": details}


# ---------------------------------------------------------------------------------------------
# Jobs


def component_overrides(settings: Dict[str, Any]) -> List[str]:
    out: List[str] = []
    for key, value in settings.items():
        out += [f"--components.{PIPE_NAME}.{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return out


def build_jobs(args, paths: Dict[str, str], run_dir: Path) -> List[C.Job]:
    jobs: List[C.Job] = []
    configs = Path(args.configs)
    upos_cfg = configs / "tagger_upos.cfg"
    upos_cfg_arg = None if args.xpos_only else (str(upos_cfg) if upos_cfg.exists() else None)
    ours_extra = list(C.GOLD_PREPROC_OVERRIDES)   # on gold tokens, as spaCy's (train_spacy_peer)
    ours_extra += list(QUICK_OURS_OVERRIDES) if args.quick else []
    ours_extra += shlex.split(args.ours_overrides or "")
    systems, ours_settings = C.parse_only(args.only, SYSTEMS, OURS, [s["setting"] for s in STRUCTPERC_SETTINGS])
    if "crfsuite" in systems:
        params = dict(CRF_PARAMS, **({"max_iterations": QUICK_CRF_ITERATIONS} if args.quick else {}))
        jobs.append(C.Job("crfsuite", "crfsuite", "run_crfsuite",
                          {"paths": paths, "out_dir": str(run_dir / "crfsuite"), "params": params},
                          dataset=DATASET))
    if "spacy" in systems:
        max_steps = args.spacy_max_steps or (QUICK_SPACY_STEPS if args.quick else None)
        extra = ["--training.eval_frequency", "100"] if args.quick else []
        jobs.append(C.Job("spacy", "spacy", "run_spacy",
                          {"paths": paths, "out_dir": str(run_dir / "spacy"), "max_steps": max_steps,
                           "extra_overrides": extra}, dataset=DATASET))
    if OURS in systems:
        for s in STRUCTPERC_SETTINGS:
            if ours_settings is not None and s["setting"] not in ours_settings:
                continue
            jobs.append(C.Job(
                f"{OURS} | {s['setting']}", OURS, "run_structperc",
                {"paths": paths, "out_dir": str(run_dir / OURS / C.slug(s["setting"])),
                 "config": str(configs / "tagger.cfg"), "upos_config": upos_cfg_arg,
                 "overrides": component_overrides(s["overrides"]) + ours_extra},
                setting=s["setting"], dataset=DATASET))
    return jobs


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=None,
                   help="UD English EWT folder (default: $STRUCTPERC_DATA/ud_en_ewt, else "
                        "../shared/data/ud_en_ewt from the repo root)")
    C.add_run_args(p)
    p.add_argument("--wsj", type=Path, default=None,
                   help="the Penn Treebank WSJ sample's folder, with combined/*.mrg (default: "
                        "$STRUCTPERC_DATA/ptb_sample, else ../shared/data/ptb_sample)")
    p.add_argument("--only", default=None,
                   help="comma-separated systems out of %s; or 'structperc_tagger:SETTING[;SETTING]'"
                        % ",".join(SYSTEMS))
    p.add_argument("--spacy-max-steps", type=int, default=None,
                   help="cap spaCy's training at this many steps (default: its config, 20000 "
                        "steps max, stopped earlier by patience 1600)")
    p.add_argument("--configs", type=Path, default=C.REPO_ROOT / "configs",
                   help="folder with tagger.cfg and tagger_upos.cfg")
    p.add_argument("--ours-overrides", default=None,
                   help="extra spacy train overrides for all our runs, given with '=', e.g. "
                        "--ours-overrides='--training.max_epochs 5'")
    p.add_argument("--xpos-only", action="store_true",
                   help="skip our UPOS runs (no pos_acc for structperc_tagger)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    data_dir = args.data or C.default_data_dir(DATASET)
    bench = C.Bench.start(COMPONENT, __file__, args, argv, lambda results, out: [], OURS, data=data_dir)
    if bench is None:
        return 0
    wsj_dir = args.wsj or C.default_data_dir("ptb_sample")
    paths = prepare_data(Path(data_dir), bench.work_dir, args.quick, Path(wsj_dir))["paths"]
    jobs = build_jobs(args, paths, bench.run_dir)
    if not jobs:
        print("nothing to run")
        return 0
    for job in jobs:
        job.kwargs["predict_repeats"] = args.predict_repeats
        if job.func == "run_structperc" and not Path(job.kwargs["config"]).exists():
            bench.errors[job.key] = f"{job.kwargs['config']} does not exist yet"
            print(f"  {job.key} skipped: {bench.errors[job.key]}", flush=True)
    bench.run([job for job in jobs if job.key not in bench.errors])
    return bench.finish(data={"dir": str(data_dir), "counts": corpus_counts(paths)}, notes=NOTES)


if __name__ == "__main__":
    sys.exit(main())
