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


@pytest.mark.slow
@pytest.mark.parametrize("code", RUNNABLE, ids=[f"block{i}" for i in range(len(RUNNABLE))])
def test_readme_example_runs(code, tmp_path):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    for expected in re.findall(r"# (\[.*\])\s*$", code, flags=re.M):   # "print(...)  # [...]"
        assert expected in result.stdout, (expected, result.stdout)
