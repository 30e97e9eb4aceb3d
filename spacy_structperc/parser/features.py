"""The parser's feature templates and their registered set (spacy-structperc.parser_features.v1).

Templates follow Zhang & Nivre (2011) as used for arc-standard by Huang & Sagae (2010): words and
tags of s0-s2 and q0-q2 with their pairs and triples, the leftmost / rightmost (and second)
children of s0 and s1 with their arc labels, the s0-s1 distance and the valencies of s0 and s1.
A part is [position, attribute]; see `_core/arcstandard.pyx` for the positions.
"""
from typing import List, Sequence

from spacy.util import registry

from ..atoms import leave_out as without_templates
from ..atoms import template


def parser_templates(word: str = "lower", third_order: bool = True, valency: bool = True,
                     distance: bool = True, queue: int = 3, clusters: bool = False,
                     arc_hybrid: bool = False, upos: bool = False, label_sets: bool = False,
                     cluster_pairs: bool = False, boundary: bool = False, casing: bool = False) -> List[dict]:
    """Zhang & Nivre (2011) features for labelled arc-standard parsing.

    word: the atom used as the word form (lower or orth). third_order adds the second-leftmost /
    rightmost children and the tag trigrams along them. queue: how many queue words are read.
    clusters adds Brown-cluster (c6, cluster) features of s0, s1 and q0. arc_hybrid adds q0's
    left children, which only arc-hybrid builds (with arc-standard they never exist). upos adds
    label_sets adds the sets of labels of s0's and s1's left and right children with their word
    or tag (Zhang & Nivre 2011's non-local features). upos adds
    the universal POS (token.pos_, which the tagger predicts with pos = "predict") of the stack,
    queue and children, alone and in pairs: it tells AUX from VERB and SCONJ from ADP, which
    the fine tags do not, and which UD's labels (aux / cop, mark / case) follow.
    cluster_pairs (with clusters) adds Koo, Carreras & Collins (2008)'s cluster features: 4- and
    6-bit prefixes of the words an arc would join (s0 with s1, s0 with q0, a word with its
    nearest children) conjoined with each other and with the other word's tag.
    boundary adds what tells where a sentence ends (the BREAK decision in a Doc without sentence
    starts): the word and tag just before the buffer's front (q-1, the last word shifted) and
    q0's short shape (capitalisation, which the lower-cased word hides), with each other and
    with the tag of s0, the finished tree's head.
    """
    w, t = word, "tag"
    T = [template("bias")]

    def add(name, *parts):
        T.append(template(name, *parts))

    # Single positions.
    for pos in ("s0", "s1", "q0") + (("q1",) if queue >= 2 else ()):
        add(f"{pos}w", (pos, w))
        add(f"{pos}t", (pos, t))
        add(f"{pos}wt", (pos, w), (pos, t))
    add("s2t", ("s2", t))
    add("s2w", ("s2", w))
    if queue >= 3:
        add("q2t", ("q2", t))
        add("q2w", ("q2", w))
    # Pairs.
    add("s0wt,s1wt", ("s0", w), ("s0", t), ("s1", w), ("s1", t))
    add("s0wt,s1w", ("s0", w), ("s0", t), ("s1", w))
    add("s0w,s1wt", ("s0", w), ("s1", w), ("s1", t))
    add("s0wt,s1t", ("s0", w), ("s0", t), ("s1", t))
    add("s0t,s1wt", ("s0", t), ("s1", w), ("s1", t))
    add("s0w,s1w", ("s0", w), ("s1", w))
    add("s0t,s1t", ("s0", t), ("s1", t))
    add("s0t,q0t", ("s0", t), ("q0", t))
    add("s0w,q0w", ("s0", w), ("q0", w))
    add("s0wt,q0t", ("s0", w), ("s0", t), ("q0", t))
    add("s0t,q0wt", ("s0", t), ("q0", w), ("q0", t))
    add("s1t,q0t", ("s1", t), ("q0", t))
    add("s1w,q0w", ("s1", w), ("q0", w))
    # Tag triples.
    add("s0t,s1t,q0t", ("s0", t), ("s1", t), ("q0", t))
    add("s0t,q0t,q1t", ("s0", t), ("q0", t), ("q1", t))
    add("s1t,s0t,q0t,q1t", ("s1", t), ("s0", t), ("q0", t), ("q1", t))
    add("s2t,s1t,s0t", ("s2", t), ("s1", t), ("s0", t))
    add("s1t,s0t,s0lt", ("s1", t), ("s0", t), ("s0l", t))
    add("s1t,s0t,s0rt", ("s1", t), ("s0", t), ("s0r", t))
    add("s1t,s1lt,s0t", ("s1", t), ("s1l", t), ("s0", t))
    add("s1t,s1rt,s0t", ("s1", t), ("s1r", t), ("s0", t))
    add("s1t,s0w,s0lt", ("s1", t), ("s0", w), ("s0l", t))
    add("s1t,s1rt,s0w", ("s1", t), ("s1r", t), ("s0", w))
    add("s1w,s0t,s0lt", ("s1", w), ("s0", t), ("s0l", t))
    # Children and their labels.
    for child in ("s0l", "s0r", "s1l", "s1r"):
        add(f"{child}w", (child, w))
        add(f"{child}t", (child, t))
        add(f"{child}l", (child, "dep"))
    add("s0t,s0ll", ("s0", t), ("s0l", "dep"))
    add("s0t,s0rl", ("s0", t), ("s0r", "dep"))
    add("s1t,s1ll", ("s1", t), ("s1l", "dep"))
    add("s1t,s1rl", ("s1", t), ("s1r", "dep"))
    add("s1t,s1rl,s0t", ("s1", t), ("s1r", "dep"), ("s0", t))
    add("s1t,s0ll,s0t", ("s1", t), ("s0l", "dep"), ("s0", t))
    if third_order:
        for child in ("s0l2", "s0r2", "s1l2", "s1r2"):
            add(f"{child}t", (child, t))
            add(f"{child}l", (child, "dep"))
        add("s0t,s0lt,s0l2t", ("s0", t), ("s0l", t), ("s0l2", t))
        add("s0t,s0rt,s0r2t", ("s0", t), ("s0r", t), ("s0r2", t))
        add("s1t,s1lt,s1l2t", ("s1", t), ("s1l", t), ("s1l2", t))
        add("s1t,s1rt,s1r2t", ("s1", t), ("s1r", t), ("s1r2", t))
        add("s0t,s0ll,s0l2l", ("s0", t), ("s0l", "dep"), ("s0l2", "dep"))
        add("s1t,s1rl,s1r2l", ("s1", t), ("s1r", "dep"), ("s1r2", "dep"))
    if distance:
        add("s0w,d", ("s0", w), ("dist", "s0s1"))
        add("s0t,d", ("s0", t), ("dist", "s0s1"))
        add("s1w,d", ("s1", w), ("dist", "s0s1"))
        add("s1t,d", ("s1", t), ("dist", "s0s1"))
        add("s0w,s1w,d", ("s0", w), ("s1", w), ("dist", "s0s1"))
        add("s0t,s1t,d", ("s0", t), ("s1", t), ("dist", "s0s1"))
    if valency:
        for pos in ("s0", "s1"):
            add(f"{pos}w,vl", (pos, w), (pos, "vl"))
            add(f"{pos}t,vl", (pos, t), (pos, "vl"))
            add(f"{pos}w,vr", (pos, w), (pos, "vr"))
            add(f"{pos}t,vr", (pos, t), (pos, "vr"))
    if arc_hybrid:
        add("q0lw", ("q0l", w))
        add("q0lt", ("q0l", t))
        add("q0ll", ("q0l", "dep"))
        add("q0t,q0lt", ("q0", t), ("q0l", t))
        add("q0t,q0ll", ("q0", t), ("q0l", "dep"))
        add("s0t,q0t,q0lt", ("s0", t), ("q0", t), ("q0l", t))
        add("s0w,q0t,q0ll", ("s0", w), ("q0", t), ("q0l", "dep"))
        if third_order:
            add("q0l2t", ("q0l2", t))
            add("q0l2l", ("q0l2", "dep"))
            add("q0t,q0lt,q0l2t", ("q0", t), ("q0l", t), ("q0l2", t))
        if valency:
            add("q0w,vl", ("q0", w), ("q0", "vl"))
            add("q0t,vl", ("q0", t), ("q0", "vl"))
        # LEFT-ARC joins s0 and q0: their pairs and distance, as the s0-s1 ones above.
        add("s0wt,q0wt", ("s0", w), ("s0", t), ("q0", w), ("q0", t))
        add("s0w,q0t", ("s0", w), ("q0", t))
        add("s0t,q0w", ("s0", t), ("q0", w))
        add("s0t,s0lt,q0t", ("s0", t), ("s0l", t), ("q0", t))
        add("s0t,s0rt,q0t", ("s0", t), ("s0r", t), ("q0", t))
        add("s0t,s0rl,q0t", ("s0", t), ("s0r", "dep"), ("q0", t))
        if distance:
            add("s0w,d0", ("s0", w), ("dist0", "s0q0"))
            add("s0t,d0", ("s0", t), ("dist0", "s0q0"))
            add("q0w,d0", ("q0", w), ("dist0", "s0q0"))
            add("q0t,d0", ("q0", t), ("dist0", "s0q0"))
            add("s0w,q0w,d0", ("s0", w), ("q0", w), ("dist0", "s0q0"))
            add("s0t,q0t,d0", ("s0", t), ("q0", t), ("dist0", "s0q0"))
    if label_sets:
        for pos in ("s0", "s1") + (("q0",) if arc_hybrid else ()):
            for side in ("ls", "rs") if pos != "q0" else ("ls",):
                add(f"{pos}w,{side}", (pos, w), (pos, side))
                add(f"{pos}t,{side}", (pos, t), (pos, side))
    if upos:
        p = "pos"
        for pos in ("s0", "s1", "s2", "q0", "q1", "q2", "s0l", "s0r", "s1l", "s1r"):
            add(f"{pos}p", (pos, p))
        for pos in ("s0", "s1", "q0"):
            add(f"{pos}wp", (pos, w), (pos, p))
        add("s0p,s1p", ("s0", p), ("s1", p))
        add("s0p,q0p", ("s0", p), ("q0", p))
        add("s1p,q0p", ("s1", p), ("q0", p))
        add("s0w,s1p", ("s0", w), ("s1", p))
        add("s0p,s1w", ("s0", p), ("s1", w))
        add("s1p,s0p,q0p", ("s1", p), ("s0", p), ("q0", p))
        add("s0p,q0p,q1p", ("s0", p), ("q0", p), ("q1", p))
        add("s1p,s0p,s0lp", ("s1", p), ("s0", p), ("s0l", p))
        add("s1p,s1rp,s0p", ("s1", p), ("s1r", p), ("s0", p))
        if distance:
            add("s0p,s1p,d", ("s0", p), ("s1", p), ("dist", "s0s1"))
    if boundary:
        ss = "short_shape"
        add("q-1w", ("q-1", w))
        add("q-1t", ("q-1", t))
        add("q0ss", ("q0", ss))
        add("q-1w,q0ss", ("q-1", w), ("q0", ss))
        add("q-1w,q0w", ("q-1", w), ("q0", w))
        add("q-1t,q0t", ("q-1", t), ("q0", t))
        add("q-1w,q0ss,q0t", ("q-1", w), ("q0", ss), ("q0", t))
        add("s0t,q-1w,q0ss", ("s0", t), ("q-1", w), ("q0", ss))
    if casing:
        cs = "cshare"
        add("q0cs", ("q0", cs))
        add("q0ss,q0cs", ("q0", "short_shape"), ("q0", cs))
        add("q-1w,q0ss,q0cs", ("q-1", w), ("q0", "short_shape"), ("q0", cs))
        add("s0t,q0ss,q0cs", ("s0", t), ("q0", "short_shape"), ("q0", cs))
        add("q0t,q0cs", ("q0", t), ("q0", cs))
    if clusters:
        for pos in ("s0", "s1", "q0"):
            add(f"{pos}c6", (pos, "c6"))
            add(f"{pos}c", (pos, "cluster"))
        add("s0c6,s1c6", ("s0", "c6"), ("s1", "c6"))
        add("s0c,s1t", ("s0", "cluster"), ("s1", t))
        add("s0t,s1c", ("s0", t), ("s1", "cluster"))
        if cluster_pairs:
            for pos in ("s0", "s1", "q0"):
                add(f"{pos}c4", (pos, "c4"))
            add("q1c6", ("q1", "c6"))
            add("s0c4,s1c4", ("s0", "c4"), ("s1", "c4"))
            add("s0c6,s1t", ("s0", "c6"), ("s1", t))
            add("s0t,s1c6", ("s0", t), ("s1", "c6"))
            add("s0c4,s1t", ("s0", "c4"), ("s1", t))
            add("s0t,s1c4", ("s0", t), ("s1", "c4"))
            add("s0c6,q0c6", ("s0", "c6"), ("q0", "c6"))
            add("s0c6,q0t", ("s0", "c6"), ("q0", t))
            add("s0t,q0c6", ("s0", t), ("q0", "c6"))
            add("s1c6,s0c6,q0t", ("s1", "c6"), ("s0", "c6"), ("q0", t))
            for child in ("s0l", "s0r", "s1r"):
                add(f"{child}c6", (child, "c6"))
            add("s0c6,s0lt", ("s0", "c6"), ("s0l", t))
            add("s0t,s0lc6", ("s0", t), ("s0l", "c6"))
            add("s1c6,s1rt", ("s1", "c6"), ("s1r", t))
            add("s1t,s1rc6", ("s1", t), ("s1r", "c6"))
    return T


