"""Clauses for any UD treebank: a rule that derives CoNLL-2001-style clause spans from a UD tree,
and a CoNLL-U reader that applies it.

The rule (`ud_clauses`), following the CoNLL-2001 definition (a clause is an S, SBAR, SBARQ,
SINV or SQ constituent of the Penn Treebank) as closely as UD allows:

1. Clause heads. The root, if it is a predicate; a dependent attached as csubj, ccomp, advcl,
   acl:relcl or parataxis (any subtype: csubj:pass, advcl:relcl...); as xcomp if it is verbal
   (UPOS VERB or AUX, or has a mark: "want [to go]", not "seems [happy]"); as acl if it has a
   subject or a mark ("the decision [to go]", not the reduced relative "the man [sitting
   there]", a VP in the PTB); as conj of a clause head if it has its own subject ("[he came] and
   [she saw]"; conjoined verbs sharing a subject are one clause, VP coordination in the PTB). A
   predicate is a VERB or AUX, or any word with a subject, copula or auxiliary dependent.
2. Spans. A clause is the projection of its head (first to last token of its subtree); the
   root's clause is the whole sentence. Other clauses lose their leading and trailing
   punctuation and coordinators ("[, which ...]" -> "which ..."; "and [she saw]").
3. Coordinated clauses. A head with conjoined clauses (step 1) spans the whole coordination, and
   its own clause - the projection without the conjuncts, cc and punctuation between them - is
   a clause too ("[[he came] and [she saw]]").
4. SBAR over S. A clause with a subject that starts with a mark ("because", "that", "if") or a
   wh-phrase (a leading dependent whose subtree holds WDT/WP/WP$/WRB or PronType=Rel/Int) is
   also a clause without it: "[because [he left]]", "[who [left]]", as the PTB's SBAR over S.
5. Clauses that cross each other (non-projective trees) are dropped, the later one first.

Where it differs from CoNLL-2001 on the PTB: gerunds and participles after prepositions ("after
[leaving]") are clauses in both, but a subjectless clause with a mark never gets the outer
SBAR span ("[to go]", "after [leaving]"), and "while leaving"-type SBARs lose it too; small
clauses ("consider [him happy]") and the PTB's S-over-VP coordination details are not recovered;
FRAG roots (no predicate) give no root clause; UD's flat and fixed expressions and the EWT's web
genres (lists, emails) have no PTB counterpart. Questions (SQ, SBARQ) and inversion (SINV) are
just clauses here, as they are in the CoNLL-2001 task (all labels S).
"""
from pathlib import Path
from typing import AbstractSet, Any, Callable, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry
from spacy.vocab import Vocab

from ..errors import Errors
from ..readers import text_lines
from .conll2001 import CLAUSE_LABEL, input_copy

READER = "spacy-structperc.ud_clauses_reader.v1"
ALWAYS = {"csubj", "ccomp", "advcl", "parataxis"}
SUBJECTS = {"nsubj", "csubj", "expl"}
PREDICATE_MARKERS = SUBJECTS | {"cop", "aux"}
WH_TAGS = {"WDT", "WP", "WP$", "WRB"}
EDGE_DROP = {"punct", "cc"}

Clause = Tuple[int, int]   # token indexes, end exclusive


def _base(dep: str) -> str:
    return dep.split(":")[0].lower()


class _Tree:
    """Heads and relations of one sentence, token indexes relative to it."""

    def __init__(self, heads: Sequence[int], deps: Sequence[str], upos: Sequence[str], xpos: Sequence[str],
                 feats: Sequence[str]):
        self.n = len(heads)
        self.heads = list(heads)      # -1 for the root
        self.deps = [d.lower() for d in deps]
        self.upos, self.xpos, self.feats = list(upos), list(xpos), list(feats)
        self.children: List[List[int]] = [[] for _ in range(self.n)]
        for i, h in enumerate(self.heads):
            if h >= 0:
                self.children[h].append(i)

    def kids(self, i: int, rels: Set[str]) -> List[int]:
        return [c for c in self.children[i] if _base(self.deps[c]) in rels or self.deps[c] in rels]

    def subtree(self, i: int, skip: AbstractSet[int] = frozenset()) -> List[int]:
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(c for c in self.children[j] if c not in skip)
        return sorted(out)

    def is_predicate(self, i: int) -> bool:
        return self.upos[i] in ("VERB", "AUX") or bool(self.kids(i, PREDICATE_MARKERS))

    def has_subject(self, i: int) -> bool:
        return bool(self.kids(i, SUBJECTS))

    def is_wh(self, i: int) -> bool:
        return self.xpos[i] in WH_TAGS or "PronType=Rel" in self.feats[i] or "PronType=Int" in self.feats[i]


