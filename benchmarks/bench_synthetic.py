"""Latent perceptron vs plain perceptron on sun2009's synthetic latent data (the shape of Fig. 3).

Data: ``spacy_structperc.synthetic`` (an HMM over h1, h2 -> y1 and h3, h4 -> y2 along the cycle
h1 -> h2 -> h3 -> h4 -> h1 taken with probability P, near-random observations x1/x2; see its
docstring). For each P in 0.5 ... 0.9 and each seed: 3,000 training and 1,000 test sequences of 10
tokens (the paper: 3,000 training instances), train the latent perceptron with n_latent 1 (the plain
structured perceptron), 2 and 4 sub-states per label, and measure test label accuracy (the
projection of the best latent path to labels). The Bayes-optimal accuracy under the true HMM
(forward-backward marginals, ``synthetic.posterior_labels``) is the ceiling.

The models are the ones ``structperc_ner`` trains, built directly on the shared core (the
synthetic labels y1/y2 are per-token classes, not entity spans): node features {x_i} x {h_i},
edge features {h_{i-1} h_i} (the paper's templates, first order), weights starting at small seeded
noise, the update of sun2009 Eq. 8 (``viterbi.train_latent``), modified parameter averaging
(weights reset to the averages at the start of every ``reset_every``-th pass), and decoding with the
averaged weights.

Rows ``{"system": "structperc_ner", "setting": "n_latent L", "dataset": "synthetic P=0.9",
"split": "test", "metric": "label_acc"}`` (mean over seeds; per-seed values under
``synthetic`` in the file) and a ``bayes_optimal`` row per P are merged into
``benchmarks/results/ner.json`` (only the synthetic rows are replaced). The drawing of
``ner_synthetic.png`` is retired, being finished (the figure stays; docs/benchmarks.md).

    python benchmarks/bench_synthetic.py            # everything (a couple of minutes)
    python benchmarks/bench_synthetic.py --quick    # smoke run, results to the work dir
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

COMPONENT = "ner"
OURS = "structperc_ner"
BAYES = "bayes_optimal"
DATASET_PREFIX = "synthetic P="

P_VALUES = (0.5, 0.6, 0.7, 0.8, 0.9)
N_LATENT = (1, 2, 4)
SETTINGS = {1: "n_latent 1 (plain perceptron)", 2: "n_latent 2", 4: "n_latent 4"}
BAYES_SETTING = "true HMM, forward-backward"
DEFAULTS = {"n_train": 3000, "n_test": 1000, "length": 10, "emission_bias": 0.05, "start": "h1",
            "epochs": 30, "reset_every": 4, "init_scale": 0.01, "seeds": 3}
QUICK = {"n_train": 500, "n_test": 200, "epochs": 5, "seeds": 1}

NOTES = [
    "Synthetic latent data after sun2009 §4 (spacy_structperc.synthetic): cycle h1->h2->h3->h4->h1 "
    "taken with probability P, the rest (1-P) spread over the other three states; P(x1|h) = "
    "0.5 +/- emission_bias; every sequence starts in h1 (the paper does not say; see the module "
    "docstring for why a uniform start leaves even the Bayes-optimal decoder near chance).",
    "label_acc: token label accuracy on the test sequences, mean over seeds (each seed draws new "
    "training and test data and new initial weight noise); bayes_optimal: the accuracy of the "
    "forward-backward marginal decoder under the true HMM on the same test data, a ceiling.",
    "Features as in the paper: node {x_i} x {h_i}, edge {h_{i-1} h_i}, first order; n_latent 1 is "
    "the plain structured perceptron over the same features (its label edges cannot see the "
    "cycle's phase). The absolute figures are not the paper's (its emission probabilities and "
    "start distribution are not given); the comparison is the shape: the gap grows with P.",
]


def _features(x):
    import numpy

    return (numpy.asarray(x) + 1).astype(numpy.uint64)[:, None]  # atom 0 means absent


def run_one(P: float, n_latent: int, seed: int, cfg: Dict[str, Any]) -> Dict[str, float]:
    """Train one model on one draw of the data; returns test label accuracy and the Bayes ceiling."""
    import numpy

    from spacy_structperc import synthetic
    from spacy_structperc._core import viterbi
    from spacy_structperc._core.tagging import TagSystem
    from spacy_structperc._core.templates import TemplateSet
    from spacy_structperc._core.weights import AveragedWeights

    kw = {"emission_bias": cfg["emission_bias"], "start": cfg["start"]}
    train = synthetic.generate(cfg["n_train"], cfg["length"], P, seed=2 * seed, **kw)
    test = synthetic.generate(cfg["n_test"], cfg["length"], P, seed=2 * seed + 1, **kw)
    specs = [{"name": "x0", "parts": [[0, "orth"]]}, {"name": "h-1", "parts": [["hist", 1]]}]
    weights = AveragedWeights(len(synthetic.LABELS) * n_latent, 1 << 10)
    weights.set_noise(cfg["init_scale"], seed)
    system = TagSystem(TemplateSet(specs, ["orth"]), weights)
    k = cfg["reset_every"]
    t0 = time.perf_counter()
    for epoch in range(cfg["epochs"]):
        q = epoch + 1
        if k and q > 1 and q % k == 0:
            weights.reset_to_average()
        weights.set_use_averages(False)
        for x, y, _ in train:
            system.set_sentence(_features(x))
            viterbi.train_latent(system, y, n_latent, 1)
            weights.next_example()
    train_seconds = time.perf_counter() - t0
    weights.set_use_averages(True)
    correct = total = bayes = 0
    for x, y, _ in test:
        system.set_sentence(_features(x))
        latent, _ = viterbi.viterbi(system, 1)
        correct += int((numpy.asarray(latent) // n_latent == y).sum())
        bayes += int((synthetic.posterior_labels(x, P, **kw) == y).sum())
        total += len(y)
    return {"label_acc": correct / total, "bayes_acc": bayes / total, "train_seconds": train_seconds}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work-dir", type=Path, default=C.DEFAULT_WORK_DIR)
    p.add_argument("--results-dir", type=Path, default=None,
                   help="default benchmarks/results; with --quick: WORK_DIR/quick-results")
    p.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK}")
    p.add_argument("--seeds", type=int, default=None, help=f"default {DEFAULTS['seeds']}")
    p.add_argument("--epochs", type=int, default=None, help=f"default {DEFAULTS['epochs']}")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    work_dir = args.work_dir.resolve()
    results_dir = (args.results_dir or (work_dir / "quick-results" if args.quick else C.RESULTS_DIR)).resolve()
    results_path = results_dir / f"{COMPONENT}.json"
    cfg = dict(DEFAULTS, **(QUICK if args.quick else {}))
    if args.seeds:
        cfg["seeds"] = args.seeds
    if args.epochs:
        cfg["epochs"] = args.epochs
    command = "python benchmarks/bench_synthetic.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    t_start = time.time()
    load_before = C.load_average()
    rows, per_seed = [], {}
    for P in P_VALUES:
        dataset = f"{DATASET_PREFIX}{P}"
        bayes = []
        for L in N_LATENT:
            accs, secs = [], []
            for seed in range(cfg["seeds"]):
                res = run_one(P, L, seed, cfg)
                accs.append(res["label_acc"])
                secs.append(res["train_seconds"])
                if L == N_LATENT[0]:
                    bayes.append(res["bayes_acc"])
            mean = statistics.fmean(accs)
            rows.append(C.make_row(OURS, SETTINGS[L], "label_acc", mean, dataset=dataset))
            per_seed[f"{dataset} | {SETTINGS[L]}"] = {
                "label_acc": [round(a, 6) for a in accs], "train_seconds": [round(s, 2) for s in secs]}
            print(f"P={P} n_latent={L}: label acc {100 * mean:.2f} "
                  f"(seeds {' '.join(f'{100 * a:.2f}' for a in accs)}; {sum(secs):.0f}s)", flush=True)
        rows.append(C.make_row(BAYES, BAYES_SETTING, "label_acc", statistics.fmean(bayes), dataset=dataset))
        per_seed[f"{dataset} | {BAYES}"] = {"label_acc": [round(a, 6) for a in bayes]}
        print(f"P={P} Bayes optimum: {100 * statistics.fmean(bayes):.2f}", flush=True)

    with C.locked(results_path):
        old = C.load_results(results_path)
        merged = C.merge_rows(old.get("rows", []), rows,
                              lambda r: r["dataset"].startswith(DATASET_PREFIX))
        extra = {k: v for k, v in old.items() if k not in ("component", "rows")}
        extra.setdefault("machine", C.machine_info())
        extra["synthetic"] = {"config": cfg, "p_values": list(P_VALUES), "n_latent": list(N_LATENT),
                              "quick": bool(args.quick), "command": command, "date": C.now_iso(),
                              "git": C.git_revision(), "seconds": round(time.time() - t_start, 1),
                              "load_avg_before": load_before, "load_avg_after": C.load_average(),
                              "notes": NOTES, "per_seed": per_seed}
        C.write_results(results_path, COMPONENT, merged, **extra)
    print(f"wrote {results_path} ({len(rows)} synthetic rows, {len(merged)} in all)")
    print(f"done in {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
