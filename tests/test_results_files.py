"""Results files say where a run read and wrote relative to the checkout, never where the checkout
was: no committed ``benchmarks/results/*.json`` holds an absolute path of the machine that ran it,
and the benchmarks' writer makes the paths it is given relative."""
import importlib
import json
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = sorted((REPO_ROOT / "benchmarks" / "results").glob("*.json"))

# A "/" that starts a word (not "words/s", "sents_p/r/f" or "https://"), then at least two path
# components. Kept apart from benchmarks/_results.py's ABSOLUTE_PATH on purpose: a change there must
# not loosen this check.
ABSOLUTE = re.compile(r"(?<![\w.:/~<>%$-])/(?:[^\s/\"'`,;:()\[\]{}=|<>@\\]+/)+[^\s/\"'`,;:()\[\]{}=|<>@\\]*")
# Paths every Linux machine has alike (/proc/stat, /usr/bin/time).
SYSTEM = ("/proc/", "/sys/", "/dev/", "/usr/", "/bin/", "/etc/")


def absolute_paths(obj):
    """Every absolute, machine-specific path in the strings and keys of a JSON value."""
    if isinstance(obj, str):
        return [m for m in ABSOLUTE.findall(obj) if not m.startswith(SYSTEM)]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in absolute_paths(k) + absolute_paths(v)]
    if isinstance(obj, list):
        return [p for v in obj for p in absolute_paths(v)]
    return []


def test_the_check_finds_absolute_paths():
    assert absolute_paths({"command": "spacy train /srv/x/configs/parser.cfg --output /tmp/run/model",
                           "/root/cache/a": ["PYTHONPATH=/home/u/lib:x"]}) == \
        ["/srv/x/configs/parser.cfg", "/tmp/run/model", "/root/cache/a", "/home/u/lib"]
    assert absolute_paths({"notes": "words/s, sents_p/r/f, UAS / LAS, https://example.org/a/b, "
                                    "benchmarks/.work/runs, ../shared/data/conll2000, <tmp>/size/dev.spacy, "
                                    "/usr/bin/time -v, /proc/stat"}) == []


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_no_results_file_holds_an_absolute_path(path):
    found = absolute_paths(json.loads(path.read_text(encoding="utf8")))
    assert not found, f"{path.name}: {sorted(set(found))[:5]}"


def test_the_results_writer_makes_paths_relative(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))  # as the scripts import it
    results = importlib.import_module("_results")
    root = results.REPO_ROOT
    row = results.make_row("structperc_tagger", "default", "tag_acc", 0.95, dataset="ud_en_ewt")
    out = results.write_results(
        tmp_path / "x.json", "tagger", [row],
        command=f"-m spacy train {root}/configs/tagger.cfg --output {root}/benchmarks/.work/run "
                f"--paths.train {root.parent}/shared/data/ud_en_ewt/train.spacy",
        details={f"{root}/benchmarks/.work/run": {"log": "/tmp/run/train.log"}})
    data = json.loads(out.read_text())
    assert absolute_paths(data) == []
    assert data["command"] == ("-m spacy train configs/tagger.cfg --output benchmarks/.work/run "
                               "--paths.train ../shared/data/ud_en_ewt/train.spacy")
    assert data["details"] == {"benchmarks/.work/run": {"log": "<tmp>/run/train.log"}}
    assert data["rows"] == [row]


def test_a_merged_results_file_says_which_run_measured_each_row(tmp_path, monkeypatch):
    """A run that re-measures some settings keeps the others' runs: footnotes name every run
    whose rows a table shows, not only the last."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    results = importlib.import_module("_results")
    tables = importlib.import_module("_tables")
    path = tmp_path / "x.json"
    row = lambda setting, value: results.make_row("ours", setting, "tag_acc", value, dataset="d")
    # A file from before runs were kept: its rows are the old file's date and revision.
    results.write_results(path, "x", [row("a", 0.1), row("b", 0.2)], date="2026-01-01T00:00:00", git="aaa")
    monkeypatch.setattr(results, "now_iso", lambda: "2026-02-02T00:00:00")
    monkeypatch.setattr(results, "git_revision", lambda: "bbb")
    results.save_results(path, "x", [row("b", 0.3)], {}, replace=lambda r: False, errors={})
    data = json.loads(path.read_text())
    assert data["runs"] == {"ours | a | d": {"date": "2026-01-01T00:00:00", "git": "aaa", "up_to": True},
                            "ours | b | d": {"date": "2026-02-02T00:00:00", "git": "bbb"}}
    assert [tables.run_label(r) for r in results.runs_of(data)] == ["up to 2026-01-01, aaa", "2026-02-02, bbb"]
    assert [tables.run_label(r) for r in results.runs_of(data, [row("a", 0.1)])] == ["up to 2026-01-01, aaa"]
    # The next run of "a" keeps b's entry.
    monkeypatch.setattr(results, "git_revision", lambda: "ccc")
    results.save_results(path, "x", [row("a", 0.4)], {}, replace=lambda r: False, errors={})
    data = json.loads(path.read_text())
    assert data["runs"]["ours | a | d"]["git"] == "ccc" and data["runs"]["ours | b | d"]["git"] == "bbb"
