"""The latent NER's feature templates and their registered set (spacy-structperc.ner_features.v1).

The atoms the templates read are defined in spacy_structperc/atoms.py; the C code that hashes the
templates per token is spacy_structperc/_core/templates.pyx.
"""
from typing import List, Sequence

from spacy.util import registry

from ..atoms import leave_out as without_templates
from ..atoms import template, word_and_pos_window
from ..errors import Errors


NER_CORE_TEMPLATES = ("bias", "o0", "w0", "p0", "sh0", "s3", "c6_0")
NER_LATENT_MODES = ("all", "core", "none")


def ner_templates(pos: bool = True, window: int = 2, affixes: int = 4, clusters: bool = False,
                  history: int = 1, latent: str = "all", label_level: bool = False,
                  context: bool = False, document: bool = False, casing: bool = False) -> List[dict]:
    """Named-entity templates after sun2009 Table 1: words, POS and orthography in a window and
    their conjunctions, with the prefixes and suffixes of tsuruoka2011 §4.1.

    Node features are conjoined with the current latent state by the weights themselves (one
    column per state); history = 1 adds the state bigram (first order), 2 the state trigram.
    pos = false works from words alone (for corpora such as JNLPBA that carry no POS).

    latent: which node templates are conjoined with the latent state: "all" (sun2009), "core"
    (a few: the word, its shape, POS, suffix and cluster), or "none". label_level: add a copy of
    every node template conjoined with the label only ("tied": its weights are shared by the
    label's latent states), so rare features are not split across states. context: add the
    neighbours' suffixes and more word bigrams (for biomedical names, whose heads and modifiers
    are telling: "... kinase", "anti- ...").
    document: add what the other occurrences of the word in the same Doc say (Ratinov and Roth
    2009 §5): the cases it has there (away from sentence starts), alone and with the word's
    own shape, and the words around its first other occurrence (see atoms.CONTEXT_ATOMS). A Doc
    of one sentence gives them little; a Doc of a whole text, all of it.
    casing: add how the word and its neighbours are cased in general text (atoms.CASING_ATOMS).
    """
    if latent not in NER_LATENT_MODES:
        raise ValueError(Errors.S012.format(setting="latent", name="ner_features", value=latent,
                                            requirement=f"one of {list(NER_LATENT_MODES)}"))
    node = _ner_node_templates(pos, window, affixes, clusters, context, document, casing)
    t = [dict(spec) for spec in node if latent == "all" or (latent == "core" and spec["name"] in NER_CORE_TEMPLATES)]
    if label_level:
        t.extend(dict(spec, name="label:" + spec["name"], tied=True) for spec in node)
    if history >= 1:
        t.append(template("h-1", ("hist", 1)))
    if history >= 2:
        t.append(template("h-2,h-1", ("hist", 2), ("hist", 1)))
    return t


def _ner_node_templates(pos: bool, window: int, affixes: int, clusters: bool, context: bool,
                        document: bool = False, casing: bool = False) -> List[dict]:
    t = [template("bias", (0, "bias"))]
    t.append(template("o0", (0, "orth")))
    t.extend(word_and_pos_window(window, pos))
    # Orthography mode: the word's shape (Xxxx, dd-dd, ...).
    t.append(template("sh0", (0, "shape")))
    for k in range(1, window + 1):
        t.append(template(f"sh-{k}", (-k, "short_shape")))
        t.append(template(f"sh+{k}", (k, "short_shape")))
    t.append(template("sh-2,sh-1", (-2, "short_shape"), (-1, "short_shape")))
    t.append(template("sh-1,sh0", (-1, "short_shape"), (0, "short_shape")))
    t.append(template("sh0,sh+1", (0, "short_shape"), (1, "short_shape")))
    t.append(template("sh+1,sh+2", (1, "short_shape"), (2, "short_shape")))
    for k in range(1, affixes + 1):
        t.append(template(f"p{k}", (0, f"p{k}")))
        t.append(template(f"s{k}", (0, f"s{k}")))
    if clusters:
        for name in ("c4", "c6", "c10", "c20", "cluster"):
            t.append(template(f"{name}_0", (0, name)))
        for k in (-1, 1):
            t.append(template(f"c6{k:+d}", (k, "c6")))
            t.append(template(f"cluster{k:+d}", (k, "cluster")))
    if context:
        for k in (-1, 1):
            t.append(template(f"s3{k:+d}", (k, "s3")))
            t.append(template(f"s4{k:+d}", (k, "s4")))
            t.append(template(f"p3{k:+d}", (k, "p3")))
        t.append(template("w-2,w-1", (-2, "lower"), (-1, "lower")))
        t.append(template("w+1,w+2", (1, "lower"), (2, "lower")))
        t.append(template("w-1,w+1", (-1, "lower"), (1, "lower")))
        t.append(template("sh0,w-1", (0, "short_shape"), (-1, "lower")))
        t.append(template("sh0,w+1", (0, "short_shape"), (1, "lower")))
    if document:
        t.append(template("dcase", (0, "dcase")))
        t.append(template("sh0,dcase", (0, "short_shape"), (0, "dcase")))
        t.append(template("dprev", (0, "dprev")))
        t.append(template("dnext", (0, "dnext")))
    if casing:
        t.append(template("cshare0", (0, "cshare")))
        t.append(template("cfreq0", (0, "cfreq")))
        t.append(template("cshare0,cfreq0", (0, "cshare"), (0, "cfreq")))
        t.append(template("sh0,cshare0", (0, "short_shape"), (0, "cshare")))
        t.append(template("sh0,cshare0,cfreq0", (0, "short_shape"), (0, "cshare"), (0, "cfreq")))
        for k in (-1, 1):
            t.append(template(f"cshare{k:+d}", (k, "cshare")))
            t.append(template(f"cshare0,cshare{k:+d}", (0, "cshare"), (k, "cshare")))
    return t


@registry.misc("spacy-structperc.ner_features.v1")
def ner_features(pos: bool = True, window: int = 2, affixes: int = 4, clusters: bool = False,
                 history: int = 1, latent: str = "all", label_level: bool = False,
                 context: bool = False, document: bool = False, casing: bool = False,
                 leave_out: Sequence[str] = ()) -> List[dict]:
    """Word, POS, orthography, affix and latent-state templates for NER (sun2009 Table 1).

    pos: read token.tag_; false works from words alone. history: 1 = latent-state bigrams
    (first order, the paper's odr=1), 2 = trigrams (odr=2; set the component's order = 2).
    clusters: add Brown-cluster features from spacy-lookups-data (saved with the model).
    latent: node templates conjoined with the latent state: "all" (sun2009), "core" or "none".
    label_level: add label-level copies of every node template, shared by a label's states.
    context: add neighbours' affixes and more word bigrams.
    document: add what the word's other occurrences in the Doc say (case, neighbours).
    casing: add how the word and its neighbours are cased, and how frequent the word is, in
    general text (spacy-lookups-data's word frequencies, saved with the model).
    leave_out: names of templates to leave out of the set (S020 for a name it does not have).
    The component's gazetteer and two-stage templates are not in this set.
    """
    return without_templates(ner_templates(pos, window, affixes, clusters, history, latent, label_level,
                                           context, document, casing),
                             leave_out, "spacy-structperc.ner_features.v1")
