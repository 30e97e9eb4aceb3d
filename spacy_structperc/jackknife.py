"""Jackknifed tags: the training text tagged as new text would be.

A component that reads a tagger's tags (configs/pos.cfg's universal POS tagger) learns from its
training text how far to trust them. Tagged by the tagger that was trained on it, that text has
nearly every tag right (99.8% on UD English EWT train), new text about one in twenty wrong (95.4%
on EWT test), so the reader learns to trust the tags more than it should. Here the training Docs
are split into `folds` folds (Doc i in fold i mod folds); for each fold a tagger is trained from a
config on the other folds and tags that fold, so every Doc is tagged by a tagger that never saw
it (96.3% right on EWT train with five folds), as Collins (2000) made his reranker's training
lists. The tags are stored with each Doc (`doc.user_data[TAGS_KEY]`), the gold annotation is
kept, and the documents corpus reader with `predicted_tags = true` puts them on the predicted
Docs.

    python -m spacy_structperc jackknife configs/tagger.cfg corpus/en_ewt-ud-train.spacy \\
        corpus/en_ewt-ud-train.jackknifed.spacy --folds 5 --paths.dev corpus/en_ewt-ud-dev.spacy
"""
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .errors import Errors

TAGS_KEY = "structperc_jackknifed_tags"
COMMAND = "jackknife"


def fold_of(i: int, folds: int) -> int:
    """The fold of the training file's i-th Doc."""
    return i % folds


def check_folds(folds: Any, n_docs: int) -> int:
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= n_docs:
        raise ValueError(Errors.S431.format(value=folds, n=n_docs))
    return folds


def stored_tags(doc, i: int, path: Union[str, Path]) -> List[str]:
    """The jackknifed tags stored with `doc` (the i-th of `path`): S037 if absent or not one per
    token."""
    tags = doc.user_data.get(TAGS_KEY)
    if not isinstance(tags, (list, tuple)) or len(tags) != len(doc) or not all(isinstance(t, str) for t in tags):
        raise ValueError(Errors.S430.format(i=i, path=path))
    return list(tags)


def _tag(nlp, component: str, docs: Sequence, config: Path) -> List[List[str]]:
    """The tags `nlp`'s `component` gives the words of `docs` (in nlp's vocab)."""
    from spacy.tokens import Doc

    if component not in nlp.pipe_names:
        raise ValueError(Errors.S432.format(config=config, component=component, names=nlp.pipe_names))
    pipe = nlp.get_pipe(component)
    plain = [Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in docs]
    # The pipes before it (a tokenizer's pipeline has none) run too, as they would on new text.
    before = nlp.pipe_names[:nlp.pipe_names.index(component)]
    for name in before:
        plain = list(nlp.get_pipe(name).pipe(plain))
    return [[t.tag_ for t in doc] for doc in pipe.pipe(plain)]


def jackknife_tags(config: Union[str, Path], train: Union[str, Path], output: Union[str, Path], *,
                   folds: int = 5, component: str = "tagger", overrides: Optional[Dict[str, Any]] = None,
                   work_dir: Optional[Union[str, Path]] = None) -> Dict[str, Any]:
    """Write `output`: the Docs of the .spacy file `train`, each with the tags that `component`
    of a pipeline trained from `config` on the other folds gives it (doc.user_data[TAGS_KEY]).
    `overrides` are spacy train's (e.g. {"paths.dev": ..., "training.max_epochs": 6});
    paths.train is set per fold. Returns {"docs", "tokens", "folds", "accuracy"} (the tags
    against the file's own gold tags, when it has them)."""
    import spacy
    from spacy.cli.train import train as spacy_train
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    from .readers import read_docbin

    config, train, output = Path(config), Path(train), Path(output)
    docs = list(read_docbin(Vocab(), train, COMMAND))   # S034, S210, S035 as every reader
    check_folds(folds, len(docs))
    tags: List[Optional[List[str]]] = [None] * len(docs)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        for k in range(folds):
            rest = [d for i, d in enumerate(docs) if fold_of(i, folds) != k]
            part = Path(tmp) / f"train_not_{k}.spacy"
            DocBin(docs=rest, store_user_data=False).to_disk(part)
            out = Path(tmp) / f"fold_{k}"
            spacy_train(config, out, overrides={**(overrides or {}), "paths.train": str(part)})
            model = out / "model-best" if (out / "model-best").exists() else out / "model-last"
            nlp = spacy.load(model)
            held = [i for i in range(len(docs)) if fold_of(i, folds) == k]
            for i, row in zip(held, _tag(nlp, component, [docs[i] for i in held], config)):
                tags[i] = row
    right = total = 0
    out_bin = DocBin(store_user_data=True)
    for doc, held_out in zip(docs, tags):
        assert held_out is not None   # every Doc is in one fold
        doc.user_data[TAGS_KEY] = held_out
        if doc.has_annotation("TAG"):
            right += sum(t.tag_ == p for t, p in zip(doc, held_out))
            total += len(doc)
        out_bin.add(doc)
    output.parent.mkdir(parents=True, exist_ok=True)
    out_bin.to_disk(output)
    return {"docs": len(docs), "tokens": sum(len(d) for d in docs), "folds": folds,
            "accuracy": right / total if total else None}
