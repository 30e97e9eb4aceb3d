"""train-distributed on a two-worker LocalCluster: a loadable pipeline that learned the data,
the same model as a serial run when there is one shard, and no harm from a killed worker."""
import json
import os
import signal
import threading
import time

import sys

import cloudpickle
import pytest
import spacy
from distributed import WorkerPlugin
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_structperc.distributed.train import train_distributed

from .conftest import toy_sentences, write_docbin

pytestmark = pytest.mark.slow
# The workers cannot import this test module: send the plugin class by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _accuracy(model_dir, docbin_path):
    nlp = spacy.load(model_dir)
    gold = list(DocBin().from_disk(docbin_path).get_docs(nlp.vocab))
    examples = [Example(nlp(spacy.tokens.Doc(nlp.vocab, words=[t.text for t in g])), g) for g in gold]
    return nlp.get_pipe("tagger").score(examples)["tag_acc"]


def _overrides(toy_corpus):
    train, dev = toy_corpus
    return {"paths.train": str(train), "paths.dev": str(dev)}


def test_two_workers_train_a_loadable_pipeline_that_learns_the_toy_data(tmp_path, cluster, toy_corpus, toy_config):
    log = train_distributed(toy_config, tmp_path / "out", overrides=_overrides(toy_corpus), client=cluster,
                            printer=None)
    assert log["n_shards"] == 2 and log["n_workers"] == 2 and len(log["epochs"]) == 3
    # Both shards trained and made mistakes at first, fewer later.
    first, last = log["epochs"][0]["mistakes"]["tagger"], log["epochs"][-1]["mistakes"]["tagger"]
    assert len(first) == 2 and all(m > 0 for m in first) and sum(last) < sum(first)
    for name in ("model-best", "model-last"):
        assert _accuracy(tmp_path / "out" / name, toy_corpus[1]) >= 0.97
    # tag_acc: the config's score also weighs pos_acc, and the toy data has no POS.
    assert json.loads((tmp_path / "out" / "ipm_log.json").read_text())["epochs"][-1]["scores"]["tag_acc"] > 0.9


def test_one_shard_on_the_cluster_is_serial_training(tmp_path, cluster, toy_corpus, toy_config):
    """Mixing one shard is the identity: the cluster run and the in-process serial run save the
    same weights."""
    kw = dict(overrides=_overrides(toy_corpus), n_shards=1, epochs=2, printer=None)
    train_distributed(toy_config, tmp_path / "dask", client=cluster, **kw)
    train_distributed(toy_config, tmp_path / "serial", simulate=True, **kw)
    a = (tmp_path / "dask" / "model-last" / "tagger" / "model").read_bytes()
    b = (tmp_path / "serial" / "model-last" / "tagger" / "model").read_bytes()
    assert a == b


class KillOnce(WorkerPlugin):
    """A worker plugin that SIGKILLs its own worker process shortly after a matching task starts
    executing on it, once per marker file (the nanny then starts a fresh worker)."""

    name = "structperc-kill-once"

    def __init__(self, prefix, marker, delay=0.1):
        self.prefix, self.marker, self.delay = prefix, str(marker), delay

    def transition(self, key, start, finish, **kwargs):
        name = key if isinstance(key, str) else str(key)
        if finish == "executing" and name.startswith(self.prefix):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, f"{os.getpid()} {name}".encode())
            os.close(fd)
            threading.Timer(self.delay, os.kill, (os.getpid(), signal.SIGKILL)).start()


