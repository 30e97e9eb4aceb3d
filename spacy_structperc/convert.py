"""Convert CoNLL-2000 chunking files and NER column files (CoNLL-2003, IOB2) to spaCy's .spacy format.

    python -m spacy_structperc.convert train.txt corpus/ --heldout 1000
    python -m spacy_structperc.convert test.txt corpus/
    python -m spacy_structperc.convert eng.train corpus/ --format conll2003
    python -m spacy_structperc.convert Genia4ERtask1.iob2 corpus/ --format iob2 --heldout 1000
    python -m spacy_structperc.convert train.txt corpus/ --format conll2001
    python -m spacy_structperc.convert en_ewt-ud-train.conllu corpus/ --format ud-clauses

CoNLL-2000 (--format conll2000, the default): each sentence becomes one Doc: words, POS tags in
token.tag_, and the chunks (read as conlleval reads them) in doc.spans["chunks"].

CoNLL-2003 (--format conll2003, IOB1) and IOB2 column files such as JNLPBA (--format iob2): each
sentence becomes one Doc with the entities in doc.ents (every other token annotated O) and, for
CoNLL-2003, the POS tags in token.tag_ (--no-pos leaves them out). --n-sents N puts up to N
sentences of one document into a Doc (with sentence starts; documents start at -DOCSTART- or
###MEDLINE: lines and a Doc never spans two of them); --n-sents 0 writes whole documents.
The output is named after the input without a .txt/.iob2/.iob/.tsv/.conll suffix
(eng.train -> eng.train.spacy, Genia4ERtask1.iob2 -> Genia4ERtask1.spacy).

CoNLL-2001 clause files (--format conll2001, `word POS [chunk ...] clause`): each sentence
becomes one Doc with the POS tags, the chunks when the file has a chunk column, and the clauses
in doc.spans["clauses"] (--spans-key). CoNLL-U treebanks (--format ud-clauses): each sentence
becomes one Doc with its tags and tree and the clauses the UD rule derives
(spacy_structperc.clauses.ud) in doc.spans["clauses"].

The corpora have no development split except CoNLL-2003 (eng.testa), so with --heldout N the
last N sentences are written to NAME.heldout.spacy and the rest to NAME.train.spacy; without it
everything goes to NAME.spacy.

spacy.Corpus gives a component predicted Docs without POS tags; train from these files with
this package's readers (conll2000_reader, conll2003_reader and iob2_reader read .spacy files
too and keep the POS tags on the predicted Doc), or put a tagger first.
"""
import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import spacy
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from .errors import Errors
from .readers import (CONLL2003_READER, IOB2_READER, NerSentence, select_ner_part, ner_sentence_to_doc,
                      read_conll2000, read_conll2003, read_iob2, select_part, sentence_to_doc)

FORMATS = ("conll2000", "conll2003", "iob2", "conll2001", "ud-clauses")
TEXT_SUFFIXES = (".txt", ".iob2", ".iob", ".tsv", ".conll")


def convert(input_path: Path, output_dir: Path, heldout: int = 0, spans_key: str = "chunks",
            lang: str = "en") -> List[Path]:
    nlp = spacy.blank(lang)
    sentences = read_conll2000(input_path)
    output_dir.mkdir(parents=True, exist_ok=True)
    stem = input_path.stem
    if heldout:
        parts = [("train", select_part(sentences, "train", heldout)),
                 ("heldout", select_part(sentences, "heldout", heldout))]
    else:
        parts = [("", sentences)]
    written = []
    for part, items in parts:
        docbin = DocBin(store_user_data=False)
        for sentence in items:
            docbin.add(sentence_to_doc(nlp.vocab, sentence, spans_key))
        path = output_dir / (f"{stem}.{part}.spacy" if part else f"{stem}.spacy")
        docbin.to_disk(path)
        written.append(path)
        print(f"{path}: {len(items)} sentences, {sum(len(s[0]) for s in items)} words")
    return written


def group_ner_docs(vocab: Vocab, sentences: Sequence[NerSentence], *, n_sents: int = 1,
                   pos: bool = True) -> List[Doc]:
    """Docs of up to `n_sents` consecutive sentences of one document (0: whole documents).
    With n_sents != 1 every Doc carries sentence starts; with n_sents = 1 (one Doc per
    sentence) none do."""
    if not isinstance(n_sents, int) or n_sents < 0:
        raise ValueError(Errors.S036.format(setting="n_sents", reader="NER conversion", value=n_sents))
    groups: List[List[NerSentence]] = []
    for sentence in sentences:
        last = groups[-1] if groups else None
        if last and last[-1].document == sentence.document and (n_sents == 0 or len(last) < n_sents):
            last.append(sentence)
        else:
            groups.append([sentence])
    docs = []
    for group in groups:
        parts = [ner_sentence_to_doc(vocab, s, pos=pos, sent_start=n_sents != 1) for s in group]
        docs.append(parts[0] if len(parts) == 1 else Doc.from_docs(parts))
    return docs


