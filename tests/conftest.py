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


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared corpora. Missing corpora skip locally but fail under CI (CI has them)."""
    path = resolve_data_dir()
    if not (path / "ud_en_ewt" / "en_ewt-ud-train.conllu").exists():
        message = (f"corpus not found under {path}; set $STRUCTPERC_DATA to the folder holding "
                   "ud_en_ewt/")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
