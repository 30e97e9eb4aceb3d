"""The results file ``results/<component>.json``: rows ``{system, setting, dataset, split, metric,
value}``, merged on re-runs under a lock (a run replaces the rows of what it measured and keeps the
rest), with every absolute path written relative to the repository."""
from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from _machine import REPO_ROOT, git_revision, machine_info, now_iso

ROW_KEYS = ("system", "setting", "dataset", "split", "metric", "value")


def make_row(system: str, setting: str, metric: str, value: float, *, dataset: str,
             split: str = "test") -> Dict[str, Any]:
    if isinstance(value, float):
        value = round(value, 6)
    return {"system": system, "setting": setting, "dataset": dataset, "split": split,
            "metric": metric, "value": value}


def run_key(row: Dict[str, Any]) -> str:
    """The key of a row's entry in a results file's ``runs``: its system, setting and dataset."""
    return f"{row['system']} | {row['setting']} | {row['dataset']}"


def merge_runs(old: Dict[str, Any], rows: Sequence[Dict[str, Any]], new_rows: Sequence[Dict[str, Any]],
               date: str, git: Optional[str]) -> Dict[str, Dict[str, Any]]:
    """``runs`` after a merge: for each (system, setting, dataset) of ``rows``, the date and git
    revision of the run that measured it: this run's for the new rows, else the old file's entry
    (or, in a file from before entries were kept, the old file's own date and revision, which
    its rows are no newer than: marked "up_to")."""
    old_runs = old.get("runs") or {}
    fallback = {"date": old.get("date"), "git": old.get("git"), "up_to": True}
    new_keys = {run_key(r) for r in new_rows}
    runs = {}
    for r in rows:
        key = run_key(r)
        runs[key] = {"date": date, "git": git} if key in new_keys else old_runs.get(key, fallback)
    return runs


