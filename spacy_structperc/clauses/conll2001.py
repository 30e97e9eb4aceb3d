"""CoNLL-2001 clause data: reading, writing and the registered corpus reader.

One token a line, `word POS [chunk ...] clause`, a blank line between sentences. The clause tag
is the last field: "(S" for every clause starting at the token, "*", then "S)" for every clause
ending there (`(S(S*`, `*`, `*S)S)`). The original shared-task files have more columns
(`word POS chunk start end clause`); only the first two and the last are required, and a third
field that is an IOB chunk tag (O, B-X, I-X) is read as the chunk. -DOCSTART- lines are skipped.
Clause labels other than S (`(SBAR*` in some derived files) are read as S: the task has one
category.
"""
import re
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry
from spacy.vocab import Vocab

from ..errors import Errors
from ..readers import read_docbin, text_lines
from ..scorers import iob_to_chunks, split_tag

READER = "spacy-structperc.conll2001_reader.v1"
CLAUSE_LABEL = "S"
_TAG = re.compile(r"^((?:\([A-Z]*)*)\*((?:[A-Z]*\))*)$")

Clause = Tuple[int, int]   # token indexes, end exclusive


class ClauseSentence(NamedTuple):
    words: List[str]
    tags: List[str]
    chunks: Optional[List[str]]   # IOB chunk tags when the file has them
    clauses: List[Clause]
    line: int                     # line of the first token


def parse_clause_tags(tags: List[str], path: Union[str, Path] = "<string>", first_line: int = 1) -> List[Clause]:
    """Clause spans (start, end exclusive) of one sentence's clause tags, sorted by start and
    longest first. Malformed tags raise S200, unbalanced brackets S201 (naming file and line)."""
    open_at: List[Tuple[int, int]] = []   # (token, line)
    clauses: List[Clause] = []
    for i, tag in enumerate(tags):
        line = first_line + i
        m = _TAG.match(tag)
        if not m:
            raise ValueError(Errors.S200.format(path=path, line=line, text=tag))
        for _ in range(m.group(1).count("(")):
            open_at.append((i, line))
        for _ in range(m.group(2).count(")")):
            if not open_at:
                raise ValueError(Errors.S201.format(path=path, line=line,
                                                    problem=f"token {i + 1} closes a clause that was never opened"))
            start, _ = open_at.pop()
            clauses.append((start, i + 1))
    if open_at:
        start, line = open_at[-1]
        raise ValueError(Errors.S201.format(path=path, line=line,
                                            problem=f"{len(open_at)} clause(s) opened here or before are "
                                                    "not closed by the end of the sentence"))
    return sorted(set(clauses), key=lambda c: (c[0], -c[1]))


def clause_tags(n: int, clauses: Iterable[Clause]) -> List[str]:
    """The clause column for n tokens and (start, end exclusive) clauses that nest."""
    opens, closes = [0] * n, [0] * n
    for start, end in clauses:
        opens[start] += 1
        closes[end - 1] += 1
    return [f"{'(S' * opens[i]}*{'S)' * closes[i]}" for i in range(n)]


def _is_chunk_tag(field: str) -> bool:
    try:
        split_tag(field)
    except ValueError:
        return False
    return True


def read_conll2001(path: Union[str, Path]) -> List[ClauseSentence]:
    """Parse a CoNLL-2001-style clause file into sentences (see the module docstring). The file
    is opened as every reader opens one (readers.text_lines): a missing file is S034, text that
    is not UTF-8 S125 naming the file, line and byte, a byte-order mark dropped; a file without
    sentences is S035."""
    path = Path(path)
    sentences: List[ClauseSentence] = []
    rows: List[Tuple[int, List[str]]] = []

    def end_sentence() -> None:
        if not rows:
            return
        words = [f[0] for _, f in rows]
        tags = [f[1] for _, f in rows]
        has_chunks = all(len(f) >= 4 and _is_chunk_tag(f[2]) for _, f in rows)
        chunks = [f[2] for _, f in rows] if has_chunks else None
        clauses = parse_clause_tags([f[-1] for _, f in rows], path, rows[0][0])
        sentences.append(ClauseSentence(words, tags, chunks, clauses, rows[0][0]))
        rows.clear()

    with text_lines(path, READER) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                end_sentence()
                continue
            if fields[0] == "-DOCSTART-":
                end_sentence()
                continue
            if len(fields) < 3:
                raise ValueError(Errors.S200.format(path=path, line=lineno, text=line.rstrip("\n")))
            rows.append((lineno, fields))
    end_sentence()
    if not sentences:
        raise ValueError(Errors.S035.format(path=path, reader=READER))
    return sentences


