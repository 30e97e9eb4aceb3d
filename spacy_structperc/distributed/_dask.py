"""The one place that imports Dask, so a missing extra is one coded error."""
import os
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

from ..errors import Errors

# Dask settings for the LocalCluster `dask_client` starts (a cluster given by address keeps its
# own). The workers run one CPU-bound task at a time; Dask's defaults spend CPU beside it: a
# statistical profiler samples every thread's stack every 10 ms, the event loop wakes every
# 20 ms to check that it is responsive, the system monitor samples psutil every 0.5 s and the
# memory monitor every 0.1 s. Measured on an annotate worker (12 partitions of EWT text, 2.5-3 s
# of task CPU): the worker process's CPU beside the task thread was 6.7-7.5% of the task's with
# the defaults, 2.2-4.0% without the profiler, 0.4-0.9% with all of these slower. Nothing here
# changes what the cluster computes (the nanny still sees a dead process at once, and restarts
# it); a spill or pause for memory reacts within a second instead of 0.1 s.
EMBEDDED_CONFIG: Dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "200ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    # A LocalCluster's nanny restarts a worker process that dies. The cluster object also closes
    # (for good) the nanny of a worker that has not re-registered 15 s after it was lost: a
    # worker killed again while it restarts, or slow to start on a loaded machine, then never
    # comes back. The nannies here restart their workers; the cluster leaves them to it.
    "distributed.deploy.lost-worker-timeout": "1 day",
}


def require_dask(command: str):
    """Import and return `distributed`, or raise S340 naming the extra to install."""
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError:
        raise ImportError(Errors.S340.format(command=command)) from None
    return distributed


# Start-up and shutdown. A worker process can die while the cluster starts it (Dask raises
# "Nanny failed to start"): the start is tried again, a fresh cluster each time. The commands
# then wait until every configured worker is up (a nanny restarts a killed one), and go on with
# the workers present after `WORKER_TIMEOUT` if there is one. At the end the client closes
# first, then each worker process is given `CLOSE_TIMEOUT` seconds to exit (Dask's own 4 s is
# short for a process that frees a pipeline on a loaded machine: it then logs "Worker process
# still alive after 4.0 seconds, killing"), then the cluster.
START_ATTEMPTS = 3
WORKER_TIMEOUT = 120.0
CLOSE_TIMEOUT = 30.0


def configured_workers(client) -> Optional[int]:
    """How many workers the client's cluster is configured to run (a LocalCluster's n_workers:
    what its nannies restore after a loss), or None for a cluster given by address."""
    spec = getattr(getattr(client, "cluster", None), "worker_spec", None)
    return len(spec) if spec else None


def wait_for_workers(client, n: int, command: str, timeout: float = WORKER_TIMEOUT) -> int:
    """Wait up to `timeout` seconds for `n` workers; go on with fewer if at least one is there
    (S351 if none). Returns the number present."""
    import distributed

    deadline = time.monotonic() + timeout
    try:
        client.wait_for_workers(n, timeout=timeout)
    except (distributed.TimeoutError, TimeoutError, OSError):
        pass
    while True:
        present = len(client.nthreads())
        if present or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if not present:
        cluster = getattr(client, "cluster", None) or client.scheduler.address
        raise RuntimeError(Errors.S351.format(command=command, cluster=cluster, timeout=timeout))
    return present


def start_local_cluster(command: str, n: int, attempts: int = START_ATTEMPTS, **kwargs):
    """A LocalCluster of `n` single-threaded worker processes, its start tried `attempts` times
    (S350 if none succeeds)."""
    import distributed

    from . import _faults

    if _faults.fault_plan().get("startup"):
        kwargs.setdefault("preload", [_faults.__name__])
    reason = ""
    for _ in range(attempts):
        try:
            return distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                            dashboard_address=None, **kwargs)
        except Exception as e:    # noqa: BLE001 - Dask raises several kinds; all mean "try again"
            reason = f"{type(e).__name__}: {str(e).rstrip('.')}"
    raise RuntimeError(Errors.S350.format(command=command, n_workers=n, attempts=attempts, reason=reason))


def close_cluster(client, cluster, timeout: float = CLOSE_TIMEOUT) -> None:
    """Close `client`, then every worker process of `cluster` (each given `timeout` seconds to
    exit), then the cluster (its scheduler)."""
    import asyncio

    if client is not None:
        try:
            client.close(timeout=timeout)
        except Exception:    # noqa: BLE001 - the cluster is closed below either way
            pass
    if cluster is None:
        return

    async def close_workers():
        await asyncio.gather(*(w.close(timeout=timeout) for w in list(cluster.workers.values())),
                             return_exceptions=True)

    try:
        cluster.sync(close_workers)
    except Exception:    # noqa: BLE001
        pass
    cluster.close(timeout=timeout)


@contextmanager
def dask_client(command: str, scheduler: Optional[str] = None, workers: Optional[int] = None,
                worker_timeout: float = WORKER_TIMEOUT) -> Iterator:
    """A Client on the cluster at `scheduler` (waiting for `workers` workers, default 1), or on an
    embedded LocalCluster of `workers` single-threaded worker processes (default: one per core;
    `EMBEDDED_CONFIG` in effect for the cluster, its workers and the client), closed on exit in
    that order. The client's `structperc_startup_seconds` is how long the start took."""
    distributed = require_dask(command)
    start = time.perf_counter()
    if scheduler:
        client = distributed.Client(scheduler, timeout=worker_timeout)
        try:
            wait_for_workers(client, workers or 1, command, worker_timeout)
            client.structperc_startup_seconds = time.perf_counter() - start
            yield client
        finally:
            client.close(timeout=CLOSE_TIMEOUT)
        return
    import dask

    n = workers or os.cpu_count() or 1
    with dask.config.set(EMBEDDED_CONFIG):
        cluster = start_local_cluster(command, n)
        client = None
        try:
            client = distributed.Client(cluster)
            wait_for_workers(client, n, command, worker_timeout)
            client.structperc_startup_seconds = time.perf_counter() - start
            yield client
        finally:
            close_cluster(client, cluster)
