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
from spacy.attrs import ORTH, SENT_START, TAG
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
        self._chunk: Dict[int, Tuple[int, int, bool]] = {}
        self._vp: Dict[int, int] = {}
        self._outside = _h("chunk", "O")

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

    def _chunk_atoms(self, label: int, strings) -> Tuple[int, int, bool]:
        """(B- atom, I- atom, is a VP) of a chunk label, cached per label."""
        value = self._chunk.get(label)
        if value is None:
            name = strings[label]
            value = self._chunk[label] = (_h("chunk", "B-" + name), _h("chunk", "I-" + name), name == "VP")
        return value

    def _vp_element(self, tag: int, strings) -> int:
        """The pattern element of a VP whose last token has this tag, cached per tag."""
        value = self._vp.get(tag)
        if value is None:
            value = self._vp[tag] = _h("el", "VP:" + strings[tag])
        return value

    def __call__(self, doc: Doc, sentences: bool = False):
        """(atoms, elements, is_vp) of the Doc; with sentences, also its SENT_START column
        (1 where a sentence starts), read in the same pass."""
        n = len(doc)
        if n and not doc.has_annotation("TAG"):
            raise ValueError(Errors.S203.format(name=self.name))
        atoms = numpy.zeros((n, len(ATOM_NAMES)), dtype=numpy.uint64)
        if n == 0:
            empty = (atoms, numpy.zeros((0,), dtype=numpy.uint64), numpy.zeros((0,), dtype=numpy.uint8))
            return empty + (numpy.zeros((0,), dtype=numpy.int64),) if sentences else empty
        strings = doc.vocab.strings
        columns = doc.to_array([ORTH, TAG, SENT_START] if sentences else [ORTH, TAG])
        tags = columns[:, 1].tolist()
        atoms[:, 0] = 1
        atoms[:, 2] = columns[:, 1]
        # One dict lookup per token for its lowercase atom and pattern element.
        lexical = self._lexical
        pairs = [lexical.get(key) or self._add_lexical(key[0], key[1], strings)
                 for key in zip(columns[:, 0].tolist(), tags)]
        lex = numpy.array(pairs, dtype=numpy.uint64)
        atoms[:, 1] = lex[:, 0]
        elements = lex[:, 1].copy()
        is_vp = numpy.zeros((n,), dtype=numpy.uint8)
        chunks = doc.spans[self.chunks_key] if self.chunks_key in doc.spans else None
        if chunks is not None:
            # Tokens outside every chunk are O; a Doc with no chunks group leaves the atom absent.
            chunk = [self._outside] * n
            for span in chunks:
                start, end = span.start, span.end
                b, i, vp = self._chunk.get(span.label) or self._chunk_atoms(span.label, strings)
                chunk[start] = b
                if end - start > 1:
                    chunk[start + 1:end] = [i] * (end - start - 1)
                if vp:
                    elements[start] = self._vp.get(tags[end - 1]) or self._vp_element(tags[end - 1], strings)
                    is_vp[start] = 1
            atoms[:, 3] = chunk
        else:
            i = 0
            while i < n:
                if strings[tags[i]] in VERB_TAGS:
                    j = i
                    while j + 1 < n and strings[tags[j + 1]] in VERB_TAGS:
                        j += 1
                    elements[i] = self._vp_element(tags[j], strings)
                    is_vp[i] = 1
                    i = j + 1
                else:
                    i += 1
        if sentences:
            return atoms, elements, is_vp, columns[:, 2]
        return atoms, elements, is_vp


@registry.misc("spacy-structperc.clause_features.v1")
def clause_features(window: int = 3, conjunctions: bool = True) -> List[dict]:
    """Words, POS and chunk tags in [-window, +window] around a word (L_w = 3 in the paper), and
    with conjunctions a few tag / chunk / word bigrams (useful in primal form)."""
    return clause_templates(window, conjunctions)
