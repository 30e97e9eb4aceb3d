"""The benchmarks' Penn Treebank reader (benchmarks/_corpus.py), which bench_tagger.py uses to
tag text of another domain than EWT's: the leaves of each tree, without the empty elements, and
brackets and quotes written as EWT's text has them."""
import importlib
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, resolve_data_dir

TREES = """
( (S
    (NP-SBJ (DT The) (NN asbestos) (NN fiber) )
    (, ,)
    (NP (-NONE- *T*-1) )
    (`` ``) (VP (VBZ is) (ADJP (RB unusually) (JJ resilient) ))
    ('' '') (-LRB- -LRB-) (CD 1989) (-RRB- -RRB-)
    (. .) ))
( (S (NP-SBJ (PRP It) ) (VP (VBD fell) (NP (-NONE- *) )) (. .) ))
"""


@pytest.fixture(scope="module")
def corpus():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        yield importlib.import_module("_corpus")
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))


def test_leaves_without_empty_elements(corpus, tmp_path):
    (tmp_path / "combined").mkdir()
    (tmp_path / "combined" / "wsj_0001.mrg").write_text(TREES, encoding="utf8")
    sentences = corpus.read_ptb_tagged(tmp_path)
    assert sentences == [
        [("The", "DT"), ("asbestos", "NN"), ("fiber", "NN"), (",", ","), ('"', "``"), ("is", "VBZ"),
         ("unusually", "RB"), ("resilient", "JJ"), ('"', "''"), ("(", "-LRB-"), ("1989", "CD"),
         (")", "-RRB-"), (".", ".")],
        [("It", "PRP"), ("fell", "VBD"), (".", ".")],
    ]


def test_docbin_is_rebuilt_only_when_the_trees_change(corpus, tmp_path):
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    (tmp_path / "combined").mkdir()
    mrg = tmp_path / "combined" / "wsj_0001.mrg"
    mrg.write_text(TREES, encoding="utf8")
    out = tmp_path / "wsj.spacy"
    assert corpus.ptb_to_docbin(tmp_path, out) == {"converted": True, "docs": 2, "tokens": 16}
    assert corpus.ptb_to_docbin(tmp_path, out) == {"converted": False}
    docs = list(DocBin().from_disk(out).get_docs(Vocab()))
    assert [t.tag_ for t in docs[1]] == ["PRP", "VBD", "."]
    mrg.write_text(TREES.split("\n( (S (NP-SBJ (PRP")[0], encoding="utf8")
    assert corpus.ptb_to_docbin(tmp_path, out)["docs"] == 1


def test_a_folder_without_trees_is_refused(corpus, tmp_path):
    with pytest.raises(FileNotFoundError, match="combined"):
        corpus.read_ptb_tagged(tmp_path)


def test_the_wsj_sample_has_the_counts_of_its_source(corpus, require_corpus):
    # shared/data/ptb_sample/SOURCE.md: 3,914 trees, 94,084 words without the -NONE- elements,
    # 45 POS tags.
    folder = resolve_data_dir() / "ptb_sample"
    require_corpus(folder / "combined" / "wsj_0001.mrg")
    sentences = corpus.read_ptb_tagged(folder)
    assert len(sentences) == 3914
    assert sum(len(s) for s in sentences) == 94084
    assert len({tag for s in sentences for _, tag in s}) == 45
