"""What a new user meets before any training: an unbuilt checkout names the build step, and a
scorer with nothing to score reports nothing rather than 0.0."""
import shutil
import subprocess
import sys
from pathlib import Path

import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_structperc.clauses.scorer import score_clauses
from spacy_structperc.scorers import score_chunks

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_an_unbuilt_checkout_names_the_build_step(tmp_path):
    # The package's sources without a single compiled module, as in a clone that was never built.
    shutil.copytree(REPO_ROOT / "spacy_structperc", tmp_path / "spacy_structperc",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    result = subprocess.run([sys.executable, "-c", "import spacy_structperc"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: [S050]") and "pip install -e ." in last, result.stderr


def _examples(with_gold: bool):
    nlp = spacy.blank("en")
    ref = Doc(nlp.vocab, words=["The", "cat", "sat", "."])
    pred = Doc(nlp.vocab, words=["The", "cat", "sat", "."])
    pred.spans["chunks"] = [Span(pred, 0, 2, "NP")]
    pred.spans["clauses"] = [Span(pred, 0, 4, "S")]
    if with_gold:
        ref.spans["chunks"] = [Span(ref, 0, 2, "NP")]
        ref.spans["clauses"] = [Span(ref, 0, 3, "S")]
    return [Example(pred, ref)]


def test_scores_without_gold_are_absent_not_zero():
    chunks = score_chunks(_examples(False))
    assert set(chunks) == {f"{p}_{s}" for p in ("chunks", "spans_chunks") for s in ("p", "r", "f", "per_type")}
    assert all(v is None for v in chunks.values())
    assert all(v is None for v in score_clauses(_examples(False)).values())


def test_scores_with_gold_are_counted():
    assert score_chunks(_examples(True))["chunks_f"] == 1.0
    clauses = score_clauses(_examples(True))
    assert clauses["spans_clauses_p"] == 0.0 and clauses["spans_clauses_f"] == 0.0
