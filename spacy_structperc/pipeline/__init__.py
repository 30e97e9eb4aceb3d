"""What the trainable components share (each component has its own folder beside this one).

base.py      PerceptronPipe: labels, initialization checks, averaging, serialization, threads;
             build_pipe (every factory's body) and the epoch-hook callback
sequence.py  SequenceLabeller: greedy / lookahead / Viterbi / beam sequence labelling
             (tagger, chunker and NER derive from it)
bio.py       BIO classes, their transitions and spans (chunker and NER)
"""
from .base import PerceptronPipe
from .sequence import SequenceLabeller

__all__ = ["PerceptronPipe", "SequenceLabeller"]
