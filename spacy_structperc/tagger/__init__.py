"""structperc_tagger, the part-of-speech tagger (collins2001, huang2012, tsuruoka2011).

factory.py    the factory: default config and settings     component.py  the pipe (StructuredTagger)
features.py   templates, tagger_features.v1                scorer.py     tagger_scorer.v1
Shared with the other sequence labellers: pipeline/sequence.py (decoding and training) and the
model, spacy_structperc/model.py. The decoders are Cython: _core/tagging.pyx (the tag system),
_core/viterbi.pyx, _core/beam.pyx, _core/lookahead.pyx and _core/batch.pyx (greedy over a batch).
"""
from .component import StructuredTagger

__all__ = ["StructuredTagger"]
