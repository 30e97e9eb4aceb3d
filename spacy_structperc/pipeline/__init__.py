from .base import PerceptronPipe
from .tagger import StructuredTagger

__all__ = ["PerceptronPipe", "StructuredTagger"]
