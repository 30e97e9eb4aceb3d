"""The one place that imports Dask, so a missing extra is one coded error."""
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
# changes what the cluster computes or how it recovers from a lost worker (the nanny still sees
# a dead process at once); a spill or pause for memory reacts within a second instead of 0.1 s.
EMBEDDED_CONFIG: Dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "200ms",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}


def require_dask(command: str):
    """Import and return `distributed`, or raise S340 naming the extra to install."""
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError:
        raise ImportError(Errors.S340.format(command=command)) from None
    return distributed


@contextmanager
def dask_client(command: str, scheduler: Optional[str] = None, workers: Optional[int] = None) -> Iterator:
    """A Client on the cluster at `scheduler`, or on an embedded LocalCluster of `workers`
    single-threaded worker processes (default: one per core; `EMBEDDED_CONFIG` in effect for
    the cluster, its workers and the client), closed on exit."""
    distributed = require_dask(command)
    if scheduler:
        client = distributed.Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    import os

    import dask

    n = workers or os.cpu_count() or 1
    with dask.config.set(EMBEDDED_CONFIG):
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
