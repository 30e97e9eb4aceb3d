"""Evaluate a trained chunker pipeline on a CoNLL-2000 file (the POS tags of the file are given).

    python scripts/evaluate_chunker.py training/chunker/model-best test.txt [--output metrics.json]

`spacy evaluate` reads .spacy files through spacy.Corpus, whose predicted Docs carry no POS tags;
this reads the CoNLL-2000 file with the package's reader instead, so the chunker sees the tags.
Scores are conlleval's counts (spans_chunks_f/p/r and per type) and the words per second of
nlp.evaluate.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import spacy

from spacy_structperc.readers import create_conll2000_reader


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path)
    p.add_argument("data", type=Path, help="CoNLL-2000 file (word POS chunk)")
    p.add_argument("--part", default="all", choices=["all", "train", "heldout"])
    p.add_argument("--output", type=Path, default=None)
    args = p.parse_args(argv)
    nlp = spacy.load(args.model)
    examples = list(create_conll2000_reader(args.data, part=args.part)(nlp))
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    seconds = time.perf_counter() - start
    n_words = sum(len(eg.reference) for eg in examples)
    out = {k: v for k, v in scores.items() if k.startswith("spans_")}
    out.update({"speed": n_words / seconds, "sentences": len(examples), "words": n_words})
    print(json.dumps(out, indent=1))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
