"""Put the assets of project.yml in place, from a local copy when there is one.

For every asset of project.yml (those marked `extra`, the corpora other than UD English EWT, only
with --extra or when --only names them), in this order:
1. `dest` already exists with the MD5 checksum project.yml gives: nothing to do;
2. a LOCAL_DIR holds a file with the same name (the one whose checksum matches, when several do):
   it is checked against the checksum and copied;
3. otherwise the asset's `url` (a URL or a local path) is fetched the way `spacy project assets`
   fetches it, and checked.
A file with the wrong checksum is never left in place, and the script exits non-zero. A
downloaded `.gz` is decompressed first: the checksum is that of the file itself (CoNLL-2000 is
published gzipped), so `spacy project assets` cannot check those; use the project's commands.

    python scripts/fetch_assets.py LOCAL_DIR [LOCAL_DIR ...] [--only DEST_PREFIX ...] [--extra] [--vars.NAME VALUE ...]

--only limits the run to assets whose dest starts with DEST_PREFIX (one corpus's assets).
--extra includes the assets marked `extra` (with no --only: every asset of the project).

`--vars.*` overrides are applied to project.yml as `spacy project run` applies them, so the
`assets` command of project.yml forwards its URL variables here.
"""
import gzip
import hashlib
import shutil
import sys
from pathlib import Path

from weasel.util import download_file, load_project_config, parse_config_overrides

PROJECT_DIR = Path(__file__).resolve().parent.parent


def md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def place(asset: dict, local_dirs) -> str:
    """Make asset["dest"] exist with the right checksum; say where it came from."""
    dest = PROJECT_DIR / asset["dest"]
    checksum = asset.get("checksum")
    if dest.is_file() and (checksum is None or md5(dest) == checksum):
        return "already in place"
    # Corpora share file names (CoNLL-2000's and ptb_clauses' train.txt): prefer the local copy
    # whose checksum matches, else the first by name (whose mismatch is then reported).
    copies = [d / dest.name for d in local_dirs if (d / dest.name).is_file()]
    local = next((c for c in copies if checksum is None or md5(c) == checksum),
                 copies[0] if copies else local_dirs[0] / dest.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    if local.is_file():
        source = str(local)
        shutil.copyfile(local, tmp)
    elif asset.get("url"):
        source = asset["url"]
        tmp.unlink(missing_ok=True)
        download_file(source, tmp)
        if source.endswith(".gz"):
            packed = tmp.with_name(tmp.name + ".gz")
            tmp.replace(packed)
            with gzip.open(packed, "rb") as src, tmp.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            packed.unlink()
    else:
        raise RuntimeError(f"no local copy at {local} and no url for {asset['dest']}")
    found = md5(tmp)
    if checksum is not None and found != checksum:
        tmp.unlink()
        raise RuntimeError(f"checksum mismatch for {source}: MD5 {found}, project.yml expects "
                           f"{checksum}")
    tmp.replace(dest)
    return f"copied from {source}"


def main(argv) -> int:
    if not argv or argv[0].startswith("--"):
        print(__doc__, file=sys.stderr)
        return 2
    argv = list(argv)
    local_dirs, only = [], []
    while argv and not argv[0].startswith("--"):
        local_dirs.append(Path(argv.pop(0)))
    include_extra = "--extra" in argv
    if include_extra:
        argv.remove("--extra")
    while "--only" in argv:
        i = argv.index("--only")
        only.append(argv[i + 1])
        del argv[i:i + 2]
    config = load_project_config(PROJECT_DIR, overrides=parse_config_overrides(argv))
    failed = 0
    for asset in config.get("assets", []):
        if only and not any(asset["dest"].startswith(p) for p in only):
            continue
        if asset.get("extra", False) and not (only or include_extra):
            continue
        try:
            print(f"{asset['dest']}: {place(asset, local_dirs)}")
        except Exception as e:  # report every asset, then fail
            print(f"{asset['dest']}: FAILED: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
