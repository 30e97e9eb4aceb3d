"""Corpus readers: CoNLL-2000 chunking data (`word POS chunk`, one token a line), CoNLL-2003 NER
data (`word POS chunk NER`, IOB1) and IOB2 column files such as JNLPBA (`token<TAB>tag`).

CoNLL-2000 has a training and a test file but no development split. `heldout` (default 1,000)
sets how many sentences at the end of the training file are held out for tuning: read the file
with part = "train" for the rest and part = "heldout" for those sentences (part = "all" reads
everything, the shared task's training set). The IOB2 reader offers the same (JNLPBA has no
development split either); the CoNLL-2003 reader offers it too, but eng.testa is the dev set.

Entity tags are read the way conlleval reads them (scorers.iob_to_chunks), for IOB1 and IOB2
alike: B-X starts an entity, I-X continues an open entity of type X and otherwise starts one.
"""
import io
import warnings
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.util import registry
from spacy.vocab import Vocab

from .errors import Errors, Warnings
from .scorers import Chunk, chunks_to_iob, inconsistent_iob, iob_to_chunks, split_tag

PARTS = ("all", "train", "heldout")
CONLL2000_READER = "spacy-structperc.conll2000_reader.v1"
DEFAULT_HELDOUT = 1000

Sentence = Tuple[List[str], List[str], List[str]]  # words, POS tags, chunk tags


def read_conll2000(path: Union[str, Path], *, warn_inconsistent: bool = True) -> List[Sentence]:
    """Parse a CoNLL-2000 file into (words, tags, chunk tags) sentences.

    Malformed lines raise ValueError naming the file and line (S015); a missing file
    FileNotFoundError (S034), a file without sentences ValueError (S035), a file that is not
    UTF-8 ValueError (S125). A byte-order mark is not part of the first word. Inconsistent IOB (I-NP after O or
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

    path = open_checked(path, CONLL2000_READER)
    with text_lines(path, CONLL2000_READER) as f:
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
    if not sentences:
        raise ValueError(Errors.S035.format(path=path, reader=CONLL2000_READER))
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
    path = open_checked(path, CONLL2000_READER)
    if path.suffix == ".spacy":
        docs = list(read_docbin(vocab, path, CONLL2000_READER))
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


# NER corpora: CoNLL-2003 (IOB1) and IOB2 column files (JNLPBA) ---------------------------------------

CONLL2003_READER = "spacy-structperc.conll2003_reader.v1"
IOB2_READER = "spacy-structperc.iob2_reader.v1"
DOCSTART = "-DOCSTART-"
MEDLINE_HEADER = "###MEDLINE:"


class NerSentence(NamedTuple):
    """One sentence of an NER column file. `tags` (POS) is empty when the format has none;
    `document` counts the documents of the file from 0 (-DOCSTART- / ###MEDLINE: lines start
    one); `line` is the line number of the sentence's first token."""
    words: List[str]
    tags: List[str]
    ner: List[str]
    document: int
    line: int


class _ColumnReader:
    """Collects tokens into sentences and documents and tracks inconsistent I- tags."""

    def __init__(self, path: Path):
        self.path = path
        self.sentences: List[NerSentence] = []
        self.words: List[str] = []
        self.tags: List[str] = []
        self.ner: List[str] = []
        self.document = 0
        self.start_line = 0
        self.n_inconsistent = 0
        self.first_inconsistent = 0

    def add(self, lineno: int, word: str, tag: Optional[str], ner: str) -> None:
        if not self.words:
            self.start_line = lineno
        self.words.append(word)
        if tag is not None:
            self.tags.append(tag)
        self.ner.append(ner)

    def end_sentence(self) -> None:
        if not self.words:
            return
        self.sentences.append(NerSentence(self.words, self.tags, self.ner, self.document, self.start_line))
        bad = inconsistent_iob(self.ner)
        if bad and not self.n_inconsistent:
            self.first_inconsistent = self.start_line + _first_inconsistent(self.ner)
        self.n_inconsistent += bad
        self.words, self.tags, self.ner = [], [], []

    def start_document(self) -> None:
        self.end_sentence()
        if self.sentences and self.sentences[-1].document == self.document:
            self.document += 1


# Opening corpus files: every reader of this package (CoNLL-2000, CoNLL-2003, IOB2, CoNLL-2001,
# CoNLL-U clauses, and the .spacy files of each and of the documents corpus) opens its files
# through these, so they fail the same way: a missing file is S034, text that is not UTF-8 S125
# naming the file, line and byte, a .spacy file that cannot be read S210, and a file without
# sentences S035 (each reader checks the last after parsing). A UTF-8 byte-order mark is
# dropped, and lines end at "\n", "\r\n" or "\r" (as open() reads text).


