"""Random single-byte damage to model files (issue 12): how many load silently?

Trains the four components on generated sentences (tests/reliability/threaded_nlp.py), then
for each component's model file flips one random byte (random position, random non-zero XOR)
--flips / 4 times and loads the result with PerceptronModel.parse_bytes (what from_bytes and
from_disk run before changing anything). Counts silent loads (no error), coded errors by code,
and uncoded errors. Target: 0 silent loads in 10,000 flips.

    python benchmarks/bench_model_damage.py [--flips 10000] [--seed 0]
"""
import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))
from _common import git_revision, load_average, machine_info  # noqa: E402

PIPES = ("structperc_tagger", "structperc_chunker", "structperc_ner", "structperc_parser")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flips", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "model_damage.json")
    args = ap.parse_args()
    from threaded_nlp import train_pipeline
    nlp = train_pipeline(n_train=40, epochs=2)
    rng = numpy.random.default_rng(args.seed)
    rows = []
    start = time.perf_counter()
    for name in PIPES:
        pipe = nlp.get_pipe(name)
        good = pipe.model.to_bytes()
        outcomes: Counter = Counter()
        for _ in range(args.flips // len(PIPES)):
            damaged = bytearray(good)
            damaged[int(rng.integers(len(good)))] ^= int(rng.integers(1, 256))
            try:
                pipe.model.parse_bytes(bytes(damaged), name)
                outcomes["silent load"] += 1
            except ValueError as e:
                m = re.match(r"^\[(S\d+)\]", str(e))
                outcomes[m.group(1) if m else f"uncoded ValueError"] += 1
            except Exception as e:   # noqa: BLE001 - counted, it is what we look for
                outcomes[f"uncoded {type(e).__name__}"] += 1
        rows.append({"component": name, "model_bytes": len(good), "flips": sum(outcomes.values()),
                     "outcomes": dict(outcomes), "silent_loads": outcomes["silent load"]})
        print(rows[-1], flush=True)
    out = {"what": "single random byte flips of each component's model file, loaded with parse_bytes",
           "command": "python " + " ".join(["benchmarks/bench_model_damage.py"] + sys.argv[1:]),
           "rows": rows, "total_flips": sum(r["flips"] for r in rows),
           "total_silent_loads": sum(r["silent_loads"] for r in rows),
           "seconds": round(time.perf_counter() - start, 1), "load_average": load_average(),
           "machine": machine_info(), "git_revision": git_revision()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print("silent loads:", out["total_silent_loads"], "of", out["total_flips"])


if __name__ == "__main__":
    main()
