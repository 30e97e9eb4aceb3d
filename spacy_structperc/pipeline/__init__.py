from .base import PerceptronPipe
from .chunker import StructuredChunker
from .sequence import SequenceLabeller
from .tagger import StructuredTagger

__all__ = ["PerceptronPipe", "SequenceLabeller", "StructuredChunker", "StructuredTagger"]
