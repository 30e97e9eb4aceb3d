"""The one place that imports Dask, so a missing extra is one coded error."""
from contextlib import contextmanager
from typing import Iterator, Optional

from ..errors import Errors


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
    single-threaded worker processes (default: one per core), closed on exit."""
    distributed = require_dask(command)
    if scheduler:
        client = distributed.Client(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    import os

    n = workers or os.cpu_count() or 1
    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
