"""Shared fixtures: corpus location and small random problems over the Cython core."""
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: data-backed or CLI tests that take more than a few seconds")


def resolve_data_dir() -> Path:
    """$STRUCTPERC_DATA, else ../shared/data next to the repository root."""
    env = os.environ.get("STRUCTPERC_DATA")
    return Path(env) if env else (REPO_ROOT.parent / "shared" / "data")


def require_corpus(marker: Path) -> None:
    """A missing corpus skips locally but fails under CI, which always has ../shared/data."""
    if not marker.exists():
        message = f"corpus file {marker} not found; set $STRUCTPERC_DATA to the folder of corpora"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(name="require_corpus", scope="session")
def require_corpus_fixture():
    """require_corpus for tests of corpora other than UD English EWT."""
    return require_corpus


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared corpora (UD English EWT checked here; other corpora by their own fixtures)."""
    path = resolve_data_dir()
    require_corpus(path / "ud_en_ewt" / "en_ewt-ud-train.conllu")
    return path


# Property-based tests (hypothesis): a small fixed budget by default, so CI stays fast; set
# STRUCTPERC_HYPOTHESIS=long for a thorough local run.
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("long", max_examples=1000, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("STRUCTPERC_HYPOTHESIS", "ci"))
except ImportError:   # hypothesis is in the test extra; the property tests skip without it
    pass
