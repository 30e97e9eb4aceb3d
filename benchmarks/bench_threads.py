"""Single-thread speed with per-thread decoding state, and what 4 threads sharing one nlp give
(issue 12). Trains the four components on generated sentences (tests/reliability/threaded_nlp.py),
then times nlp.pipe over --docs generated Docs: one thread (best of --repeats), and 4 threads
each annotating a quarter. Run it with PYTHONPATH pointing at another checkout to compare.

    python benchmarks/bench_threads.py [--docs 2000] [--repeats 5] [--out FILE]
"""
import argparse
import json
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))
from _common import git_revision, load_average, machine_info  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "threads.json")
    args = ap.parse_args()
    from spacy.tokens import Doc
    import spacy_structperc
    from threaded_nlp import random_texts, train_pipeline
    nlp = train_pipeline(n_train=60, epochs=3)
    texts = random_texts(args.docs, seed=3, max_sents=3)
    n_words = sum(len(t) for t in texts)

    def annotate(part):
        for _ in nlp.pipe((Doc(nlp.vocab, words=w) for w in part), batch_size=64):
            pass

    annotate(texts[:50])
    single = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        annotate(texts)
        single = min(single, time.perf_counter() - start)
    threaded = float("inf")
    for _ in range(args.repeats):
        parts = [texts[k::args.threads] for k in range(args.threads)]
        threads = [threading.Thread(target=annotate, args=(p,)) for p in parts]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        threaded = min(threaded, time.perf_counter() - start)
    out = {"what": "words per second of nlp.pipe (tagger + chunker + NER + parser, small models on "
                   "generated sentences): one thread, and threads sharing one nlp",
           "command": "python " + " ".join(["benchmarks/bench_threads.py"] + sys.argv[1:]),
           "package": str(Path(spacy_structperc.__file__).parent),
           "words": n_words, "single_thread_wps": round(n_words / single),
           f"{args.threads}_threads_wps": round(n_words / threaded),
           "load_average": load_average(), "machine": machine_info(), "git_revision": git_revision()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}))


if __name__ == "__main__":
    main()
