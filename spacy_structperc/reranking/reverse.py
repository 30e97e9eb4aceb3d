"""A second opinion from the other direction: the same parser trained on reversed sentences.

A left-to-right arc-standard beam commits to the left of a sentence first; a parser that reads
the sentence from its end (trained on reversed sentences: the last word first, every arc
mirrored) errs elsewhere. Combining the two directions is a classic ensemble for transition
parsers (Sagae and Lavie 2006 reparse with both). For reranking, ``TreeScorer`` gives any
structperc_parser pipeline's score of a given tree (the score of the tree's transition path
under the model: the sum of its canonical transition path's action scores) and its own k-best, both in the original
word order, whichever direction the pipeline reads; ``union`` merges k-best lists of both
directions without repeats.

A tree here is (heads, labels): heads per word relative to the span, -1 for a root, and labels
as string hashes (decorated pseudo-projective labels included), which are the same numbers in
every pipeline's StringStore, so trees pass between pipelines of different vocabularies.
"""
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.tokens import Doc

from ..errors import Errors

Tree = Tuple[numpy.ndarray, numpy.ndarray]


def reverse_heads(heads: numpy.ndarray) -> numpy.ndarray:
    """The heads of a span's tree (-1 for a root) with the words in reverse order."""
    heads = numpy.asarray(heads, dtype=numpy.int64)
    n = len(heads)
    flipped = heads[::-1]
    return numpy.where(flipped >= 0, n - 1 - flipped, -1)


def reverse_tree(tree: Tree) -> Tree:
    """The same tree over the reversed words (its own inverse)."""
    heads, labels = tree
    return reverse_heads(heads), numpy.asarray(labels)[::-1].copy()


def reversed_doc(doc: Doc, vocab=None, gold: bool = False) -> Doc:
    """The words of `doc` in reverse order with their tags (and with `gold`, their heads and
    dependency labels mirrored, for training a right-to-left parser), in `vocab` (default the
    doc's). Spaces are not kept: the words are the parser's input, not the text."""
    words = [t.text for t in reversed(doc)]
    kwargs = {}
    if doc.has_annotation("TAG"):
        kwargs["tags"] = [t.tag_ for t in reversed(doc)]
    if doc.has_annotation("POS"):
        kwargs["pos"] = [t.pos_ for t in reversed(doc)]
    if gold and doc.has_annotation("DEP"):
        n = len(doc)
        kwargs["heads"] = [n - 1 - t.head.i for t in reversed(doc)]
        kwargs["deps"] = [t.dep_ for t in reversed(doc)]
    return Doc(vocab if vocab is not None else doc.vocab, words=words, **kwargs)


def union(*lists: Iterable[Tree]) -> Tuple[List[Tree], numpy.ndarray]:
    """The distinct trees of the lists in order (a tree's first occurrence is kept), and for each
    the index of the list it came from."""
    seen, out, source = set(), [], []
    for s, trees in enumerate(lists):
        for heads, labels in trees:
            heads = numpy.asarray(heads, dtype=numpy.int64)
            labels = numpy.asarray(labels, dtype=numpy.uint64)
            key = heads.tobytes() + labels.tobytes()
            if key not in seen:
                seen.add(key)
                out.append((heads, labels))
                source.append(s)
    return out, numpy.asarray(source, dtype=numpy.int64)


def path_scores(system, atoms, trees: Sequence[Tuple[numpy.ndarray, numpy.ndarray]],
                allow_break: bool = False) -> numpy.ndarray:
    """Each tree's score under an arc-standard system: the sum of the action scores along its
    canonical path over `atoms` (trees as (heads with -1 for a root, classes; a root's class is
    ignored)); -inf without a path (not projective). The paths are walked in C
    (ArcStandardSystem.score_trees), the span bound once."""
    n = len(atoms)
    if not trees:
        return numpy.zeros((0,), dtype=numpy.float64)
    heads = numpy.array([numpy.asarray(h) for h, _ in trees], dtype=numpy.int32).reshape(len(trees), n)
    classes = numpy.array([numpy.asarray(c) for _, c in trees], dtype=numpy.int64).reshape(len(trees), n)
    labels = numpy.where(heads >= 0, classes, -1).astype(numpy.int32)
    return system.score_trees(atoms, heads, labels, allow_break)


