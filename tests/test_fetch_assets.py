"""scripts/fetch_assets.py: local copies first, downloads (gzipped or not) checked by MD5."""
import gzip
import hashlib
import importlib.util
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("fetch_assets", REPO_ROOT / "scripts" / "fetch_assets.py")
fetch_assets = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fetch_assets)

CONTENT = b"Confidence NN B-NP\nin IN B-PP\n\n"


@pytest.fixture
def dest_dir():
    path = REPO_ROOT / "assets" / "_fetch_assets_test"
    shutil.rmtree(path, ignore_errors=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_gzipped_download_is_decompressed_and_checked(tmp_path, dest_dir):
    packed = tmp_path / "train.txt.gz"
    packed.write_bytes(gzip.compress(CONTENT))
    asset = {"dest": "assets/_fetch_assets_test/train.txt", "url": str(packed),
             "checksum": hashlib.md5(CONTENT).hexdigest()}
    assert fetch_assets.place(asset, [tmp_path / "nowhere"]).startswith("copied from")
    assert (dest_dir / "train.txt").read_bytes() == CONTENT
    assert fetch_assets.place(asset, [tmp_path / "nowhere"]) == "already in place"


def test_local_copy_wins_and_a_wrong_checksum_leaves_nothing(tmp_path, dest_dir):
    local = tmp_path / "local"
    local.mkdir()
    (local / "train.txt").write_bytes(CONTENT)
    asset = {"dest": "assets/_fetch_assets_test/train.txt", "url": "https://example.invalid/x.gz",
             "checksum": hashlib.md5(CONTENT).hexdigest()}
    assert fetch_assets.place(asset, [tmp_path / "other", local]) == f"copied from {local / 'train.txt'}"
    (dest_dir / "train.txt").unlink()
    asset["checksum"] = "0" * 32
    with pytest.raises(RuntimeError, match="checksum mismatch"):
        fetch_assets.place(asset, [local])
    assert not any(dest_dir.iterdir())
