"""The harness of speed, size and memory measurements of saved spaCy pipelines (bench_speed.py;
bench_pipeline.py times its loads with it).

- in a fresh child process: ``measure_load`` (import and ``spacy.load`` seconds, RSS right after
  the load);
- in the child that times a pipeline: ``paired_wps`` (two pipelines' ``nlp.pipe`` passes
  alternated, so both sides of a ratio see the machine's drift alike) and ``profile_rows`` (our
  predict path by stage, and the decode of a few sentences cold and cached);
- in the parent: ``load_summary`` (the best of several loads), ``disk_rows`` (MB on disk per
  component) and ``SpeedRun``, a ``Bench`` whose models are trained once and cached under the
  work dir, keyed on what trained them, then measured job by job.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

SCRIPT = Path(__file__).resolve()  # the children of this module (measure_load)
BATCH_SIZE = 1000
# decode_cold / decode_cached: the decode of the first CACHED_SENTENCES test sentences (~150
# words), timed right after the rest of the split was decoded (cold: what they read is wherever
# the other sentences left it) and back to back (cached: everything they read is in the CPU's
# caches, and the branch predictors have seen the same decisions), best of CACHED_PASSES each.
# The same sentences both ways, so the difference is what waiting on memory costs them, and
# decode_cached is a floor that memory-layout work can approach and not pass.
CACHED_SENTENCES, CACHED_PASSES = 10, 40


# ---------------------------------------------------------------------------------------------
# Children

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
        stages_of = None
        source = "fallback: model.atoms, predict minus atoms, set_annotations timed in benchmarks/_speed.py"
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


def pipe_wps(nlp, gold: list, texts: List[str], repeats: int) -> Tuple[list, Dict[str, float], Dict[str, Any]]:
    """words/s of ``nlp.pipe`` on copies of the gold Docs without annotation and on their texts
    (tokenizer included), the best of ``repeats`` passes each, words counted: the gold words.
    Returns (the predictions on the gold words, metrics, details)."""
    n_words = C.count_tokens(gold)
    preds, wps_gold, sec_gold = C.time_pipe_best_of(nlp, lambda: C.unannotated_copies(gold, nlp.vocab),
                                                    n_words, repeats, BATCH_SIZE)
    _, wps_raw, sec_raw = C.time_pipe_best_of(nlp, lambda: list(texts), n_words, repeats, BATCH_SIZE)
    return preds, {"wps_gold_words": wps_gold, "wps_raw_text": wps_raw}, \
        {"words": n_words, "sentences": len(gold), "seconds_gold": sec_gold, "seconds_raw": sec_raw}


def profile_rows(nlp, gold: list, texts: List[str]) -> Tuple[Dict[str, float], Dict[str, Any]]:
    """The profile of ``profile_stages`` as metrics (``profile:COMPONENT:STAGE``, microseconds
    per gold word) and details (profile_source, profile_seconds)."""
    n_words = C.count_tokens(gold)
    prof = profile_stages(nlp, gold, texts)
    metrics: Dict[str, float] = {}
    for comp, stages in prof["seconds"].items():
        for stage, sec in stages.items():
            metrics[f"profile:{comp}:{stage}"] = sec / n_words * 1e6
    for comp, stages in prof["cold_cached"].items():
        for stage, us in stages.items():
            metrics[f"profile:{comp}:{stage}"] = us
    return metrics, {"profile_source": prof["source"], "profile_seconds": prof["seconds"]}


def paired_wps(sides: Dict[str, Tuple[Any, list, List[str]]], repeats: int) -> Dict[str, Any]:
    """words/s of several pipelines (``sides``: name -> (nlp, gold Docs, their texts)) in this
    one process, their passes alternated (each on the gold words, then each on the raw text,
    ``repeats`` times), best pass of each: on a shared machine whose speed drifts over minutes,
    the sides of a ratio see the same drift. Words counted: the first side's gold words."""
    for nlp, _, _ in sides.values():
        C.materialize_averages(nlp)
    n_words = C.count_tokens(next(iter(sides.values()))[1])
    seconds: Dict[str, Dict[str, List[float]]] = {s: {"gold": [], "raw": []} for s in sides}
    for _ in range(max(1, repeats)):
        for kind in ("gold", "raw"):
            for side, (nlp, gold, texts) in sides.items():
                docs = C.unannotated_copies(gold, nlp.vocab) if kind == "gold" else list(texts)
                with C.Timer() as t:
                    for _doc in nlp.pipe(docs, batch_size=BATCH_SIZE):
                        pass
                seconds[side][kind].append(t.seconds)
    return {side: {"metrics": {"wps_gold_words": n_words / min(sec["gold"]),
                               "wps_raw_text": n_words / min(sec["raw"])},
                   "details": {"words": n_words, "pass_seconds": sec}}
            for side, sec in seconds.items()}


