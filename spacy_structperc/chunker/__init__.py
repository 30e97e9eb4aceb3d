"""structperc_chunker, the text chunker as BIO tagging (tsuruoka2011), writing doc.spans.

factory.py    the factory: default config and settings     component.py  the pipe (StructuredChunker)
features.py   templates, chunker_features.v1
Shared: pipeline/sequence.py (decoding and training), pipeline/bio.py (BIO classes and spans),
scorers.py (conlleval's chunk scorer) and readers.py (the CoNLL-2000 reader). The decoders are
Cython: _core/tagging.pyx, _core/viterbi.pyx, _core/beam.pyx, _core/lookahead.pyx, _core/batch.pyx.
"""
from .component import StructuredChunker

__all__ = ["StructuredChunker"]
