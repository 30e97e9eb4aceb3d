"""The documentation's Python examples run as written (those that need no trained pipeline), in
README.md and every page of docs/, and the pages stay what a reader can use: a short README,
links that resolve, tables as the results files say, no diary."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGES = [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").glob("*.md"))
BLOCKS = [(page.relative_to(REPO_ROOT).as_posix(), i, code) for page in PAGES
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))]
RUNNABLE = [(name, i, code) for name, i, code in BLOCKS if "spacy.load(" not in code]
IDS = [f"{name}:block{i}" for name, i, _ in RUNNABLE]


def test_every_component_has_a_raw_text_example_on_its_page():
    for factory, page in (("structperc_tagger", "docs/tagger.md"), ("structperc_chunker", "docs/chunker.md"),
                          ("structperc_ner", "docs/ner.md"), ("structperc_parser", "docs/parser.md")):
        assert any(name == page and f'"{factory}"' in code and "nlp(" in code for name, _, code in RUNNABLE), factory
    assert any(name == "README.md" and "spacy.load(" in code and "doc.sents" in code for name, _, code in BLOCKS)


# What the examples print where the page gives no "# [...]" comment, keyed by the print line,
# derived by hand from the example's own training data: every word of the sentence it parses was
# seen in training with the arc printed here.
PRINTED = {
    "print([(t.text, t.dep_, t.head.text) for t in doc])":
        "[('They', 'nsubj', 'like'), ('like', 'ROOT', 'like'), ('green', 'amod', 'eggs'), ('eggs', 'obj', 'like'), "
        "('.', 'punct', 'like'), ('Eat', 'ROOT', 'Eat'), ('blue', 'amod', 'ham'), ('ham', 'obj', 'Eat'), "
        "('.', 'punct', 'Eat')]",
}


def expected_output(code):
    """The lines the block prints, in order: each print line's "# [...]" comment, else its
    entry in PRINTED; None for a print line with neither."""
    lines = []
    for line in code.splitlines():
        if not line.startswith("print("):
            continue
        comment = re.search(r"#\s*(\[.*\])\s*$", line)
        lines.append(comment.group(1) if comment else PRINTED.get(line.strip()))
    return lines


@pytest.mark.parametrize("name,index,code", RUNNABLE, ids=IDS)
def test_every_example_output_is_known(name, index, code):
    """An example whose printed result is unchecked could print anything and pass: each print
    of a runnable block has its expected line (a comment on the page or PRINTED)."""
    expected = expected_output(code)
    assert expected and None not in expected, f"{name}, block {index}:\n{code}"


@pytest.mark.slow
@pytest.mark.parametrize("name,index,code", RUNNABLE, ids=IDS)
def test_example_runs(name, index, code, tmp_path):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected_output(code), result.stdout


def test_the_readme_is_short():
    """The README is what a new user reads in five minutes; reference goes in docs/."""
    assert len((REPO_ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path = target.split("#", 1)[0]
        assert not path or (page.parent / path).exists(), f"{page.name}: {target}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_pages_are_reference_not_a_diary(page):
    """The project's history is in git log: no page speaks of work sessions or of this machine's
    paths."""
    text = page.read_text()
    assert not re.search(r"\bsessions?\b", text, flags=re.I), page.name
    assert not re.search(r"(?<![\w.~<>-])/(work|root|home)/", text), page.name


def test_generated_tables_are_up_to_date():
    """Every table between bench markers is what make_readme_tables.py writes from the results
    files (it reads only JSON)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "make_readme_tables.py"), "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
