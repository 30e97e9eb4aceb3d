"""spacy-structperc: structured-perceptron components for spaCy."""
from .about import __version__
from .model import PerceptronModel
from .pipeline.chunker import StructuredChunker
from .pipeline.ner import LatentEntityRecognizer
from .pipeline.parser import StructuredParser
from .pipeline.tagger import StructuredTagger
from .clauses import ClauseIdentifier
from . import factories  # noqa: F401  (registers the factories)

__all__ = ["__version__", "ClauseIdentifier", "PerceptronModel", "LatentEntityRecognizer", "StructuredChunker", "StructuredParser",
           "StructuredTagger"]
