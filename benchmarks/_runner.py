"""The run of a benchmark script: each measured system in its own child process (``run_child``,
``run_job``: its result and its own peak RSS), the options every script has (``add_run_args``,
``parse_only``), and ``Bench``, the job loop that gathers rows, details and errors and merges them
into the results file. A script declares its jobs and says which old rows a run replaces.

A child is this file run as ``_runner.py --child MODULE_PATH FUNC IN_JSON OUT_JSON``: it loads the
script by path and calls its function."""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from _machine import (DEFAULT_WORK_DIR, REPO_ROOT, RESULTS_DIR, Timer, child_env, load_average, now_iso,
                      peak_rss_mb, slug)
from _results import make_row, save_results

# ---------------------------------------------------------------------------------------------
# Running one system in a child process


def run_child(
    module_path: Path,
    func_name: str,
    kwargs: Dict[str, Any],
    *,
    log_path: Path,
    env: Optional[Dict[str, str]] = None,
    timeout: Optional[float] = None,
) -> Dict[str, Any]:
    """Call ``func_name(**kwargs)`` from the module file ``module_path`` in a fresh interpreter.

    The function must return a JSON-serializable dict. The child adds ``peak_rss_mb`` (its own
    ru_maxrss, or that of the largest subprocess it waited for, whichever is larger) and
    ``child_seconds``. Output goes to ``log_path``. Raises ``RuntimeError`` with the log's tail
    if the child fails.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    io_base = log_path.with_suffix("")
    in_json = Path(str(io_base) + ".in.json")
    out_json = Path(str(io_base) + ".out.json")
    in_json.write_text(json.dumps(kwargs, indent=1, default=str))
    if out_json.exists():
        out_json.unlink()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(Path(module_path).resolve()),
           func_name, str(in_json), str(out_json)]
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env or child_env(),
                              cwd=REPO_ROOT, timeout=timeout)
    if proc.returncode != 0 or not out_json.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"{func_name} failed in child (exit {proc.returncode}); "
                           f"log {log_path}:\n{tail}")
    return json.loads(out_json.read_text())


def _child_main(argv: List[str]) -> int:
    module_path, func_name, in_json, out_json = argv
    t0 = time.perf_counter()
    sys.path.insert(0, str(Path(module_path).parent))
    spec = importlib.util.spec_from_file_location(Path(module_path).stem, module_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kwargs = json.loads(Path(in_json).read_text())
    try:
        result = getattr(module, func_name)(**kwargs)
    except Exception:
        traceback.print_exc()
        return 1
    result = dict(result or {})
    result["peak_rss_mb"] = peak_rss_mb(include_children=True)
    result["peak_rss_self_mb"] = peak_rss_mb(include_children=False)
    result["child_seconds"] = time.perf_counter() - t0
    Path(out_json).write_text(json.dumps(result, indent=1, default=str))
    return 0


def run_job(script: Path, func: str, kwargs: Dict[str, Any], label: str, log_path: Path,
            errors: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """Run one measured system in a child (run_child) and return its result, with
    ``metrics["peak_rss_mb"]``, ``seconds`` and the load averages around it added; on failure,
    record it in ``errors[label]``, say so, and return None."""
    load_before = load_average()
    try:
        with Timer() as t:
            res = run_child(script, func, kwargs, log_path=log_path)
    except Exception as err:
        errors[label] = str(err)
        print(f"  FAILED: {err}", flush=True)
        return None
    res["metrics"] = dict(res["metrics"], peak_rss_mb=res["peak_rss_mb"])
    res.update(seconds=t.seconds, load_avg_before=load_before, load_avg_after=load_average())
    return res


def show_metrics(setting: str, metrics: Dict[str, Any], seconds: float) -> None:
    """Print a job's metrics: fractions to 4 places, counts and rates with thousands separators."""
    shown = ", ".join(f"{k}={v:.4f}" if isinstance(v, float) and v < 1.5 else f"{k}={v:,.0f}"
                      for k, v in metrics.items() if v is not None)
    print(f"  {setting}: {shown}  ({seconds:.0f}s)", flush=True)


