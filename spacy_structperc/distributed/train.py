"""`train-distributed`: any component's config trained by iterative parameter mixing.

McDonald, Hall and Mann (2010): the training set is cut into S shards; every epoch each shard
trains one pass from the current mix, and the S resulting weight vectors are mixed (uniformly,
or weighted by each shard's mistakes) into the seed of the next epoch.

The driver initializes the pipeline as `spacy train` does (`init_nlp`), writes the shards where
the workers can read them (a local folder or any fsspec URL) and sends the initialized pipeline
once as `nlp.to_bytes()`. Workers keep the pipeline, their shard and the current mix between
epochs (resident, keyed by the run's token: a new run drops the last one's). Each epoch a shard
sends back only the cells it changed, and the driver broadcasts only the mix of those cells (see
`delta.py`: the result is `WeightsMixer`'s on the full states, bit for bit). A worker that dies
loses nothing: its task is pure (the mix, the shard, the epoch and the seed fix its result), so
it runs again elsewhere; what it starts from (the pipeline, the epoch's mix) travels as results
of tasks whose specs the scheduler keeps (never `client.scatter`, whose values die with their
last holder), and a worker that does not hold the mix the task starts from (a restarted one)
gets the full base from the driver; the epoch's mix is the one it would have been. With no
worker for `worker_timeout` seconds the run stops with S352 and the last completed epoch saved
(`resume=True` continues it). `_faults.py` kills workers at a named phase, for the tests.
"""
import json
import os
import random
import resource
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..errors import Errors
from . import _faults
from ._docbin import get_docs, set_user_data
from .delta import apply_mix, full_base, load_base, message_nbytes, mix_message, shard_delta
from .mixing import mixable_pipes, mixing_coefficients

MIXING = ("uniform", "mistakes")
_WORKER: Dict[str, Any] = {}   # this worker's resident run: token, pipeline (holding the mix), shards
_WORKER_LOCK = threading.Lock()  # one shard at a time per process (workers with several threads)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Shards ----------------------------------------------------------------------------------------

def write_shards(examples: Sequence, n_shards: int, shard_dir: str) -> List[str]:
    """Deal the examples round-robin into `n_shards` shards; write each as two DocBins (the
    reference docs, and the predicted docs' tokens, so workers rebuild the same Examples the
    config's reader made). Returns one URL prefix per shard."""
    import fsspec
    from spacy.tokens import DocBin

    if len(examples) < n_shards:
        raise ValueError(Errors.S343.format(n_examples=len(examples), n_shards=n_shards))
    fs, _, (root,) = fsspec.get_fs_token_paths(shard_dir)
    fs.makedirs(root, exist_ok=True)
    urls = []
    for s in range(n_shards):
        ref, pred = DocBin(), DocBin(attrs=["ORTH", "SPACY"], store_user_data=False)
        for eg in examples[s::n_shards]:
            ref.add(eg.reference)
            pred.add(eg.predicted)
        set_user_data(ref, [dict(eg.reference.user_data) for eg in examples[s::n_shards]])
        prefix = f"{shard_dir.rstrip('/')}/shard-{s:03d}"
        for suffix, db in ((".reference.spacy", ref), (".predicted.spacy", pred)):
            with fsspec.open(prefix + suffix, "wb") as f:
                f.write(db.to_bytes())
        urls.append(prefix)
    return urls


def read_shard(url: str, nlp) -> List:
    import fsspec
    from spacy.tokens import DocBin
    from spacy.training import Example

    try:
        with fsspec.open(url + ".reference.spacy", "rb") as f:
            refs = list(get_docs(DocBin().from_bytes(f.read()), nlp.vocab))
        with fsspec.open(url + ".predicted.spacy", "rb") as f:
            preds = list(DocBin().from_bytes(f.read()).get_docs(nlp.vocab))
    except (OSError, ValueError) as e:
        raise ValueError(Errors.S344.format(url=url, reason=f"{type(e).__name__}: {e}")) from None
    return [Example(p, r) for p, r in zip(preds, refs)]


# The task a worker runs ------------------------------------------------------------------------

class NeedsBase(Exception):
    """The worker does not hold the mix a task starts from (a fresh or restarted worker, or one
    that missed an epoch): the driver resends that task with the full base."""


def _worker_state(payload: Dict[str, Any]) -> Dict[str, Any]:
    """This process's resident run: the pipeline (whose tables hold the mix, plus what the last
    shard trained here changed) and the shards it read, kept across epochs. A task of another
    run (another token) replaces all of it (the dict is replaced, not emptied, so a task still
    holding the old one is not disturbed)."""
    global _WORKER
    state = _WORKER
    if state.get("token") != payload["token"]:
        from spacy import util
        from thinc.api import Config

        _WORKER = {}
        config = Config().from_str(payload["config"], interpolate=False)
        nlp = util.load_model_from_config(config, auto_fill=False, validate=False)
        nlp.from_bytes(payload["nlp"])
        # version: the mix the tables hold (None: nothing usable); holds: the shard whose
        # changes they hold on top of it (None: exactly the mix).
        state = {"token": payload["token"], "nlp": nlp, "shards": {}, "version": None, "holds": None}
        _WORKER = state
    return state


