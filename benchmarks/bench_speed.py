"""Speed, size and memory of every component and of the English pipeline, ours and spaCy's peer.

Models (trained once and cached under ``--work-dir``; ours again whenever the package's code
changes, see ``C.code_fingerprint``):

- ours: ``configs/tagger.cfg`` and ``configs/parser.cfg`` on UD EWT, ``configs/chunker.cfg`` on
  CoNLL-2000, ``configs/ner.cfg`` on CoNLL-2003 (``--epochs`` overrides each config's own);
  the chunker and the NER run behind our EWT tagger (they read ``token.tag_``), and the full
  pipeline is ``configs/pipeline_en.cfg`` over the parser.cfg pipeline, the chunker and the NER;
- spaCy's peers (``spacy init config --optimize efficiency``, at most ``--spacy-max-steps``):
  tagger, tagger+parser, ``ner`` on CoNLL-2000 chunks and ``ner`` on CoNLL-2003, and for the
  pipeline the tagger+parser with both ``ner``s sourced into it (each with its own tok2vec).

Measured per task, both systems in the same run, each in a fresh child process:

- words/s of ``nlp.pipe`` (one process, one thread, best of ``--repeats``) on the test split's
  gold words (``wps_gold_words``) and on its raw text, one text per sentence, tokenizer included
  (``wps_raw_text``; words counted are the gold words, the same for both systems);
- ``spacy.load`` seconds (best of ``--load-repeats`` fresh processes), RSS right after the load,
  model bytes on disk (total and per component);
- accuracy on the test split's gold words (tag_acc, dep_uas/las, chunks F1, ents F1);
- training: seconds and peak RSS of each model's training command (ours and the peers');
- ours only: a per-stage profile of the predict path in microseconds per word (atoms, decode,
  write = set_annotations, per component; and the tokenizer), from
  ``spacy_structperc.profile.predict_stages`` when the package has it, else timed here from each
  pipe's ``predict``/``set_annotations`` and ``model.atoms`` (the details say which).

    python benchmarks/bench_speed.py --quick
    nice -n 5 python benchmarks/bench_speed.py     # reuse trained peers: --work-dir of an earlier run
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402
import _speed as S  # noqa: E402

COMPONENT = "speed"
OURS = "structperc"
CONFIGS = C.REPO_ROOT / "configs"
QUICK = {"train": 300, "dev": 100, "test": 200}

# Trained models: key -> (system, corpus, what trains it). Ours are keyed on the code as well.
OURS_TRAINED = {
    "tagger": ("tagger.cfg", "ud_en_ewt"),
    # The tagger the chunker and NER tasks read: tagger.cfg at depth 0, the fast tagger (as the
    # English pipeline's, in parser.cfg, decodes); OURS_VARIANTS says how it differs.
    "tagger_fast": ("tagger.cfg", "ud_en_ewt"),
    "tagger_parser": ("parser.cfg", "ud_en_ewt"),
    "chunker": ("chunker.cfg", "conll2000"),
    # clauses.cfg sources the chunker trained above (CLAUSES_SOURCE); only its clause identifier
    # goes into pipeline_en.
    "clauses": ("clauses.cfg", "ptb_clauses"),
    "ner": ("ner.cfg", "conll2003"),
}
# Models trained from a config with overrides: key -> (what the training rows add to the config's
# name, the spacy train overrides).
OURS_VARIANTS = {"tagger_fast": ("at depth 0", ["--components.tagger.lookahead_depth", "0"])}
CLAUSES_SOURCE = "chunker"
PEERS_TRAINED = {
    "tagger": ("tagger", "ud_en_ewt"),
    "tagger_parser": ("tagger,parser", "ud_en_ewt"),
    "ner_chunks": ("ner", "conll2000"),
    "ner_conll2003": ("ner", "conll2003"),
}
# Tasks: name -> (dataset, our model, the peer's model). Assembled models are built from the
# trained ones (see assemble() and BUILT_FROM).
TASKS = {
    "tagger": ("ud_en_ewt", "tagger", "tagger"),
    "tagger+parser": ("ud_en_ewt", "tagger_parser", "tagger_parser"),
    "chunker (with tagger)": ("conll2000", "tagger+chunker", "ner_chunks"),
    "ner (with tagger)": ("conll2003", "tagger+ner", "ner_conll2003"),
    "pipeline_en": ("ud_en_ewt", "pipeline_en", "pipeline_en"),
}
BUILT_FROM: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "structperc": {"tagger+chunker": ("tagger_fast", "chunker"), "tagger+ner": ("tagger_fast", "ner"),
                   "pipeline_en": ("tagger_parser", "chunker", "clauses", "ner")},
    "spacy": {"pipeline_en": ("tagger_parser", "ner_conll2003", "ner_chunks")},
}


NOTES = [
    "wps_gold_words: words/s of nlp.pipe over the test split's gold words, one Doc per sentence, "
    f"batch_size {S.BATCH_SIZE}, one thread, best of --repeats passes; ours and the peer's are "
    "measured in one process with their passes alternated (measure_speed_pair), so both sides of "
    "a ratio see the machine's drift alike; each system's figure from its own process (minutes "
    "apart) is in details.alone. Rows measured before this (see code) came from separate processes",
    "wps_raw_text: the same over the raw text of the same sentences (tokenizer included); the "
    "words counted are the gold words, the same for both systems",
    "load_seconds: spacy.load in a fresh process, best of --load-repeats (import spacy and the "
    "plugin not included: import_seconds); rss_after_load_mb: VmRSS right after that load",
    "disk_mb: the saved pipeline folder; disk_mb:NAME one component's folder; disk_mb:other the "
    "vocab, tokenizer, config and meta",
    "train_*: the model's training command (spacy train) in a child; train_peak_rss_mb is that "
    "child's peak RSS (its spacy train subprocess included)",
    "profile:COMPONENT:STAGE: microseconds per gold word of our predict path on the gold words, "
    "stages atoms (reading the Doc), decode, write (set_annotations) and total; tokenizer:total "
    "is nlp.make_doc on the raw text (details.profile_source says how it was measured); "
    f"decode_cold / decode_cached: the decode of the first {S.CACHED_SENTENCES} sentences right after "
    "the rest of the split / back to back, everything they read then in the CPU's caches (best of "
    f"{S.CACHED_PASSES} each): what waiting on memory costs them, and a floor for memory-layout work",
    "the chunker and NER tasks: ours is our EWT tagger (configs/tagger.cfg at lookahead_depth 0, the "
    "fast tagger, as the English pipeline's tagger decodes; rows measured before tagger.cfg "
    "searched ahead used the config as it was, the same tagger) then the component, "
    "which reads the predicted tags; the peer is spaCy's ner trained on chunks / CoNLL-2003",
    "spaCy's peers train for at most --spacy-max-steps steps (in the setting): their speed and "
    "size, not their accuracy, are what the issue-14 targets compare",
    "the machine is shared (2 cores): load_avg rows and details give the 1-minute load "
    "around each job; ratios within one run are fair",
]


# ---------------------------------------------------------------------------------------------
# Data (in the parent: converted once, cached)


def prepare_data(root: Path, work: Path, quick: bool) -> Dict[str, str]:
    out = work / "data" / ("quick" if quick else "full")
    paths = {}
    for split in ("train", "dev", "test"):
        src = C.find_split_file(root / "ud_en_ewt", split, "*-ud-{split}.conllu")
        paths[f"ewt_{split}"] = str(out / f"ewt_{split}.spacy")
        C.conllu_to_docbins(src, {"gold": Path(paths[f"ewt_{split}"])}, limit=QUICK[split] if quick else 0)
    paths.update(conll2000=str(root / "conll2000"), conll2003=str(root / "conll2003"),
                 ptb_clauses=str(root / "ptb_clauses"))
    return paths


def gold_docs(dataset: str, paths: Dict[str, str], vocab, limit: int = 0) -> list:
    """The test split's gold Docs, one per sentence."""
    if dataset == "ud_en_ewt":
        return C.load_docs(Path(paths["ewt_test"]), vocab)
    if dataset == "conll2000":
        from spacy_structperc.readers import conll2000_docs

        return conll2000_docs(vocab, Path(paths["conll2000"]) / "test.txt", limit=limit)
    from spacy_structperc.readers import CONLL2003_READER, ner_docs

    return ner_docs(vocab, Path(paths["conll2003"]) / "eng.testb", reader=CONLL2003_READER, limit=limit)