# ---------------------------------------------------------------------------------------------
# The run: options, job loop, saving


def csv(cast: Callable[[str], Any] = str) -> Callable[[str], List[Any]]:
    """An argparse type: "a,b,c" -> [cast(a), cast(b), cast(c)] (blanks dropped)."""
    return lambda text: [cast(x.strip()) for x in text.split(",") if x.strip()]


def add_run_args(p: argparse.ArgumentParser, predict_repeats: int = 3) -> argparse.ArgumentParser:
    """The options every benchmark script has: where it works and writes, --quick, the number
    of timed prediction passes, and --plots-only."""
    p.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR,
                   help="converted corpora, trained models and logs (default benchmarks/.work)")
    p.add_argument("--results-dir", type=Path, default=None,
                   help="default benchmarks/results; with --quick: WORK_DIR/quick-results")
    p.add_argument("--quick", action="store_true", help="smoke run: corpus slices, short training")
    p.add_argument("--predict-repeats", type=int, default=predict_repeats,
                   help=f"time the prediction pass N times, keep the fastest (default {predict_repeats})")
    p.add_argument("--plots-only", action="store_true", help="redraw the plots from the JSON")
    return p


def parse_only(only: Optional[str], systems: Sequence[str], ours: str,
               known_settings: Optional[Iterable[str]] = None):
    """``--only crfsuite,spacy``, or with settings of ours by name (names contain commas, so
    they come last, after ``<ours>:``, separated by ';'): ``--only "crfsuite,ours:beam 4, early;viterbi"``.
    Returns (systems, our settings or None for all); unknown names end the run."""
    if not only:
        return set(systems), None
    settings = None
    head, sep, tail = only.partition(ours + ":")
    if sep:
        settings = {n.strip() for n in tail.split(";") if n.strip()}
        known = set(known_settings) if known_settings is not None else settings
        if settings - known:
            raise SystemExit(f"unknown setting(s) {sorted(settings - known)}; known: {sorted(known)}")
    chosen = {p.strip() for p in head.split(",") if p.strip()} | ({ours} if sep else set())
    if chosen - set(systems):
        raise SystemExit(f"unknown system(s) {sorted(chosen - set(systems))}; choose from {list(systems)}")
    return chosen, settings


@dataclasses.dataclass
class Job:
    """One measured system: ``func(**kwargs)`` of the script, run in a child process."""
    key: str                       # its progress line, log file and details entry
    system: str
    func: str
    kwargs: Dict[str, Any]
    setting: Optional[str] = None  # None: the child's result names it
    dataset: str = ""
    split: str = "test"
    info: Dict[str, Any] = dataclasses.field(default_factory=dict)  # the script's own (e.g. what it replaces)


