"""A digest of everything a trained pipeline predicts, to check that a speed change leaves the
predictions byte-identical: run it under two builds and compare the lines.

    PYTHONPATH=<build before> python benchmarks/predict_digest.py MODEL_DIR... > before.txt
    PYTHONPATH=$PWD python benchmarks/predict_digest.py MODEL_DIR... > after.txt
    diff before.txt after.txt

Input: the words of a .spacy file (default: EWT dev, as bench_speed prepares it), as new Docs.
Each line: the model dir, the word count and a sha256 over tags, POS, heads, dependency labels,
sentence starts, entities (with labels, KB and entity ids) and every span group (with character
offsets).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import spacy
from spacy.tokens import Doc, DocBin

DEFAULT_DATA = Path(__file__).resolve().parent / ".work" / "speed" / "data" / "full" / "ewt_dev.spacy"


def digest(nlp, docs) -> str:
    h = hashlib.sha256()
    for doc in nlp.pipe(docs, batch_size=1000):
        for t in doc:
            h.update(f"{t.tag_}\t{t.pos_}\t{t.head.i}\t{t.dep_}\t{t.is_sent_start}\t{t.ent_iob_}{t.ent_type_}"
                     f"\t{t.ent_kb_id}\t{t.ent_id}\n".encode())
        for name in sorted(doc.spans):
            for span in doc.spans[name]:
                h.update(f"{name}\t{span.start}\t{span.end}\t{span.start_char}\t{span.end_char}\t{span.label_}"
                         f"\t{span.kb_id}\t{span.id}\n".encode())
        h.update(b"\x00")
    return h.hexdigest()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = p.parse_args(argv)
    for model in args.models:
        nlp = spacy.load(model)
        gold = list(DocBin().from_disk(args.data).get_docs(nlp.vocab))
        docs = [Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in gold]
        print(model, sum(len(d) for d in docs), digest(nlp, docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
