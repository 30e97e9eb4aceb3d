"""structperc_clauses, the clause identifier (carreras2003), and everything only it uses.

component.py  the pipe (ClauseIdentifier)        model.py    the three learned functions
features.py   atoms, pattern elements, templates  registry.py architecture, features, readers
conll2001.py  CoNLL-2001 reader/writer            ud.py       clauses derived from UD trees
scorer.py     exact-span P/R/F1
The search and the learners are Cython: spacy_structperc/_core/span_ranker.pyx.
"""
from .component import ClauseIdentifier
from .model import ClauseModel

__all__ = ["ClauseIdentifier", "ClauseModel"]