def runs_of(data: Dict[str, Any], rows: Optional[Sequence[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    """The distinct runs (date, git) that measured ``rows`` (default: all) of a results file,
    oldest first; the file's own date and revision where it keeps no ``runs``."""
    runs = data.get("runs") or {}
    fallback = {"date": data.get("date"), "git": data.get("git")}
    seen: Dict[tuple, Dict[str, Any]] = {}
    for r in data.get("rows", []) if rows is None else rows:
        run = runs.get(run_key(r), fallback)
        seen.setdefault((str(run.get("date") or "")[:10], run.get("git") or "", bool(run.get("up_to"))), run)
    return [seen[k] for k in sorted(seen)]


def load_results(path: Path) -> Dict[str, Any]:
    path = Path(path)
    if path.exists():
        return json.loads(path.read_text())
    return {}


def merge_rows(old_rows: Sequence[Dict[str, Any]], new_rows: Sequence[Dict[str, Any]],
               replace: Callable[[Dict[str, Any]], bool]) -> List[Dict[str, Any]]:
    """Old rows for which ``replace(row)`` is false, then the new rows; also drops any old row
    with the same (system, setting, dataset, split, metric) as a new one."""
    new_keys = {tuple(r[k] for k in ROW_KEYS[:-1]) for r in new_rows}
    kept = [r for r in old_rows
            if not replace(r) and tuple(r[k] for k in ROW_KEYS[:-1]) not in new_keys]
    return kept + list(new_rows)


# An absolute path inside a string: a "/" that starts a word (not "words/s", not "https://"),
# then at least two components. tests/test_results_files.py checks the committed files with its
# own copy of this pattern.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~<>%$-])/(?:[^\s/\"'`,;:()\[\]{}=|<>@\\]+/)+[^\s/\"'`,;:()\[\]{}=|<>@\\]*")


# Paths every Linux machine has alike (/proc/stat, /usr/bin/time): left as they are.
SYSTEM_ROOTS = ("proc", "sys", "dev", "usr", "bin", "etc")


def relative_path(path: str, root: Path = REPO_ROOT) -> str:
    """An absolute path as a results file may show it: relative to the repository (also above
    it, "../shared/data/..."), a temporary file under "<tmp>", a home directory as "~", a
    system path (SYSTEM_ROOTS) as it is."""
    import tempfile

    p = Path(path)
    if p.parts[1:2] and p.parts[1] in SYSTEM_ROOTS:
        return path
    # The checkout and the corpora beside it (project.yml's data_dir, ../shared/data) are
    # relative to the checkout wherever it lies, a temporary folder included.
    for near in (root, root.parent / "shared"):
        if p == near or near in p.parents:
            return os.path.relpath(p, root).replace(os.sep, "/")
    for tmp in {Path(tempfile.gettempdir()), Path("/tmp")}:
        if p == tmp or tmp in p.parents:
            return "<tmp>/" + p.relative_to(tmp).as_posix()
    home = Path.home()
    if home != Path("/") and home in p.parents:
        return "~/" + p.relative_to(home).as_posix()
    return os.path.relpath(p, root).replace(os.sep, "/")


def relative_paths(obj: Any, root: Path = REPO_ROOT) -> Any:
    """``obj`` (dicts, lists, strings: a results payload) with every absolute path in its strings
    and keys made machine-neutral by ``relative_path``: a results file says where a run read and
    wrote relative to the checkout, never where the checkout was."""
    if isinstance(obj, str):
        return ABSOLUTE_PATH.sub(lambda m: relative_path(m.group(0), root), obj)
    if isinstance(obj, dict):
        return {relative_paths(k, root): relative_paths(v, root) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [relative_paths(v, root) for v in obj]
    return obj


def write_results(path: Path, component: str, rows: Sequence[Dict[str, Any]],
                  **extra: Any) -> Path:
    """Write ``{"component", "rows", **extra}``; every row has exactly ROW_KEYS. Absolute paths
    in the payload are written relative to the repository (``relative_paths``)."""
    for r in rows:
        if tuple(sorted(r)) != tuple(sorted(ROW_KEYS)):
            raise ValueError(f"bad row keys: {sorted(r)}")
    payload = {"component": component, "rows": list(rows)}
    payload.update(extra)
    payload = relative_paths(payload)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def save_results(path: Path, component: str, new_rows: Sequence[Dict[str, Any]],
                 details: Dict[str, Any], replace: Callable[[Dict[str, Any]], bool],
                 errors: Dict[str, str], drop_detail: Optional[Callable[[str], bool]] = None,
                 **settings: Any) -> None:
    """Merge one run into the results file, under its lock: old rows that ``replace`` selects
    (and any with a new row's key) give way to ``new_rows``, old details that ``drop_detail``
    selects are dropped and ``details`` added; the run's ``settings`` (command, notes, ...),
    machine, date and git revision replace the file's, and the run's errors are kept as
    ``errors_last_run``; ``runs`` says which run measured each (system, setting, dataset).
    Nothing is written when the run made no rows."""
    if not new_rows:
        return
    with locked(path):
        old = load_results(path)
        rows = merge_rows(old.get("rows", []), new_rows, replace)
        all_details = {k: v for k, v in old.get("details", {}).items()
                       if drop_detail is None or not drop_detail(k)}
        all_details.update(details)
        extra = {k: v for k, v in old.items() if k not in ("component", "rows", "details", "errors_last_run")}
        date, git = now_iso(), git_revision()
        extra.update(settings, machine=machine_info(), date=date, git=git, details=all_details,
                     runs=merge_runs(old, rows, new_rows, date, git))
        if errors:
            extra["errors_last_run"] = errors
        write_results(path, component, rows, **extra)
    print(f"wrote {path} ({len(new_rows)} new rows, {len(rows)} in all)")


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock on ``path`` + ".lock" (fcntl), so that two benchmark runs finishing at
    the same time do not lose each other's rows when they merge into one results file."""
    lock_path = Path(str(path) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        try:
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # not on POSIX: no lock
            pass
        yield
