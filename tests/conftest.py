"""Shared fixtures: corpus location and small random problems over the Cython core."""
import importlib
import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: data-backed or CLI tests that take more than a few seconds")


def resolve_data_dir() -> Path:
    """$STRUCTPERC_DATA, else ../shared/data next to the repository root."""
    env = os.environ.get("STRUCTPERC_DATA")
    return Path(env) if env else (REPO_ROOT.parent / "shared" / "data")


def skip_or_fail(message: str) -> NoReturn:
    """Skip locally, fail under CI (CI=true): CI has the corpora (../shared/data) and the [test]
    extra, so a corpus or test dependency missing there is a broken setup, not a reason to skip.
    Works at module level too (a conftest or test module that needs a dependency throughout)."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_corpus(marker: Path) -> None:
    """A missing corpus skips locally but fails under CI, which always has ../shared/data."""
    if not marker.exists():
        skip_or_fail(f"corpus file {marker} not found; set $STRUCTPERC_DATA to the folder of corpora")


def require_module(name: str, extra: str = "test"):
    """pytest.importorskip for the test dependencies: the module, or a skip locally and a failure
    under CI, which installs the [test] extra (so a dependency dropped from it cannot silently
    skip the tests that need it)."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        skip_or_fail(f"{name} is not installed ({err}); pip install -e '.[{extra}]'")


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
except ImportError:   # hypothesis is in the test extra; the property tests skip (fail under CI) without it
    pass
