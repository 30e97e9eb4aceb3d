"""The embedded LocalCluster of `dask_client`: its workers run with EMBEDDED_CONFIG (no
statistical profiler, slower housekeeping), and the settings do not outlive it."""
import time

import dask

from spacy_structperc.distributed._dask import EMBEDDED_CONFIG, dask_client


def _worker_settings():
    import dask as worker_dask

    return {key: worker_dask.config.get(key) for key in EMBEDDED_CONFIG}


def _busy():
    start = time.time()
    while time.time() - start < 0.5:
        sum(range(1000))


def test_the_embedded_cluster_runs_with_its_settings_and_leaves_the_config_as_it_was():
    before = {key: dask.config.get(key) for key in EMBEDDED_CONFIG}
    with dask_client("annotate", workers=2) as client:
        assert client.scheduler_info()["workers"] and len(client.scheduler_info()["workers"]) == 2
        settings = client.run(_worker_settings)
        assert len(settings) == 2
        for found in settings.values():
            assert found == EMBEDDED_CONFIG
        # No profiler samples a busy task (with Dask's defaults, half a second gets 30-50).
        client.gather([client.submit(_busy, pure=False, workers=[w]) for w in settings])
        samples = client.run(lambda dask_worker: dask_worker.profile_recent.get("count"))
        assert set(samples.values()) == {0}
    assert {key: dask.config.get(key) for key in EMBEDDED_CONFIG} == before
