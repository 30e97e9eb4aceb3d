"""The dual-form kernel perceptron (degree 2) against the primal averaged perceptron: training time.

Data: a synthetic sparse binary problem of the clause identifier's size and shape (carreras2003
§3's filters see one item per word, ~150k per epoch, each a few dozen binary indicator
features). Every item has one value for each of ``n_features`` templates; template vocabularies
range from a handful of values (POS-like: their keys are in most items, so their postings are
long) to tens of thousands (word-like), values drawn Zipf-distributed. The label is a
thresholded teacher with a linear part and pairwise conjunctions of template values (what a
degree-2 kernel can represent and a linear model cannot), ~20% positive, with a little label
noise so the support keeps growing, as it does on real data.

Systems, all trained online on the same stream with the binary perceptron update (score with the
current perceptron, update on a mistake, tick every item) and evaluated on held-out items with the
averaged prediction (the voted one too, on a part, for the dual):

- ``primal``: ``AveragedWeights`` (one class column), the linear perceptron the components use;
- ``dual poly2``: ``DualPerceptron(PolynomialKernel(2))``, the inverted index;
- ``dual poly2, cache``: the same with the per-item-id row cache;
- ``dual poly2, budget``: the same with a support budget (oldest items forgotten).

Rows ``{system, setting, dataset: "synthetic sparse binary", split, metric, value}`` go to
``benchmarks/results/kernel.json``: ``train_seconds_epoch_<k>``, ``mistakes_epoch_<k>``,
``support``, ``accuracy`` (held-out, averaged), ``voted_accuracy``, ``us_per_query_epoch_<k>``.

    python benchmarks/bench_kernel.py                 # 150k items x 40 features, 3 epochs
    python benchmarks/bench_kernel.py --quick         # 20k items, 2 epochs, to the work dir
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "kernel"
DATASET = "synthetic sparse binary"


def _mix64(h):
    """MurmurHash3's finalizer, as the feature templates hash their keys (AveragedWeights expects
    well-mixed keys: its buckets are the low bits)."""
    h = h.astype(numpy.uint64, copy=True)
    with numpy.errstate(over="ignore"):
        h ^= h >> numpy.uint64(33)
        h *= numpy.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> numpy.uint64(33)
        h *= numpy.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> numpy.uint64(33)
    h[h == 0] = 1
    return h


def make_problem(n_items: int, n_features: int, n_pairs: int, noise: float, seed: int, n_informative: int = 10):
    """Items (n_items x n_features uint64 keys) and labels (+1/-1) of the synthetic problem."""
    rng = numpy.random.default_rng(seed)
    vocab = numpy.exp(rng.uniform(numpy.log(5), numpy.log(30000), size=n_features)).astype(numpy.int64)
    values = numpy.empty((n_items, n_features), dtype=numpy.int64)
    for t in range(n_features):
        ranks = numpy.arange(1, vocab[t] + 1, dtype=numpy.float64)
        p = ranks ** -1.1
        values[:, t] = rng.choice(vocab[t], size=n_items, p=p / p.sum())
    keys = _mix64(((numpy.arange(n_features, dtype=numpy.uint64)[None, :] << numpy.uint64(32))
                   | values.astype(numpy.uint64)) + numpy.uint64(1))
    # The teacher: a linear part plus conjunctions of n_pairs template pairs, over n_informative
    # templates of at most 100 values; the others are distractors.
    small = numpy.flatnonzero(vocab <= 100)   # informative templates are POS/chunk-like
    informative = rng.choice(small, size=min(n_informative, len(small)), replace=False)
    f = numpy.zeros(n_items)
    for t in informative:
        f += rng.normal(size=vocab[t])[values[:, t]]
    pairs = [tuple(rng.choice(informative, size=2, replace=False)) for _ in range(n_pairs)]
    for t1, t2 in pairs:
        h = (values[:, t1] * 1000003 + values[:, t2] * 7919 + t1 * 31 + t2) * 2654435761 % (1 << 32)
        f += 2.0 * (h / float(1 << 32) * 2.0 - 1.0)
    y = numpy.where(f > numpy.quantile(f, 0.8), 1.0, -1.0)
    flip = rng.random(n_items) < noise
    y[flip] = -y[flip]
    return keys, y


def train_primal(train, y, epochs: int) -> Dict[str, Any]:
    from spacy_structperc._core.weights import AveragedWeights
    w = AveragedWeights(1, 1 << 20)
    out: Dict[str, Any] = {"epochs": []}
    for epoch in range(epochs):
        mistakes = 0
        start = time.perf_counter()
        for j in range(len(train)):
            x = train[j]
            if y[j] * float(w.score(x)[0]) <= 0:
                mistakes += 1
                for key in x.tolist():
                    w.add(key, 0, float(y[j]))
            w.next_example()
        out["epochs"].append({"seconds": time.perf_counter() - start, "mistakes": mistakes})
    w.set_use_averages(True)
    out["model"] = w
    return out


def train_dual(train, y, epochs: int, **kwargs) -> Dict[str, Any]:
    from spacy_structperc._core.kernel import DualPerceptron, PolynomialKernel
    p = DualPerceptron(PolynomialKernel(2, 1.0, 1.0), **kwargs)
    use_ids = p.cache_limit > 0
    out: Dict[str, Any] = {"epochs": []}
    for epoch in range(epochs):
        mistakes = 0
        start = time.perf_counter()
        for j in range(len(train)):
            x = train[j]
            item_id = j if use_ids else -1
            if y[j] * p.score(x, item_id, "last") <= 0:
                mistakes += 1
                p.update(x, float(y[j]), j)
            p.tick()
        seconds = time.perf_counter() - start
        out["epochs"].append({"seconds": seconds, "mistakes": mistakes, "support": p.n_support,
                              "postings": p.kernel.n_postings, "peak_rss_mb": C.peak_rss_mb(False),
                              "expansion_features": p.expansion.n_features if p.expanded else 0,
                              "expansion_mb": p.expansion.n_bytes / 2**20 if p.expanded else 0,
                              "cache_mb": p.cache_bytes / 2**20, "cache_hits": p.cache_hits})
        print(f"    epoch {epoch + 1}: {seconds:.1f}s, {mistakes} mistakes, support {p.n_support}", flush=True)
    out["model"] = p
    return out


def evaluate(model, test, y_test, voted_n: int) -> Dict[str, float]:
    from spacy_structperc._core.kernel import DualPerceptron
    if isinstance(model, DualPerceptron):
        start = time.perf_counter()
        scores = model.score_batch(list(test), mode="averaged")
        seconds = time.perf_counter() - start
        result = {"accuracy": float(numpy.mean(numpy.sign(scores) == y_test)),
                  "us_per_query_averaged": 1e6 * seconds / len(test)}
        if voted_n:
            start = time.perf_counter()
            voted = model.score_batch(list(test[:voted_n]), mode="voted")
            result["us_per_query_voted"] = 1e6 * (time.perf_counter() - start) / voted_n
            result["voted_accuracy"] = float(numpy.mean(numpy.sign(voted) == y_test[:voted_n]))
        return result
    scores = numpy.array([float(model.score(x)[0]) for x in test])
    return {"accuracy": float(numpy.mean(numpy.sign(scores) == y_test))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-train", type=int, default=150_000)
    ap.add_argument("--n-test", type=int, default=20_000)
    ap.add_argument("--n-features", type=int, default=40)
    ap.add_argument("--n-pairs", type=int, default=6)
    ap.add_argument("--n-informative", type=int, default=8)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--budget", type=int, default=20000)
    ap.add_argument("--cache-mb", type=float, default=2048.0)
    ap.add_argument("--voted-n", type=int, default=2000, help="held-out items scored with the voted prediction")
    ap.add_argument("--systems", default="primal,dual,dual-rows,dual-cache,dual-budget")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a small run, written to the work dir")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.n_train, args.n_test, args.epochs, args.voted_n = 20_000, 5_000, 2, 500
    out_path = args.out or (C.DEFAULT_WORK_DIR / "kernel.json" if args.quick else C.RESULTS_DIR / "kernel.json")

    keys, labels = make_problem(args.n_train + args.n_test, args.n_features, args.n_pairs, args.noise, args.seed,
                                 args.n_informative)
    train, y = keys[: args.n_train], labels[: args.n_train]
    test, y_test = keys[args.n_train:], labels[args.n_train:]
    print(f"{args.n_train} training items x {args.n_features} features, {y.mean() * 50 + 50:.1f}% positive; "
          f"load {C.load_average()}", flush=True)

    systems = {
        "primal": ("primal averaged perceptron", "AveragedWeights, linear", lambda: train_primal(train, y, args.epochs)),
        "dual": ("dual perceptron", "poly2, primal expansion (default)", lambda: train_dual(train, y, args.epochs)),
        "dual-rows": ("dual perceptron", "poly2, inverted index (expand=False)",
                      lambda: train_dual(train, y, args.epochs, expand=False)),
        "dual-cache": ("dual perceptron", f"poly2, inverted index + row cache {args.cache_mb:g} MB",
                       lambda: train_dual(train, y, args.epochs, cache_mb=args.cache_mb, expand=False)),
        "dual-budget": ("dual perceptron", f"poly2, primal expansion, budget {args.budget} (oldest)",
                        lambda: train_dual(train, y, args.epochs, budget=args.budget)),
    }
    rows: List[Dict[str, Any]] = []
    details: Dict[str, Any] = {}
    loads = {}
    for name in args.systems.split(","):
        system, setting, run = systems[name]
        print(f"  {system} ({setting})", flush=True)
        loads[setting] = C.load_average()
        result = run()
        model = result.pop("model")
        metrics = evaluate(model, test, y_test, args.voted_n if system != "primal averaged perceptron" else 0)
        result.update(metrics, load_before=loads[setting], load_after=C.load_average())
        details[setting] = result
        for k, ep in enumerate(result["epochs"], 1):
            rows.append(C.make_row(system, setting, f"train_seconds_epoch_{k}", ep["seconds"], dataset=DATASET, split="train"))
            rows.append(C.make_row(system, setting, f"mistakes_epoch_{k}", ep["mistakes"], dataset=DATASET, split="train"))
            rows.append(C.make_row(system, setting, f"us_per_query_epoch_{k}", 1e6 * ep["seconds"] / args.n_train,
                                   dataset=DATASET, split="train"))
        rows.append(C.make_row(system, setting, "train_seconds", sum(e["seconds"] for e in result["epochs"]),
                               dataset=DATASET, split="train"))
        if "support" in result["epochs"][-1]:
            rows.append(C.make_row(system, setting, "support", result["epochs"][-1]["support"], dataset=DATASET, split="train"))
        for metric in ("accuracy", "voted_accuracy", "us_per_query_averaged", "us_per_query_voted"):
            if metric in metrics:
                rows.append(C.make_row(system, setting, metric, metrics[metric], dataset=DATASET, split="test"))
        print(f"    {metrics}", flush=True)
        del model
    C.save_results(out_path, COMPONENT, rows, details, replace=lambda r: r["dataset"] == DATASET, errors={},
                   command="python benchmarks/bench_kernel.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
                   data={k: v for k, v in vars(args).items() if k not in ("out",)} | {"out": str(out_path)},
                   load_average=C.load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
