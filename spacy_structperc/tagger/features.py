"""The tagger's feature templates and their registered set (spacy-structperc.tagger_features.v1).

The atoms the templates read are defined in spacy_structperc/atoms.py; the C code that hashes the
templates per token is spacy_structperc/_core/templates.pyx.
"""
from typing import List

from spacy.util import registry

from ..atoms import LEXICON_POS, template
from ..errors import Errors


def tagger_templates(history: int = 2, history_words: bool = True, window: int = 2,
                     suffixes: int = 5, prefixes: int = 4, clusters: bool = False,
                     lexicon: bool = False, casing: bool = False, tags: int = 0) -> List[dict]:
    """Templates after Ratnaparkhi (1996) / Collins (2002), with a wider lexical window.

    history: how many previous labels the label n-gram features read (1 = bigram, 2 = trigram,
    3 = four-gram). history_words adds the previous label conjoined with the current word and
    suffix, which a first-order model can still decode exactly. tags: the fine tags
    (token.tag_, set by a tagger earlier in the pipeline) of the tokens up to this many places
    on each side, alone, with the word and in pairs: for a universal POS tagger (attr = "pos")
    that reads a fine-grained tagger's output, the right-hand tags included.
    """
    t = [template("bias", (0, "bias"))]
    t.append(template("w0", (0, "lower")))
    t.append(template("o0", (0, "orth")))
    for k in range(1, window + 1):
        t.append(template(f"w-{k}", (-k, "lower")))
        t.append(template(f"w+{k}", (k, "lower")))
    t.append(template("w-1,w0", (-1, "lower"), (0, "lower")))
    t.append(template("w0,w+1", (0, "lower"), (1, "lower")))
    t.append(template("w-1,w+1", (-1, "lower"), (1, "lower")))
    for k in range(1, suffixes + 1):
        t.append(template(f"s{k}", (0, f"s{k}")))
    for k in range(1, prefixes + 1):
        t.append(template(f"p{k}", (0, f"p{k}")))
    t.append(template("shape", (0, "shape")))
    t.append(template("sshape-1,sshape0,sshape+1", (-1, "short_shape"), (0, "short_shape"), (1, "short_shape")))
    t.append(template("s3-1", (-1, "s3")))
    t.append(template("s3+1", (1, "s3")))
    t.append(template("s2+1", (1, "s2")))
    for flag in ("has_digit", "has_hyphen", "has_upper", "is_title", "is_upper", "is_punct"):
        t.append(template(flag, (0, flag)))
    t.append(template("is_title,w-1", (0, "is_title"), (-1, "lower")))
    t.append(template("length", (0, "length")))
    if clusters:
        for name in ("c4", "c6", "c10", "c20", "cluster"):
            t.append(template(f"{name}0", (0, name)))
        for k in (-2, -1, 1, 2):
            t.append(template(f"c6{k:+d}", (k, "c6")))
            t.append(template(f"cluster{k:+d}", (k, "cluster")))
        t.append(template("c6-1,c6+1", (-1, "c6"), (1, "c6")))
    if lexicon:
        t.append(template("lex0", (0, "lex")))
        for pos in LEXICON_POS:
            t.append(template(f"lex_{pos}0", (0, f"lex_{pos}")))
        t.append(template("lex-1", (-1, "lex")))
        t.append(template("lex+1", (1, "lex")))
        t.append(template("lex0,s2", (0, "lex"), (0, "s2")))
        t.append(template("lex0,is_title", (0, "lex"), (0, "is_title")))
    if casing:
        t.append(template("cshare0", (0, "cshare")))
        t.append(template("cfreq0", (0, "cfreq")))
        t.append(template("cshare0,cfreq0", (0, "cshare"), (0, "cfreq")))
        t.append(template("sh0,cshare0", (0, "short_shape"), (0, "cshare")))
        t.append(template("cshare-1", (-1, "cshare")))
        t.append(template("cshare+1", (1, "cshare")))
        t.append(template("cshare0,w-1", (0, "cshare"), (-1, "lower")))
        t.append(template("cfreq0,s3", (0, "cfreq"), (0, "s3")))
    if tags:
        t.append(template("x0", (0, "tag")))
        t.append(template("x0,w0", (0, "tag"), (0, "lower")))
        t.append(template("x0,s3", (0, "tag"), (0, "s3")))
        for k in range(1, tags + 1):
            t.append(template(f"x-{k}", (-k, "tag")))
            t.append(template(f"x+{k}", (k, "tag")))
        t.append(template("x-1,x0", (-1, "tag"), (0, "tag")))
        t.append(template("x0,x+1", (0, "tag"), (1, "tag")))
        t.append(template("x-1,x0,x+1", (-1, "tag"), (0, "tag"), (1, "tag")))
        t.append(template("x0,w+1", (0, "tag"), (1, "lower")))
    if history >= 1:
        t.append(template("t-1", ("hist", 1)))
    if history >= 2:
        t.append(template("t-2,t-1", ("hist", 2), ("hist", 1)))
    if history >= 3:
        t.append(template("t-3,t-2,t-1", ("hist", 3), ("hist", 2), ("hist", 1)))
    if history_words and history >= 1:
        t.append(template("t-1,w0", ("hist", 1), (0, "lower")))
        t.append(template("t-1,s3", ("hist", 1), (0, "s3")))
        if clusters:
            t.append(template("t-1,c6", ("hist", 1), (0, "c6")))
        if lexicon:
            t.append(template("t-1,lex", ("hist", 1), (0, "lex")))
    return t


@registry.misc("spacy-structperc.tagger_features.v1")
def tagger_features(history: int = 2, history_words: bool = True, window: int = 2,
                    suffixes: int = 5, prefixes: int = 4, clusters: bool = False,
                    lexicon: bool = False, casing: bool = False, tags: int = 0) -> List[dict]:
    """Word, affix, shape, word-cluster and label-history templates for POS tagging.

    clusters: add Brown-cluster features (from spacy-lookups-data at initialization; stored in
    the model afterwards).
    lexicon: add features from spaCy's English lemmatizer tables (WordNet index, exceptions and
    suffix rules): which parts of speech a word could be, and by which inflection.
    casing: add how each word is cased and how frequent it is in general text (spacy-lookups-data's
    word frequencies, read at initialization and stored in the model; atoms.CASING_ATOMS).
    tags: read the fine tags of an earlier tagger, this many tokens on each side (0: none).
    """
    if not isinstance(tags, int) or isinstance(tags, bool) or tags < 0:
        raise ValueError(Errors.S012.format(name="tagger_features.v1", setting="tags", value=tags,
                                            requirement="an integer >= 0"))
    return tagger_templates(history, history_words, window, suffixes, prefixes, clusters, lexicon, casing, tags)


@registry.misc("spacy-structperc.tagger_features_small.v1")
def tagger_features_small(history: int = 1) -> List[dict]:
    """A compact template set (current word, suffix 3, previous label): fast, and tiny models."""
    return tagger_templates(history, history_words=False, window=0, suffixes=3, prefixes=0)
