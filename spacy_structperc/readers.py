"""Corpus readers: CoNLL-2000 chunking data (`word POS chunk`, one token a line).

CoNLL-2000 has a training and a test file but no development split. `heldout` (default 1,000)
sets how many sentences at the end of the training file are held out for tuning: read the file
with part = "train" for the rest and part = "heldout" for those sentences (part = "all" reads
everything, the shared task's training set).
"""
import warnings
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.util import registry
from spacy.vocab import Vocab

from .errors import Errors, Warnings
from .scorers import inconsistent_iob, iob_to_chunks, split_tag

PARTS = ("all", "train", "heldout")
DEFAULT_HELDOUT = 1000

Sentence = Tuple[List[str], List[str], List[str]]  # words, POS tags, chunk tags


def read_conll2000(path: Union[str, Path], *, warn_inconsistent: bool = True) -> List[Sentence]:
    """Parse a CoNLL-2000 file into (words, tags, chunk tags) sentences.

    Malformed lines raise ValueError naming the file and line. Inconsistent IOB (I-NP after O or
    after B-VP) is kept as it is, and reported once per file with a count.
    """
    path = Path(path)
    sentences: List[Sentence] = []
    words: List[str] = []
    tags: List[str] = []
    chunks: List[str] = []
    n_inconsistent = 0
    first_line = 0
    start_line = 1

    def end_sentence() -> None:
        nonlocal n_inconsistent, first_line
        if not words:
            return
        sentences.append((words, tags, chunks))
        bad = inconsistent_iob(chunks)
        if bad and not n_inconsistent:
            first_line = start_line + _first_inconsistent(chunks)
        n_inconsistent += bad

    with path.open(encoding="utf8") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                end_sentence()
                words, tags, chunks = [], [], []
                start_line = lineno + 1
                continue
            fields = text.split()
            if len(fields) != 3:
                raise ValueError(Errors.S015.format(path=path, line=lineno, text=line.rstrip("\n")))
            try:
                split_tag(fields[2])
            except ValueError:
                raise ValueError(Errors.S015.format(path=path, line=lineno, text=line.rstrip("\n"))) from None
            words.append(fields[0])
            tags.append(fields[1])
            chunks.append(fields[2])
    end_sentence()
    if n_inconsistent and warn_inconsistent:
        warnings.warn(Warnings.W002.format(path=path, n=n_inconsistent, line=first_line), UserWarning)
    return sentences


def _first_inconsistent(chunks: List[str]) -> int:
    for i in range(len(chunks)):
        if inconsistent_iob(chunks[: i + 1]):
            return i
    return 0


def select_part(items: List, part: str, heldout: int) -> List:
    if part not in PARTS:
        raise ValueError(Errors.S016.format(part=part, options=list(PARTS)))
    if not isinstance(heldout, int) or heldout < 0:
        raise ValueError(Errors.S017.format(value=heldout))
    if part == "all":
        return items
    cut = max(0, len(items) - heldout)
    return items[:cut] if part == "train" else items[cut:]


def sentence_to_doc(vocab: Vocab, sentence: Sentence, spans_key: str = "chunks") -> Doc:
    """A gold Doc: words, POS in token.tag_, and the chunks (read the conlleval way) as spans."""
    words, tags, chunk_tags = sentence
    doc = Doc(vocab, words=words, tags=tags)
    doc.spans[spans_key] = [Span(doc, s, e, label=kind) for s, e, kind in iob_to_chunks(chunk_tags)]
    return doc


def predicted_copy(vocab: Vocab, gold: Doc) -> Doc:
    """The words and the given POS tags of `gold`, without chunks: the chunker's input."""
    return Doc(vocab, words=[t.text for t in gold], spaces=[bool(t.whitespace_) for t in gold],
               tags=[t.tag_ for t in gold])


def conll2000_docs(vocab: Vocab, path: Union[str, Path], *, part: str = "all",
                   heldout: int = DEFAULT_HELDOUT, spans_key: str = "chunks",
                   limit: int = 0) -> List[Doc]:
    """Gold Docs (one per sentence) from a CoNLL-2000 file, or from a .spacy file converted
    from one (see spacy_structperc.convert, which applies `part` already)."""
    path = Path(path)
    if path.suffix == ".spacy":
        docs = list(DocBin().from_disk(path).get_docs(vocab))
        if part != "all":
            docs = select_part(docs, part, heldout)
    else:
        docs = [sentence_to_doc(vocab, s, spans_key) for s in select_part(read_conll2000(path), part, heldout)]
    return docs[:limit] if limit else docs


@registry.readers("spacy-structperc.conll2000_reader.v1")
def create_conll2000_reader(path: Optional[Path], part: str = "all", heldout: int = DEFAULT_HELDOUT,
                            spans_key: str = "chunks", limit: int = 0) -> Callable[[Language], Iterable[Example]]:
    """Examples from CoNLL-2000 data: the predicted Doc carries the words and the file's POS tags
    (token.tag_), the reference Doc the same plus the chunks in doc.spans[spans_key].

    path: a CoNLL-2000 text file (or a .spacy file written by spacy_structperc.convert).
    part: "all", "train" (all but the last `heldout` sentences) or "heldout" (those sentences).
    limit: read at most this many sentences (0 = all).
    """
    select_part([], part, heldout)  # validate the settings when the config is resolved

    def read(nlp: Language) -> Iterator[Example]:
        if path is None:
            raise ValueError(Errors.S018)
        for gold in conll2000_docs(nlp.vocab, path, part=part, heldout=heldout, spans_key=spans_key,
                                   limit=limit):
            yield Example(predicted_copy(nlp.vocab, gold), gold)

    return read