def score(dataset: str, preds: list, gold: list, pipe_names: List[str]) -> Dict[str, float]:
    import spacy
    from spacy.scorer import Scorer
    from spacy.tokens import Span
    from spacy.training import Example

    out: Dict[str, float] = {}
    if dataset == "ud_en_ewt":
        out.update(C.score_token_attrs(preds, gold, ["tag"]))
        if "parser" in pipe_names:
            parser_score = spacy.registry.scorers.get("spacy.parser_scorer.v1")()
            s = parser_score([Example(p, g) for p, g in zip(preds, gold)])
            out.update(dep_uas=s["dep_uas"], dep_las=s["dep_las"], sents_f=s["sents_f"])
    elif dataset == "conll2000":
        from spacy_structperc.scorers import score_chunks

        for doc in preds:  # the peer marks chunks as entities
            if "chunks" not in doc.spans:
                doc.spans["chunks"] = [Span(doc, e.start, e.end, e.label_) for e in doc.ents]
        out["chunks_f"] = score_chunks([Example(p, g) for p, g in zip(preds, gold)])["spans_chunks_f"]
    else:
        out["ents_f"] = Scorer.score_spans([Example(p, g) for p, g in zip(preds, gold)], "ents")["ents_f"]
    return out


# ---------------------------------------------------------------------------------------------
# Children: training


