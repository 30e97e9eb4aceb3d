"""The corpora: where they are, CoNLL-U -> DocBin conversion (gold tokenization, one Doc per
sentence), un-annotated copies of Docs for prediction, token-attribute scoring with spaCy's
``Scorer``, entity types' F1 as row metrics, and the timed ``nlp.pipe`` pass. spaCy is imported
inside the functions, so a child's peak RSS only counts what the measured system itself loads."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional, Sequence

from _machine import REPO_ROOT, Timer


def default_data_root() -> Path:
    """The folder that holds the corpora: $STRUCTPERC_DATA, else ../shared/data from the repo."""
    env = os.environ.get("STRUCTPERC_DATA")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "data"


def default_data_dir(corpus: str) -> Path:
    """The folder of one corpus, e.g. ``default_data_dir("ud_en_ewt")``."""
    return default_data_root() / corpus


def find_split_file(data_dir: Path, split: str, pattern: str = "*-{split}.conllu") -> Path:
    """Find the one file of a split in a corpus dir (e.g. ``en_ewt-ud-train.conllu``)."""
    hits = sorted(Path(data_dir).glob(pattern.format(split=split)))
    if len(hits) != 1:
        raise FileNotFoundError(
            f"expected one file matching {pattern.format(split=split)!r} in {data_dir}, "
            f"found {len(hits)}: pass the corpus folder with --data or set STRUCTPERC_DATA"
        )
    return hits[0]


def _file_fingerprint(path: Path) -> str:
    st = Path(path).stat()
    return f"{Path(path).resolve()}:{st.st_size}:{int(st.st_mtime)}"


def conllu_to_docbins(
    conllu_path: Path,
    outputs: Dict[str, Path],
    *,
    limit: int = 0,
    transforms: Optional[Dict[str, Callable[[Any], Any]]] = None,
) -> Dict[str, Any]:
    """Convert one CoNLL-U file to one or more ``.spacy`` DocBins.

    Gold tokenization (the syntactic words; multiword-token ranges and empty nodes are dropped by
    spaCy's converter), one Doc per sentence, XPOS in ``tag_``, UPOS in ``pos_``, plus lemmas,
    morphs, heads and deps. ``outputs`` maps a variant name to its path; ``transforms`` maps a
    variant name to a function ``Doc -> Doc`` applied before saving (no transform: saved as read).
    ``limit`` > 0 keeps the first ``limit`` sentences. A stamp file next to each output records
    the source and limit, so an up-to-date output is not rebuilt.
    """
    from spacy.tokens import DocBin
    from spacy.training.converters import conllu_to_docs

    transforms = transforms or {}
    stamp = json.dumps(
        {"source": _file_fingerprint(conllu_path), "limit": limit, "version": 1}, sort_keys=True
    )
    todo = {
        name: Path(path)
        for name, path in outputs.items()
        if not (Path(path).exists() and _read(Path(str(path) + ".stamp")) == stamp)
    }
    if not todo:
        return {"converted": False}
    text = Path(conllu_path).read_text(encoding="utf8")
    docs = []
    for doc in conllu_to_docs(text, n_sents=1, no_print=True):
        docs.append(doc)
        if limit and len(docs) >= limit:
            break
    n_tokens = sum(len(d) for d in docs)
    for name, path in todo.items():
        fn = transforms.get(name)
        db = DocBin(store_user_data=False)
        for doc in docs:
            db.add(fn(doc) if fn else doc)
        path.parent.mkdir(parents=True, exist_ok=True)
        db.to_disk(path)
        Path(str(path) + ".stamp").write_text(stamp)
    return {"converted": True, "docs": len(docs), "tokens": n_tokens}


# How the Penn Treebank writes the words that EWT's text has as they are.
PTB_WORDS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]",
             "``": '"', "''": '"'}


def read_ptb_tagged(ptb_dir: Path) -> list:
    """The sentences of a Penn Treebank folder's bracketed files (``combined/*.mrg``, as in NLTK's
    WSJ sample) as lists of (word, tag), without the empty elements (``-NONE-``); brackets and
    quotes written as EWT's text has them (``-LRB-`` is ``(``)."""
    import re

    files = sorted((Path(ptb_dir) / "combined").glob("*.mrg"))
    if not files:
        raise FileNotFoundError(f"no combined/*.mrg files in {ptb_dir}: pass the folder of the "
                                "Penn Treebank sample or set STRUCTPERC_DATA")
    leaf = re.compile(r"\(([^\s()]+) ([^\s()]+)\)")
    sentences = []
    for path in files:
        # A tree starts at the beginning of a line with "( (".
        for tree in re.split(r"\n(?=\(\s*\()", path.read_text(encoding="utf8")):
            words = [(PTB_WORDS.get(w, w), t) for t, w in leaf.findall(tree) if t != "-NONE-"]
            if words:
                sentences.append(words)
    return sentences


