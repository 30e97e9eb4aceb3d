"""Evaluate a trained pipeline on a column-format corpus read with the package's readers.

    python scripts/evaluate_corpus.py training/chunker/model-best test.txt --reader conll2000
    python scripts/evaluate_corpus.py training/ner/model-best eng.testb --reader conll2003 --documents
    python scripts/evaluate_corpus.py training/ner_jnlpba/model-best Genia4EReval1.iob2 --reader iob2
    python scripts/evaluate_corpus.py training/clauses/model-best test.txt --reader conll2001

`spacy evaluate` reads .spacy files through spacy.Corpus, whose predicted Docs carry no POS tags;
the readers here keep the file's POS tags on the predicted side (they are input in CoNLL-2000 and
CoNLL-2003), so components whose features read token.tag_ see them. Prints the pipeline's scores
(spans_* for the chunker, ents_* for NER, with per-type figures) and the words per second of
nlp.evaluate, and writes them to --output. --documents (conll2003) reads one Example per
document (-DOCSTART- to -DOCSTART-, its sentences marked), as a user passes whole texts: the
NER's document features and two-stage aggregation see the whole document.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import spacy

from spacy_structperc.readers import (create_conll2000_reader, create_conll2003_reader,
                                      create_iob2_reader)
from spacy_structperc.clauses.conll2001 import create_conll2001_reader
from spacy_structperc.clauses.ud import create_ud_clauses_reader

READERS = {"conll2000": create_conll2000_reader, "conll2003": create_conll2003_reader,
           "iob2": create_iob2_reader}
# Clause corpora: words only on the predicted side (the pipeline's tagger and chunker annotate).
READERS["conll2001"] = lambda path, part="all": create_conll2001_reader(path, pos=False, chunks=False)
READERS["ud-clauses"] = lambda path, part="all": create_ud_clauses_reader(path, pos=False)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path)
    p.add_argument("data", type=Path, help="the corpus file")
    p.add_argument("--reader", choices=sorted(READERS), default="conll2000")
    p.add_argument("--part", default="all", choices=["all", "train", "heldout"])
    p.add_argument("--output", type=Path, default=None)
    p.add_argument("--documents", action="store_true", help="one Example per document (conll2003)")
    args = p.parse_args(argv)
    if args.documents and args.reader != "conll2003":
        p.error("--documents needs --reader conll2003 (the file's -DOCSTART- lines)")
    nlp = spacy.load(args.model)
    extra = {"documents": True} if args.documents else {}
    examples = list(READERS[args.reader](args.data, part=args.part, **extra)(nlp))
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    seconds = time.perf_counter() - start
    n_words = sum(len(eg.reference) for eg in examples)
    out = {k: v for k, v in scores.items() if k.startswith(("spans_", "ents_"))}
    n_sents = sum(len(list(eg.reference.sents)) if eg.reference.has_annotation("SENT_START") else 1
                  for eg in examples)
    out.update({"speed": n_words / seconds, "sentences": n_sents, "words": n_words})
    if args.documents:
        out["documents"] = len(examples)
    print(json.dumps(out, indent=1))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