def _install(state: Dict[str, Any], update: Dict[str, Any], names: Sequence[str]) -> None:
    """Bring the tables to the mix `update` describes: a full base, or, in place, the mix
    message from the version before."""
    nlp, version = state["nlp"], update["version"]
    if state["version"] == version and state["holds"] is None:
        return
    if update["kind"] == "full":
        state["version"] = None
        for name in names:
            load_base(nlp.get_pipe(name).model.weights, update["bases"][name])
    elif state["version"] == version - 1 and (state["holds"] is None or
                                               next(iter(update["mixes"].values()))["coefs"][state["holds"]] != 0.0):
        # The tables hold the last mix plus what one shard wrote, all of it in the message (a
        # shard of coefficient 0 is not: that table cannot reach the mix in place).
        state["version"] = None
        for name in names:
            apply_mix(nlp.get_pipe(name).model.weights, update["mixes"][name])
    else:
        raise NeedsBase(f"worker {os.getpid()} holds mix {state['version']} (+ shard {state['holds']}), "
                        f"the task needs {version}")
    for name in names:
        nlp.get_pipe(name)._labels_changed()
    state["version"], state["holds"] = version, None


def batches_by_words(examples: Iterable, size_words: int = 1000) -> Iterator[List]:
    """Batches of Examples of about `size_words` reference words each, in order (the last one
    may be smaller)."""
    batch, n = [], 0
    for eg in examples:
        batch.append(eg)
        n += len(eg.reference)
        if n >= size_words:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def _batches(payload: Dict[str, Any], examples: List) -> Iterator[List]:
    return batches_by_words(examples, max(1, int(payload.get("batch_words", 1000))))


def train_shard(payload: Dict[str, Any], update: Dict[str, Any], shard_url: str, epoch: int,
                shard_index: int, fallback: Any = None) -> Dict[str, Any]:
    """One epoch over one shard from the mix `update` leads to (or `fallback`, a full update or a
    function that returns one, if this worker cannot get there): what the shard changed
    (`delta.shard_delta` per component) and its statistics; `{"needs_base": why}` if the worker
    cannot get there and there is no fallback."""
    with _WORKER_LOCK:
        return _train_shard(payload, update, shard_url, epoch, shard_index, fallback)


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


_USAGE_FIELDS = ("wall", "cpu", "user", "sys", "minflt", "nivcsw", "migrations", "process_cpu")


