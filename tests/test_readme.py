"""The README's Python examples run as written (those that need no trained pipeline)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO_ROOT / "README.md").read_text(), flags=re.S)
RUNNABLE = [b for b in BLOCKS if "spacy.load(" not in b]


def test_every_component_has_a_raw_text_example():
    for factory in ("structperc_tagger", "structperc_chunker", "structperc_ner", "structperc_parser"):
        assert any(f'"{factory}"' in b and "nlp(" in b for b in RUNNABLE), factory
    assert any("spacy.load(" in b and "doc.sents" in b for b in BLOCKS)


# What the examples print where README.md gives no "# [...]" comment, keyed by the print line,
# derived by hand from each example's own training data: every word of the sentence it
# annotates was seen in training with the tag, chunk, entity or arc printed here. The NER
# example's second line is the entity_ruler's ORG kept next to the model's PER.
PRINTED = {
    'print([t.tag_ for t in nlp("I like blue eggs")])': "['PRP', 'VBP', 'JJ', 'NNS']",
    'print([(chunk.text, chunk.label_) for chunk in doc.spans["chunks"]])':
        "[('The cat', 'NP'), ('saw', 'VP'), ('a dog', 'NP'), ('in', 'PP'), ('the garden', 'NP')]",
    'print([(e.text, e.label_) for e in nlp("Peter Jones works for Acme Corp in New York City.").ents])':
        "[('Peter Jones', 'PER'), ('Acme Corp', 'ORG'), ('New York City', 'LOC')]",
    'print([(e.text, e.label_) for e in nlp("Mary Smith works for the Boston Globe.").ents])':
        "[('Mary Smith', 'PER'), ('Boston Globe', 'ORG')]",
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


@pytest.mark.parametrize("code", RUNNABLE, ids=[f"block{i}" for i in range(len(RUNNABLE))])
def test_every_example_output_is_known(code):
    """An example whose printed result is unchecked could print anything and pass: each print
    of a runnable block has its expected line (a README comment or PRINTED)."""
    expected = expected_output(code)
    assert expected and None not in expected, code


@pytest.mark.slow
@pytest.mark.parametrize("code", RUNNABLE, ids=[f"block{i}" for i in range(len(RUNNABLE))])
def test_readme_example_runs(code, tmp_path):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected_output(code), result.stdout
