"""The NER's perceptron model: the shared PerceptronModel plus the atoms only NER reads.

Gazetteer atoms (gazetteers.GAZ_ATOMS) come from the component's name lists; stage atoms
(aggregation.STAGE_ATOMS) are left 0 by the extractor and filled by the component from its
first-stage predictions. Every other atom is the shared AtomExtractor's.
"""
from typing import List, Optional, Sequence

import numpy
from spacy.attrs import LOWER, SENT_START

from ..atoms import AtomBatch, AtomExtractor, CasingTable, Lexicon
from ..model import PerceptronModel
from .aggregation import STAGE_ATOMS
from .gazetteers import GAZ_ATOMS, Gazetteer, fold_of  # noqa: F401

NER_ATOMS = GAZ_ATOMS + STAGE_ATOMS


class NerAtomExtractor:
    """AtomExtractor's atoms with the gazetteer atoms added (the stage atoms' columns are 0).

    `fold`: the jackknife fold of a training Doc (its own lists' entries left out); None at
    prediction time (every entry)."""

    def __init__(self, atom_names: Sequence[str], clusters=None, lexicon: Optional[Lexicon] = None,
                 gazetteer: Optional[Gazetteer] = None, casing: Optional[CasingTable] = None):
        self.atom_names = list(atom_names)
        self.clusters = clusters or {}
        self.lexicon = lexicon
        self.gazetteer = gazetteer
        self.casing = casing
        base_names = [n for n in self.atom_names if n not in NER_ATOMS]
        self.base = AtomExtractor(base_names, clusters=clusters, lexicon=lexicon, casing=casing)
        self._plain = len(base_names) == len(self.atom_names)
        self._base_cols = numpy.array([self.atom_names.index(n) for n in base_names], dtype=numpy.int64)
        self._gaz = [(j, n) for j, n in enumerate(self.atom_names) if n in GAZ_ATOMS]
        self.stage_columns = {n: j for j, n in enumerate(self.atom_names) if n in STAGE_ATOMS}

    def __reduce__(self):
        return (NerAtomExtractor, (self.atom_names, self.clusters, self.lexicon, self.gazetteer, self.casing))

    def batch(self, docs, name: Optional[str] = None, extra: Sequence[int] = (), on_missing=None,
              fold: Optional[int] = None) -> AtomBatch:
        if self._plain:
            return self.base.batch(docs, name, extra, on_missing)
        n_extra = len(extra)
        mine = [LOWER, SENT_START] if self._gaz else []
        b = self.base.batch(docs, name, list(extra) + mine, on_missing)
        atoms = numpy.zeros((len(b.atoms), len(self.atom_names)), dtype=numpy.uint64)
        atoms[:, self._base_cols] = b.atoms
        if self._gaz and self.gazetteer is not None and len(atoms):
            lower = numpy.ascontiguousarray(b.extra[:, n_extra])
            starts = b.extra[:, n_extra + 1] == 1
            lengths = numpy.diff(b.offsets)
            starts[b.offsets[:-1][lengths > 0]] = True
            columns = self.gazetteer.atoms(lower, starts, [n for _, n in self._gaz], fold)
            for (j, _), column in zip(self._gaz, columns):
                atoms[:, j] = column
        return AtomBatch(atoms, b.offsets, b.orths, b.extra[:, :n_extra])

    def __call__(self, doc, name: Optional[str] = None, fold: Optional[int] = None) -> numpy.ndarray:
        return self.batch([doc], name, fold=fold).atoms


class NerPerceptronModel(PerceptronModel):
    """PerceptronModel whose atoms may include the NER's own (gazetteers, two-stage)."""

    gazetteer: Optional[Gazetteer] = None   # a class default: model.py's parse probe has none
    atoms: NerAtomExtractor   # type: ignore[assignment]

    def _atom_extractor(self) -> NerAtomExtractor:   # type: ignore[override]
        lexicon = Lexicon(self.lexicon_tables) if self.lexicon_tables else None
        return NerAtomExtractor(self.atom_names, self.clusters, lexicon, self.gazetteer, self.casing)

    def set_gazetteer(self, gazetteer: Optional[Gazetteer]) -> None:
        self.gazetteer = gazetteer
        self.atoms = self._atom_extractor()

    @classmethod
    def adopt(cls, model: PerceptronModel, templates: List[dict]) -> "NerPerceptronModel":
        """This kind of model with `model`'s settings and state, and `templates` added to its own."""
        new = cls(list(model.template_specs) + list(templates), model.n_buckets, model.precision,
                  model.prune_below)
        new.clusters, new.label_dict, new.casing = model.clusters, model.label_dict, model.casing
        new.lexicon_tables, new.allowed_keys = model.lexicon_tables, model.allowed_keys
        new.set_templates(new.template_specs)
        new.weights = model.weights
        return new

    def __reduce__(self):
        base = PerceptronModel.__reduce__(self)[1]
        return (_rebuild_ner_model, (base, self.gazetteer))


def _rebuild_ner_model(base: tuple, gazetteer: Optional[Gazetteer]) -> NerPerceptronModel:
    (templates, n_buckets, weights, clusters, label_dict, lexicon_tables, allowed_keys,
     precision, prune_below, casing) = base
    model = NerPerceptronModel(templates, n_buckets, precision, prune_below)
    model.clusters, model.label_dict, model.lexicon_tables = clusters, label_dict, lexicon_tables
    model.casing = casing
    model.allowed_keys, model.gazetteer = allowed_keys, gazetteer
    model.set_templates(templates)
    model.weights = weights
    return model