class Bench:
    """One run of a benchmark script: ``Bench.start`` (None after --plots-only), ``run(jobs)``
    (rows, details and errors gathered; returns the jobs that ran with their settings), then
    ``finish(replaces, ...)`` to merge the rows into ``results/<component>.json`` and redraw."""

    def __init__(self, component: str, script: str, args: argparse.Namespace,
                 argv: Optional[Sequence[str]], make_plots: Callable[[Path, Path], List[Path]], ours: str):
        self.component = component
        self.ours = ours
        self.script = Path(script).resolve()
        self.args = args
        self.make_plots = make_plots
        self.quick = bool(getattr(args, "quick", False))
        self.work_dir = Path(args.work_dir).resolve()
        self.results_dir = Path(args.results_dir or (self.work_dir / "quick-results" if self.quick
                                                     else RESULTS_DIR)).resolve()
        self.results_path = self.results_dir / f"{component}.json"
        self.run_dir = self.work_dir / "runs" / ("quick" if self.quick else "full") / component
        self.command = f"python benchmarks/{self.script.name} " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        self.t_start = time.time()
        self.rows: List[Dict[str, Any]] = []
        self.details: Dict[str, Any] = {}
        self.errors: Dict[str, str] = {}
        self.done: List[Any] = []   # (job, setting) of every job that ran

    @classmethod
    def start(cls, component: str, script: str, args: argparse.Namespace, argv: Optional[Sequence[str]],
              make_plots: Callable[[Path, Path], List[Path]], ours: str, data: Any = None) -> Optional["Bench"]:
        bench = cls(component, script, args, argv, make_plots, ours)
        if getattr(args, "plots_only", False):
            bench.plots()
            return None
        print(f"data: {data}\nwork: {bench.work_dir}\nresults: {bench.results_path}", flush=True)
        return bench

    def plots(self) -> None:
        for path in self.make_plots(self.results_path, self.results_dir):
            print(f"wrote {path}")

    def child(self, func: str, kwargs: Dict[str, Any], name: str) -> Dict[str, Any]:
        """``func(**kwargs)`` of the script in a child, logged to run_dir/logs/<name>.log (for
        tuning runs, which keep their own records)."""
        return run_child(self.script, func, kwargs, log_path=self.run_dir / "logs" / f"{name}.log")

    def run(self, jobs: Sequence[Job]) -> List[Any]:
        """Run every job in its own child; one failing does not lose the others. Returns
        (job, setting) for each job that ran."""
        done = []
        for n, job in enumerate(jobs, 1):
            log = self.run_dir / "logs" / f"{slug(job.key)}.log"
            print(f"[{n}/{len(jobs)}] {job.key} (log: {log})", flush=True)
            res = run_job(self.script, job.func, job.kwargs, job.key, log, self.errors)
            if res is None:
                continue
            setting = job.setting or res["setting"]
            extra_rows = dict(res.get("extra_rows", {}))
            for name, metrics in [(setting, res["metrics"])] + list(extra_rows.items()):
                for metric, value in metrics.items():
                    if value is not None:
                        self.rows.append(make_row(job.system, name, metric, value, dataset=job.dataset,
                                                  split=job.split))
            self.details[job.key if job.setting else f"{job.key} | {setting}"] = dict(
                res.get("details", {}), setting=setting, dataset=job.dataset, split=job.split,
                date=now_iso(), command=self.command,
                # other work on the machine skews the timings: 1-minute load averages
                load_avg_before=res["load_avg_before"], load_avg_after=res["load_avg_after"],
                child_seconds=res.get("child_seconds"), peak_rss_self_mb=res.get("peak_rss_self_mb"))
            show_metrics(setting, res["metrics"], res["seconds"])
            done.append((job, setting))
        self.done += done
        return done

    def replaces(self, row: Dict[str, Any]) -> bool:
        """Whether a run replaces an old row: a job of ours replaces its setting's rows; a peer
        that ran replaces all its rows (its setting may have changed), on the same data and split."""
        return any(row["system"] == job.system and row["dataset"] == job.dataset and row["split"] == job.split
                   and (job.system != self.ours or row["setting"] == setting) for job, setting in self.done)

    def drops_detail(self, key: str) -> bool:
        """A re-run peer's old details go with its old rows."""
        return any(job.system != self.ours and not job.setting and key.startswith(f"{job.key} | ")
                   for job, _ in self.done)

    def finish(self, **settings: Any) -> int:
        """Merge the run into the results file (old rows that ``replaces`` selects give way),
        redraw the plots, say how it went; the exit status is 1 when a job failed."""
        save_results(self.results_path, self.component, self.rows, self.details, self.replaces, self.errors,
                     drop_detail=self.drops_detail, command=self.command, quick=self.quick, **settings)
        self.plots()
        failed = f"; {len(self.errors)} failed: {sorted(self.errors)}" if self.errors else ""
        print(f"done in {time.time() - self.t_start:.0f}s{failed}")
        return 1 if self.errors else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        sys.exit(_child_main(sys.argv[2:]))
    print("usage: _runner.py --child MODULE_PATH FUNC IN_JSON OUT_JSON (internal)", file=sys.stderr)
    sys.exit(2)