def train_ours(key: str, paths: Dict[str, str], out_dir: str, epochs: Optional[int], quick: bool,
               source: Optional[str] = None) -> Dict[str, Any]:
    import spacy_structperc  # noqa: F401

    config, dataset = OURS_TRAINED[key]
    overrides: List[str] = list(OURS_VARIANTS.get(key, ("", []))[1])
    if epochs:
        overrides += ["--training.max_epochs", str(epochs)]
    if dataset == "ud_en_ewt":
        train, dev = paths["ewt_train"], paths["ewt_dev"]
    elif dataset == "conll2000":
        train = dev = str(Path(paths["conll2000"]) / "train.txt")
    elif dataset == "ptb_clauses":
        train, dev = str(Path(paths["ptb_clauses"]) / "train.txt"), str(Path(paths["ptb_clauses"]) / "dev.txt")
        overrides += ["--paths.chunker", str(source)]
    else:
        train, dev = str(Path(paths["conll2003"]) / "eng.train"), str(Path(paths["conll2003"]) / "eng.testa")
    if quick and dataset != "ud_en_ewt":
        overrides += ["--corpora.train.limit", str(QUICK["train"]), "--corpora.dev.limit", str(QUICK["dev"])]
    run = C.spacy_train(CONFIGS / config, Path(out_dir), Path(train), Path(dev), overrides=overrides)
    return {"metrics": {}, "run": run}


