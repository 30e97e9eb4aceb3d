"""The English pipeline as a user gets it: install the plugin's wheel and the pipeline's wheel into a
new virtual environment, load the pipeline there, run it on raw text and print what it wrote; then
print the scores `evaluate-pipeline` wrote for each corpus.

    python scripts/try_pipeline.py packages training/metrics --venv training/venv

With `--deps pypi` (the default) the new environment gets both wheels and, from PyPI, what they
depend on (spaCy, NumPy, ...), as on a fresh machine. `--deps here` installs only the two wheels and
lets the new environment see this one's packages instead (offline: the test suite's tiny run of the
workflow uses it).
"""
import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

TEXT = ("Apple is looking at buying a U.K. startup for $1 billion. The deal was announced in London "
        "on Monday, and the company said that it would close next year.")

# Run inside the new environment: nothing of this checkout is on its path.
SNIPPET = """
import json, resource, sys, time
t0 = time.perf_counter()
import spacy, spacy_structperc
nlp = spacy.load(sys.argv[1])
load = time.perf_counter() - t0
doc = nlp(sys.argv[2])
print(f"{nlp.meta['lang']}_{nlp.meta['name']} {nlp.meta['version']}: {', '.join(nlp.pipe_names)}")
print(f"spacy_structperc {spacy_structperc.__version__} from {spacy_structperc.__file__}")
print(f"loaded in {load:.2f} s (imports included); peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
print()
print(f"{'i':>3} {'text':<12} {'tag_':<5} {'pos_':<6} {'dep_':<10} {'head':>4}  ent")
for t in doc:
    ent = f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else t.ent_iob_
    print(f"{t.i:>3} {t.text:<12} {t.tag_:<5} {t.pos_:<6} {t.dep_:<10} {t.head.i:>4}  {ent}")
print()
print("sentences:", [s.text for s in doc.sents])
print("chunks:   ", [(c.text, c.label_) for c in doc.spans["chunks"]])
print("clauses:  ", [c.text for c in doc.spans["clauses"]])
print("entities: ", [(e.text, e.label_) for e in doc.ents])
"""

# (metrics file, [(column, key)]): the figures of `evaluate-pipeline`, one row per corpus.
SCORES = [
    ("pipeline_ewt.json", "UD English EWT test, gold tokens",
     [("TAG", "tag_acc"), ("POS", "pos_acc"), ("UAS", "dep_uas"), ("LAS", "dep_las")]),
    ("pipeline_ewt_raw.json", "UD English EWT test, raw text",
     [("SENT F", "sents_f"), ("UAS", "dep_uas"), ("LAS", "dep_las")]),
    ("pipeline_conll2000.json", "CoNLL-2000 test: chunks", [("F", "spans_chunks_f")]),
    ("pipeline_clauses.json", "ptb_clauses test: clauses", [("F", "spans_clauses_f")]),
    ("pipeline_conll2003.json", "CoNLL-2003 test: entities", [("F", "ents_f")]),
]


def wheels(packages: Path):
    plugin = sorted((packages / "dist").glob("spacy_structperc-*.whl"))
    pipeline = sorted(packages.glob("en_*/dist/*.whl"))
    if len(plugin) != 1 or len(pipeline) != 1:
        sys.exit(f"expected one plugin wheel in {packages}/dist and one pipeline wheel in "
                 f"{packages}/en_*/dist; found {[p.name for p in plugin + pipeline]}")
    return plugin[0], pipeline[0]


def make_venv(venv: Path, reuse_env: bool):
    """A new virtual environment at venv: its python and its site directory."""
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if reuse_env else []), str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    site_dir = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    if reuse_env:
        # This environment's site directories, after the new one's own (addsitedir, so that the
        # .pth files there count too).
        here = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
        (site_dir / "_outer_env.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in here))
    return python, site_dir


def install(python: Path, site_dir: Path, files, reuse_env: bool) -> None:
    if reuse_env:   # the wheels alone, with this environment's pip
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
               "--target", str(site_dir), *map(str, files)]
    else:
        cmd = [str(python), "-m", "pip", "install", "--quiet", *map(str, files)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def print_scores(metrics: Path) -> None:
    print("\nScores (`spacy project run evaluate-pipeline`, each corpus's test split):")
    for name, title, columns in SCORES:
        path = metrics / name
        if not path.exists():
            print(f"  {title}: no {path}")
            continue
        scores = json.loads(path.read_text())
        cells = [f"{col} {scores[key] * 100:.2f}" if isinstance(scores.get(key), (int, float)) else f"{col} -"
                 for col, key in columns]
        print(f"  {title:<36} " + "  ".join(cells))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("packages", type=Path, help="the folder `package-pipeline` wrote")
    p.add_argument("metrics", type=Path, help="the folder `evaluate-pipeline` wrote")
    p.add_argument("--venv", type=Path, default=Path("training/venv"))
    p.add_argument("--deps", choices=["pypi", "here"], default="pypi",
                   help="where the wheels' dependencies come from: PyPI, or this environment (offline)")
    p.add_argument("--text", default=TEXT)
    args = p.parse_args(argv)
    plugin, pipeline = wheels(args.packages)
    reuse_env = args.deps == "here"
    args.venv = args.venv.resolve()
    python, site_dir = make_venv(args.venv, reuse_env)
    install(python, site_dir, [plugin, pipeline], reuse_env)
    name = pipeline.name.split("-")[0]
    print(f"\nIn the new environment {args.venv}: spacy.load({name!r}) on {args.text!r}\n", flush=True)
    # From a folder outside the checkout, so that nothing here shadows the installed packages.
    subprocess.run([str(python), "-c", SNIPPET, name, args.text], check=True, cwd=args.venv)
    print_scores(args.metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
