"""Rewrite the benchmark tables in README.md and docs/*.md from ``benchmarks/results/*.json``.

For every results file ``benchmarks/results/<component>.json`` the block between

    <!-- bench:<component>:start -->
    <!-- bench:<component>:end -->

in whichever page holds it (README.md or a page of docs/) is replaced by a Markdown table: one
line per (system, setting), one column per metric, rows of one split (default ``test``).
``speed.json`` (bench_speed.py) gets tables of its own, ours beside spaCy per task with the
issue-14 targets (and our figures from ``speed_baseline.json`` when present), and its plot
``speed.png``. ``<!-- bench:summary:... -->`` (the README's component table) is built from
several files (SUMMARY). A results file whose markers are in no page is printed instead.

    python benchmarks/make_readme_tables.py            # rewrite the pages, print what changed
    python benchmarks/make_readme_tables.py --check    # exit 1 if a page is out of date
    python benchmarks/make_readme_tables.py --print    # print the tables, touch nothing
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
from _speed_tables import build_speed_table, make_speed_plot  # noqa: E402
from _tables import build_summary_table, build_table, build_tune_table  # noqa: E402

# The README's component table (build_summary_table): one row per component, each cell from the
# results file that measured it; a source is (results file, system, setting, dataset), see
# _tables.Source; the first source that has every metric of a cell wins.
SPEED_OURS = "structperc"
SUMMARY: List[Dict[str, Any]] = [
    {"name": "`structperc_tagger`", "writes": "`token.tag_` (XPOS)",
     "paper": "Collins 2002; Tsuruoka et al. 2011", "corpus": "UD English EWT", "metrics": ["tag_acc"],
     "ours": [("speed", SPEED_OURS, "tagger (ours)", None), ("tagger", "structperc_tagger", "default", None)],
     "spacy": [("tagger", "spacy", None, None)],
     "published": "97.28 (WSJ; Tsuruoka et al. 2011, Table 1)",
     "wps": [("speed", SPEED_OURS, "tagger (ours)", None), ("speed", "spacy", "tagger (*", None)]},
    {"name": "`structperc_tagger`", "writes": "`token.pos_` (universal POS)",
     "paper": "", "corpus": "UD English EWT", "metrics": ["pos_acc"],
     "ours": [("speed", SPEED_OURS, "tagger (ours)", None), ("tagger", "structperc_tagger", "default", None)],
     "spacy": [("tagger", "spacy", None, None)], "published": "", "wps": []},
    {"name": "`structperc_parser`", "writes": "`token.head`, `token.dep_`, sentences",
     "paper": "Nivre 2004; Huang et al. 2012; Collins 2001 (reranking)", "corpus": "UD English EWT",
     "metrics": ["dep_uas", "dep_las"],
     "ours": [("speed", SPEED_OURS, "tagger+parser (ours)", None)],
     "spacy": [("parser", "spacy", None, None)],
     "published": "92.18 UAS (WSJ, unlabelled; Huang et al. 2012)",
     "wps": [("speed", SPEED_OURS, "tagger+parser (ours)", None), ("speed", "spacy", "tagger+parser (*", None)]},
    {"name": "`structperc_chunker`", "writes": "`doc.spans[\"chunks\"]`",
     "paper": "Tsuruoka et al. 2011 (Sha & Pereira 2003 features)", "corpus": "CoNLL-2000",
     "metrics": ["spans_chunks_f"],
     "ours": [("chunker", "structperc_chunker", "default", None)],
     "spacy": [("chunker", "spacy_ner", None, None)],
     "published": "93.81 (CoNLL-2000; Tsuruoka et al. 2011, Table 2)",
     "wps": [("speed", SPEED_OURS, "chunker (with tagger) (ours)", None),
             ("speed", "spacy", "chunker (with tagger) (*", None)]},
    {"name": "`structperc_clauses`", "writes": "`doc.spans[\"clauses\"]`",
     "paper": "Carreras & Màrquez 2003", "corpus": "ptb_clauses", "metrics": ["clauses_f"],
     "ours": [("clauses", "structperc_clauses", "default", "ptb_clauses")],
     "spacy": [("clauses", "spacy_spancat", None, "ptb_clauses")],
     "published": "85.03 (CoNLL-2001; Carreras & Màrquez 2003, Table 1)",
     "wps": [("clauses", "structperc_clauses", "default", "ptb_clauses"),
             ("clauses", "spacy_spancat", None, "ptb_clauses")]},
    {"name": "`structperc_ner`", "writes": "`doc.ents`",
     "paper": "Sun et al. 2009", "corpus": "CoNLL-2003", "metrics": ["ents_f"],
     # configs/ner.cfg as committed (bench_ner.py --only structperc_ner:config) once ner.json has it
     "ours": [("ner", "structperc_ner", "configs/ner.cfg*", "conll2003"),
              ("speed", SPEED_OURS, "ner (with tagger) (ours)", None)],
     "spacy": [("ner", "spacy_ner", None, "conll2003")],
     "published": "72.28 (JNLPBA; Tsuruoka et al. 2011, Table 3; ours {jnlpba})",
     "published_ours": {"jnlpba": [("ner", "structperc_ner", "configs/ner_jnlpba.cfg*", "jnlpba", "ents_f"),
                                   ("ner", "structperc_ner", "default", "jnlpba", "ents_f")]},
     "wps": [("speed", SPEED_OURS, "ner (with tagger) (ours)", None),
             ("speed", "spacy", "ner (with tagger) (*", None)]},
]


def replace_block(readme: str, component: str, table: str) -> Optional[str]:
    """A page's text with the component's block replaced, or None if the markers are missing."""
    start = f"<!-- bench:{component}:start -->"
    end = f"<!-- bench:{component}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        return None
    return pattern.sub(lambda _: f"{start}\n{table}\n{end}", readme, count=1)


def default_pages() -> List[Path]:
    """README.md and every page of docs/: where the markers may be."""
    return [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").glob("*.md"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results",
                   help="folder of <component>.json files")
    p.add_argument("--page", "--readme", dest="pages", type=Path, action="append", default=None,
                   help="a page to rewrite (repeatable; default README.md and docs/*.md)")
    p.add_argument("--split", default="test")
    p.add_argument("--component", action="append", default=None,
                   help="only these components (repeatable)")
    p.add_argument("--check", action="store_true", help="exit 1 if a page would change")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the tables, leave the pages alone")
    args = p.parse_args(argv)

    files = sorted(args.results.glob("*.json"))
    if not files:
        print(f"no results in {args.results}", file=sys.stderr)
        return 1
    pages = {path: path.read_text(encoding="utf8") for path in (args.pages or default_pages())
             if path.exists()}
    new_pages = dict(pages)
    results: Dict[str, Any] = {}
    tables: List[Tuple[str, Optional[str], str]] = []  # (component, table, file name)
    for path in files:
        data = json.loads(path.read_text(encoding="utf8"))
        component = (data.get("component") if isinstance(data, dict) else None) or path.stem
        results[path.stem] = data
        if args.component and component not in args.component:
            continue
        if component == "speed_baseline":  # shown inside the speed table
            continue
        if component == "speed":
            base_path = path.with_name("speed_baseline.json")
            baseline = json.loads(base_path.read_text(encoding="utf8")) if base_path.exists() else None
            table = build_speed_table(data, baseline, args.split)
            if table is not None and not (args.print_only or args.check):
                print(f"wrote {make_speed_plot(data, path.with_suffix('.png'), args.split)}")
        elif component.endswith("_tune"):
            table = build_tune_table(data)
        else:
            table = build_table(data, args.split)
        tables.append((component, table, path.name))
    if not args.component or "summary" in args.component:
        tables.append(("summary", build_summary_table(results, SUMMARY, args.split), "several files"))

    for component, table, name in tables:
        if table is None:
            print(f"{name}: no {args.split} rows")
            continue
        where = [page for page, text in new_pages.items() if f"<!-- bench:{component}:start -->" in text]
        if args.print_only or not where:
            if not args.print_only:
                print(f"{component}: no <!-- bench:{component}:start/end --> markers in "
                      f"{', '.join(pg.name for pg in pages) or 'any page'}; table not written:")
            print(f"\n### {component}\n\n{table}\n")
            continue
        for page in where:
            replaced = replace_block(new_pages[page], component, table)
            state = "up to date" if replaced == new_pages[page] else "updated"
            print(f"{component}: table {state} in {page.relative_to(REPO_ROOT) if page.is_relative_to(REPO_ROOT) else page}")
            new_pages[page] = replaced
    changed = [page for page in pages if new_pages[page] != pages[page]]
    if args.print_only or not changed:
        return 0
    if args.check:
        for page in changed:
            print(f"{page} is out of date: run python benchmarks/make_readme_tables.py")
        return 1
    for page in changed:
        page.write_text(new_pages[page], encoding="utf8")
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
