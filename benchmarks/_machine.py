"""Where the benchmarks live and what they run on: the repository's folders, the environment of
a child process (one thread), wall-clock and memory measurements, the machine, the git revision and
a fingerprint of the code a cached model was trained by. No spaCy here."""
from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_WORK_DIR = BENCH_DIR / ".work"

# Environment variables that keep numeric libraries on one core. The benchmark machine has few
# cores and is shared, and "words per second (one process)" should mean one thread too.
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}


def slug(text: str) -> str:
    """A file-name-safe form of a setting name."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "default"


# ---------------------------------------------------------------------------------------------
# Measuring


def peak_rss_mb(include_children: bool = True) -> float:
    """Peak resident set size in MB of this process (and, by default, of the largest waited-for
    child process, e.g. a ``spacy train`` subprocess). ru_maxrss is KiB on Linux, bytes on macOS.
    """
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if include_children:
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return peak / scale


class Timer:
    """Wall-clock timer: ``with Timer() as t: ...; t.seconds``."""

    def __enter__(self) -> "Timer":
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def load_average() -> Optional[float]:
    """The 1-minute load average (other work on the machine skews timings), if known."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Environment for child processes: one thread, the repo importable, unbuffered output."""
    env = dict(os.environ)
    env.update(SINGLE_THREAD_ENV)
    env["PYTHONUNBUFFERED"] = "1"
    paths = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if extra:
        env.update(extra)
    return env


def machine_info() -> Dict[str, Any]:
    """What the numbers were measured on."""
    info: Dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        info["cpu"] = platform.processor()
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
            info["mem_gb"] = round(kb / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    for pkg in ("spacy", "thinc", "numpy", "pycrfsuite", "spacy_structperc"):
        try:
            from importlib.metadata import version

            dist = {"pycrfsuite": "python-crfsuite", "spacy_structperc": "spacy-structperc"}
            info[pkg] = version(dist.get(pkg, pkg))
        except Exception:
            pass
    return info


def git_revision() -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=10,
        )
        return out.stdout.strip() or None
    except Exception:
        return None


def code_fingerprint(*paths: str) -> str:
    """A short hash of the code under ``paths`` (repo-relative) as it is now: the git tree of each
    at HEAD plus any uncommitted change to it. Cached models are keyed on it, so a model trained
    by older code is retrained rather than measured as the new code's."""
    parts = []
    for rel in paths or ("spacy_structperc",):
        for cmd in (["git", "rev-parse", f"HEAD:{rel}"], ["git", "diff", "HEAD", "--", rel],
                    ["git", "ls-files", "--others", "--exclude-standard", "--", rel]):
            try:
                out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
                parts.append(out.stdout)
            except Exception:
                parts.append("?")
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def dir_bytes(path: Path) -> int:
    """Bytes of all files under ``path`` (or of the file itself)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def current_rss_mb() -> Optional[float]:
    """This process's resident set size now (VmRSS), in MB; None where /proc is missing."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
