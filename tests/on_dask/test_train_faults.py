"""train-distributed loses no run to a lost worker: worker processes killed at each phase of a run
(while the cluster starts them, as soon as the data an epoch starts from reached them, in the
middle of a shard's epoch, while the driver mixes) cost time, and the saved model is the one an
undisturbed run saves, byte for byte. When no worker comes back, the run stops with a coded error
and the last completed epoch saved, and resuming from it saves that same model.

The kills are placed by the trainer's fault hook (STRUCTPERC_FAULT, `distributed/_faults.py`),
not by timers. One LocalCluster of two worker processes serves the module."""
import logging
import time

import pytest

from spacy_structperc.distributed import _faults
from spacy_structperc.distributed._dask import dask_client, start_local_cluster
from spacy_structperc.distributed.train import train_distributed

from .conftest import toy_sentences, write_docbin, write_toy_config

pytestmark = pytest.mark.slow
EPOCHS = 2


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A small tagger config and corpus (as conftest's toy_config and toy_corpus), for the module."""
    root = tmp_path_factory.mktemp("toy")
    train = write_docbin(root / "train.spacy", toy_sentences(160, 1))
    dev = write_docbin(root / "dev.spacy", toy_sentences(40, 2))
    return {"config": write_toy_config(root, n_buckets=1 << 12),
            "overrides": {"paths.train": str(train), "paths.dev": str(dev)}}


@pytest.fixture(scope="module")
def client():
    with dask_client("train-distributed", workers=2) as c:
        yield c


def _run(toy, out, client=None, **kw):
    return train_distributed(toy["config"], out, overrides=toy["overrides"], client=client, epochs=EPOCHS,
                             printer=None, **kw)


def _model(out):
    return (out / "model-last" / "tagger" / "model").read_bytes()


@pytest.fixture(scope="module")
def undisturbed(toy, tmp_path_factory):
    """The model of an undisturbed run: two shards trained in turn in this process, which is the
    two workers' model bit for bit (test_train_distributed)."""
    out = tmp_path_factory.mktemp("undisturbed")
    _run(toy, out, simulate=True, n_shards=2)
    return _model(out)


def _fault(monkeypatch, tmp_path, plan):
    folder = tmp_path / "fired"
    folder.mkdir()
    monkeypatch.setenv(_faults.ENV, plan)
    monkeypatch.setenv(_faults.ENV_DIR, str(folder))
    return folder


def _wait_for_two(client):
    client.wait_for_workers(2, timeout=60)


@pytest.mark.parametrize("plan", ["mixing@1,scatter@2", "mid-epoch@2"])
def test_workers_killed_at_a_phase_cost_nothing_of_the_model(tmp_path, monkeypatch, client, toy, undisturbed, plan):
    """mixing: both workers die while the driver mixes epoch 1 (epoch 2 starts on fresh
    processes); scatter: every worker holding the pipeline and epoch 2's mix is killed as soon as
    they are there (with `client.scatter`, that data was gone for good: "lost scattered data",
    and the run's tasks cancelled); mid-epoch: the worker training shard 0 dies after its first
    batch of epoch 2."""
    _wait_for_two(client)
    fired = _fault(monkeypatch, tmp_path, plan)
    log = _run(toy, tmp_path / "out", client)
    for fault in plan.split(","):
        phase, _, epoch = fault.partition("@")
        assert (fired / f"fired-{phase}-e{epoch}").exists(), f"{fault} did not fire"
    assert log["n_shards"] == 2 and len(log["epochs"]) == EPOCHS
    assert _model(tmp_path / "out") == undisturbed
    assert not (tmp_path / "out" / "checkpoint").exists()


def test_no_worker_at_the_start_waits_for_them_and_keeps_the_configured_shard_count(tmp_path, monkeypatch, client,
                                                                                      toy, undisturbed):
    """Both workers dead as the run starts (the nannies restart them): the shard count is the
    cluster's configured two, not the workers present at that moment (zero or one); and dead
    again as the first epoch's shards are submitted: nothing divides by the empty worker list."""
    from spacy_structperc.distributed.train import DaskExecutor

    _wait_for_two(client)
    assert _faults.kill_workers(client) == 2
    assert not client.nthreads()
    submit = DaskExecutor.submit

    def submit_to_no_one(self, update, epoch, full_base):
        if epoch == 1:
            _wait_for_two(client)
            _faults.kill_workers(client)
            assert not client.nthreads()
        return submit(self, update, epoch, full_base)

    monkeypatch.setattr(DaskExecutor, "submit", submit_to_no_one)
    log = _run(toy, tmp_path / "out", client)
    assert log["n_shards"] == 2 and log["n_workers"] == 2
    assert _model(tmp_path / "out") == undisturbed


def test_a_worker_killed_while_the_cluster_starts_is_started_again_and_shutdown_is_clean(tmp_path, monkeypatch):
    """A worker process dies in its start-up (Dask: "Nanny failed to start"): the cluster start
    is tried again, and the cluster has its two workers (a run on it trains two shards: the
    tests above). At the end the workers get the time they need to exit (here 4.3 s, more than
    Dask's 4 s), with no "still alive ... killing"."""
    from spacy_structperc.distributed._dask import configured_workers

    import atexit

    fired = _fault(monkeypatch, tmp_path, "startup")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    nanny_log = logging.getLogger("distributed.nanny")
    nanny_log.addHandler(handler)
    try:
        with dask_client("train-distributed", workers=2) as started:
            assert (fired / "fired-startup-e1").exists()
            assert started.structperc_startup_seconds > 0
            assert configured_workers(started) == 2 and len(started.nthreads()) == 2
            started.run(atexit.register, time.sleep, 4.3)
    finally:
        nanny_log.removeHandler(handler)
    messages = [r.getMessage() for r in records]
    assert not [m for m in messages if "still alive" in m], messages


def test_a_cluster_that_never_starts_is_a_coded_error(monkeypatch):
    import distributed

    starts = []

    def failing(*args, **kwargs):
        starts.append(kwargs)
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", failing)
    with pytest.raises(RuntimeError, match="S350.*Nanny failed to start"):
        start_local_cluster("train-distributed", 2)
    assert len(starts) == 3


def test_a_scheduler_without_workers_is_a_coded_error():
    import distributed

    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        with pytest.raises(RuntimeError, match="S351"):
            with dask_client("annotate", scheduler=empty.scheduler_address, worker_timeout=1.0):
                pass


def test_a_cluster_given_by_address_needs_the_shard_count(tmp_path, client, toy, monkeypatch):
    import distributed

    from spacy_structperc import __main__ as cli
    from spacy_structperc.distributed import _dask

    with distributed.Client(client.scheduler.address) as by_address:
        with pytest.raises(ValueError, match="S354"):
            _run(toy, tmp_path / "out", by_address)
    monkeypatch.setattr(_dask, "dask_client", lambda *a, **k: pytest.fail("a cluster was started"))
    with pytest.raises(ValueError, match="S354"):
        cli.main(["train-distributed", str(toy["config"]), "--output", str(tmp_path / "cli"),
                  "--scheduler", client.scheduler.address])
    with pytest.raises(ValueError, match="S355"):
        _run(toy, tmp_path / "zero", client, n_shards=0)


def test_no_worker_for_the_timeout_stops_with_the_last_epoch_saved_and_resume_saves_the_same_model(
        tmp_path, monkeypatch, client, toy, undisturbed):
    """The cluster loses all its workers for good before epoch 2: the run stops with S352 after
    `worker_timeout` seconds, epoch 1's mix saved; with the workers back, resume=True trains
    epoch 2 from it and saves the undisturbed run's model."""
    from spacy_structperc.distributed.train import DaskExecutor

    _wait_for_two(client)
    submit = DaskExecutor.submit

    def submit_to_no_one(self, update, epoch, full_base):
        if epoch == 2:
            client.cluster.scale(0)
            deadline = time.monotonic() + 30
            while client.nthreads() and time.monotonic() < deadline:
                time.sleep(0.05)
        return submit(self, update, epoch, full_base)

    monkeypatch.setattr(DaskExecutor, "submit", submit_to_no_one)
    try:
        with pytest.raises(RuntimeError, match="S352.*epoch 2.*no Dask worker") as e:
            _run(toy, tmp_path / "out", client, worker_timeout=1.0)
        assert "--resume" in str(e.value)
    finally:
        monkeypatch.setattr(DaskExecutor, "submit", submit)
        client.cluster.scale(2)
        _wait_for_two(client)
    assert (tmp_path / "out" / "checkpoint" / "state.json").exists()
    assert not (tmp_path / "out" / "model-last").exists()
    with pytest.raises(ValueError, match="S353.*n_shards"):
        _run(toy, tmp_path / "out", client, resume=True, n_shards=3)
    log = _run(toy, tmp_path / "out", client, resume=True)
    assert log["resumed_after"] == 1 and [r["epoch"] for r in log["epochs"]] == [1, 2]
    assert _model(tmp_path / "out") == undisturbed
    assert not (tmp_path / "out" / "checkpoint").exists()
    with pytest.raises(ValueError, match="S353.*no checkpoint"):
        _run(toy, tmp_path / "out", client, resume=True)
