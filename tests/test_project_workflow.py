"""The README's first command in miniature: `spacy project run all` on a copy of the project, with
the real corpora but a tiny training budget (100 examples a corpus, one epoch), through every step
of the workflow: assets, conversion, the five trainings, `spacy assemble`, `spacy package` with the
plugin's own wheel, `spacy evaluate` on each corpus, and both wheels installed into a new virtual
environment where the pipeline annotates raw text. Then `spacy debug config` and `spacy init
fill-config` on every config of configs/, with the paths the project's commands give them."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import srsly

REPO_ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
TINY = {"train_limit": 100, "parser_epochs": 1, "pos_epochs": 1, "chunker_epochs": 1, "clauses_epochs": 1, "ner_epochs": 1,
        "try_deps": "here"}


def copy_checkout(dest: Path) -> Path:
    """The files git tracks, and the compiled modules `pip install -e .` left beside their sources
    (mtimes kept: the plugin's wheel reuses them instead of compiling the core again)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    files = tracked.stdout.split() if tracked.stdout.strip() else []
    files += [str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "spacy_structperc").rglob("*")
              if p.suffix in (".so", ".c", ".cpp")]
    for name in files:
        if name.startswith(("benchmarks/", "tests/")) or not (REPO_ROOT / name).is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def project(data_dir, require_corpus, tmp_path_factory):
    for marker in ("conll2000/train.txt", "conll2003/eng.train", "jnlpba/train/Genia4ERtask1.iob2",
                   "ptb_clauses/train.txt"):
        require_corpus(data_dir / marker)
    project = copy_checkout(tmp_path_factory.mktemp("project"))
    args = [f"--vars.data_dir={data_dir}", *(f"--vars.{k}={v}" for k, v in TINY.items())]
    result = subprocess.run([sys.executable, "-m", "spacy", "project", "run", "all", str(project), *args],
                            capture_output=True, text=True, timeout=1200,
                            env={**os.environ, "PYTHONPATH": ""})
    (project / "workflow.log").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return project, result.stdout


def test_the_workflow_is_the_readme_first_command():
    readme = (REPO_ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n", readme).group(1)
    assert "spacy project run all ." in first and '".[project]"' in first
    steps = srsly.read_yaml(REPO_ROOT / "project.yml")["workflows"]["all"]
    for step in ("train-parser", "jackknife-tags", "train-pos", "train-chunker", "train-clauses", "train-ner", "assemble-pipeline",
                 "package-pipeline", "evaluate-pipeline"):
        assert step in steps
    assert steps[-1] == "try-pipeline"


def test_the_workflow_packages_both_wheels(project):
    path, _ = project
    assert len(list((path / "packages" / "dist").glob("spacy_structperc-*.whl"))) == 1
    assert len(list(path.glob("packages/en_structperc_pipeline-*/dist/*.whl"))) == 1


def test_the_installed_pipeline_annotates_raw_text_in_a_new_environment(project):
    path, stdout = project
    venv = path / "training" / "venv"
    # Loaded from the wheel installed in the new environment, not from the checkout.
    origin = re.search(r"spacy_structperc \S+ from (\S+)", stdout).group(1)
    assert Path(origin).resolve().is_relative_to(venv.resolve()), origin
    assert "tagger, upos, parser, chunker, clauses, ner" in stdout
    rows = re.findall(r"^\s*(\d+) (\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)  (\S+)$", stdout, flags=re.M)
    assert [r[1] for r in rows][:3] == ["Apple", "is", "looking"]
    assert all(tag and pos and dep for _, _, tag, pos, dep, _, _ in rows)
    for line in ("sentences:", "chunks:", "clauses:", "entities:"):
        assert re.search(rf"^{line}\s+\[.+\]$", stdout, flags=re.M), line


def test_each_corpus_has_its_scores(project):
    path, stdout = project
    metrics = path / "training" / "metrics"
    ewt = json.loads((metrics / "pipeline_ewt.json").read_text())
    assert 0 < ewt["tag_acc"] <= 1 and 0 < ewt["dep_uas"] <= 1
    assert 0 < json.loads((metrics / "pipeline_conll2000.json").read_text())["spans_chunks_f"] <= 1
    assert 0 < json.loads((metrics / "pipeline_conll2003.json").read_text())["ents_f"] <= 1
    assert 0 <= json.loads((metrics / "pipeline_clauses.json").read_text())["spans_clauses_f"] <= 1
    for title in ("UD English EWT test, gold tokens", "CoNLL-2000 test: chunks", "ptb_clauses test: clauses",
                  "CoNLL-2003 test: entities"):
        assert re.search(rf"{re.escape(title)}\s+\S+ \d+\.\d\d", stdout), title


def test_scores_a_corpus_has_no_gold_for_are_absent_not_zero(project):
    import spacy
    from spacy.tokens import DocBin
    from spacy.training import Example

    path, _ = project
    nlp = spacy.load(path / "training" / "pipeline_en")
    refs = list(DocBin().from_disk(path / "corpus" / "en_ewt-ud-test.spacy").get_docs(nlp.vocab))[:50]
    scores = nlp.evaluate([Example(nlp.make_doc(ref.text), ref) for ref in refs])
    # EWT has no chunk, clause or entity gold.
    for key in ("chunks_f", "spans_chunks_f", "spans_clauses_f", "ents_f"):
        assert scores[key] is None, (key, scores[key])
    assert 0 < scores["dep_uas"] <= 1 and 0 < scores["tag_acc"] <= 1


def project_configs():
    """(config, overrides) for every `spacy train` / `spacy assemble` command of project.yml."""
    commands = srsly.read_yaml(REPO_ROOT / "project.yml")["commands"]
    found = {}
    for command in commands:
        for line in command.get("script", []):
            m = re.match(r"python -m spacy (?:train|assemble) (configs/\S+\.cfg) (.*)", line)
            if m:
                paths = dict(re.findall(r"--(paths\.\w+) (\S+)", m.group(2)))
                found.setdefault(m.group(1), paths)
    return found


def test_every_config_is_trained_or_assembled_by_a_project_command():
    assert sorted(project_configs()) == sorted(f"configs/{p.name}" for p in (REPO_ROOT / "configs").glob("*.cfg"))


@pytest.mark.parametrize("config", sorted(project_configs()))
def test_debug_config_and_fill_config_work_with_the_projects_paths(project, config, tmp_path, monkeypatch):
    from spacy.cli.debug_config import debug_config
    from spacy.cli.init_config import fill_config

    path, _ = project
    monkeypatch.chdir(path)   # the commands' paths are relative to the project
    overrides = project_configs()[config]
    debug_config(Path(config), overrides=overrides)
    # fill-config takes no overrides: the config's own [paths] must let it load (sources included).
    filled, _ = fill_config(tmp_path / "filled.cfg", Path(config), silent=True)
    assert (tmp_path / "filled.cfg").exists() and filled["nlp"]["pipeline"]