def _trim(tree: _Tree, start: int, end: int) -> Tuple[int, int]:
    """Drop leading and trailing punctuation and coordinators (end exclusive)."""
    while start < end and _base(tree.deps[start]) in EDGE_DROP:
        start += 1
    while end > start and _base(tree.deps[end - 1]) in EDGE_DROP:
        end -= 1
    return start, end


def _is_clause_head(tree: _Tree, i: int, clause_heads: Set[int]) -> bool:
    dep, base = tree.deps[i], _base(tree.deps[i])
    if tree.heads[i] < 0:
        return tree.is_predicate(i)
    if base in ALWAYS or dep.startswith("acl:relcl"):
        return True
    if base == "xcomp":
        return tree.upos[i] in ("VERB", "AUX") or bool(tree.kids(i, {"mark"}))
    if base == "acl":
        return tree.has_subject(i) or bool(tree.kids(i, {"mark"}))
    if base == "conj":
        return tree.heads[i] in clause_heads and tree.has_subject(i)
    return False


def ud_clauses(heads: Sequence[int], deps: Sequence[str], upos: Sequence[str], xpos: Sequence[str],
               feats: Optional[Sequence[str]] = None) -> List[Clause]:
    """The clauses of one sentence (see the module docstring) as (start, end exclusive) pairs,
    sorted by start, longest first. heads: the head of each token (sentence-relative), -1 or the
    token itself for the root."""
    heads = [-1 if h == i or h is None or h < 0 else h for i, h in enumerate(heads)]
    tree = _Tree(heads, deps, upos, xpos, feats or [""] * len(heads))
    n = tree.n
    # Heads in top-down order, so a conj knows whether its head is a clause head.
    order, stack = [], [i for i in range(n) if heads[i] < 0]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(tree.children[i])
    clause_heads: Set[int] = set()
    for i in order:
        if _is_clause_head(tree, i, clause_heads):
            clause_heads.add(i)
    spans: Set[Clause] = set()
    for i in clause_heads:
        is_root = heads[i] < 0
        full = tree.subtree(i)
        start, end = (0, n) if is_root else _trim(tree, full[0], full[-1] + 1)
        if start < end:
            spans.add((start, end))
        conjuncts = [c for c in tree.kids(i, {"conj"}) if c in clause_heads]
        own_start, own_end = start, end
        if conjuncts:
            # The head's own clause: its projection without the conjoined clauses.
            skip = set(conjuncts)
            own = tree.subtree(i, skip)
            inside = [j for j in own if not (_base(tree.deps[j]) in EDGE_DROP and tree.heads[j] == i
                                             and j > min(conjuncts))]
            own_start, own_end = _trim(tree, inside[0], inside[-1] + 1)
            if own_start < own_end:
                spans.add((own_start, own_end))
        # SBAR over S: the clause without its leading mark or wh-phrase.
        if tree.has_subject(i) and own_start < own_end:
            first = own_start
            lead = None
            for c in tree.children[i]:
                if c < i and (c == first or tree.subtree(c)[0] == first):
                    lead = c
            if lead is not None and (_base(tree.deps[lead]) == "mark" or
                                     any(tree.is_wh(j) for j in tree.subtree(lead))):
                inner_start = tree.subtree(lead)[-1] + 1
                inner_start, inner_end = _trim(tree, inner_start, own_end)
                if inner_start < inner_end and (inner_start, inner_end) != (own_start, own_end):
                    spans.add((inner_start, inner_end))
    kept: List[Clause] = []
    for span in sorted(spans, key=lambda sp: (sp[0], -sp[1])):
        if not any(a < span[0] < b < span[1] or span[0] < a < span[1] < b for a, b in kept):
            kept.append(span)
    return kept


def doc_ud_clauses(doc: Doc) -> List[Clause]:
    """ud_clauses over every sentence of a parsed Doc (token.head, dep_, pos_, tag_, morph)."""
    out: List[Clause] = []
    sents = list(doc.sents) if doc.has_annotation("DEP") or doc.has_annotation("SENT_START") else [doc[:]]
    for sent in sents:
        start = sent.start
        heads = [t.head.i - start if t.head.i != t.i else -1 for t in sent]
        deps = ["root" if t.dep_.lower() == "root" else t.dep_ for t in sent]
        found = ud_clauses(heads, deps, [t.pos_ for t in sent], [t.tag_ for t in sent],
                           [str(t.morph) for t in sent])
        out.extend((start + s, start + e) for s, e in found)
    return out


# CoNLL-U -------------------------------------------------------------------------------------


