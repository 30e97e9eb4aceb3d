"""The UD clause rule on hand-derived EWT sentences, and the CoNLL-U clause reader."""
import pytest
import spacy

from spacy_structperc.clauses.ud import WH_TAGS, conllu_clause_docs, read_conllu_sentences, ud_clauses

# word/UPOS/XPOS/head (1-based, 0 root)/relation, from en_ewt-ud-dev.conllu (r2.16)
EWT = {
    # "President Bush on Tuesday nominated two individuals [to replace retiring jurists ...] ."
    "nominated": (
        'President/PROPN/NNP/2/nmod:desc Bush/PROPN/NNP/5/nsubj on/ADP/IN/4/case Tuesday/PROPN/NNP/5/obl '
        'nominated/VERB/VBD/0/root two/NUM/CD/7/nummod individuals/NOUN/NNS/5/obj to/PART/TO/9/mark '
        'replace/VERB/VB/5/advcl retiring/VERB/VBG/11/amod jurists/NOUN/NNS/9/obj on/ADP/IN/14/case '
        'federal/ADJ/JJ/14/amod courts/NOUN/NNS/11/nmod in/ADP/IN/18/case the/DET/DT/18/det '
        'Washington/PROPN/NNP/18/compound area/NOUN/NN/14/nmod ./PUNCT/./5/punct',
        # The sentence; the infinitival "to replace ... area" (one clause: no SBAR over a
        # subjectless clause), without the final period.
        [(0, 19), (7, 18)]),
    # "... came out against US troops [when [they briefly arrested a yound newlywed bride]] ."
    "when": (
        'In/ADP/IN/2/case Fallujah/PROPN/NNP/7/obl ,/PUNCT/,/2/punct hundreds/NOUN/NNS/7/nsubj '
        'of/ADP/IN/6/case demonstrators/NOUN/NNS/4/nmod came/VERB/VBD/0/root out/ADV/RB/7/advmod '
        'against/ADP/IN/11/case US/PROPN/NNP/11/compound troops/NOUN/NNS/7/obl when/ADV/WRB/15/advmod '
        'they/PRON/PRP/15/nsubj briefly/ADV/RB/15/advmod arrested/VERB/VBD/7/advcl a/DET/DT/19/det '
        'yound/ADJ/JJ/19/amod newlywed/ADJ/JJ/19/amod bride/NOUN/NN/15/obj ./PUNCT/./7/punct',
        # SBAR (WHADVP when) over S (they ... bride), as the PTB brackets it.
        [(0, 20), (11, 19), (12, 19)]),
    # "[[Usually, these are just a chance [for [the suckups to suck up]]], but [this time people
    #  are actually concerned about the company's plans].]"
    "but": (
        'Usually/ADV/RB/7/advmod ,/PUNCT/,/1/punct these/PRON/DT/7/nsubj are/AUX/VBP/7/cop '
        'just/ADV/RB/7/advmod a/DET/DT/7/det chance/NOUN/NN/0/root for/SCONJ/IN/12/mark the/DET/DT/10/det '
        'suckups/NOUN/NNS/12/nsubj to/PART/TO/12/mark suck/VERB/VB/7/acl up/ADP/RP/12/compound:prt '
        ',/PUNCT/,/21/punct but/CCONJ/CC/21/cc this/DET/DT/17/det time/NOUN/NN/21/obl:unmarked '
        'people/NOUN/NNS/21/nsubj are/AUX/VBP/21/cop actually/ADV/RB/21/advmod concerned/ADJ/JJ/7/conj '
        'about/ADP/IN/26/case the/DET/DT/24/det company/NOUN/NN/26/nmod:poss \'s/PART/POS/24/case '
        'plans/NOUN/NNS/21/obl ./PUNCT/./7/punct',
        # Coordinated clauses (the conjunct has its own subject): the whole sentence, the first
        # conjunct, its "for ... to" clause (SBAR over S) and the second conjunct without "but".
        [(0, 27), (0, 13), (7, 13), (8, 13), (15, 26)]),
    # "Arafat's death creates a vacuum in Palestinian leadership [that [will not soon be filled]] ."
    "relcl": (
        "Arafat/PROPN/NNP/3/nmod:poss 's/PART/POS/1/case death/NOUN/NN/4/nsubj creates/VERB/VBZ/0/root "
        "a/DET/DT/6/det vacuum/NOUN/NN/4/obj in/ADP/IN/9/case Palestinian/ADJ/JJ/9/amod "
        "leadership/NOUN/NN/6/nmod that/PRON/WDT/15/nsubj:pass will/AUX/MD/15/aux not/PART/RB/15/advmod "
        "soon/ADV/RB/15/advmod be/AUX/VB/15/aux:pass filled/VERB/VBN/6/acl:relcl ./PUNCT/./4/punct",
        # SBAR (WHNP that) over S (will not soon be filled).
        [(0, 16), (9, 15), (10, 15)]),
}