def train_peer(key: str, paths: Dict[str, str], out_dir: str, max_steps: int, quick: bool) -> Dict[str, Any]:
    import spacy
    from spacy.tokens import DocBin

    pipeline, dataset = PEERS_TRAINED[key]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if dataset == "ud_en_ewt":
        train, dev = Path(paths["ewt_train"]), Path(paths["ewt_dev"])
    else:  # the chunks or the entities as doc.ents
        nlp = spacy.blank("en")
        limits = (QUICK["train"], QUICK["dev"]) if quick else (0, 0)
        if dataset == "conll2000":
            from spacy_structperc.readers import conll2000_docs

            parts = [conll2000_docs(nlp.vocab, Path(paths["conll2000"]) / "train.txt", part=part, limit=lim)
                     for part, lim in zip(("train", "heldout"), limits)]
            for docs in parts:
                for doc in docs:
                    doc.ents = list(doc.spans["chunks"])
        else:
            from spacy_structperc.readers import CONLL2003_READER, ner_docs

            parts = [ner_docs(nlp.vocab, Path(paths["conll2003"]) / name, reader=CONLL2003_READER, limit=lim)
                     for name, lim in zip(("eng.train", "eng.testa"), limits)]
        train, dev = out / "train.spacy", out / "dev.spacy"
        for docs, path in zip(parts, (train, dev)):
            DocBin(docs=docs).to_disk(path)
    run = C.train_spacy_peer(out, pipeline, train, dev, max_steps=max_steps,
                             extra_overrides=["--training.eval_frequency", str(min(max_steps, max(50, max_steps // 4)))])
    return {"metrics": {}, "run": run}


def assemble(system: str, models: Dict[str, str], out_dir: str, which: List[str]) -> Dict[str, Any]:
    """Build the pipelines ``which`` (keys of BUILT_FROM) from trained ones under ``out_dir``."""
    import spacy

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    built = {}
    if system == OURS:
        import spacy_structperc  # noqa: F401
        from spacy.util import load_config, load_model_from_config

        for comp in ("chunker", "ner"):
            if f"tagger+{comp}" not in which:
                continue
            nlp = spacy.load(models["tagger_fast"])
            nlp.add_pipe(comp, source=spacy.load(models[comp]))
            nlp.to_disk(Path(out_dir) / f"tagger+{comp}")
            built[f"tagger+{comp}"] = str(Path(out_dir) / f"tagger+{comp}")
        if "pipeline_en" not in which:
            return {"metrics": {}, "built": built}
        config = load_config(CONFIGS / "pipeline_en.cfg", interpolate=False, overrides={
            "paths.tagger_parser": models["tagger_parser"], "paths.chunker": models["chunker"],
            "paths.clauses": models["clauses"], "paths.ner": models["ner"]})
        nlp = load_model_from_config(config, auto_fill=True)
        nlp.to_disk(Path(out_dir) / "pipeline_en")
        built["pipeline_en"] = str(Path(out_dir) / "pipeline_en")
        return {"metrics": {}, "built": built}
    nlp = spacy.load(models["tagger_parser"])
    for key, name in (("ner_conll2003", "ner"), ("ner_chunks", "chunks")):
        src = spacy.load(models[key])
        src.replace_listeners("tok2vec", "ner", ["model.tok2vec"])
        nlp.add_pipe("ner", name=name, source=src)
    nlp.to_disk(Path(out_dir) / "pipeline_en")
    built["pipeline_en"] = str(Path(out_dir) / "pipeline_en")
    return {"metrics": {}, "built": built}


# ---------------------------------------------------------------------------------------------
# Children: measuring (measure_load is _speed.py's)


def _loaded_for_speed(model_dir: str, dataset: str, paths: Dict[str, str], limit: int):
    """A pipeline to time, warmed up, with the test split's gold Docs and their texts."""
    import spacy

    nlp = spacy.load(model_dir)
    gold = gold_docs(dataset, paths, nlp.vocab, limit)
    if limit:
        gold = gold[:limit]
    texts = [d.text for d in gold]
    list(nlp.pipe(texts[:50]))  # warm up
    return nlp, gold, texts


def measure_speed(model_dir: str, dataset: str, paths: Dict[str, str], repeats: int, plugin: bool,
                  profile: bool, limit: int) -> Dict[str, Any]:
    if plugin:
        import spacy_structperc  # noqa: F401
    nlp, gold, texts = _loaded_for_speed(model_dir, dataset, paths, limit)
    preds, metrics, details = S.pipe_wps(nlp, gold, texts, repeats)
    metrics.update(score(dataset, preds, gold, nlp.pipe_names))
    details["pipe_names"] = nlp.pipe_names
    if profile:
        prof_metrics, prof_details = S.profile_rows(nlp, gold, texts)
        metrics.update(prof_metrics)
        details.update(prof_details)
    return {"metrics": metrics, "details": details}


def measure_speed_pair(our_dir: str, peer_dir: str, dataset: str, paths: Dict[str, str], repeats: int,
                       limit: int) -> Dict[str, Any]:
    """words/s of our pipeline and the peer's in one process, their passes alternated
    (``_speed.paired_wps``; measure_speed's own figures, minutes apart, are kept in the details)."""
    import spacy_structperc  # noqa: F401

    sides = {"ours": _loaded_for_speed(our_dir, dataset, paths, limit),
             "peer": _loaded_for_speed(peer_dir, dataset, paths, limit)}
    return dict({"metrics": {}}, **S.paired_wps(sides, repeats))   # run_job adds the peak RSS to metrics


# ---------------------------------------------------------------------------------------------
# Parent


def train_all(run: S.SpeedRun, needed: Dict[str, set], paths: Dict[str, str]) -> Dict[str, Dict[str, str]]:
    """Our and the peers' models that ``needed`` names, trained or from the cache."""
    a = run.args
    code = C.code_fingerprint("spacy_structperc")
    models: Dict[str, Dict[str, str]] = {OURS: {}, "spacy": {}}
    for key, (config, dataset) in OURS_TRAINED.items():
        if key not in needed[OURS]:
            continue
        variant, overrides = OURS_VARIANTS.get(key, ("", []))
        fp = {"config": (CONFIGS / config).read_text(), "code": code, "epochs": a.epochs, "quick": a.quick}
        if overrides:
            fp["overrides"] = overrides
        extra = {}
        if key == "clauses":
            if CLAUSES_SOURCE not in models[OURS]:
                continue
            extra["source"] = fp["source"] = models[OURS][CLAUSES_SOURCE]
        got = run.trained(OURS, key, "train_ours", fp, paths=paths, epochs=a.epochs, quick=a.quick, **extra)
        if got:
            models[OURS][key] = got[0]
            run.train_rows(OURS, f"train {config}" + (f" {variant}" if variant else "")
                           + (f", {a.epochs} epochs" if a.epochs else ""), dataset, got[1])
    import importlib.metadata as md

    for key, (pipeline, dataset) in PEERS_TRAINED.items():
        if key not in needed["spacy"]:
            continue
        fp = {"pipeline": pipeline, "spacy": md.version("spacy"), "steps": a.spacy_max_steps, "quick": a.quick}
        got = run.trained("spacy", key, "train_peer", fp, paths=paths, max_steps=a.spacy_max_steps, quick=a.quick)
        if got:
            models["spacy"][key] = got[0]
            run.train_rows("spacy", f"train {pipeline} on {dataset}, efficiency cfg, "
                           f"{got[1]['run'].get('steps')} steps", dataset, got[1])
    return models


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", type=Path, default=None)
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--results-dir", type=Path, default=None)
    p.add_argument("--only", default=None, help="comma-separated task names (" + ", ".join(TASKS) + ")")
    p.add_argument("--quick", action="store_true", help="tiny data, 1 epoch, 30 spaCy steps: a smoke test")
    p.add_argument("--repeats", type=int, default=5, help="nlp.pipe runs per measurement (the best counts)")
    p.add_argument("--load-repeats", type=int, default=3, help="fresh processes for spacy.load (the best counts)")
    p.add_argument("--epochs", type=int, default=None, help="our training passes (default: each config's own)")
    p.add_argument("--spacy-max-steps", type=int, default=1000,
                   help="the peers' training steps (the baseline used 1000; cached peers are keyed on it)")
    p.add_argument("--retrain", action="store_true", help="train even when a cached model matches")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--code", default=None, help="what code this measures, recorded in the results (e.g. "
                   "'baseline: main before the issue-14 speed work')")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs, args.spacy_max_steps = 1, 30
        args.repeats, args.load_repeats = min(args.repeats, 2), 1
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    root = (args.data_root or C.default_data_root()).resolve()
    tasks = list(TASKS) if not args.only else [t.strip() for t in args.only.split(",")]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    run = S.SpeedRun(COMPONENT, __file__, args, argv, OURS)
    paths = prepare_data(root, run.work_dir, args.quick)
    needed, build = S.plan({OURS: [TASKS[t][1] for t in tasks], "spacy": [TASKS[t][2] for t in tasks]}, BUILT_FROM)
    models = train_all(run, needed, paths)
    run.assemble(models, build, BUILT_FROM)
    ours, peers = models[OURS], models["spacy"]
    limit = QUICK["test"] if args.quick else 0
    for task in tasks:
        dataset, our_key, peer_key = TASKS[task]
        speed = dict(dataset=dataset, paths=paths, repeats=args.repeats, limit=limit)
        pair = None
        if our_key in ours and peer_key in peers:
            pair = run.job(f"paired speed {task}", "measure_speed_pair", our_dir=ours[our_key],
                           peer_dir=peers[peer_key], dataset=dataset, paths=paths, repeats=args.repeats, limit=limit)
        if our_key in ours:
            run.measure(OURS, f"{task} (ours" + (f", {args.epochs} epochs)" if args.epochs else ")"), dataset,
                        ours[our_key], dict(speed, profile=not args.no_profile), paired=pair and pair["ours"])
        if peer_key in peers:
            run.measure("spacy", f"{task} (efficiency cfg, at most {args.spacy_max_steps} steps)", dataset,
                        peers[peer_key], dict(speed, profile=False), paired=pair and pair["peer"])
    # A re-run replaces the rows of the tasks it asked for and the training rows of the models it
    # used (trained or cached: "train parser.cfg..." or "train ner on conll2000, ..."); others stay.
    run.measured = set(tasks)
    return run.finish(code=args.code or f"git {C.git_revision()}", notes=NOTES)


if __name__ == "__main__":
    sys.exit(main())
