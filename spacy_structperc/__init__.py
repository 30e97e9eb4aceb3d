"""spacy-structperc: structured-perceptron components for spaCy.

One folder per component (tagger, chunker, ner, parser, clauses), each with its factory,
component, features and (where it has its own) model; reranking/ is the parser's and chunker's
k-best reranker; pipeline/ what the components share; _core/ the Cython core, which knows
nothing of spaCy. Importing the package registers every factory and registered function.
"""
from importlib import import_module

from .about import __version__
from .errors import Errors

try:   # the compiled core, which every component needs: a clear message when it was never built
    import_module(f"{__name__}._core.templates")
except ModuleNotFoundError as _err:
    if not (_err.name or "").startswith(__name__ + "._core"):
        raise
    raise ImportError(Errors.S050.format(module=_err.name)) from _err
from . import documents as _documents  # noqa: F401  (registers the documents corpus)
from . import readers as _readers  # noqa: F401  (registers the corpus readers)
from . import scorers as _scorers  # noqa: F401  (registers the chunk scorer)
from .model import PerceptronModel
from .pipeline import base as _base  # noqa: F401  (registers the epoch hook)
from .tagger import factory as _tagger_factory  # noqa: F401
from .chunker import factory as _chunker_factory  # noqa: F401
from .ner import factory as _ner_factory  # noqa: F401
from .parser import factory as _parser_factory  # noqa: F401
from .clauses import factory as _clauses_factory  # noqa: F401
from .tagger import StructuredTagger
from .chunker import StructuredChunker
from .ner import LatentEntityRecognizer
from .parser import StructuredParser
from .clauses import ClauseIdentifier

__all__ = ["__version__", "ClauseIdentifier", "PerceptronModel", "LatentEntityRecognizer", "StructuredChunker", "StructuredParser",
           "StructuredTagger"]