# Made-up sentences for the cases the EWT ones above do not show.
OTHER = {
    # VP coordination (one subject): one clause.
    "vp-coordination": ("He/PRON/PRP/2/nsubj came/VERB/VBD/0/root and/CCONJ/CC/4/cc saw/VERB/VBD/2/conj "
                        "./PUNCT/./2/punct", [(0, 5)]),
    # Adjectival xcomp and a reduced relative (acl without subject or mark): no clause.
    "small": ("She/PRON/PRP/2/nsubj seems/VERB/VBZ/0/root happy/ADJ/JJ/2/xcomp with/ADP/IN/6/case "
              "the/DET/DT/6/det man/NOUN/NN/2/obl sitting/VERB/VBG/6/acl there/ADV/RB/7/advmod",
              [(0, 8)]),
    # A fragment root (no predicate): no root clause.
    "fragment": ("Great/ADJ/JJ/2/amod service/NOUN/NN/0/root !/PUNCT/./2/punct", []),
}


def _parse(text):
    rows = [t.rsplit("/", 4) for t in text.split(" ")]
    words = [r[0] for r in rows]
    return words, [r[1] for r in rows], [r[2] for r in rows], [int(r[3]) - 1 for r in rows], [r[4] for r in rows]


@pytest.mark.parametrize("name", sorted(EWT) + sorted(OTHER))
def test_ud_rule_gives_the_hand_derived_clauses(name):
    text, expected = {**EWT, **OTHER}[name]
    words, upos, xpos, heads, deps = _parse(text)
    assert ud_clauses(heads, deps, upos, xpos) == sorted(expected, key=lambda c: (c[0], -c[1]))


def _conllu(text, sent_id="s1"):
    words, upos, xpos, heads, deps = _parse(text)
    lines = [f"# sent_id = {sent_id}"]
    for i, (w, u, x, h, d) in enumerate(zip(words, upos, xpos, heads, deps), 1):
        lines.append("\t".join([str(i), w, "_", u, x, "_", str(h + 1), d, "_", "_"]))
    return "\n".join(lines) + "\n\n"


def test_conllu_reader_applies_the_rule_and_skips_multiword_lines(tmp_path):
    text = _conllu(EWT["relcl"][0]).replace("1\tArafat", "1-2\tArafat's\t_\t_\t_\t_\t_\t_\t_\t_\n1\tArafat", 1)
    path = tmp_path / "x.conllu"
    path.write_text(text + _conllu(EWT["when"][0], "s2"))
    nlp = spacy.blank("en")
    docs = conllu_clause_docs(nlp.vocab, path)
    assert [[(s.start, s.end) for s in d.spans["clauses"]] for d in docs] == [EWT["relcl"][1], EWT["when"][1]]
    assert docs[0][9].tag_ == "WDT" and docs[0][14].dep_ == "acl:relcl"
    reader = spacy.registry.readers.get("spacy-structperc.ud_clauses_reader.v1")(path, pos=False)
    egs = list(reader(nlp))
    assert len(egs) == 2 and not egs[0].predicted.has_annotation("TAG")