def convert_ner(input_path: Path, output_dir: Path, *, file_format: str = "conll2003", heldout: int = 0,
                n_sents: int = 1, pos: bool = True, lang: str = "en") -> List[Path]:
    """Write NAME.spacy (or NAME.train.spacy and NAME.heldout.spacy with heldout > 0) from a
    CoNLL-2003 (file_format = "conll2003") or IOB2 ("iob2") file; heldout counts sentences."""
    if file_format not in ("conll2003", "iob2"):
        raise ValueError(Errors.S032.format(setting="format", value=file_format, reader="NER conversion",
                                            options=["conll2003", "iob2"]))
    reader = CONLL2003_READER if file_format == "conll2003" else IOB2_READER
    nlp = spacy.blank(lang)
    sentences = read_conll2003(input_path) if file_format == "conll2003" else read_iob2(input_path)
    name = input_path.stem if input_path.suffix in TEXT_SUFFIXES else input_path.name
    if heldout:
        parts = [("train", select_ner_part(sentences, "train", heldout, 0, reader)),
                 ("heldout", select_ner_part(sentences, "heldout", heldout, 0, reader))]
    else:
        parts = [("", select_ner_part(sentences, "all", 0, 0, reader))]
    output_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for part, items in parts:
        docbin = DocBin(store_user_data=False)
        for doc in group_ner_docs(nlp.vocab, items, n_sents=n_sents, pos=pos):
            docbin.add(doc)
        path = output_dir / (f"{name}.{part}.spacy" if part else f"{name}.spacy")
        docbin.to_disk(path)
        written.append(path)
        n_ents = sum(len(d.ents) for d in docbin.get_docs(nlp.vocab))
        print(f"{path}: {len(docbin)} docs, {len(items)} sentences, {sum(len(s.words) for s in items)} words, "
              f"{n_ents} entities")
    return written


def convert_clauses(input_path: Path, output_dir: Path, *, file_format: str = "conll2001",
                    spans_key: str = "clauses", lang: str = "en") -> List[Path]:
    """Write NAME.spacy from a CoNLL-2001 clause file or (file_format = "ud-clauses") a CoNLL-U
    treebank, the clauses in doc.spans[spans_key]."""
    from .clauses.conll2001 import conll2001_docs
    from .clauses.ud import conllu_clause_docs

    nlp = spacy.blank(lang)
    if file_format == "conll2001":
        docs = conll2001_docs(nlp.vocab, input_path, spans_key=spans_key)
    else:
        docs = conllu_clause_docs(nlp.vocab, input_path, spans_key=spans_key)
    output_dir.mkdir(parents=True, exist_ok=True)
    name = input_path.stem if input_path.suffix in TEXT_SUFFIXES + (".conllu",) else input_path.name
    path = output_dir / f"{name}.spacy"
    DocBin(store_user_data=False, docs=docs).to_disk(path)
    n_clauses = sum(len(d.spans[spans_key]) for d in docs)
    print(f"{path}: {len(docs)} sentences, {sum(len(d) for d in docs)} words, {n_clauses} clauses")
    return [path]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_structperc.convert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="CoNLL-2000 (word POS chunk), CoNLL-2003 or IOB2 file")
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--format", dest="file_format", choices=FORMATS, default="conll2000",
                        help="input format (default conll2000)")
    parser.add_argument("--heldout", type=int, default=0,
                        help="hold out the last N sentences as a tuning set (CoNLL-2000 train: 1000)")
    parser.add_argument("--spans-key", default="chunks", help="conll2000: the spans key of the chunks (conll2001 / ud-clauses: of the clauses, default clauses)")
    parser.add_argument("--n-sents", type=int, default=1,
                        help="conll2003/iob2: sentences per Doc within a document (0 = whole documents)")
    parser.add_argument("--no-pos", action="store_true", help="conll2003: leave the POS tags out")
    parser.add_argument("--lang", default="en")
    args = parser.parse_args(argv)
    try:
        if args.file_format == "conll2000":
            convert(args.input, args.output_dir, args.heldout, args.spans_key, args.lang)
        elif args.file_format in ("conll2001", "ud-clauses"):
            key = "clauses" if args.spans_key == "chunks" else args.spans_key
            convert_clauses(args.input, args.output_dir, file_format=args.file_format, spans_key=key, lang=args.lang)
        else:
            convert_ner(args.input, args.output_dir, file_format=args.file_format, heldout=args.heldout,
                        n_sents=args.n_sents, pos=not args.no_pos, lang=args.lang)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
