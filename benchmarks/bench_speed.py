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
import json
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "speed"
CONFIGS = C.REPO_ROOT / "configs"
QUICK = {"train": 300, "dev": 100, "test": 200}
BATCH_SIZE = 1000

# Trained models: key -> (system, corpus, what trains it). Ours are keyed on the code as well.
OURS_TRAINED = {
    "tagger": ("tagger.cfg", "ud_en_ewt"),
    "tagger_parser": ("parser.cfg", "ud_en_ewt"),
    "chunker": ("chunker.cfg", "conll2000"),
    # clauses.cfg sources the chunker trained above (CLAUSES_SOURCE); only its clause identifier
    # goes into pipeline_en.
    "clauses": ("clauses.cfg", "ptb_clauses"),
    "ner": ("ner.cfg", "conll2003"),
}
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
    "structperc": {"tagger+chunker": ("tagger", "chunker"), "tagger+ner": ("tagger", "ner"),
                   "pipeline_en": ("tagger_parser", "chunker", "clauses", "ner")},
    "spacy": {"pipeline_en": ("tagger_parser", "ner_conll2003", "ner_chunks")},
}
# decode_cold / decode_cached: the decode of the first CACHED_SENTENCES test sentences (~150
# words), timed right after the rest of the split was decoded (cold: what they read is wherever
# the other sentences left it) and back to back (cached: everything they read is in the CPU's
# caches, and the branch predictors have seen the same decisions), best of CACHED_PASSES each.
# The same sentences both ways, so the difference is what waiting on memory costs them, and
# decode_cached is a floor that memory-layout work can approach and not pass.
CACHED_SENTENCES, CACHED_PASSES = 10, 40