@pytest.mark.parametrize("mutate,code,line", [
    (lambda t: t.replace("\t_\t_\n", "\t_\n", 1), "S205", 2),                 # 9 fields
    (lambda t: t.replace("\t3\tnmod:poss", "\tx\tnmod:poss", 1), "S205", 2),   # head not a number
    (lambda t: t.replace("\t0\troot", "\t4\troot", 1), "S206", 18),           # no root (a cycle)
])
def test_bad_conllu_raises_coded_errors_naming_file_and_line(tmp_path, mutate, code, line):
    path = tmp_path / "bad.conllu"
    path.write_text(mutate(_conllu(EWT["relcl"][0])))
    with pytest.raises(ValueError) as err:
        list(read_conllu_sentences(path))
    assert str(err.value).startswith(f"[{code}]") and f"line {line}" in str(err.value)


def _dominates(heads, h, i):
    while i != h and heads[i] != i:
        i = heads[i]
    return i == h


def _marked_subordinate_clauses(doc):
    """Brute force, from the tree alone: the subordinate clauses (advcl, ccomp, csubj, acl:relcl
    heads with a subject and no conjoined clause) whose first word is a one-word mark or
    wh-word; each should give the PTB's SBAR over S: (first word .. end) and (next word .. end),
    ends and the S's start without punctuation or coordinators."""
    edge = ("punct", "cc")
    heads = [t.head.i for t in doc]
    out = []
    for t in doc:
        if not (t.dep_.split(":")[0] in ("advcl", "ccomp", "csubj") or t.dep_ == "acl:relcl"):
            continue
        kids = [k.dep_.split(":")[0] for k in t.children]
        if not any(k in ("nsubj", "csubj", "expl") for k in kids) or "conj" in kids:
            continue
        # The subtree from the heads (token.left_edge / right_edge miss non-projective arcs).
        subtree = [i for i in range(len(doc)) if _dominates(heads, t.i, i)]
        a, b = subtree[0], subtree[-1] + 1
        while a < b and doc[a].dep_ in edge:
            a += 1
        while b > a and doc[b - 1].dep_ in edge:
            b -= 1
        lead = doc[a]
        if lead.head.i != t.i or list(lead.children) or not (lead.dep_ == "mark" or lead.tag_ in WH_TAGS):
            continue
        inner = a + 1
        while inner < b and doc[inner].dep_ in edge:
            inner += 1
        out.append(((a, b), (inner, b)))
    return out


def test_ewt_derived_clauses_are_well_formed(data_dir):
    path = data_dir / "ud_en_ewt" / "en_ewt-ud-dev.conllu"
    docs = conllu_clause_docs(spacy.blank("en").vocab, path, limit=300)
    n = n_sbar = 0
    for doc in docs:
        spans = [(s.start, s.end) for s in doc.spans["clauses"]]
        assert not any(a < c < b < d for a, b in spans for c, d in spans)
        n += len(spans)
        # A verbal root makes the whole sentence a clause.
        root = [t for t in doc if t.dep_ == "ROOT"]
        if root and root[0].pos_ == "VERB":
            assert (0, len(doc)) in spans, doc.text
        # Every marked subordinate clause the brute force finds has its SBAR and its S.
        for sbar, clause in _marked_subordinate_clauses(doc):
            assert sbar in spans and clause in spans, (doc.text, doc[sbar[0]:sbar[1]].text, spans)
            n_sbar += 1
    assert 1.5 < n / len(docs) < 4   # PTB sentences have ~3 clauses; EWT's are shorter
    assert n_sbar >= 100             # 125 in these 300 sentences (r2.16)
