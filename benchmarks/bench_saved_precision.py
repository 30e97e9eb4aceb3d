"""The model in memory (what `spacy train` evaluates) against the same model saved and reloaded.

A component saves its averaged weights in the model's `precision` (float16 by default) and leaves
out rows within `prune_below` of zero; in memory it predicts with float32 and every row. This
trains a tagger and parsers on the first N sentences of UD English EWT train (gold tags, 2
epochs), predicts M dev sentences in memory, after to_disk + spacy.load, and after a second load,
and counts the sentences whose prediction differs.

    python benchmarks/bench_saved_precision.py [--train 1000] [--dev 500]
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import default_data_dir, find_split_file, git_revision, load_average, machine_info  # noqa: E402

SETTINGS = [
    ("structperc_tagger", "float16", 0.0),
    ("structperc_parser", "float16", 0.0),
    ("structperc_parser", "float32", 0.0),
    ("structperc_parser", "float16", 1.0),
]


def read(path: Path, limit: int):
    from spacy.training.converters import conllu_to_docs

    blocks = path.read_text(encoding="utf8").split("\n\n")[:limit]
    return list(conllu_to_docs("\n\n".join(blocks) + "\n\n", n_sents=1, no_print=True))


def run(component: str, precision: str, prune_below: float, train, dev, epochs: int):
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example

    nlp = spacy.blank("en")
    config = {"model": {"precision": precision, "prune_below": prune_below}}
    pipe = nlp.add_pipe(component, config=config)
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]),
                        Doc(nlp.vocab).from_bytes(d.to_bytes())) for d in train]
    nlp.initialize(lambda: examples)
    for _ in range(epochs):
        pipe.update(examples)

    def predictions(p, vocab):
        return [repr(p.predict([Doc(vocab, words=[t.text for t in d], tags=[t.tag_ for t in d])])) for d in dev]

    in_memory = predictions(pipe, nlp.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        nlp.to_disk(tmp)
        first, second = spacy.load(tmp), spacy.load(tmp)
    saved = predictions(first.get_pipe(component), first.vocab)
    again = predictions(second.get_pipe(component), second.vocab)
    return {"component": component, "precision": precision, "prune_below": prune_below,
            "sentences": len(dev),
            "differ_in_memory_vs_saved": sum(a != b for a, b in zip(in_memory, saved)),
            "differ_between_two_loads": sum(a != b for a, b in zip(saved, again))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--dev", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "saved_precision.json")
    args = parser.parse_args()
    data = default_data_dir("ud_en_ewt")
    train = read(find_split_file(data, "train"), args.train)
    dev = read(find_split_file(data, "dev"), args.dev)
    rows = []
    for component, precision, prune_below in SETTINGS:
        rows.append(run(component, precision, prune_below, train, dev, args.epochs))
        print(json.dumps(rows[-1]), flush=True)
    out = {"command": "python benchmarks/bench_saved_precision.py "
                      f"--train {args.train} --dev {args.dev} --epochs {args.epochs}",
           "git_revision": git_revision(), "load_average": load_average(), "machine": machine_info(),
           "rows": rows}
    args.output.write_text(json.dumps(out, indent=2) + "\n", encoding="utf8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