def assert_killed(marker):
    """The marker names a worker process that no longer exists."""
    assert marker.exists(), "no worker was killed"
    pid = int(marker.read_text().split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_worker_killed_mid_epoch_loses_nothing_and_the_model_is_unchanged(tmp_path, cluster, toy_corpus, toy_config):
    kw = dict(overrides=_overrides(toy_corpus), epochs=2, printer=None)
    clean = train_distributed(toy_config, tmp_path / "clean", client=cluster, **kw)
    marker = tmp_path / "killed"
    cluster.register_plugin(KillOnce("structperc-train-", marker))
    faulted = train_distributed(toy_config, tmp_path / "faulted", client=cluster, **kw)
    assert_killed(marker)
    # The killed shard's epoch was redone: same mistakes, same words, and the same saved model.
    for a, b in zip(clean["epochs"], faulted["epochs"]):
        assert a["mistakes"] == b["mistakes"] and a["shard_words"] == b["shard_words"]
    a = (tmp_path / "clean" / "model-last" / "tagger" / "model").read_bytes()
    b = (tmp_path / "faulted" / "model-last" / "tagger" / "model").read_bytes()
    assert a == b


def test_a_worker_without_the_mix_gets_the_full_base_and_the_model_is_unchanged(tmp_path, cluster, toy_corpus,
                                                                                  toy_config):
    """Workers that lost their resident run between epochs (as restarted ones have) say so
    (`needs_base`); the driver resends the full base and the run ends with the same model."""
    from spacy_structperc.distributed.train import forget_resident_run

    kw = dict(overrides=_overrides(toy_corpus), epochs=3, printer=None)
    clean = train_distributed(toy_config, tmp_path / "clean", client=cluster, **kw)
    assert clean["resent_full_base"] == 0
    forgetful = train_distributed(toy_config, tmp_path / "forgetful", client=cluster,
                                  on_epoch=lambda row, nlp: cluster.run(forget_resident_run), **kw)
    # Each shard at least once (the next epoch's shards may already hold the mix when the
    # callback runs: they train while the driver evaluates).
    assert forgetful["resent_full_base"] >= 2
    for name in ("model-best", "model-last"):
        a = (tmp_path / "clean" / name / "tagger" / "model").read_bytes()
        b = (tmp_path / "forgetful" / name / "tagger" / "model").read_bytes()
        assert a == b


def test_a_new_run_resets_the_resident_worker_pipeline(tmp_path, cluster, toy_corpus, toy_config):
    """A second run on the same workers starts from its own pipeline, shards and mix, not the
    first run's (whose mix versions it would otherwise match): it saves what the same run on
    fresh processes saves."""
    from spacy_structperc.distributed.train import resident_run

    train, dev = toy_corpus
    other = write_docbin(tmp_path / "other.spacy", toy_sentences(200, 9))
    first = train_distributed(toy_config, tmp_path / "first", client=cluster, printer=None, epochs=2,
                              overrides={"paths.train": str(train), "paths.dev": str(dev)})
    kw = dict(overrides={"paths.train": str(other), "paths.dev": str(dev)}, epochs=2, n_shards=2, printer=None)
    second = train_distributed(toy_config, tmp_path / "second", client=cluster, **kw)
    held = cluster.run(resident_run)
    assert len(held) == 2
    for state in held.values():
        assert state["token"] == second["run"] != first["run"]
        assert state["version"] == 1 and len(state["shards"]) == 1
        assert str(tmp_path / "second") in state["shards"][0]
    # The same run in fresh state (this process, shards in turn) saves the same model.
    train_distributed(toy_config, tmp_path / "fresh", simulate=True, **kw)
    a = (tmp_path / "second" / "model-last" / "tagger" / "model").read_bytes()
    b = (tmp_path / "fresh" / "model-last" / "tagger" / "model").read_bytes()
    assert a == b


def test_eval_every_evaluates_every_nth_epoch_and_the_last(tmp_path, toy_corpus, toy_config):
    log = train_distributed(toy_config, tmp_path / "out", overrides=_overrides(toy_corpus), n_shards=2, epochs=3,
                            simulate=True, printer=None, eval_every=2)
    assert [r["score"] is not None for r in log["epochs"]] == [False, True, True]
    assert log["best_score"] == max(r["score"] for r in log["epochs"][1:])
    assert (tmp_path / "out" / "model-best").exists() and (tmp_path / "out" / "model-last").exists()
    with pytest.raises(ValueError, match="S012"):
        train_distributed(toy_config, tmp_path / "bad", overrides=_overrides(toy_corpus), n_shards=2, epochs=1,
                          simulate=True, printer=None, eval_every=0)


def test_two_workers_mixing_in_place_save_the_bytes_of_two_shards_trained_in_turn(tmp_path, cluster, toy_corpus,
                                                                                  toy_config):
    """Workers apply each mix in place to the table that trained their shard; the simulation
    reloads the full mix for every shard: the same model either way."""
    kw = dict(overrides=_overrides(toy_corpus), n_shards=2, epochs=3, printer=None)
    log = train_distributed(toy_config, tmp_path / "dask", client=cluster, **kw)
    train_distributed(toy_config, tmp_path / "sim", simulate=True, **kw)
    assert log["resent_full_base"] == 0          # every epoch after the first went in place
    a = (tmp_path / "dask" / "model-last" / "tagger" / "model").read_bytes()
    b = (tmp_path / "sim" / "model-last" / "tagger" / "model").read_bytes()
    assert a == b


def test_workers_sharing_the_drivers_cores_train_at_a_lower_priority(tmp_path, cluster, toy_corpus, toy_config,
                                                                       monkeypatch):
    """worker_nice=None (the default) on an otherwise idle machine: a LocalCluster of this process
    with a worker per core competes with the driver's evaluation, so the training threads run at
    nice WORKER_NICE (with more cores than workers, at their own priority)."""
    from spacy_structperc.distributed import train as dist_train
    from spacy_structperc.distributed.train import WORKER_NICE

    monkeypatch.setattr(dist_train, "_others_busy_cores", lambda seconds=0.5: 0.0)
    log = train_distributed(toy_config, tmp_path / "out", overrides=_overrides(toy_corpus), client=cluster,
                            epochs=1, printer=None)
    # The workers start at this process's nice value (a test run may itself be niced).
    own = os.getpriority(os.PRIO_PROCESS, 0)
    expected = max(own, WORKER_NICE) if 2 >= (os.cpu_count() or 1) else own
    assert log["worker_nice"] == (WORKER_NICE if 2 >= (os.cpu_count() or 1) else 0)
    assert log["epochs"][0]["shard_nice"] == [expected, expected]


@pytest.mark.parametrize("others", [1.0, None])
def test_workers_keep_their_priority_on_a_busy_machine(cluster, monkeypatch, others):
    """The automatic choice leaves the workers at their priority when the rest of the machine is
    busy (a core's worth of other work) or cannot be measured."""
    from spacy_structperc.distributed import train as dist_train

    monkeypatch.setattr(dist_train, "_others_busy_cores", lambda seconds=0.5: others)
    assert dist_train._worker_nice(cluster, None) == 0
    assert dist_train._worker_nice(cluster, 5) == 5      # a value given is kept


def test_the_machines_other_work_is_measured():
    """A busy process beside this one counts as about a core of other work."""
    import subprocess

    from spacy_structperc.distributed.train import _others_busy_cores

    if _others_busy_cores(0.05) is None:
        pytest.skip("no /proc/stat here")
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 5: pass"])
    try:
        time.sleep(0.3)
        assert _others_busy_cores(0.5) >= 0.5
    finally:
        spin.kill()
        spin.wait()


@pytest.mark.parametrize("value", [-1, 20, True, 2.0])
def test_worker_nice_must_be_a_nice_value(tmp_path, toy_config, value):
    with pytest.raises(ValueError, match="S012"):
        train_distributed(toy_config, tmp_path / "out", simulate=True, worker_nice=value, printer=None)


def test_the_command_line_worker_nice_is_checked_before_a_cluster_starts(tmp_path, toy_config, monkeypatch):
    from spacy_structperc import __main__ as cli
    from spacy_structperc.distributed import _dask

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(_dask, "dask_client", no_cluster)
    for value in ("high", "1.5"):
        with pytest.raises(ValueError, match="S012"):
            cli.main(["train-distributed", str(toy_config), "--output", str(tmp_path / "out"),
                      "--worker-nice", value])
