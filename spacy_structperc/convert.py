"""Convert CoNLL-2000 chunking files to spaCy's .spacy format.

    python -m spacy_structperc.convert train.txt corpus/ --heldout 1000
    python -m spacy_structperc.convert test.txt corpus/

Each sentence becomes one Doc: words, POS tags in token.tag_, and the chunks (read as conlleval
reads them) in doc.spans["chunks"]. CoNLL-2000 has no development split, so with --heldout N the
last N sentences are written to NAME.heldout.spacy and the rest to NAME.train.spacy; without it
everything goes to NAME.spacy.

spacy.Corpus gives the chunker predicted Docs without POS tags; train from these files with the
CoNLL-2000 reader (spacy-structperc.conll2000_reader.v1 reads .spacy files too), or put a tagger
before the chunker.
"""
import argparse
import sys
from pathlib import Path
from typing import List, Optional

import spacy
from spacy.tokens import DocBin

from .readers import read_conll2000, select_part, sentence_to_doc


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


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_structperc.convert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="CoNLL-2000 file (word POS chunk)")
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--heldout", type=int, default=0,
                        help="hold out the last N sentences as a tuning set (CoNLL-2000 train: 1000)")
    parser.add_argument("--spans-key", default="chunks")
    parser.add_argument("--lang", default="en")
    args = parser.parse_args(argv)
    try:
        convert(args.input, args.output_dir, args.heldout, args.spans_key, args.lang)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