def read_conllu_sentences(path: Union[str, Path]) -> Iterator[dict]:
    """Sentences of a CoNLL-U file: words, spaces, upos, xpos, feats, heads (-1 root), deps, line.
    Multiword-token lines and empty nodes are skipped. Malformed lines raise S205, sentences that
    are not trees S206 (naming file and line). A column that is `_` (UPOS, XPOS, FEATS, DEPREL)
    is missing: "" here, never a value named "_". The file is opened as every reader opens one
    (readers.text_lines: S034, S125 naming file, line and byte, a byte-order mark dropped), and
    a file without sentences (empty, or comments only) is S035."""
    path = Path(path)
    rows: List[Tuple[int, List[str]]] = []
    missing = lambda value: "" if value == "_" else value

    def sentence(last_line: int) -> dict:
        n = len(rows)
        heads = []
        for lineno, f in rows:
            h = int(f[6])
            if not 0 <= h <= n:
                raise ValueError(Errors.S206.format(path=path, line=last_line,
                                                    problem=f"line {lineno} has head {h} outside 0..{n}"))
            heads.append(h - 1)
        if sum(1 for h in heads if h < 0) != 1:
            raise ValueError(Errors.S206.format(path=path, line=last_line, problem="it does not have one root"))
        for i in range(n):
            seen, j = set(), i
            while j >= 0:
                if j in seen:
                    raise ValueError(Errors.S206.format(path=path, line=last_line,
                                                        problem=f"token {i + 1} is on a cycle"))
                seen.add(j)
                j = heads[j]
        return {"words": [f[1] for _, f in rows], "spaces": ["SpaceAfter=No" not in f[9] for _, f in rows],
                "upos": [missing(f[3]) for _, f in rows], "xpos": [missing(f[4]) for _, f in rows],
                "feats": [missing(f[5]) for _, f in rows], "heads": heads,
                "deps": [missing(f[7]) for _, f in rows], "line": rows[0][0]}

    n_sentences = 0
    with text_lines(path, READER) as fh:
        lineno = 0
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line.strip():
                if rows:
                    n_sentences += 1
                    yield sentence(lineno)
                    rows = []
                continue
            if line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 10:
                raise ValueError(Errors.S205.format(path=path, line=lineno, text=line))
            if "-" in fields[0] or "." in fields[0]:
                continue
            if not fields[0].isdigit() or not fields[6].isdigit() or int(fields[0]) != len(rows) + 1:
                raise ValueError(Errors.S205.format(path=path, line=lineno, text=line))
            rows.append((lineno, fields))
        if rows:
            n_sentences += 1
            yield sentence(lineno)
    if not n_sentences:
        raise ValueError(Errors.S035.format(path=path, reader=READER))


def conllu_clause_docs(vocab: Vocab, path: Union[str, Path], *, spans_key: str = "clauses",
                       limit: int = 0) -> List[Doc]:
    """Gold Docs from a CoNLL-U file: words, XPOS in token.tag_, UPOS in token.pos_, the tree,
    and the clauses of `ud_clauses` in doc.spans[spans_key]. A missing (`_`) XPOS or UPOS is a
    token without a tag or POS; a missing DEPREL a token without an arc (spaCy keeps no head
    without a label: Token.has_head() is false, which the parser reads as missing), though the
    clause rule still follows the file's head."""
    docs = []
    for s in read_conllu_sentences(path):
        upos = s["upos"]
        # None: a missing DEPREL (spaCy then also drops the head: an arc needs its label)
        deps: List[Any] = ["ROOT" if h < 0 else (d or None) for h, d in zip(s["heads"], s["deps"])]
        doc = Doc(vocab, words=s["words"], spaces=s["spaces"], tags=s["xpos"],
                  pos=upos if all(upos) else None,
                  heads=[h if h >= 0 else i for i, h in enumerate(s["heads"])], deps=deps)
        if not all(upos):
            for token, u in zip(doc, upos):
                if u:
                    token.pos_ = u
        clauses = ud_clauses(s["heads"], s["deps"], s["upos"], s["xpos"], s["feats"])
        doc.spans[spans_key] = [Span(doc, a, b, label=CLAUSE_LABEL) for a, b in clauses]
        docs.append(doc)
        if limit and len(docs) >= limit:
            break
    return docs


@registry.readers(READER)
def create_ud_clauses_reader(path: Optional[Path], spans_key: str = "clauses", pos: bool = True,
                             limit: int = 0) -> Callable[[Language], Iterable[Example]]:
    """Examples from a CoNLL-U treebank with clauses derived by the UD rule (ud_clauses), one
    per sentence. The reference Doc has the words, tags, tree and clauses; the predicted Doc the
    words, and the XPOS tags as token.tag_ when pos (set false with a tagger in the pipeline).

    path: a .conllu file. limit: read at most this many sentences (0 = all).
    """
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(Errors.S036.format(setting="limit", reader=READER, value=limit))

    def read(nlp: Language) -> Iterator[Example]:
        if path is None:
            raise ValueError(Errors.S202.format(reader=READER))
        for gold in conllu_clause_docs(nlp.vocab, path, spans_key=spans_key, limit=limit):
            yield Example(input_copy(nlp.vocab, gold, pos=pos), gold)

    return read
