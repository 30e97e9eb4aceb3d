"""What the clause identifier reads from a Doc, and its word templates.

Per token (atoms, the columns of span_ranker.ATOM_NAMES): a bias, the lowercase word, the POS tag
(token.tag_, required) and the IOB chunk tag from doc.spans[chunks_key] (absent when the Doc has
no chunks: those features then do not fire). Per token also its pattern element (carreras2003
§4, footnote 2): punctuation marks and coordinating conjunctions (by word), "that", relative
pronouns (WDT, WP, WP$, WRB, by word) and verb phrase chunks (one element per VP chunk, on its
first token, named by the tag of its last token: "VP:VBD", "VP:VB" for "to go"). Without chunks,
a VP is a maximal run of MD / VB* / TO tokens.
"""
from typing import Dict, List, Optional, Tuple

import numpy
from spacy.attrs import ORTH, TAG
from spacy.tokens import Doc
from spacy.util import registry

from .._core.span_ranker import ATOM_NAMES
from ..errors import Errors
from ..atoms import _h, template

PUNCT_TAGS = {",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "-NONE-"}
REL_TAGS = {"WDT", "WP", "WP$", "WRB"}
VERB_TAGS = {"MD", "TO", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"}


def clause_templates(window: int = 3, conjunctions: bool = True) -> List[dict]:
    """phi_w of carreras2003 §4: words, POS and chunk tags at each position of [-window,
    +window] (L_w = 3 in the paper); with conjunctions, the tag and chunk bigrams around the word
    and the word with its tag, which a linear (primal) filter cannot form by itself."""
    t = [template("bias", (0, "bias"))]
    for k in range(-window, window + 1):
        for atom in ("lower", "tag", "chunk"):
            t.append(template(f"{atom}{k:+d}", (k, atom)))
    if conjunctions:
        t.append(template("tag-1,tag0", (-1, "tag"), (0, "tag")))
        t.append(template("tag0,tag+1", (0, "tag"), (1, "tag")))
        t.append(template("tag-1,tag0,tag+1", (-1, "tag"), (0, "tag"), (1, "tag")))
        t.append(template("chunk-1,chunk0", (-1, "chunk"), (0, "chunk")))
        t.append(template("chunk0,chunk+1", (0, "chunk"), (1, "chunk")))
        t.append(template("lower0,tag0", (0, "lower"), (0, "tag")))
        t.append(template("lower-1,lower0", (-1, "lower"), (0, "lower")))
        t.append(template("lower0,lower+1", (0, "lower"), (1, "lower")))
        t.append(template("tag0,chunk+1", (0, "tag"), (1, "chunk")))
        t.append(template("chunk-1,tag0", (-1, "chunk"), (0, "tag")))
    return t


class ClauseAtoms:
    """Docs -> (atoms, elements, is_vp) for the span recognizer, caching per word type."""

    def __init__(self, name: str = "clauses", chunks_key: str = "chunks"):
        self.name = name
        self.chunks_key = chunks_key
        self._lower: Dict[int, int] = {}
        self._element: Dict[Tuple[int, int], int] = {}
        self._lexical: Dict[Tuple[int, int], Tuple[int, int]] = {}

    def __reduce__(self):
        return (ClauseAtoms, (self.name, self.chunks_key))

    def _add_lexical(self, orth: int, tag: int, strings) -> Tuple[int, int]:
        pair = (self._lower_of(orth, strings), self._element_of(orth, tag, strings))
        self._lexical[(orth, tag)] = pair
        return pair

    def _lower_of(self, orth: int, strings) -> int:
        value = self._lower.get(orth)
        if value is None:
            value = self._lower[orth] = _h("lower", strings[orth].lower())
        return value

    def _element_of(self, orth: int, tag: int, strings) -> int:
        key = (orth, tag)
        value = self._element.get(key)
        if value is None:
            text, tag_ = strings[orth], strings[tag]
            lower = text.lower()
            if tag_ in PUNCT_TAGS or (text and not any(c.isalnum() for c in text)):
                value = _h("el", "P" + text)
            elif tag_ == "CC":
                value = _h("el", "CC:" + lower)
            elif lower == "that":
                value = _h("el", "that")
            elif tag_ in REL_TAGS:
                value = _h("el", "W:" + lower)
            else:
                value = 0
            self._element[key] = value
        return value

    def __call__(self, doc: Doc):
        n = len(doc)
        if n and not doc.has_annotation("TAG"):
            raise ValueError(Errors.S203.format(name=self.name))
        strings = doc.vocab.strings
        orths = doc.to_array(ORTH).tolist() if n else []
        tags = doc.to_array(TAG).tolist() if n else []
        atoms = numpy.zeros((n, len(ATOM_NAMES)), dtype=numpy.uint64)
        if n == 0:
            return atoms, numpy.zeros((0,), dtype=numpy.uint64), numpy.zeros((0,), dtype=numpy.uint8)
        atoms[:, 0] = 1
        atoms[:, 2] = numpy.asarray(tags, dtype=numpy.uint64)
        # One dict lookup per token for its lowercase atom and pattern element.
        lexical = self._lexical
        pairs = [lexical.get((o, t)) or self._add_lexical(o, t, strings) for o, t in zip(orths, tags)]
        atoms[:, 1] = [p[0] for p in pairs]
        elements = numpy.array([p[1] for p in pairs], dtype=numpy.uint64)
        is_vp = numpy.zeros((n,), dtype=numpy.uint8)
        chunks = doc.spans[self.chunks_key] if self.chunks_key in doc.spans else None
        if chunks is not None:
            for span in chunks:
                label = span.label_
                atoms[span.start, 3] = _h("chunk", "B-" + label)
                if span.end - span.start > 1:
                    atoms[span.start + 1:span.end, 3] = _h("chunk", "I-" + label)
                if label == "VP":
                    elements[span.start] = _h("el", "VP:" + strings[tags[span.end - 1]])
                    is_vp[span.start] = 1
            # Tokens outside every chunk are O; a Doc with no chunks group leaves the atom absent.
            outside = atoms[:, 3] == 0
            atoms[outside, 3] = _h("chunk", "O")
        else:
            i = 0
            while i < n:
                if strings[tags[i]] in VERB_TAGS:
                    j = i
                    while j + 1 < n and strings[tags[j + 1]] in VERB_TAGS:
                        j += 1
                    elements[i] = _h("el", "VP:" + strings[tags[j]])
                    is_vp[i] = 1
                    i = j + 1
                else:
                    i += 1
        return atoms, elements, is_vp


@registry.misc("spacy-structperc.clause_features.v1")
def clause_features(window: int = 3, conjunctions: bool = True) -> List[dict]:
    """Words, POS and chunk tags in [-window, +window] around a word (L_w = 3 in the paper), and
    with conjunctions a few tag / chunk / word bigrams (useful in primal form)."""
    return clause_templates(window, conjunctions)
