"""Random single-byte damage to every file of a saved pipeline: which loads silently?

Trains every kind of component on generated sentences (tests/reliability/threaded_nlp.py,
`train_full_pipeline`: tagger, chunker, NER, parser, a parser with a reranker, the clause
identifier in primal and dual form), saves it with nlp.to_disk, and for each file of the saved
directory (our components' cfg / model / reranker, and spaCy's own config.cfg, meta.json,
tokenizer and vocab files) flips one random byte (random position, random non-zero XOR)
--flips times, loads the directory with spacy.load and annotates fixed texts. Each flip is
counted as a coded error (by code), an uncoded error (by type), a load whose annotations equal
the undamaged pipeline's ("same"), or a silent load with different annotations ("different").

    python benchmarks/bench_pipeline_damage.py [--flips 100] [--seed 0]
"""
import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))
from _common import git_revision, load_average, machine_info  # noqa: E402

OURS = ("cfg", "model", "reranker")


def annotate(nlp, texts):
    out = []
    for doc in nlp.pipe(texts):
        out.append(([t.text for t in doc], [t.tag_ for t in doc], [t.head.i for t in doc],
                    [t.dep_ for t in doc], [(e.start, e.end, e.label_) for e in doc.ents],
                    sorted((k, tuple((s.start, s.end, s.label_) for s in v)) for k, v in doc.spans.items())))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, default=100, help="flips per file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "pipeline_damage.json")
    args = ap.parse_args()
    import spacy
    from threaded_nlp import random_texts, train_full_pipeline

    nlp = train_full_pipeline()
    texts = [" ".join(words) for words in random_texts(8, seed=5)]
    path = Path(tempfile.mkdtemp()) / "nlp"
    nlp.to_disk(path)
    expected = annotate(spacy.load(path), texts)
    rng = numpy.random.default_rng(args.seed)
    rows = []
    start = time.perf_counter()
    loads = []
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        good = f.read_bytes()
        if not good:
            continue
        outcomes: Counter = Counter()
        for _ in range(args.flips):
            damaged = bytearray(good)
            damaged[int(rng.integers(len(good)))] ^= int(rng.integers(1, 256))
            f.write_bytes(bytes(damaged))
            t0 = time.perf_counter()
            try:
                got = annotate(spacy.load(path), texts)
                outcomes["same" if got == expected else "different"] += 1
            except Exception as e:   # noqa: BLE001 - counted, it is what we look for
                m = re.match(r"^\[(S\d+)\]", str(e))
                outcomes[m.group(1) if m else f"uncoded {type(e).__name__}"] += 1
            loads.append(time.perf_counter() - t0)
        f.write_bytes(good)
        rel = f.relative_to(path).as_posix()
        owner = "spacy-structperc" if f.name in OURS and f.parent != path else "spaCy"
        rows.append({"file": rel, "owner": owner, "bytes": len(good), "flips": sum(outcomes.values()),
                     "outcomes": dict(outcomes), "different": outcomes["different"],
                     "coded": sum(v for k, v in outcomes.items() if k.startswith("S"))})
        print(rows[-1], flush=True)
    ours = [r for r in rows if r["owner"] == "spacy-structperc"]
    out = {"what": "single random byte flips of every file of a saved pipeline (all five components, "
                   "a parser with a reranker, primal and dual clause models), loaded with spacy.load "
                   "and run on 8 texts",
           "command": "python " + " ".join(["benchmarks/bench_pipeline_damage.py"] + sys.argv[1:]),
           "rows": rows,
           "ours_flips": sum(r["flips"] for r in ours),
           "ours_different": sum(r["different"] for r in ours),
           "ours_different_without_reranker": sum(r["different"] for r in ours
                                                  if not r["file"].endswith("/reranker")),
           "median_load_seconds": round(float(numpy.median(loads)), 3),
           "seconds": round(time.perf_counter() - start, 1), "load_average": load_average(),
           "machine": machine_info(), "git_revision": git_revision()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print("our files: different", out["ours_different"], "of", out["ours_flips"],
          "(without the reranker:", out["ours_different_without_reranker"], ")")


if __name__ == "__main__":
    main()