def parser_atoms(templates: Sequence[dict]) -> List[str]:
    """The atom-table columns the templates read (structural attributes excluded)."""
    seen: List[str] = []
    for spec in templates:
        for where, what in spec["parts"]:
            if where not in ("dist", "dist0") and what not in ("dep", "vl", "vr", "ls", "rs") and what not in seen:
                seen.append(what)
    return sorted(seen)


@registry.misc("spacy-structperc.parser_features.v1")
def parser_features(word: str = "lower", third_order: bool = True, valency: bool = True,
                    distance: bool = True, queue: int = 3, clusters: bool = False,
                    arc_hybrid: bool = False, upos: bool = False, label_sets: bool = False,
                    cluster_pairs: bool = False, boundary: bool = False, casing: bool = False,
                    leave_out: Sequence[str] = ()) -> List[dict]:
    """Zhang & Nivre (2011) templates for arc-standard parsing: words and tags of s0-s2 and
    q0-q2, children of s0 and s1 with their labels, distance and valency. Tags are read from
    token.tag_, so an upstream tagger (or gold tags) must set them.

    word: the word atom (lower or orth). third_order: second-leftmost/rightmost children.
    queue: queue words read (2 or 3). clusters: Brown-cluster features (spacy-lookups-data).
    arc_hybrid: q0's left children (for the parser's transition_system "arc-hybrid").
    upos: universal POS features (token.pos_: a tagger with pos = "predict" goes first).
    label_sets: the label sets of s0's and s1's children (Zhang & Nivre 2011).
    cluster_pairs: with clusters, Koo et al. (2008)'s cluster-prefix pairs along candidate arcs.
    boundary: the word and tag before the buffer's front and q0's shape, for where sentences end.
    casing: q0's capital share in general text (atoms.CASING_ATOMS) with its shape and tag, the
    word before it and s0's tag: whether a capital starts a sentence or a name.
    leave_out: names of templates to leave out of the set (S020 for a name it does not have):
    feature selection, as configs/parser.cfg does.
    """
    return without_templates(parser_templates(word, third_order, valency, distance, queue, clusters,
                                              arc_hybrid, upos, label_sets, cluster_pairs, boundary, casing),
                             leave_out, "spacy-structperc.parser_features.v1")