def ptb_to_docbin(ptb_dir: Path, output: Path) -> Dict[str, Any]:
    """``read_ptb_tagged`` saved as a DocBin (one Doc per sentence, the tags in ``tag_``), rebuilt
    only when the folder's files changed (a stamp beside the output, as conllu_to_docbins)."""
    from spacy.tokens import Doc, DocBin
    from spacy.vocab import Vocab

    files = sorted((Path(ptb_dir) / "combined").glob("*.mrg"))
    stamp = json.dumps({"source": [_file_fingerprint(p) for p in files], "version": 1}, sort_keys=True)
    if Path(output).exists() and _read(Path(str(output) + ".stamp")) == stamp:
        return {"converted": False}
    sentences = read_ptb_tagged(ptb_dir)
    vocab = Vocab()
    db = DocBin(store_user_data=False)
    for words in sentences:
        db.add(Doc(vocab, words=[w for w, _ in words], tags=[t for _, t in words]))
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    db.to_disk(output)
    Path(str(output) + ".stamp").write_text(stamp)
    return {"converted": True, "docs": len(sentences), "tokens": sum(len(s) for s in sentences)}


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text()
    except OSError:
        return None


def load_docs(path: Path, vocab=None) -> list:
    """Read a ``.spacy`` file into a list of Docs (with a fresh or given Vocab)."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    return list(DocBin().from_disk(path).get_docs(vocab if vocab is not None else Vocab()))


def unannotated_copies(docs: Iterable, vocab) -> list:
    """Copies of ``docs`` with the same words and spaces and no annotation at all."""
    from spacy.tokens import Doc

    return [Doc(vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d])
            for d in docs]


def count_tokens(docs: Iterable) -> int:
    return sum(len(d) for d in docs)


def examples(pred_docs: Sequence, gold_docs: Sequence) -> list:
    """``Example(predicted, gold)`` of each pair, for spaCy's scorers; the two lists must match."""
    from spacy.training import Example

    if len(pred_docs) != len(gold_docs):
        raise ValueError(f"{len(pred_docs)} predicted docs for {len(gold_docs)} gold docs")
    return [Example(p, g) for p, g in zip(pred_docs, gold_docs)]


def score_token_attrs(pred_docs: Sequence, gold_docs: Sequence, attrs: Sequence[str]) -> Dict[str, float]:
    """``Scorer.score_token_attr`` over ``examples(pred_docs, gold_docs)`` for each attr ("tag",
    "pos", "lemma", ...). Returns e.g. ``{"tag_acc": 0.95}`` as fractions."""
    from spacy.scorer import Scorer

    pairs = examples(pred_docs, gold_docs)
    scores: Dict[str, float] = {}
    for attr in attrs:
        scores.update(Scorer.score_token_attr(pairs, attr))
    return scores


def per_type_f(per_type: Optional[Dict[str, Dict[str, float]]]) -> Dict[str, float]:
    """spaCy's ``ents_per_type`` ({label: {"p", "r", "f"}}) as row metrics ``f_<label>``."""
    return {f"f_{label}": scores["f"] for label, scores in sorted((per_type or {}).items())}


def time_pipe(nlp, gold_docs: Sequence, batch_size: int = 1000, repeats: int = 1):
    """Run ``nlp.pipe`` (one process) over un-annotated copies of ``gold_docs``; time only the pipe
    call. With ``repeats`` > 1 the pipe runs that many times on fresh copies and the fastest run
    counts (less noise on a busy machine). Returns ``(predicted_docs, words_per_second,
    seconds)`` with the predictions of the first run."""
    return time_pipe_best_of(nlp, lambda: unannotated_copies(gold_docs, nlp.vocab),
                             count_tokens(gold_docs), repeats, batch_size)


def materialize_averages(nlp_or_pipe) -> None:
    """See time_pipe_best_of: make in-process components score as their saved selves do."""
    procs = [p for _, p in nlp_or_pipe.pipeline] if hasattr(nlp_or_pipe, "pipeline") else [nlp_or_pipe]
    for proc in procs:
        average = getattr(getattr(getattr(proc, "model", None), "weights", None), "average", None)
        if callable(average):
            average()


def time_pipe_best_of(nlp, make_inputs: Callable[[], list], n_words: int, repeats: int = 1,
                      batch_size: int = 1000):
    """Run ``nlp.pipe`` over fresh inputs from ``make_inputs()`` ``repeats`` times; return (the
    first run's predictions, words per second of the fastest run, its seconds).

    Our components trained in this process score with averages computed from the training state
    as rows are read; a saved and loaded pipeline reads them directly. The averages are
    materialized first, so in-process timings are those of the saved pipeline."""
    materialize_averages(nlp)
    first, best = None, float("inf")
    for _ in range(max(1, repeats)):
        docs = make_inputs()
        with Timer() as t:
            preds = list(nlp.pipe(docs, batch_size=batch_size))
        first = preds if first is None else first
        best = min(best, t.seconds)
    return first, n_words / best, best