class TreeScorer:
    """A structperc_parser pipeline as a scorer of given trees and a source of k-best trees,
    in the original word order (`parser`: the component's name, default the pipeline's first
    structperc_parser). `reverse`: the pipeline was trained on reversed sentences
    (``reversed_doc(..., gold=True)``), so it is given each span reversed.

    The words' tags are the caller's (a reversed pipeline's own tagger is not run): candidates
    are compared under the tags they were parsed with.
    """

    def __init__(self, nlp: Language, reverse: bool = False, parser: Optional[str] = None):
        self.nlp = nlp
        self.reverse = reverse
        if parser is None:
            names = [name for name in nlp.pipe_names
                     if nlp.get_pipe_meta(name).factory == "structperc_parser"]
            if not names:
                raise ValueError(Errors.S250.format(names=nlp.pipe_names))
            parser = names[0]
        self.parser = nlp.get_pipe(parser)
        self.parser.begin_predict()
        values = self.parser._label_values
        self.label_values = values
        self.class_of = {int(v): i for i, v in enumerate(values[:-1])}
        self.root_class = len(values) - 1

    def _view(self, doc: Doc, start: int, end: int):
        span = doc[start:end].as_doc()
        if self.reverse:
            span = reversed_doc(span, self.nlp.vocab)
        elif span.vocab is not self.nlp.vocab:
            span = Doc(self.nlp.vocab, words=[t.text for t in span],
                       tags=[t.tag_ for t in span] if span.has_annotation("TAG") else None)
        return self.parser.model.atoms(span)

    def _own(self, tree: Tree) -> Tree:
        return reverse_tree(tree) if self.reverse else tree

    def score(self, doc: Doc, trees: Sequence[Tree], start: int = 0, end: Optional[int] = None,
              allow_break: bool = False) -> numpy.ndarray:
        """Each tree's score under the model: the sum of the action scores of its canonical
        transition path (each left arc as early as it can be made: the gold path the model was
        trained on). Arc-standard can build a tree by other paths too (a head's left and right
        dependents in either order), and the beam scores a tree by the path it found, so the two
        differ where the beam found another path. -inf for a tree with a label the model does
        not know or without a path (not projective)."""
        end = len(doc) if end is None else end
        atoms = self._view(doc, start, end)
        system = self.parser.system
        out = numpy.full((len(trees),), -numpy.inf)
        known, own = [], []
        for j, tree in enumerate(trees):
            heads, labels = self._own(tree)
            classes = numpy.array([-1 if h < 0 else self.class_of.get(int(v), -2)
                                   for h, v in zip(heads, labels)], dtype=numpy.int32)
            if not (classes == -2).any():
                known.append(j)
                own.append((heads, classes))
        out[known] = path_scores(system, atoms, own, allow_break)
        return out

    def kbest(self, doc: Doc, k: int, width: Optional[int] = None, start: int = 0,
              end: Optional[int] = None, allow_break: bool = False) -> List[Tuple[float, numpy.ndarray, numpy.ndarray]]:
        """The model's k best distinct trees of the span as (score, heads, labels), best first,
        in the original word order."""
        end = len(doc) if end is None else end
        atoms = self._view(doc, start, end)
        width = max(k, self.parser.cfg["beam_width"]) if width is None else width
        out = []
        for score, heads, classes in self.parser._span_kbest(self.parser.system, atoms, allow_break, k, width):
            heads, labels = self._own((heads, self.label_values[classes]))
            out.append((score, heads, labels))
        return out