def open_checked(path: Union[str, Path], reader: str) -> Path:
    """`path` as a Path; FileNotFoundError S034 when there is no such file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(Errors.S034.format(path=path, reader=reader))
    return path



def text_lines(path: Union[str, Path], reader: str) -> io.StringIO:
    """The file's lines as text: UTF-8, a byte-order mark dropped (Windows editors write one,
    and it would stick to the first word or make the first line malformed), newlines as open()
    reads them. A missing file: S034; not UTF-8 (say, Latin-1): S125 naming the file, line and
    byte."""
    path = open_checked(path, reader)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        raise ValueError(Errors.S125.format(path=path, line=line, byte=start, bad=data[start:start + 4],
                                            reader=reader)) from None
    return io.StringIO(text, newline=None)



def read_docbin(vocab: Vocab, path: Union[str, Path], reader: str) -> Iterator[Doc]:
    """The Docs of a .spacy file, one at a time: S034 when missing, S210 when it is not a DocBin
    (empty, cut short or another format), S035 when it holds no Doc."""
    path = open_checked(path, reader)
    n = 0
    try:
        for doc in DocBin().from_disk(path).get_docs(vocab):
            n += 1
            yield doc
    except Exception as e:   # zlib, msgpack and numpy each raise their own types on damage
        if isinstance(e, ValueError) and str(e).startswith("[S"):
            raise
        raise ValueError(Errors.S210.format(path=path, reader=reader, reason=f"{type(e).__name__}: {e}")) from None
    if not n:
        raise ValueError(Errors.S035.format(path=path, reader=reader))


def _valid_tag(tag: str) -> bool:
    try:
        split_tag(tag)
    except ValueError:
        return False
    return tag != ""


def read_conll2003(path: Union[str, Path]) -> List[NerSentence]:
    """Parse a CoNLL-2003 file (`word POS chunk NER`, IOB1 NER tags) into sentences.

    Lines whose first field is -DOCSTART- start a new document, whatever their other fields
    (train/testa have `-DOCSTART- -X- O O`, testb `-DOCSTART- -X- -X- O`); they are not tokens.
    The chunk column is not used. Malformed lines raise ValueError (S030) naming the file and
    line; a missing file FileNotFoundError (S034), a file without sentences ValueError (S035).
    IOB1 allows I-X after O, so no tag sequence is reported as inconsistent; the two B-MISC
    after O in eng.train read as the start of an entity, as conlleval reads them.
    """
    path = open_checked(path, CONLL2003_READER)
    state = _ColumnReader(path)
    with text_lines(path, CONLL2003_READER) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                state.end_sentence()
                continue
            if fields[0] == DOCSTART:
                state.start_document()
                continue
            if len(fields) != 4 or not _valid_tag(fields[3]):
                raise ValueError(Errors.S030.format(path=path, line=lineno, text=line.rstrip("\n")))
            state.add(lineno, fields[0], fields[1], fields[3])
    state.end_sentence()
    if not state.sentences:
        raise ValueError(Errors.S035.format(path=path, reader=CONLL2003_READER))
    return state.sentences


def read_iob2(path: Union[str, Path], *, warn_inconsistent: bool = True) -> List[NerSentence]:
    """Parse an IOB2 column file (`token<TAB>tag`, e.g. JNLPBA) into sentences (tags = []).

    A line with a tab is split at tabs, any other at whitespace; the token is the first field,
    the tag the last, and every token line of a file must have the same number of fields (at
    least 2). `###MEDLINE:` header lines and -DOCSTART- lines start a new document and are
    skipped. Malformed lines raise ValueError (S031) naming the file and line; a missing file
    FileNotFoundError (S034), a file without sentences ValueError (S035). I-X tags that do not
    continue an entity of type X are read the conlleval way (each starts an entity) and
    reported once per file with a count (W010).
    """
    path = open_checked(path, IOB2_READER)
    state = _ColumnReader(path)
    n_fields = 0
    with text_lines(path, IOB2_READER) as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                state.end_sentence()
                continue
            if text.startswith(MEDLINE_HEADER) or text.split()[0] == DOCSTART:
                state.start_document()
                continue
            fields = [x.strip() for x in text.split("\t")] if "\t" in text else text.split()
            n_fields = n_fields or max(2, len(fields))
            if len(fields) != n_fields or not fields[0] or not _valid_tag(fields[-1]):
                raise ValueError(Errors.S031.format(path=path, line=lineno, n=n_fields,
                                                    text=line.rstrip("\n")))
            state.add(lineno, fields[0], None, fields[-1])
    state.end_sentence()
    if not state.sentences:
        raise ValueError(Errors.S035.format(path=path, reader=IOB2_READER))
    if state.n_inconsistent and warn_inconsistent:
        warnings.warn(Warnings.W010.format(path=path, n=state.n_inconsistent, line=state.first_inconsistent),
                      UserWarning)
    return state.sentences


def select_ner_part(items: List, part: str, heldout: int, limit: int, reader: str) -> List:
    _validate_ner_settings(part, heldout, limit, reader)
    if part != "all":
        cut = max(0, len(items) - heldout)
        items = items[:cut] if part == "train" else items[cut:]
    return items[:limit] if limit else items


def _validate_ner_settings(part: str, heldout: int, limit: int, reader: str) -> None:
    if part not in PARTS:
        raise ValueError(Errors.S032.format(setting="part", value=part, reader=reader, options=list(PARTS)))
    for setting, value in (("heldout", heldout), ("limit", limit)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(Errors.S036.format(setting=setting, reader=reader, value=value))


def ner_sentence_to_doc(vocab: Vocab, sentence: NerSentence, *, pos: bool = True,
                        sent_start: bool = False) -> Doc:
    """A gold Doc: words, POS in token.tag_ (when the sentence has them and pos is true) and
    doc.ents, read from the NER tags the conlleval way; every other token is annotated O.
    sent_start: mark the Doc as one sentence (token.is_sent_start set on every token)."""
    tags = sentence.tags if pos and sentence.tags else None
    starts: Optional[List[Union[bool, int, None]]] = \
        [True, *([False] * (len(sentence.words) - 1))] if sent_start else None
    doc = Doc(vocab, words=sentence.words, tags=tags, sent_starts=starts)
    doc.set_ents([Span(doc, s, e, label=kind) for s, e, kind in iob_to_chunks(sentence.ner)],
                 default="outside")
    return doc


def ner_predicted_copy(vocab: Vocab, gold: Doc, *, pos: bool = True) -> Doc:
    """The words (and POS tags and sentence starts, if `gold` has them) of `gold`, without
    entities: the NER component's input."""
    tags = [t.tag_ for t in gold] if pos and gold.has_annotation("TAG") else None
    starts: Optional[List[Union[bool, int, None]]] = \
        [bool(t.is_sent_start) for t in gold] if gold.has_annotation("SENT_START") else None
    return Doc(vocab, words=[t.text for t in gold], spaces=[bool(t.whitespace_) for t in gold],
               tags=tags, sent_starts=starts)