def sentence_to_doc(vocab: Vocab, sentence: ClauseSentence, spans_key: str = "clauses",
                    chunks_key: str = "chunks") -> Doc:
    """A gold Doc: words, POS in token.tag_, chunks (when the file has them) in
    doc.spans[chunks_key] and the clauses, labelled S, in doc.spans[spans_key]."""
    doc = Doc(vocab, words=sentence.words, tags=sentence.tags)
    if sentence.chunks is not None:
        doc.spans[chunks_key] = [Span(doc, s, e, label=k) for s, e, k in iob_to_chunks(sentence.chunks)]
    doc.spans[spans_key] = [Span(doc, s, e, label=CLAUSE_LABEL) for s, e in sentence.clauses]
    return doc


def format_conll2001(docs: Iterable[Doc], spans_key: str = "clauses") -> str:
    """`word POS clause` text for Docs, one sentence each (their doc.spans[spans_key])."""
    out = []
    for doc in docs:
        tags = clause_tags(len(doc), [(s.start, s.end) for s in doc.spans.get(spans_key, [])])
        out.append("".join(f"{t.text} {t.tag_ or '-'} {tags[t.i]}\n" for t in doc) + "\n")
    return "".join(out)


def input_copy(vocab: Vocab, gold: Doc, *, pos: bool = True, chunks_key: Optional[str] = None) -> Doc:
    """The words of `gold` (with its POS tags if pos, and its chunks if chunks_key), no clauses:
    the clause identifier's input."""
    doc = Doc(vocab, words=[t.text for t in gold], spaces=[bool(t.whitespace_) for t in gold],
              tags=[t.tag_ for t in gold] if pos and gold.has_annotation("TAG") else None)
    if chunks_key and chunks_key in gold.spans:
        doc.spans[chunks_key] = [Span(doc, s.start, s.end, label=s.label_) for s in gold.spans[chunks_key]]
    return doc


def conll2001_docs(vocab: Vocab, path: Union[str, Path], *, spans_key: str = "clauses",
                   limit: int = 0) -> List[Doc]:
    """Gold Docs from a CoNLL-2001 file, or from a .spacy file converted from one."""
    path = Path(path)
    if path.suffix == ".spacy":
        docs = list(read_docbin(vocab, path, READER))
    else:
        sentences = read_conll2001(path)
        docs = [sentence_to_doc(vocab, s, spans_key) for s in (sentences[:limit] if limit else sentences)]
    return docs[:limit] if limit else docs


@registry.readers(READER)
def create_conll2001_reader(path: Optional[Path], spans_key: str = "clauses", pos: bool = True,
                            chunks: bool = True, limit: int = 0) -> Callable[[Language], Iterable[Example]]:
    """Examples from CoNLL-2001 clause data, one per sentence: the reference Doc carries the
    words, the file's POS tags, its chunks (if it has a chunk column) and the clauses in
    doc.spans[spans_key]; the predicted Doc the words, and the POS tags (pos) and chunks (chunks)
    of the file when asked. With upstream tagger and chunker in the pipeline, set both false.

    path: a CoNLL-2001 text file, or a .spacy file written by spacy_structperc.convert.
    limit: read at most this many sentences (0 = all).
    """
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(Errors.S036.format(setting="limit", reader=READER, value=limit))

    def read(nlp: Language) -> Iterator[Example]:
        if path is None:
            raise ValueError(Errors.S202.format(reader=READER))
        for gold in conll2001_docs(nlp.vocab, path, spans_key=spans_key, limit=limit):
            yield Example(input_copy(nlp.vocab, gold, pos=pos, chunks_key="chunks" if chunks else None), gold)

    return read