def _migrations() -> float:
    """How often the scheduler moved this thread to another core (Linux; 0 elsewhere)."""
    try:
        with open("/proc/thread-self/sched", "rb") as f:
            for line in f:
                if line.startswith(b"se.nr_migrations"):
                    return float(line.split(b":")[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _usage() -> Tuple[float, ...]:
    """Now: wall clock, this thread's CPU (user + sys, user, sys), its minor page faults,
    involuntary context switches (preemptions) and moves to another core, and the whole
    process's CPU (all threads: Dask's event loop, (de)serialization)."""
    p = resource.getrusage(resource.RUSAGE_SELF)
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:       # no per-thread usage (macOS): the thread's CPU only
        cpu = time.thread_time()
        return (time.perf_counter(), cpu, cpu, 0.0, 0.0, 0.0, 0.0, p.ru_utime + p.ru_stime)
    t = resource.getrusage(who)
    return (time.perf_counter(), t.ru_utime + t.ru_stime, t.ru_utime, t.ru_stime, float(t.ru_minflt),
            float(t.ru_nivcsw), _migrations(), p.ru_utime + p.ru_stime)


def _phase_usage(marks: Sequence[Tuple[str, Tuple[float, ...]]]) -> Dict[str, Dict[str, float]]:
    """Per phase (between consecutive marks) the differences of `_usage`."""
    return {name: {f: round(b - a, 6) for f, a, b in zip(_USAGE_FIELDS, before, after)}
            for (_, before), (name, after) in zip(marks, marks[1:])}


def _yield_to_driver(nice: int) -> None:
    """Lower this thread's scheduling priority to `nice` (Linux: per thread, so the worker's event
    loop keeps its own and answers the driver promptly). Raising a nice value needs no privilege;
    where threads have no priority of their own this does nothing."""
    if nice <= 0 or not hasattr(os, "setpriority") or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:
        pass


def _thread_nice() -> Optional[int]:
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except (AttributeError, OSError):
        return None


def _train_shard(payload, update, shard_url, epoch, shard_index, fallback):
    _yield_to_driver(int(payload.get("worker_nice", 0)))
    u_start, clock_start = _usage(), time.time()
    state = _worker_state(payload)
    names = payload["mixed"]
    try:
        _install(state, update, names)
    except NeedsBase as e:
        if fallback is None:
            # A result, not an exception: Dask would log every one as a failed task.
            return {"needs_base": str(e)}
        _install(state, fallback() if callable(fallback) else fallback, names)
    nlp = state["nlp"]
    examples = state["shards"].get(shard_url)
    if examples is None:
        examples = state["shards"][shard_url] = read_shard(shard_url, nlp)
    tables = {name: nlp.get_pipe(name).model.weights for name in names}
    version = state["version"]
    state["version"] = None            # until the shard's changes are taken: a failure leaves nothing usable
    for table in tables.values():
        table.start_journal()
    for _, pipe in nlp.pipeline:
        start_epoch = getattr(pipe, "start_epoch", None)
        if start_epoch is not None:
            start_epoch(epoch - 1)   # spaCy's epochs, as the epoch hook sees them, count from 0
    order = list(examples)
    random.Random(f"{payload['seed']}:{epoch}:{shard_index}").shuffle(order)
    losses: Dict[str, float] = {}
    u_ready = _usage()
    fault = payload.get("fault")
    for n_batch, batch in enumerate(_batches(payload, order)):
        nlp.update(batch, sgd=False, losses=losses, exclude=payload["frozen"],
                   annotates=payload["annotating"])
        if fault and n_batch == 0 and shard_index == 0 and \
                _faults.should_fire(fault["plan"], fault["dir"], "mid-epoch", epoch):
            _faults.kill_self()
    u_trained = _usage()
    deltas = {name: shard_delta(table) for name, table in tables.items()}
    state["version"], state["holds"] = version, shard_index
    usage = _phase_usage([("", u_start), ("prepare", u_ready), ("train", u_trained), ("delta", _usage())])
    return {
        "deltas": deltas,
        "mistakes": {name: float(losses.get(name, 0.0)) for name in names},
        "examples": len(order),
        "words": sum(len(eg.reference) for eg in order),
        "seconds": sum(u["wall"] for u in usage.values()),
        "phases": {phase: u["wall"] for phase, u in usage.items()},
        "phases_cpu": {phase: u["cpu"] for phase, u in usage.items()},
        "phases_usage": usage,                        # the task thread's figures by phase (see _usage)
        "task_cpu": sum(u["cpu"] for u in usage.values()),   # CPU seconds of this task's thread
        "process_cpu_start": u_start[-1],             # the worker process's CPU seconds at the start
        # Wall clock (time.time()): start, trained, end.
        "clock": [clock_start, clock_start + (u_trained[0] - u_start[0]), time.time()],
        "process_cpu": _process_cpu(),                # the worker process's CPU seconds so far
        "delta_mb": sum(message_nbytes(d) for d in deltas.values()) / 1e6,
        "peak_rss_mb": _peak_rss_mb(),
        "pid": os.getpid(),
        "nice": _thread_nice(),
    }


def warm_worker() -> float:
    """Import what a shard's task needs (spaCy and this package's components): sent to every
    worker as the run starts, so the imports overlap the driver's initialization instead of
    delaying the first epoch. Returns the seconds it took."""
    start = time.perf_counter()
    import spacy  # noqa: F401
    import spacy_structperc  # noqa: F401
    from spacy.training import Example  # noqa: F401
    return time.perf_counter() - start


def resident_run() -> Dict[str, Any]:
    """What this process holds for a run (for tests and diagnostics): its token, the shards it
    read and the mix version."""
    return {"token": _WORKER.get("token"), "shards": sorted(_WORKER.get("shards") or ()),
            "version": _WORKER.get("version")}


def forget_resident_run() -> None:
    """Drop this process's resident run (as a restarted worker would have)."""
    global _WORKER
    _WORKER = {}


def _full_update(version: int, pipes: Sequence[Tuple[str, Any]]) -> Dict[str, Any]:
    """The mix the pipes' tables hold now, as version `version`, in full (sparse)."""
    return {"version": version, "kind": "full",
            "bases": {name: full_base(pipe.model.weights) for name, pipe in pipes}}


# Executors: where the shards train -------------------------------------------------------------

class SequentialExecutor:
    """Every shard in this process, one after another: serial training (one shard), and the
    simulation of a larger cluster (accuracy does not need real cores). The shards run the very
    task the workers run, so a simulated mix is the cluster's mix bit for bit."""

    def __init__(self, payload: Dict[str, Any], shard_urls: List[str]):
        self.payload, self.shard_urls = payload, shard_urls
        self.n_workers = 1

    def submit(self, update, epoch, full_base):
        return update, epoch, full_base

    def collect(self, handle):
        update, epoch, full_base = handle
        memo: List[Dict[str, Any]] = []

        def full():
            if not memo:
                memo.append(full_base())
            return memo[0]

        # Shard i > 0 finds the tables holding shard i - 1's epoch: it starts from the full mix.
        return [train_shard(self.payload, update, url, epoch, i, full) for i, url in enumerate(self.shard_urls)]

    def worker_peak_rss_mb(self) -> List[float]:
        return [_peak_rss_mb()]

    def close(self):
        if _WORKER.get("token") == self.payload["token"]:
            forget_resident_run()


def _identity(value):
    return value


class ShardsLost(Exception):
    """An epoch's shards could not be trained on the cluster (no worker for the timeout, or a
    shard's task lost more times than `DaskExecutor.MAX_ATTEMPTS`)."""


def _infrastructure_error(exc: BaseException) -> bool:
    """Whether a task's exception is the cluster's (a worker lost, data gone, a comm closed), not
    the shard's own (a coded error of the trainer: raised to the caller)."""
    import asyncio
    import concurrent.futures

    from distributed.scheduler import KilledWorker

    return isinstance(exc, (KilledWorker, asyncio.CancelledError, concurrent.futures.CancelledError,
                            OSError, EOFError)) and not isinstance(exc, FileNotFoundError)


class DaskExecutor:
    """Shards as Dask tasks on workers that keep their pipeline, shard and mix between epochs:
    the pipeline travels once, then each epoch the mix message out and each shard's delta back.

    Nothing a task needs exists only on a worker. The pipeline and each epoch's mix travel as
    the results of tasks whose specs hold them (`_hold`): the scheduler keeps a spec while its
    future lives and computes the value again when every worker holding it is lost. (A value
    sent with `client.scatter` has no spec: lost with its last holder, it is gone for good and
    every task that needs it is cancelled.) A shard's task lost with its worker is submitted
    again (a new key, up to `MAX_ATTEMPTS` times) with the same arguments, so it computes the
    same result; a worker that lacks the mix says so (`needs_base`) and gets the full base."""

    MAX_ATTEMPTS = 5

    def __init__(self, client, payload: Dict[str, Any], shard_urls: List[str], n_workers: int,
                 worker_timeout: float = 120.0):
        self.client, self.payload, self.shard_urls = client, payload, shard_urls
        self.n_workers, self.worker_timeout = n_workers, worker_timeout
        self.token = payload["token"][:12]
        self.resent = 0      # shard tasks sent again with the full base (a worker without the mix)
        self.rerun = 0       # shard tasks sent again because their worker or data was lost
        self._payload_f = self._hold(payload, "payload")

    def _hold(self, data, name: str):
        """A future of `data` that survives the loss of any worker (see the class docstring)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sending large graph")
            return self.client.submit(_identity, data, pure=False,
                                      key=f"structperc-data-{self.token}-{name}-{uuid.uuid4().hex[:8]}")

    @staticmethod
    def _usable(future) -> bool:
        return future.status not in ("cancelled", "lost", "error")

    def _submit_shard(self, handle: Dict[str, Any], i: int, full=None):
        client, epoch = self.client, handle["epoch"]
        if not self._usable(self._payload_f):
            self._payload_f = self._hold(self.payload, "payload")
        if not self._usable(handle["update_f"]):
            handle["update_f"] = self._hold(handle["update"], f"e{epoch}-update")
        # Shard i on the same worker every epoch (it holds the shard's examples), if there is one.
        workers = sorted(client.nthreads())
        where = {"workers": [workers[i % len(workers)]], "allow_other_workers": True} if workers else {}
        attempt = handle["attempts"][i]
        handle["attempts"][i] += 1
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sending large graph")
            return client.submit(train_shard, self._payload_f, handle["update_f"], self.shard_urls[i], epoch, i,
                                 full, pure=False, key=f"structperc-train-{self.token}-e{epoch}-s{i}-a{attempt}"
                                 + ("-full" if full is not None else ""), **where)

    def submit(self, update, epoch, full_base):
        """Start an epoch's shards (they run while the driver evaluates the last epoch)."""
        handle = {"update": update, "update_f": self._hold(update, f"e{epoch}-update"), "epoch": epoch,
                  "full_base": full_base, "attempts": [0] * len(self.shard_urls)}
        fault = self.payload.get("fault")
        if fault and _faults.should_fire(fault["plan"], fault["dir"], "scatter", epoch):
            from distributed import wait

            data = [self._payload_f, handle["update_f"]]
            wait(data)
            _faults.kill_workers(self.client, {w for ws in self.client.who_has(data).values() for w in ws})
        handle["futures"] = [self._submit_shard(handle, i) for i in range(len(self.shard_urls))]
        return handle

    def collect(self, handle):
        """The epoch's shard results. A shard whose worker lacked the mix is sent again with the
        full base (`full_base()`, called only then); one whose worker or data was lost is sent
        again as it was. ShardsLost when no worker is there for `worker_timeout` seconds or a
        shard was lost `MAX_ATTEMPTS` times."""
        from distributed import wait

        client, epoch = self.client, handle["epoch"]
        pending = dict(enumerate(handle["futures"]))
        results: List[Any] = [None] * len(pending)
        full, alone_since = None, None
        try:
            while pending:
                try:
                    wait(list(pending.values()), timeout=1.0, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                if client.nthreads():
                    alone_since = None
                elif alone_since is None:
                    alone_since = time.monotonic()
                elif time.monotonic() - alone_since > self.worker_timeout:
                    raise ShardsLost(f"no Dask worker for {self.worker_timeout:.0f} s")
                for i, f in list(pending.items()):
                    if f.status == "pending":
                        continue
                    exc, result = None, None
                    if f.status == "finished":
                        try:
                            result = f.result()
                        except BaseException as e:    # noqa: BLE001 - sorted below
                            exc = e
                        if exc is None and "needs_base" not in result:
                            results[i] = result
                            del pending[i]
                            continue
                    elif f.status == "error":
                        exc = f.exception()
                    if result is not None and exc is None:
                        # A worker without the mix (restarted, or idle last epoch): send it the full base.
                        if full is None:
                            full = handle["full_base"]()
                        pending[i] = self._submit_shard(handle, i, full)
                        self.resent += 1
                    elif exc is None or _infrastructure_error(exc):
                        # Lost with its worker (cancelled, KilledWorker, a closed comm): the same task again.
                        if handle["attempts"][i] >= self.MAX_ATTEMPTS:
                            raise ShardsLost(f"shard {i}'s task was lost {handle['attempts'][i]} times "
                                             f"(last: {f.status}{'' if exc is None else ', ' + repr(exc)})")
                        pending[i] = self._submit_shard(handle, i, full)
                        self.rerun += 1
                    else:
                        raise exc
        except BaseException:
            client.cancel(list(pending.values()))
            raise
        handle.clear()
        return results

    def worker_peak_rss_mb(self) -> List[float]:
        return sorted(self.client.run(_peak_rss_mb).values())

    def close(self):
        self._payload_f.release()


# Checkpoints: the mix of the last completed epoch, written when a run stops ----------------------

CHECKPOINT = "checkpoint"


def _sha1(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode("utf8")).hexdigest()


def _write_checkpoint(output: Path, epoch: int, pipes, config_sha: str, n_shards: int, mixing: str,
                      best, epochs: List[Dict[str, Any]]) -> Path:
    """Save the pipes' training states (the mix after `epoch`, full and exact: W, U, clock) and
    what a resumed run needs; `state.json` is written last, so a checkpoint without it is not one."""
    import numpy

    folder = output / CHECKPOINT
    _remove_checkpoint(output)
    folder.mkdir(parents=True)
    for name, pipe in pipes:
        base = full_base(pipe.model.weights)
        with open(folder / f"{name}.npz", "wb") as f:
            numpy.savez(f, **{k: numpy.asarray(v) for k, v in base.items()})
    state = {"epoch": epoch, "config_sha1": config_sha, "n_shards": n_shards, "mixing": mixing, "best": best,
             "pipes": [name for name, _ in pipes], "epochs": epochs}
    tmp = folder / "state.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(folder / "state.json")
    return folder


def _read_checkpoint(output: Path, config_sha: str, n_shards: Optional[int], mixing: str) -> Dict[str, Any]:
    import numpy

    folder = output / CHECKPOINT

    def refuse(reason):
        return ValueError(Errors.S353.format(checkpoint=folder, reason=reason))

    try:
        state = json.loads((folder / "state.json").read_text())
    except (OSError, ValueError) as e:
        raise refuse(f"no checkpoint there ({type(e).__name__})") from None
    for field, now in (("config_sha1", config_sha), ("n_shards", n_shards), ("mixing", mixing)):
        if now is not None and state.get(field) != now:
            raise refuse(f"{field} was {state.get(field)!r}, now {now!r}")
    bases = {}
    for name in state["pipes"]:
        with numpy.load(folder / f"{name}.npz") as z:
            bases[name] = {k: (int(z[k]) if k in ("clock", "n_classes") else z[k]) for k in z.files}
    state["bases"] = bases
    return state


def _remove_checkpoint(output: Path) -> None:
    import shutil

    shutil.rmtree(output / CHECKPOINT, ignore_errors=True)


# The driver ------------------------------------------------------------------------------------

WORKER_NICE = 3   # two workers at nice 3 weigh about as much as the driver at 0 (CFS weights 526 vs 1024)
# The automatic choice lowers the workers' priority only on a machine the run has to itself: the
# rest of the machine busy below this many cores' worth of CPU while the driver waits.
IDLE_BELOW_CORES = 0.25


def _others_busy_cores(seconds: float = 0.5) -> Optional[float]:
    """How many cores' worth of CPU the machine spent over the next `seconds` outside this
    process (Linux: /proc/stat; None elsewhere). The LocalCluster's idle workers count, at a
    few hundredths of a core."""
    def busy() -> float:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal ...
        return float(sum(fields[:3]) + sum(fields[5:8]))

    try:
        hz = os.sysconf("SC_CLK_TCK")
        start, own = busy(), _process_cpu()
        time.sleep(seconds)
        return max(0.0, (busy() - start) / hz - (_process_cpu() - own)) / seconds
    except (OSError, ValueError, AttributeError, IndexError):
        return None


def _worker_nice(client, worker_nice: Optional[int]) -> int:
    """The nice value of the workers' training threads: `worker_nice` if given; else WORKER_NICE
    when the workers are processes of a LocalCluster made in this process with at least one
    worker per core (they compete with the driver) and the rest of the machine is idle (under
    IDLE_BELOW_CORES busy: on a busy machine a lower priority costs the workers more than the
    driver gains), else 0."""
    if worker_nice is not None:
        if isinstance(worker_nice, bool) or not isinstance(worker_nice, int) or not 0 <= worker_nice <= 19:
            raise ValueError(Errors.S012.format(setting="worker_nice", name="train-distributed",
                                                requirement="an integer from 0 to 19", value=worker_nice))
        return worker_nice
    if client is None:
        return 0
    from distributed import LocalCluster

    if not isinstance(getattr(client, "cluster", None), LocalCluster):
        return 0
    from ._dask import configured_workers

    if (configured_workers(client) or 0) < (os.cpu_count() or 1):
        return 0
    others = _others_busy_cores()
    return WORKER_NICE if others is not None and others < IDLE_BELOW_CORES else 0


def _score_row(scores: Dict[str, Any], keys: Sequence[str]) -> List[str]:
    out = []
    for key in keys:
        value = scores.get(key)
        out.append(f"{value * 100:.2f}" if isinstance(value, (int, float)) else "-")
    return out


def train_distributed(config_path, output, *, overrides: Optional[Dict[str, Any]] = None,
                      client=None, n_shards: Optional[int] = None, mixing: str = "uniform",
                      shard_dir: Optional[str] = None, epochs: Optional[int] = None,
                      simulate: bool = False, printer: Optional[Callable[[str], None]] = print,
                      on_epoch: Optional[Callable[[Dict[str, Any], Any], None]] = None,
                      eval_every: int = 1, worker_nice: Optional[int] = None, resume: bool = False,
                      worker_timeout: float = 120.0, startup_seconds: Optional[float] = None) -> Dict[str, Any]:
    """Train the pipeline of `config_path` by iterative parameter mixing; save `model-best` and
    `model-last` under `output`. With `client`, shards train on its cluster; with `simulate`, all
    shards train in this process one after another. `n_shards` (the shards decide the model) is by
    default the number of workers the client's LocalCluster is configured to run (never the
    number present at one moment), 1 with `simulate`; a cluster given by address needs it (S354).

    A worker lost at any moment costs time, not the model: the shards' tasks are sent again from
    what the driver holds (see `DaskExecutor`). If the epoch cannot be trained (no worker for
    `worker_timeout` seconds, or a shard lost again and again), the mix of the last completed
    epoch is saved in `output/checkpoint` and S352 raised; `resume=True` continues from it, to
    the model an undisturbed run saves. `startup_seconds` (the cluster's start-up, measured by
    the caller) is printed and logged apart from the epochs.
    The mix is evaluated on the dev set every `eval_every` epochs and after the last (as
    `spacy train`'s eval_frequency spaces evaluations); `model-best` is the best evaluated mix.
    `on_epoch(row, nlp)` is called after every epoch's mix (and evaluation). Returns the log
    (also written to `output/ipm_log.json`).

    While the shards of the next epoch train, the driver evaluates and saves the last mix, and
    collects the shards when it is done. When the workers share this machine's cores with the
    driver, each process gets an equal share: the workers finish first and then wait for the
    driver's evaluation with a core idle. `worker_nice` runs the workers' training threads at
    that nice value (0: their own priority), so the driver gets a core and finishes with them.
    None, the default, chooses: `WORKER_NICE` when the workers are processes of a LocalCluster
    made in this process with at least one worker per core and the rest of the machine is idle
    at the start (measured over half a second), else 0; on a busy machine the lower priority
    costs more than it gains (benchmarks/bench_distributed.py --compare-nice measures both)."""
    from spacy import util
    from spacy.schemas import ConfigSchemaTraining
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import create_evaluation_callback
    from spacy.util import registry, resolve_dot_names

    if mixing not in MIXING:
        raise ValueError(Errors.S345.format(value=mixing, options=list(MIXING)))
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(Errors.S012.format(setting="eval_every", name="train-distributed",
                                            requirement="a positive integer", value=eval_every))
    if n_shards is not None and (isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1):
        raise ValueError(Errors.S355.format(value=n_shards))
    if client is not None:
        from distributed import fire_and_forget

        for w in client.nthreads():
            fire_and_forget(client.submit(warm_worker, pure=False, workers=[w], allow_other_workers=True,
                                          key=f"structperc-warm-{uuid.uuid4().hex[:12]}"))
    nice = _worker_nice(client, worker_nice)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    config = util.load_config(config_path, overrides=overrides or {}, interpolate=False)
    config_sha = _sha1(config.to_str())
    checkpoint = _read_checkpoint(output, config_sha, n_shards, mixing) if resume else None
    if checkpoint is not None and n_shards is None:
        n_shards = checkpoint["n_shards"]
    nlp = init_nlp(config, use_gpu=-1)
    resolved = nlp.config.interpolate()
    T = registry.resolve(resolved["training"], schema=ConfigSchemaTraining)
    train_corpus, dev_corpus = resolve_dot_names(resolved, [T["train_corpus"], T["dev_corpus"]])
    n_epochs = int(epochs if epochs is not None else T["max_epochs"])
    if n_epochs < 1:
        raise ValueError(Errors.S346.format(value=n_epochs))
    frozen, annotating = list(T["frozen_components"]), list(T["annotating_components"])
    pipes = mixable_pipes(nlp, frozen)
    if client is None and not simulate:
        raise ValueError("train_distributed needs a Dask client, or simulate=True")
    if n_shards is None:
        if client is None:
            n_shards = 1
        else:
            from ._dask import configured_workers

            n_shards = configured_workers(client)
            if n_shards is None:
                raise ValueError(Errors.S354)
    examples = list(train_corpus(nlp))
    urls = write_shards(examples, n_shards, shard_dir or str(output / "shards"))
    del examples
    batcher_size = nlp.config["training"].get("batcher", {}).get("size", 1000)
    token = uuid.uuid4().hex
    payload = {
        "token": token, "config": nlp.config.to_str(), "nlp": nlp.to_bytes(),
        "frozen": frozen, "annotating": annotating, "mixed": [name for name, _ in pipes], "seed": T["seed"] if T["seed"] is not None else 0,
        "batch_words": batcher_size if isinstance(batcher_size, int) else 1000,
        "worker_nice": nice,
    }
    fault_plan = _faults.fault_plan() if client is not None else {}
    if fault_plan:
        payload["fault"] = {"plan": fault_plan, "dir": _faults.fault_dir()}
    if client is None:
        executor = SequentialExecutor(payload, urls)
    else:
        from ._dask import configured_workers

        executor = DaskExecutor(client, payload, urls, configured_workers(client) or len(client.nthreads()),
                                worker_timeout=worker_timeout)
    del payload
    evaluate = create_evaluation_callback(nlp, dev_corpus, T["score_weights"])
    score_keys = [k for k, v in T["score_weights"].items() if v]
    before_to_disk = T["before_to_disk"] or (lambda n: n)
    names = [name for name, _ in pipes]
    first_epoch = 1 if checkpoint is None else checkpoint["epoch"] + 1
    if checkpoint is not None:
        for name, pipe in pipes:
            load_base(pipe.model.weights, checkpoint["bases"][name])
            pipe._labels_changed()
    if printer:
        if startup_seconds is not None:
            printer(f"Cluster start-up {startup_seconds:.1f} s")
        if checkpoint is not None:
            printer(f"Resuming after epoch {checkpoint['epoch']} from {output / CHECKPOINT}")
        printer(f"Iterative parameter mixing: {n_shards} shard(s) on "
                f"{'this process' if client is None else str(executor.n_workers) + ' worker(s)'}, "
                f"{mixing} mixing, {n_epochs} epoch(s)")
        header = ["E", "SECONDS", *[f"MISTAKES/SHARD {n.upper()}" for n in names],
                  *[k.upper() for k in score_keys], "SCORE"]
        printer("  ".join(f"{h:>12}" for h in header))
    log: Dict[str, Any] = {"config": str(config_path), "run": token, "n_shards": n_shards, "mixing": mixing,
                           "n_workers": executor.n_workers, "worker_nice": executor.payload["worker_nice"],
                           "startup_seconds": startup_seconds, "resumed_after": None, "epochs": []}
    best = None
    if checkpoint is not None:
        log["epochs"], best, log["resumed_after"] = checkpoint["epochs"], checkpoint["best"], checkpoint["epoch"]
    try:
        # Epoch e+1's shards are submitted as soon as epoch e's mix message exists: they train
        # while the driver applies the mix to its own tables, evaluates and saves. The full mix
        # (for a worker that does not hold the last one) is built only when a worker needs it,
        # from the driver's tables, which by then hold that mix.
        submitted = time.perf_counter()
        v0 = first_epoch - 1
        handle = None
        if first_epoch <= n_epochs:
            handle = executor.submit(_full_update(v0, pipes), first_epoch, lambda: _full_update(v0, pipes))
        epoch_start, driver_cpu = submitted, _process_cpu()
        for epoch in range(first_epoch, n_epochs + 1):
            clock_collect = time.time()
            try:
                results = executor.collect(handle)
            except ShardsLost as e:
                # The driver's tables hold the mix of epoch - 1 (applied before this collect).
                where = _write_checkpoint(output, epoch - 1, pipes, config_sha, n_shards, mixing, best, log["epochs"])
                raise RuntimeError(Errors.S352.format(epoch=epoch, reason=e, done=epoch - 1, checkpoint=where)) from None
            waited = time.perf_counter()
            if fault_plan and _faults.should_fire(fault_plan, _faults.fault_dir(), "mixing", epoch):
                _faults.kill_workers(client)
            clock_collected, clock_submitted = time.time(), None
            mix_cpu_start = time.thread_time()
            stats = [{k: v for k, v in r.items() if k != "deltas"} for r in results]
            mixes = {}
            for name, pipe in pipes:
                coefs = mixing_coefficients([s["mistakes"][name] for s in stats], mixing)
                mixes[name] = mix_message(pipe.model.weights, [r["deltas"][name] for r in results], coefs)
            del results
            mix_cpu = time.thread_time() - mix_cpu_start
            train_seconds = time.perf_counter() - submitted
            if epoch < n_epochs:
                submitted = time.perf_counter()
                handle = executor.submit({"version": epoch, "kind": "delta", "mixes": mixes}, epoch + 1,
                                         lambda v=epoch: _full_update(v, pipes))
            clock_submitted = time.time()
            evaluating = epoch % eval_every == 0 or epoch == n_epochs
            for name, pipe in pipes:
                apply_mix(pipe.model.weights, mixes[name])
                if evaluating:
                    # The driver's tables only predict until the next mix: averaged weights made
                    # once (one pass over the accumulators) score the dev set twice as fast as
                    # averaging every row read on the fly. The copy costs the driver memory only.
                    pipe.model.weights.average()
                pipe._labels_changed()
            mix_seconds = time.perf_counter() - waited
            apply_cpu = time.thread_time() - mix_cpu_start - mix_cpu
            eval_cpu_start = time.thread_time()
            score, scores = evaluate() if evaluating else (None, {})
            eval_cpu = time.thread_time() - eval_cpu_start
            row = {"epoch": epoch, "train_seconds": train_seconds,
                   "seconds": time.perf_counter() - epoch_start, "score": score,
                   "scores": {k: v for k, v in scores.items() if isinstance(v, (int, float))},
                   "mistakes": {n: [s["mistakes"][n] for s in stats] for n in names},
                   "shard_seconds": [s["seconds"] for s in stats],
                   "shard_words": [s["words"] for s in stats],
                   "shard_phases": [s["phases"] for s in stats],
                   "shard_phases_cpu": [s["phases_cpu"] for s in stats],
                   "shard_phases_usage": [s["phases_usage"] for s in stats],
                   "shard_nice": [s["nice"] for s in stats],
                   "shard_process_cpu_start": [[s["pid"], s["process_cpu_start"]] for s in stats],
                   # Wall clock (time.time()): the driver started waiting for the shards, had their
                   # results, had submitted the next epoch; each shard's task start, trained, end.
                   "clock": {"collect": clock_collect, "collected": clock_collected, "submitted": clock_submitted,
                             "shards": [s["clock"] for s in stats]},
                   "mix_seconds": mix_seconds,
                   "mix_message_cpu": mix_cpu,
                   "shard_task_cpu": [s["task_cpu"] for s in stats],
                   "shard_process_cpu": [[s["pid"], s["process_cpu"]] for s in stats],
                   "delta_mb": [s["delta_mb"] for s in stats],
                   "mix_mb": sum(message_nbytes(m) for m in mixes.values()) / 1e6,
                   "worker_peak_rss_mb": sorted({s["pid"]: s["peak_rss_mb"] for s in stats}.values())}
            log["epochs"].append(row)
            save_cpu_start = time.thread_time()
            if evaluating:
                nlp.meta["performance"] = {**row["scores"], "score": score}
            if evaluating and (best is None or score > best):
                best = score
                before_to_disk(nlp).to_disk(output / "model-best")
            # The driver's main thread's CPU by phase (the rest of its process CPU is Dask's).
            row["driver_phases_cpu"] = {"mix_message": mix_cpu, "apply": apply_cpu, "evaluate": eval_cpu,
                                        "save": time.thread_time() - save_cpu_start}
            if printer:
                cells = [str(epoch), f"{row['seconds']:.1f}",
                         *["/".join(f"{m:.0f}" for m in row["mistakes"][n]) for n in names],
                         *_score_row(scores, score_keys), "-" if score is None else f"{score:.2f}"]
                printer("  ".join(f"{c:>12}" for c in cells))
            if on_epoch is not None:
                on_epoch(row, nlp)
            row["wall_seconds"] = time.perf_counter() - epoch_start   # this epoch's share of the run
            row["driver_cpu"] = _process_cpu() - driver_cpu
            epoch_start, driver_cpu = time.perf_counter(), _process_cpu()
        before_to_disk(nlp).to_disk(output / "model-last")
    finally:
        executor.close()
    _remove_checkpoint(output)
    log["best_score"] = best
    log["resent_full_base"] = getattr(executor, "resent", 0)
    log["rerun_lost_tasks"] = getattr(executor, "rerun", 0)
    (output / "ipm_log.json").write_text(json.dumps(log, indent=2))
    return log