def _without_tags(vocab: Vocab, gold: Doc) -> Doc:
    """`gold` without POS tags, keeping words, sentence starts and entities (or their absence)."""
    doc = ner_predicted_copy(vocab, gold, pos=False)
    ents = [f"{t.ent_iob_}-{t.ent_type_}" if t.ent_iob_ in ("B", "I") else t.ent_iob_ for t in gold]
    return Doc(vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc],
               sent_starts=[t.is_sent_start for t in doc] if doc.has_annotation("SENT_START") else None,
               ents=ents)


def ner_docs(vocab: Vocab, path: Union[str, Path], *, reader: str, part: str = "all", heldout: int = 0,
             limit: int = 0, pos: bool = True, documents: bool = False) -> List[Doc]:
    """Gold Docs from a CoNLL-2003 file (reader = CONLL2003_READER) or an IOB2 file (IOB2_READER),
    one per sentence (documents: one per document of the file, its sentences marked), or from a
    .spacy file converted from one (one per Doc it holds; part and heldout then count those Docs)."""
    _validate_ner_settings(part, heldout, limit, reader)
    path = open_checked(path, reader)
    if path.suffix == ".spacy":
        docs = list(read_docbin(vocab, path, reader))
        docs = select_ner_part(docs, part, heldout, limit, reader)
        return docs if pos else [_without_tags(vocab, d) for d in docs]
    sentences = read_conll2003(path) if reader == CONLL2003_READER else read_iob2(path)
    sentences = select_ner_part(sentences, part, heldout, limit, reader)
    if not documents:
        return [ner_sentence_to_doc(vocab, s, pos=pos) for s in sentences]
    groups: Dict[int, List[Doc]] = {}
    for s in sentences:
        groups.setdefault(s.document, []).append(ner_sentence_to_doc(vocab, s, pos=pos, sent_start=True))
    return [Doc.from_docs(group, ensure_whitespace=True) for group in groups.values()]


def _make_ner_reader(reader: str, path: Optional[Path], part: str, heldout: int, limit: int,
                     pos: bool, documents: bool = False) -> Callable[[Language], Iterable[Example]]:
    _validate_ner_settings(part, heldout, limit, reader)  # when the config is resolved

    def read(nlp: Language) -> Iterator[Example]:
        if path is None:
            raise ValueError(Errors.S033.format(reader=reader))
        for gold in ner_docs(nlp.vocab, path, reader=reader, part=part, heldout=heldout, limit=limit, pos=pos,
                             documents=documents):
            yield Example(ner_predicted_copy(nlp.vocab, gold, pos=pos), gold)

    return read


