"""structperc_parser, the labelled arc-standard dependency parser (tsuruoka2011, huang2012).

factory.py    the factory: default config and settings     component.py  the pipe (StructuredParser)
features.py   templates, parser_features.v1                model.py      ParserModel, ParserPerceptron.v1
nonproj.py    pseudo-projective decoration of gold trees
Its optional k-best reranker (collins2001) is spacy_structperc/reranking/. The transition system
and its state templates are Cython: _core/arcstandard.pyx; the searches _core/beam.pyx,
_core/lookahead.pyx and _core/batch.pyx (greedy over a batch).
"""
from .component import StructuredParser
from .model import ParserModel

__all__ = ["ParserModel", "StructuredParser"]