NOTES = [
    "wps_gold_words: words/s of nlp.pipe over the test split's gold words, one Doc per sentence, "
    f"batch_size {BATCH_SIZE}, one thread, best of --repeats passes; ours and the peer's are "
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
    f"decode_cold / decode_cached: the decode of the first {CACHED_SENTENCES} sentences right after "
    "the rest of the split / back to back, everything they read then in the CPU's caches (best of "
    f"{CACHED_PASSES} each): what waiting on memory costs them, and a floor for memory-layout work",
    "the chunker and NER tasks: ours is our EWT tagger (configs/tagger.cfg) then the component, "
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


def _stamped(model_dir: Path, key: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    stamp = model_dir / "bench_speed.json"
    if stamp.exists():
        info = json.loads(stamp.read_text())
        if info.get("key") == key and Path(info["run"]["model_dir"]).exists():
            return info
    return None


def train_ours(key: str, paths: Dict[str, str], out_dir: str, epochs: Optional[int], quick: bool,
               source: Optional[str] = None) -> Dict[str, Any]:
    import spacy_structperc  # noqa: F401

    config, dataset = OURS_TRAINED[key]
    overrides: List[str] = []
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


def assemble(kind: str, models: Dict[str, str], out_dir: str, which: List[str]) -> Dict[str, Any]:
    """Build the pipelines ``which`` (keys of BUILT_FROM) from trained ones under ``out_dir``."""
    import spacy

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    built = {}
    if kind == "ours":
        import spacy_structperc  # noqa: F401
        from spacy.util import load_config, load_model_from_config

        for comp in ("chunker", "ner"):
            if f"tagger+{comp}" not in which:
                continue
            nlp = spacy.load(models["tagger"])
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
# Children: measuring


def measure_load(model_dir: str, plugin: bool) -> Dict[str, Any]:
    """Import time, spacy.load time and RSS right after the load, in this fresh process."""
    with C.Timer() as t_import:
        import spacy

        if plugin:
            import spacy_structperc  # noqa: F401
    rss_before = C.current_rss_mb()
    with C.Timer() as t_load:
        nlp = spacy.load(model_dir)
    return {"metrics": {"import_seconds": t_import.seconds, "load_seconds": t_load.seconds,
                        "rss_after_load_mb": C.current_rss_mb(), "rss_before_load_mb": rss_before},
            "pipe_names": nlp.pipe_names}


def _profile_fallback(nlp, docs: list) -> Dict[str, Dict[str, float]]:
    """Seconds per stage per component, named as ``predict_stages`` names them: ``model.atoms``
    over every Doc (atoms), the rest of ``predict`` (decode), ``set_annotations`` (write) and
    predict + set_annotations (total); the components run in order, batch by batch, each on the
    Docs the earlier ones annotated. (atoms is timed in a pass of its own, so decode is predict
    minus that pass.)"""
    out: Dict[str, Dict[str, float]] = {}
    for name, proc in nlp.pipeline:
        stages = {"atoms": 0.0, "decode": 0.0, "write": 0.0}
        atoms = getattr(getattr(proc, "model", None), "atoms", None)
        for start in range(0, len(docs), BATCH_SIZE):
            batch = docs[start:start + BATCH_SIZE]
            if atoms is not None:
                with C.Timer() as t:
                    for doc in batch:
                        if len(doc):
                            atoms(doc, name)
                stages["atoms"] += t.seconds
            with C.Timer() as t:
                preds = proc.predict(batch)
            stages["decode"] += t.seconds
            with C.Timer() as t:
                proc.set_annotations(batch, preds)
            stages["write"] += t.seconds
        stages["total"] = stages["decode"] + stages["write"]
        stages["decode"] = max(0.0, stages["decode"] - stages["atoms"])
        out[name] = stages
    return out


def _nested(got: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """{component: {stage: seconds}} from that or from flat {"component:stage": seconds} (or
    {(component, stage): seconds})."""
    out: Dict[str, Dict[str, float]] = {}
    for key, value in got.items():
        if isinstance(value, dict):
            out.setdefault(str(key), {}).update({str(k): float(v) for k, v in value.items()})
        else:
            parts = list(key) if isinstance(key, tuple) else str(key).split(":", 1)
            comp, stage = (parts[0], parts[1]) if len(parts) == 2 else ("all", parts[0])
            out.setdefault(str(comp), {})[str(stage)] = float(value)
    return out


def profile_stages(nlp, gold: list, texts: List[str]) -> Dict[str, Any]:
    stages_of: Optional[Callable[..., Dict[str, Dict[str, float]]]]
    try:
        from spacy_structperc.profile import predict_stages as stages_of  # added by the speed work
    except ImportError:
        stages_of, source = None, "fallback: model.atoms, predict minus atoms, set_annotations timed in bench_speed.py"
    else:
        source = "spacy_structperc.profile.predict_stages"
    best: Dict[str, Dict[str, float]] = {}
    for _ in range(3):
        docs = C.unannotated_copies(gold, nlp.vocab)
        got = stages_of(nlp, docs) if stages_of is not None else _profile_fallback(nlp, docs)
        for comp, stages in _nested(got).items():  # per component, the run with the least total
            total = stages.get("total", sum(stages.values()))
            if comp not in best or total < best[comp].get("total", sum(best[comp].values())):
                best[comp] = dict(stages)
    with C.Timer() as t:
        for text in texts:
            nlp.make_doc(text)
    best["tokenizer"] = {"total": t.seconds}
    return {"source": source, "seconds": best, "cold_cached": decode_cold_cached(nlp, gold)}


def decode_cold_cached(nlp, gold: list) -> Dict[str, Dict[str, float]]:
    """Microseconds per word of each staged component's decode (predict_stages' "decode") of
    the first CACHED_SENTENCES sentences, cold and cached (see CACHED_SENTENCES), after the
    earlier components annotated them: {component: {"decode_cold": .., "decode_cached": ..}}."""
    from spacy_structperc.profile import _run, _staged

    docs = C.unannotated_copies(gold, nlp.vocab)
    n_words = max(1, C.count_tokens(docs[:CACHED_SENTENCES]))
    out: Dict[str, Dict[str, float]] = {}
    for name, component in nlp.pipeline:
        if _staged(component):
            component.begin_predict()
            few = component._prepare(docs[:CACHED_SENTENCES])
            rest = [component._prepare(docs[i:i + BATCH_SIZE])
                    for i in range(CACHED_SENTENCES, len(docs), BATCH_SIZE)]
            cold = cached = float("inf")
            for _ in range(CACHED_PASSES):
                for batch in rest:
                    component._decode_prepared(batch)
                with C.Timer() as t:
                    component._decode_prepared(few)
                cold = min(cold, t.seconds)
            for _ in range(CACHED_PASSES):
                with C.Timer() as t:
                    component._decode_prepared(few)
                cached = min(cached, t.seconds)
            out[name] = {"decode_cold": cold / n_words * 1e6, "decode_cached": cached / n_words * 1e6}
        docs = _run(component, docs)
    return out


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
    n_words = C.count_tokens(gold)
    preds, wps_gold, sec_gold = C.time_pipe_best_of(nlp, lambda: C.unannotated_copies(gold, nlp.vocab),
                                                    n_words, repeats, BATCH_SIZE)
    _, wps_raw, sec_raw = C.time_pipe_best_of(nlp, lambda: list(texts), n_words, repeats, BATCH_SIZE)
    metrics: Dict[str, Any] = {"wps_gold_words": wps_gold, "wps_raw_text": wps_raw}
    metrics.update(score(dataset, preds, gold, nlp.pipe_names))
    details: Dict[str, Any] = {"words": n_words, "sentences": len(gold), "seconds_gold": sec_gold,
                               "seconds_raw": sec_raw, "pipe_names": nlp.pipe_names}
    if profile:
        prof = profile_stages(nlp, gold, texts)
        details["profile_source"] = prof["source"]
        details["profile_seconds"] = prof["seconds"]
        for comp, stages in prof["seconds"].items():
            for stage, sec in stages.items():
                metrics[f"profile:{comp}:{stage}"] = sec / n_words * 1e6
        for comp, stages in prof["cold_cached"].items():
            for stage, us in stages.items():
                metrics[f"profile:{comp}:{stage}"] = us
    return {"metrics": metrics, "details": details}


def measure_speed_pair(our_dir: str, peer_dir: str, dataset: str, paths: Dict[str, str], repeats: int,
                       limit: int) -> Dict[str, Any]:
    """words/s of our pipeline and the peer's in one process, their passes alternated (ours and
    the peer's on the gold words, then on the raw text, `repeats` times), best pass of each: on
    a shared machine whose speed drifts over minutes, the two sides of a ratio see the same drift
    (measure_speed's own figures, minutes apart, are kept in the details)."""
    import spacy_structperc  # noqa: F401

    sides = {"ours": _loaded_for_speed(our_dir, dataset, paths, limit),
             "peer": _loaded_for_speed(peer_dir, dataset, paths, limit)}
    for nlp, _, _ in sides.values():
        C.materialize_averages(nlp)
    n_words = C.count_tokens(sides["ours"][1])
    seconds: Dict[str, Dict[str, List[float]]] = {s: {"gold": [], "raw": []} for s in sides}
    for _ in range(max(1, repeats)):
        for kind in ("gold", "raw"):
            for side, (nlp, gold, texts) in sides.items():
                docs = C.unannotated_copies(gold, nlp.vocab) if kind == "gold" else list(texts)
                with C.Timer() as t:
                    for _doc in nlp.pipe(docs, batch_size=BATCH_SIZE):
                        pass
                seconds[side][kind].append(t.seconds)
    out: Dict[str, Any] = {"metrics": {}}   # run_job adds the process's peak RSS here
    for side, sec in seconds.items():
        out[side] = {"metrics": {"wps_gold_words": n_words / min(sec["gold"]),
                                 "wps_raw_text": n_words / min(sec["raw"])},
                     "details": {"words": n_words, "pass_seconds": sec}}
    return out


# ---------------------------------------------------------------------------------------------
# Parent


def disk_rows(model_dir: Path) -> Dict[str, float]:
    """MB on disk: total, each component's folder, the rest as 'other'."""
    names = json.loads((model_dir / "meta.json").read_text()).get("pipeline", [])
    out = {"disk_mb": C.dir_bytes(model_dir) / 1e6}
    other = out["disk_mb"]
    for name in names:
        if (model_dir / name).exists():
            out[f"disk_mb:{name}"] = C.dir_bytes(model_dir / name) / 1e6
            other -= out[f"disk_mb:{name}"]
    out["disk_mb:other"] = other
    return out


class Run:
    """One benchmark run: the jobs it ran, its rows and details."""

    def __init__(self, args, paths: Dict[str, str], run_dir: Path):
        self.args, self.paths, self.run_dir = args, paths, run_dir
        self.rows: List[Dict[str, Any]] = []
        self.details: Dict[str, Any] = {}
        self.errors: Dict[str, str] = {}
        self.train_prefixes: List[str] = []  # of the training rows this run reports
        self.me = Path(__file__).resolve()

    def job(self, label: str, func: str, **kwargs) -> Optional[Dict[str, Any]]:
        print(label, flush=True)
        res = C.run_job(self.me, func, kwargs, label, self.run_dir / "logs" / f"{C.slug(label)}.log", self.errors)
        if res is not None:
            print(f"  done in {res['seconds']:.0f}s (load {res['load_avg_before']} -> {res['load_avg_after']})",
                  flush=True)
        return res

    def add(self, system: str, setting: str, dataset: str, metrics: Dict[str, Any]) -> None:
        self.rows += [C.make_row(system, setting, k, v, dataset=dataset) for k, v in metrics.items()
                      if v is not None]
        C.show_metrics(setting, {k: v for k, v in metrics.items() if not k.startswith("profile:")}, 0)

    def trained(self, system: str, key: str, func: str, fingerprint: Dict[str, Any],
                **kwargs) -> Optional[Tuple[str, Dict[str, Any]]]:
        """(model dir, training info) of a trained model: from the cache when its fingerprint
        matches, else trained now (its seconds and peak RSS recorded); None if training failed."""
        out = self.run_dir / "models" / system / key
        info = None if self.args.retrain else _stamped(out, fingerprint)
        label = f"train {system} {key}"
        if info is None:
            res = self.job(label, func, key=key, paths=self.paths, out_dir=str(out), **kwargs)
            if res is None:
                return None
            info = {"key": fingerprint, "run": res["run"], "peak_rss_mb": res["peak_rss_mb"],
                    "seconds": res["seconds"], "load_avg_before": res["load_avg_before"],
                    "load_avg_after": res["load_avg_after"], "date": C.now_iso(), "git": C.git_revision()}
            out.mkdir(parents=True, exist_ok=True)
            (out / "bench_speed.json").write_text(json.dumps(info, indent=1, default=str))
        else:
            print(f"{label}: cached ({info['date']}, git {info['git']})", flush=True)
        return info["run"]["model_dir"], info

    def train_all(self, needed: Dict[str, set]) -> Dict[str, Dict[str, str]]:
        """Our and the peers' models that ``needed`` names, trained or from the cache."""
        a = self.args
        code = C.code_fingerprint("spacy_structperc")
        models: Dict[str, Dict[str, str]] = {"structperc": {}, "spacy": {}}
        for key, (config, dataset) in OURS_TRAINED.items():
            if key not in needed["structperc"]:
                continue
            fp = {"config": (CONFIGS / config).read_text(), "code": code, "epochs": a.epochs, "quick": a.quick}
            extra = {}
            if key == "clauses":
                if CLAUSES_SOURCE not in models["structperc"]:
                    continue
                extra["source"] = fp["source"] = models["structperc"][CLAUSES_SOURCE]
            got = self.trained("structperc", key, "train_ours", fp, epochs=a.epochs, quick=a.quick, **extra)
            if got:
                models["structperc"][key] = got[0]
                self._train_rows("structperc", f"train {config}" + (f", {a.epochs} epochs" if a.epochs else ""),
                                 dataset, got[1])
        import importlib.metadata as md

        for key, (pipeline, dataset) in PEERS_TRAINED.items():
            if key not in needed["spacy"]:
                continue
            fp = {"pipeline": pipeline, "spacy": md.version("spacy"), "steps": a.spacy_max_steps, "quick": a.quick}
            got = self.trained("spacy", key, "train_peer", fp, max_steps=a.spacy_max_steps, quick=a.quick)
            if got:
                models["spacy"][key] = got[0]
                self._train_rows("spacy", f"train {pipeline} on {dataset}, efficiency cfg, "
                                 f"{got[1]['run'].get('steps')} steps", dataset, got[1])
        return models

    def _train_rows(self, system: str, setting: str, dataset: str, info: Dict[str, Any]) -> None:
        # What names the model whatever its epochs or steps: "train parser.cfg", "train ner on conll2000,"
        self.train_prefixes.append(setting.split(", ")[0] + ("," if system == "spacy" else ""))
        self.add(system, setting, dataset, {"train_seconds": info["run"]["seconds"],
                                            "train_peak_rss_mb": info["peak_rss_mb"]})
        self.details[f"{system} | {setting}"] = {k: info[k] for k in ("run", "date", "git", "load_avg_before",
                                                                        "load_avg_after")}

    def measure(self, system: str, setting: str, dataset: str, model_dir: str,
                paired: Optional[Dict[str, Any]] = None) -> None:
        a, plugin = self.args, system == "structperc"
        loads = []
        for i in range(a.load_repeats):
            res = self.job(f"load {system} {setting} ({i + 1})", "measure_load", model_dir=model_dir, plugin=plugin)
            if res:
                loads.append(res)
        speed = self.job(f"speed {system} {setting}", "measure_speed", model_dir=model_dir, dataset=dataset,
                         paths=self.paths, repeats=a.repeats, plugin=plugin, profile=plugin and not a.no_profile,
                         limit=QUICK["test"] if a.quick else 0)
        metrics: Dict[str, Any] = {}
        if loads:
            best = min(loads, key=lambda r: r["metrics"]["load_seconds"])
            metrics.update(load_seconds=best["metrics"]["load_seconds"],
                           import_seconds=min(r["metrics"]["import_seconds"] for r in loads),
                           rss_after_load_mb=statistics.median(r["metrics"]["rss_after_load_mb"] for r in loads))
        metrics.update(disk_rows(Path(model_dir)))
        details: Dict[str, Any] = {"model_dir": model_dir,
                                   "loads": [{**r["metrics"], "load_avg": r["load_avg_before"]} for r in loads]}
        if speed:
            metrics.update({("predict_peak_rss_mb" if k == "peak_rss_mb" else k): v
                            for k, v in speed["metrics"].items()})
            details.update(speed["details"], load_avg_before=speed["load_avg_before"],
                           load_avg_after=speed["load_avg_after"])
            metrics["load_avg"] = speed["load_avg_before"]
        if paired:
            details["alone"] = {k: metrics.get(k) for k in paired["metrics"]}
            details["paired"] = paired["details"]
            metrics.update(paired["metrics"])
        self.add(system, setting, dataset, metrics)
        self.details[f"{system} | {setting}"] = details


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
    work = args.work_dir.resolve()
    results_dir = (args.results_dir or (work / "quick-results" if args.quick else C.RESULTS_DIR)).resolve()
    run_dir = work / "runs" / ("quick" if args.quick else "full") / COMPONENT
    tasks = list(TASKS) if not args.only else [t.strip() for t in args.only.split(",")]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    command = "python benchmarks/bench_speed.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    t0 = time.time()
    run = Run(args, prepare_data(root, work, args.quick), run_dir)
    needed: Dict[str, set] = {"structperc": set(), "spacy": set()}
    build: Dict[str, List[str]] = {"structperc": [], "spacy": []}
    for task in tasks:
        for system, key in zip(("structperc", "spacy"), TASKS[task][1:]):
            if key in BUILT_FROM[system]:
                build[system].append(key)
                needed[system].update(BUILT_FROM[system][key])
            else:
                needed[system].add(key)
    models = run.train_all(needed)
    for system, kind in (("structperc", "ours"), ("spacy", "spacy")):
        which = [k for k in build[system] if all(m in models[system] for m in BUILT_FROM[system][k])]
        if which:
            res = run.job(f"assemble {system} {', '.join(which)}", "assemble", kind=kind, models=models[system],
                          out_dir=str(run_dir / "assembled" / system), which=which)
            if res:
                models[system].update(res["built"])
    ours, peers = models["structperc"], models["spacy"]
    for task in tasks:
        dataset, our_key, peer_key = TASKS[task]
        pair = None
        if our_key in ours and peer_key in peers:
            pair = run.job(f"paired speed {task}", "measure_speed_pair", our_dir=ours[our_key],
                           peer_dir=peers[peer_key], dataset=dataset, paths=run.paths, repeats=args.repeats,
                           limit=QUICK["test"] if args.quick else 0)
        if our_key in ours:
            run.measure("structperc", f"{task} (ours" + (f", {args.epochs} epochs)" if args.epochs else ")"),
                        dataset, ours[our_key], paired=pair and pair["ours"])
        if peer_key in peers:
            run.measure("spacy", f"{task} (efficiency cfg, at most {args.spacy_max_steps} steps)", dataset,
                        peers[peer_key], paired=pair and pair["peer"])
    # A re-run replaces the rows of the tasks it measured and the training rows of the models it
    # used (trained or cached: "train parser.cfg..." or "train ner on conll2000, ..."); others stay.
    measured = set(tasks)

    def replaced(row: Dict[str, Any]) -> bool:
        if row["setting"].startswith("train "):
            return any(row["setting"].startswith(p) for p in run.train_prefixes)
        return row["setting"].rsplit(" (", 1)[0] in measured

    C.save_results(results_dir / f"{COMPONENT}.json", COMPONENT, run.rows, run.details,
                   replace=replaced, drop_detail=lambda k: replaced({"setting": k.split(" | ", 1)[-1]}),
                   errors=run.errors, command=command, quick=args.quick,
                   code=args.code or f"git {C.git_revision()}", notes=NOTES)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