@registry.readers(CONLL2003_READER)
def create_conll2003_reader(path: Optional[Path], part: str = "all", heldout: int = 0, pos: bool = True,
                            limit: int = 0, documents: bool = False) -> Callable[[Language], Iterable[Example]]:
    """Examples from CoNLL-2003 NER data, one per sentence: the predicted Doc carries the words
    and the file's POS tags (token.tag_), the reference Doc the same plus the entities in
    doc.ents (all other tokens annotated O). -DOCSTART- lines are not tokens.

    path: eng.train / eng.testa (the dev set) / eng.testb, or a .spacy file converted from one.
    part: "all" (default), "train" (all but the last `heldout` sentences) or "heldout".
    heldout: sentences held out at the end (default 0: use eng.testa for tuning).
    pos: false leaves token.tag_ empty on both Docs (words alone).
    limit: read at most this many sentences (0 = all).
    documents: one Example per document (-DOCSTART- to -DOCSTART-) of the sentences read, its
        sentence starts marked, instead of one per sentence (for NER features that read the
        whole Doc); ignored for a .spacy file.
    """
    return _make_ner_reader(CONLL2003_READER, path, part, heldout, limit, pos, documents)


@registry.readers(IOB2_READER)
def create_iob2_reader(path: Optional[Path], part: str = "all", heldout: int = DEFAULT_HELDOUT,
                       limit: int = 0) -> Callable[[Language], Iterable[Example]]:
    """Examples from an IOB2 column file such as JNLPBA's Genia4ERtask1.iob2, one per sentence:
    the predicted Doc carries the words, the reference Doc the words and the entities in
    doc.ents (all other tokens annotated O).

    path: an IOB2 file (token<TAB>tag), or a .spacy file converted from one.
    part: "all" (default), "train" (all but the last `heldout` sentences) or "heldout" (those).
    heldout: sentences held out at the end of the file for tuning (default 1,000).
    limit: read at most this many sentences (0 = all).
    """
    return _make_ner_reader(IOB2_READER, path, part, heldout, limit, True)


def chunks_to_iob1(n: int, chunks: Iterable[Chunk]) -> List[str]:
    """IOB1 tags for non-overlapping chunks: I-X throughout, B-X only at the first token of a
    chunk that directly follows a chunk of the same type (as in CoNLL-2003)."""
    tags = chunks_to_iob(n, chunks)
    for i, tag in enumerate(tags):
        if tag.startswith("B-") and not (i > 0 and tags[i - 1] != "O" and tags[i - 1][2:] == tag[2:]):
            tags[i] = "I-" + tag[2:]
    return tags


def doc_ner_tags(doc: Doc, scheme: str = "IOB2") -> List[str]:
    """The entity tags of `doc` (from doc.ents) in the IOB2 or IOB1 scheme."""
    chunks = [(e.start, e.end, e.label_) for e in doc.ents]
    if scheme == "IOB2":
        return chunks_to_iob(len(doc), chunks)
    if scheme == "IOB1":
        return chunks_to_iob1(len(doc), chunks)
    raise ValueError(Errors.S032.format(setting="scheme", value=scheme, reader="doc_ner_tags",
                                        options=["IOB1", "IOB2"]))


def format_conll2003(docs: Sequence[Doc], *, docstart: str = "-DOCSTART- -X- O O") -> str:
    """CoNLL-2003 text for `docs`, one sentence each (doc.sents when the Doc has sentence
    starts): `word POS - NER` with IOB1 tags, the chunk column written as "-"; every Doc is
    preceded by `docstart` unless it is empty ("")."""
    out = []
    for doc in docs:
        if docstart:
            out.append(docstart + "\n\n")
        tags = doc_ner_tags(doc, "IOB1")
        for sent in (doc.sents if doc.has_annotation("SENT_START") else [doc[:]]):
            out.append("".join(f"{t.text} {t.tag_ or '-'} - {tags[t.i]}\n" for t in sent) + "\n")
    return "".join(out)


def format_iob2(docs: Sequence[Doc]) -> str:
    """IOB2 column text (`token<TAB>tag`, a blank line after each sentence) for `docs`."""
    out = []
    for doc in docs:
        tags = doc_ner_tags(doc, "IOB2")
        for sent in (doc.sents if doc.has_annotation("SENT_START") else [doc[:]]):
            out.append("".join(f"{t.text}\t{tags[t.i]}\n" for t in sent) + "\n")
    return "".join(out)
