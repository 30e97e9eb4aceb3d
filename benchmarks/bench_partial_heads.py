"""Parsers trained on partially annotated trees (issue 12): UAS with 50% of heads missing
against the same sentences fully annotated, for structperc_parser and spaCy's parser.

UD English EWT, gold tokens and gold tags, one Doc per sentence (with its sentence boundary).
The first --train sentences of train are used twice: fully annotated, and with each token's
head (and label) removed with probability --missing (seeded), the way spaCy marks a missing
head (Token.has_head() false). Each parser is trained for --epochs passes and scored on the
first --dev sentences of dev (spaCy's parser scorer, punctuation excluded). spaCy's parser is
the `parser` of `spacy init config --pipeline parser --optimize efficiency` (tok2vec + parser,
trained with nlp.update, batches of 32), which reads missing heads natively.

    python benchmarks/bench_partial_heads.py [--train 2000] [--dev 1000] [--epochs 5]
"""
import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import default_data_dir, git_revision, load_average, machine_info  # noqa: E402


def partial(nlp, doc, p_missing, rng):
    from spacy.tokens import Doc
    heads, deps = [], []
    for t in doc:
        if rng.random() < p_missing:
            heads.append(None)
            deps.append(None)
        else:
            heads.append(t.head.i)
            deps.append(t.dep_)
    return Doc(nlp.vocab, words=[t.text for t in doc], tags=[t.tag_ for t in doc], heads=heads,
               deps=deps, sent_starts=[True] + [False] * (len(doc) - 1))


def inputs(nlp, docs):
    from spacy.tokens import Doc
    return [Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d],
                sent_starts=[True] + [False] * (len(d) - 1)) for d in docs]


def score(preds, gold):
    from spacy.pipeline.dep_parser import parser_score
    from spacy.training import Example
    s = parser_score([Example(p, g) for p, g in zip(preds, gold)])
    return {"dep_uas": round(100 * s["dep_uas"], 2), "dep_las": round(100 * s["dep_las"], 2)}


def run_structperc(train_docs, dev_docs, epochs, p_missing, seed):
    import spacy
    from spacy.training import Example
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("structperc_parser")
    rng = random.Random(seed)
    refs = [partial(nlp, d, p_missing, rng) if p_missing else d for d in train_docs]
    egs = [Example(x, y) for x, y in zip(inputs(nlp, refs), refs)]
    start = time.perf_counter()
    parser.initialize(lambda: egs, nlp=nlp)
    for _ in range(epochs):
        random.Random(seed).shuffle(egs)
        parser.update(egs)
    seconds = time.perf_counter() - start
    preds = list(parser.pipe(inputs(nlp, dev_docs)))
    return {**score(preds, dev_docs), "train_seconds": round(seconds, 1)}


def run_spacy(train_docs, dev_docs, epochs, p_missing, seed):
    import spacy
    from spacy.training import Example
    from spacy.util import minibatch
    from thinc.api import fix_random_seed
    fix_random_seed(seed)
    from spacy.cli.init_config import init_config
    config = init_config(lang="en", pipeline=["parser"], optimize="efficiency")
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    rng = random.Random(seed)
    refs = [partial(nlp, d, p_missing, rng) if p_missing else d for d in train_docs]
    egs = [Example(x, y) for x, y in zip(inputs(nlp, refs), refs)]
    start = time.perf_counter()
    optimizer = nlp.initialize(lambda: egs)
    for _ in range(epochs):
        random.Random(seed).shuffle(egs)
        for batch in minibatch(egs, 32):
            nlp.update(batch, sgd=optimizer)
    seconds = time.perf_counter() - start
    with nlp.use_params(optimizer.averages):
        preds = list(nlp.pipe(inputs(nlp, dev_docs)))
    return {**score(preds, dev_docs), "train_seconds": round(seconds, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--dev", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--missing", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--systems", nargs="+", default=["structperc", "spacy"])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "partial_heads.json")
    args = ap.parse_args()
    from conllu_data import read_conllu
    ewt = default_data_dir("ud_en_ewt")
    train_docs = read_conllu(ewt / "en_ewt-ud-train.conllu", limit=args.train)
    dev_docs = read_conllu(ewt / "en_ewt-ud-dev.conllu", limit=args.dev)
    rows = []
    runners = {"structperc": run_structperc, "spacy": run_spacy}
    for system in args.systems:
        for p in (0.0, args.missing):
            row = {"system": system, "heads_missing": p,
                   **runners[system](train_docs, dev_docs, args.epochs, p, args.seed)}
            rows.append(row)
            print(row, flush=True)
    gaps = {}
    for system in args.systems:
        full = next(r for r in rows if r["system"] == system and r["heads_missing"] == 0.0)
        part = next(r for r in rows if r["system"] == system and r["heads_missing"] == args.missing)
        gaps[system] = round(full["dep_uas"] - part["dep_uas"], 2)
    out = {"what": f"UAS on the first {args.dev} EWT dev sentences (gold tags) of parsers trained "
                   f"{args.epochs} epochs on the first {args.train} EWT train sentences, fully "
                   f"annotated and with {int(100 * args.missing)}% of heads missing",
           "command": "python " + " ".join(["benchmarks/bench_partial_heads.py"] + sys.argv[1:]),
           "rows": rows, "uas_gap_full_minus_partial": gaps, "load_average": load_average(),
           "machine": machine_info(), "git_revision": git_revision()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(gaps))


if __name__ == "__main__":
    main()