# ---------------------------------------------------------------------------------------------
# Parent


def plan(uses: Dict[str, List[str]], built_from: Dict[str, Dict[str, Tuple[str, ...]]]):
    """What a run needs, per system: the models to train (a set) and the pipelines to assemble
    from them (a list), for the pipelines that ``uses`` names (system -> keys): a key of
    ``built_from[system]`` is assembled from the models it lists, any other is trained."""
    needed: Dict[str, set] = {system: set() for system in uses}
    build: Dict[str, List[str]] = {system: [] for system in uses}
    for system, keys in uses.items():
        for key in keys:
            if key in built_from[system]:
                build[system].append(key)
                needed[system].update(built_from[system][key])
            else:
                needed[system].add(key)
    return needed, build


def load_summary(loads: List[Dict[str, Any]]) -> Dict[str, float]:
    """The metrics of several ``measure_load`` runs of one pipeline: the best load and import
    seconds, the median RSS after the load."""
    return {"load_seconds": min(r["load_seconds"] for r in loads),
            "import_seconds": min(r["import_seconds"] for r in loads),
            "rss_after_load_mb": statistics.median(r["rss_after_load_mb"] for r in loads)}


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



class SpeedRun(C.Bench):
    """A run of a speed script: its models trained once and cached (``trained``), then each
    measured (``measure``), every job a child of the script. Rows named ``TASK (...)`` for the
    measured pipelines and ``train ...`` for the training of the models they are made of; a run
    replaces the rows of the tasks it measured (``measured``) and the training rows of the models
    it used (``train_prefixes``), and leaves the others."""

    def __init__(self, component: str, script: str, args, argv, ours: str):
        super().__init__(component, script, args, argv, lambda results, out: [], ours)
        self.measured: set = set()           # the tasks of this run, measured or not
        self.train_prefixes: List[str] = []  # of the training rows this run reports

    def job(self, label: str, func: str, script: Optional[Path] = None, **kwargs) -> Optional[Dict[str, Any]]:
        """``func(**kwargs)`` of the script (or of ``script``) in a child; None if it failed."""
        print(label, flush=True)
        res = C.run_job(script or self.script, func, kwargs, label,
                        self.run_dir / "logs" / f"{C.slug(label)}.log", self.errors)
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
        matches (and --retrain is off), else trained now by the script's ``func(key, out_dir,
        **kwargs)``, its seconds and peak RSS recorded; None if training failed."""
        out = self.run_dir / "models" / system / key
        stamp = out / f"{self.script.stem}.json"
        info = None if getattr(self.args, "retrain", False) else _stamped(stamp, fingerprint)
        label = f"train {system} {key}"
        if info is None:
            res = self.job(label, func, key=key, out_dir=str(out), **kwargs)
            if res is None:
                return None
            info = {"key": fingerprint, "run": res["run"], "peak_rss_mb": res["peak_rss_mb"],
                    "seconds": res["seconds"], "load_avg_before": res["load_avg_before"],
                    "load_avg_after": res["load_avg_after"], "date": C.now_iso(), "git": C.git_revision()}
            out.mkdir(parents=True, exist_ok=True)
            stamp.write_text(json.dumps(info, indent=1, default=str))
        else:
            print(f"{label}: cached ({info['date']}, git {info['git']})", flush=True)
        return info["run"]["model_dir"], info

    def assemble(self, models: Dict[str, Dict[str, str]], build: Dict[str, List[str]],
                 built_from: Dict[str, Dict[str, Tuple[str, ...]]]) -> None:
        """Each system's pipelines ``build[system]`` (see ``plan``) whose parts were all trained,
        built by the script's ``assemble(system, models, out_dir, which)`` and added to ``models``."""
        for system, keys in build.items():
            which = [k for k in keys if all(m in models[system] for m in built_from[system][k])]
            if which:
                res = self.job(f"assemble {system} {', '.join(which)}", "assemble", system=system,
                               models=models[system], out_dir=str(self.run_dir / "assembled" / system), which=which)
                if res:
                    models[system].update(res["built"])

    def train_rows(self, system: str, setting: str, dataset: str, info: Dict[str, Any]) -> None:
        """The rows of a model's training (``trained``'s info), named ``setting``."""
        # What names the model whatever its epochs or steps: "train parser.cfg", "train ner on conll2000,"
        self.train_prefixes.append(setting.split(", ")[0] + ("," if system != self.ours else ""))
        self.add(system, setting, dataset, {"train_seconds": info["run"]["seconds"],
                                            "train_peak_rss_mb": info["peak_rss_mb"]})
        self.details[f"{system} | {setting}"] = {k: info[k] for k in ("run", "date", "git", "load_avg_before",
                                                                        "load_avg_after")}

    def measure(self, system: str, setting: str, dataset: str, model_dir: str, speed: Dict[str, Any],
                paired: Optional[Dict[str, Any]] = None) -> None:
        """One pipeline's rows: ``measure_load`` in --load-repeats fresh processes, the script's
        ``measure_speed(model_dir, plugin, **speed)`` in another, its size on disk, and the figures
        of a paired run (``paired_wps``) over the speed job's own (kept in details.alone)."""
        plugin = system == self.ours
        loads = []
        for i in range(self.args.load_repeats):
            res = self.job(f"load {system} {setting} ({i + 1})", "measure_load", script=SCRIPT,
                           model_dir=model_dir, plugin=plugin)
            if res:
                loads.append(res)
        speed_res = self.job(f"speed {system} {setting}", "measure_speed", model_dir=model_dir, plugin=plugin,
                             **speed)
        metrics: Dict[str, Any] = load_summary([r["metrics"] for r in loads]) if loads else {}
        metrics.update(disk_rows(Path(model_dir)))
        details: Dict[str, Any] = {"model_dir": model_dir,
                                   "loads": [{**r["metrics"], "load_avg": r["load_avg_before"]} for r in loads]}
        if speed_res:
            metrics.update({("predict_peak_rss_mb" if k == "peak_rss_mb" else k): v
                            for k, v in speed_res["metrics"].items()})
            details.update(speed_res["details"], load_avg_before=speed_res["load_avg_before"],
                           load_avg_after=speed_res["load_avg_after"])
            metrics["load_avg"] = speed_res["load_avg_before"]
        if paired:
            details["alone"] = {k: metrics.get(k) for k in paired["metrics"]}
            details["paired"] = paired["details"]
            metrics.update(paired["metrics"])
        self.add(system, setting, dataset, metrics)
        self.details[f"{system} | {setting}"] = details

    def replaces(self, row: Dict[str, Any]) -> bool:
        if row["setting"].startswith("train "):
            return any(row["setting"].startswith(p) for p in self.train_prefixes)
        return row["setting"].rsplit(" (", 1)[0] in self.measured

    def drops_detail(self, key: str) -> bool:
        return self.replaces({"setting": key.split(" | ", 1)[-1]})


def _stamped(stamp: Path, key: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    if stamp.exists():
        info = json.loads(stamp.read_text())
        if info.get("key") == key and Path(info["run"]["model_dir"]).exists():
            return info
    return None
