"""The chunker's feature templates and their registered set (spacy-structperc.chunker_features.v1).

The atoms the templates read are defined in spacy_structperc/atoms.py; the C code that hashes the
templates per token is spacy_structperc/_core/templates.pyx.
"""
from typing import List

from spacy.util import registry

from ..atoms import template, word_and_pos_window


def chunker_templates(pos: bool = True, history: int = 2, history_features: bool = True,
                      window: int = 2, affixes: bool = False, clusters: bool = False,
                      edges: bool = False) -> List[dict]:
    """Chunking templates after Sha & Pereira (2003) as used by Tsuruoka et al. (2009, 2011).

    Words w-2..w+2, w-1w0, w0w+1; POS p-2..p+2, p-2p-1, p-1p0, p0p+1, p+1p+2, p-2p-1p0,
    p-1p0p+1, p0p+1p+2; chunk-tag history t-1, t-2t-1 (history = 2), and t-1 conjoined with
    w0 and p0 (history_features). pos = false chunks from words alone (no token.tag_ needed);
    affixes adds suffix and shape features, which help most then.

    clusters: Brown-cluster features (Koo et al. 2008; Turian et al. 2010): the 4-, 6-, 10- and
    20-bit prefixes and the full path of w0's cluster, the 6-bit prefix and full path of w-1's
    and w+1's, and (with history_features) t-1 conjoined with w0's 6-bit prefix.
    edges: t-1 conjoined with the neighbours' words (w-1, w+1) and POS (p-1, p+1, p-1p0,
    p0p+1, p-1p0p+1), as Sha & Pereira's label-bigram features; they need history >= 1 and
    pay off with the global decoders (beam, viterbi) more than with greedy decoding.
    """
    t = [template("bias", (0, "bias"))]
    t.extend(word_and_pos_window(window, pos))
    if affixes:
        for k in (1, 2, 3, 4):
            t.append(template(f"s{k}", (0, f"s{k}")))
        t.append(template("shape", (0, "shape")))
        t.append(template("sshape-1,sshape0,sshape+1", (-1, "short_shape"), (0, "short_shape"), (1, "short_shape")))
        t.append(template("s3-1", (-1, "s3")))
        t.append(template("s3+1", (1, "s3")))
    if clusters:
        for name in ("c4", "c6", "c10", "c20", "cluster"):
            t.append(template(f"{name}0", (0, name)))
        for k in (-1, 1):
            t.append(template(f"c6{k:+d}", (k, "c6")))
            t.append(template(f"cluster{k:+d}", (k, "cluster")))
    if history >= 1:
        t.append(template("t-1", ("hist", 1)))
    if history >= 2:
        t.append(template("t-2,t-1", ("hist", 2), ("hist", 1)))
    if history_features and history >= 1:
        t.append(template("t-1,w0", ("hist", 1), (0, "lower")))
        if pos:
            t.append(template("t-1,p0", ("hist", 1), (0, "tag")))
        elif affixes:
            t.append(template("t-1,s3", ("hist", 1), (0, "s3")))
        if clusters:
            t.append(template("t-1,c6", ("hist", 1), (0, "c6")))
    if edges and history >= 1:
        t.append(template("t-1,w-1", ("hist", 1), (-1, "lower")))
        t.append(template("t-1,w+1", ("hist", 1), (1, "lower")))
        if pos:
            t.append(template("t-1,p-1", ("hist", 1), (-1, "tag")))
            t.append(template("t-1,p+1", ("hist", 1), (1, "tag")))
            t.append(template("t-1,p-1,p0", ("hist", 1), (-1, "tag"), (0, "tag")))
            t.append(template("t-1,p0,p+1", ("hist", 1), (0, "tag"), (1, "tag")))
            t.append(template("t-1,p-1,p0,p+1", ("hist", 1), (-1, "tag"), (0, "tag"), (1, "tag")))
    return t


@registry.misc("spacy-structperc.chunker_features.v1")
def chunker_features(pos: bool = True, history: int = 2, history_features: bool = True,
                     window: int = 2, affixes: bool = False, clusters: bool = True,
                     edges: bool = False) -> List[dict]:
    """Word, POS and chunk-tag-history templates for chunking (Sha & Pereira 2003).

    pos: read token.tag_ (set upstream or by the corpus reader); false chunks from words only.
    history: previous chunk tags read (1 = bigram, decodable by first-order Viterbi; 2 = trigram).
    affixes: add suffix and word-shape features (useful with pos = false).
    clusters: add Brown-cluster features of w-1..w+1 (from spacy-lookups-data at
    initialization; stored in the model afterwards); false for the templates of tsuruoka2011.
    edges: add the previous chunk tag conjoined with the neighbouring words and POS tags
    (label-bigram features; worth their cost with the beam and Viterbi decoders).
    """
    return chunker_templates(pos, history, history_features, window, affixes, clusters, edges)
