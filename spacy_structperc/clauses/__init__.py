"""structperc_clauses, the clause identifier (carreras2003), and everything only it uses.

factory.py    the factory: default config and settings     component.py  the pipe (ClauseIdentifier)
features.py   atoms, pattern elements, templates,          model.py      the three learned functions,
              clause_features.v1                                         ClauseRanker.v1
conll2001.py  CoNLL-2001 reader/writer                      ud.py         clauses derived from UD trees
scorer.py     exact-span P/R/F1, clause_scorer.v1
The search and the learners are Cython: spacy_structperc/_core/span_ranker.pyx.
"""
from . import conll2001 as _conll2001  # noqa: F401  (registers the CoNLL-2001 reader)
from . import scorer as _scorer  # noqa: F401  (registers the clause scorer)
from . import ud as _ud  # noqa: F401  (registers the UD clause reader)
from .component import ClauseIdentifier
from .model import ClauseModel

__all__ = ["ClauseIdentifier", "ClauseModel"]
