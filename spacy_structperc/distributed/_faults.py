"""Fault injection for tests and the soak benchmark: kill Dask worker processes at a named phase
of train-distributed, so a test can show that a run survives a loss at that exact moment.

Off unless the environment sets STRUCTPERC_FAULT (and STRUCTPERC_FAULT_DIR, a folder for the
markers that make each fault fire once per run, also in a rerun task or a restarted worker):

    STRUCTPERC_FAULT="<phase>[@<epoch>][,<phase>[@<epoch>]...]"

Phases (the epoch defaults to 1; "*" is every epoch):

* ``startup``: a worker process kills itself while the LocalCluster starts it (a preload,
  before the worker registers: Dask's "Nanny failed to start");
* ``scatter``: the driver kills every worker holding the data an epoch starts from (the run's
  pipeline and the epoch's mix) as soon as it is on a worker, before the shards train;
* ``mid-epoch``: the worker training shard 0 kills itself after its first batch;
* ``mixing``: the driver kills every worker while it mixes the epoch's shard results.

Only for a LocalCluster on this machine (the driver sends SIGKILL to the workers' pids).
"""
import os
import signal
import time
from typing import Dict, Optional

PHASES = ("startup", "scatter", "mid-epoch", "mixing")
ENV, ENV_DIR = "STRUCTPERC_FAULT", "STRUCTPERC_FAULT_DIR"


def fault_plan(value: Optional[str] = None) -> Dict[str, str]:
    """{phase: epoch ("1", "2", ... or "*")} from STRUCTPERC_FAULT (or `value`)."""
    value = os.environ.get(ENV, "") if value is None else value
    plan = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        phase, _, epoch = item.partition("@")
        if phase not in PHASES:
            raise ValueError(f"{ENV}: unknown phase {phase!r} (expected one of {PHASES})")
        plan[phase] = epoch or "1"
    return plan


def fault_dir() -> Optional[str]:
    return os.environ.get(ENV_DIR) or None


def should_fire(plan: Dict[str, str], folder: Optional[str], phase: str, epoch: int = 1, tag: str = "") -> bool:
    """True once per (phase, epoch, tag) if the plan names the phase at this epoch: a marker file
    in `folder` records that it fired."""
    want = plan.get(phase)
    if want is None or folder is None or (want != "*" and int(want) != epoch):
        return False
    try:
        fd = os.open(os.path.join(folder, f"fired-{phase}-e{epoch}{tag}"),
                     os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_workers(client, addresses=None, wait: float = 20.0) -> int:
    """SIGKILL the processes of the workers at `addresses` (default: all), and wait until the
    scheduler has removed them. Returns how many were killed."""
    pids = client.run(os.getpid, workers=list(addresses) if addresses is not None else None)
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and set(pids) & set(client.nthreads()):
        time.sleep(0.05)
    return len(pids)


def dask_setup(worker) -> None:    # noqa: ARG001 - Dask's preload hook, run as a worker starts
    if should_fire(fault_plan(), fault_dir(), "startup"):
        kill_self()
