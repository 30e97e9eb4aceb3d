"""The offline routes of project.yml: the README's `spacy project assets` command with local
files (UD English EWT only; the other corpora are `extra`) and `assets-all`, which copies every
corpus from ${vars.data_dir}."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import srsly

REPO_ROOT = Path(__file__).resolve().parent.parent


def project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "project.yml", project)
    shutil.copy(REPO_ROOT / "scripts" / "fetch_assets.py", project / "scripts")
    return project


def readme_offline_command() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(python -m spacy project assets \. [^`]*?)```", readme).group(1)
    return " ".join(line.rstrip("\\").strip() for line in block.strip().splitlines())


def test_only_ud_ewt_is_a_main_asset():
    assets = srsly.read_yaml(REPO_ROOT / "project.yml")["assets"]
    main = [a["dest"] for a in assets if not a.get("extra")]
    assert main and all(d.startswith("assets/en_ewt-ud-") for d in main)


@pytest.mark.slow
def test_readme_offline_assets_command_works_without_a_download(tmp_path, data_dir):
    project = project_copy(tmp_path)
    ewt = data_dir / "ud_en_ewt"
    command = readme_offline_command().replace("/data/", f"{ewt}/")
    args = command.split()[1:]   # drop "python"
    args[args.index("."):args.index(".") + 1] = [str(project)]
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in (project / "assets").iterdir()) == [
        "en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu", "en_ewt-ud-train.conllu"]


@pytest.mark.slow
def test_assets_all_copies_every_corpus_from_the_data_dir(tmp_path, data_dir, require_corpus):
    for marker in ("conll2000/train.txt", "conll2003/eng.train", "jnlpba/train/Genia4ERtask1.iob2"):
        require_corpus(data_dir / marker)
    project = project_copy(tmp_path)
    result = subprocess.run([sys.executable, "-m", "spacy", "project", "run", "assets-all", str(project),
                             f"--vars.data_dir={data_dir}"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assets = srsly.read_yaml(REPO_ROOT / "project.yml")["assets"]
    for asset in assets:
        assert (project / asset["dest"]).is_file(), asset["dest"]
    assert result.stdout.count("copied from") == len(assets), result.stdout
