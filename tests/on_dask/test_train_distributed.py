"""train-distributed on a two-worker LocalCluster: a loadable pipeline that learned the data,
the same model as a serial run when there is one shard, and no harm from a killed worker."""
import json
import os
import signal
import threading

import sys

import cloudpickle
import pytest
import spacy
from distributed import WorkerPlugin
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_structperc.distributed.train import train_distributed

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
    assert json.loads((tmp_path / "out" / "ipm_log.json").read_text())["epochs"][-1]["score"] > 0.9


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
