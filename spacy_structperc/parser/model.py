"""The parser's model: averaged perceptron weights over templates that address parser states
(stack, queue, children), and its registered architecture (spacy-structperc.ParserPerceptron.v1).
The templates are in features.py, the states and their positions in _core/arcstandard.pyx.
"""
from typing import List, Sequence

from spacy.util import registry

from .._core.arcstandard import ParseTemplates
from ..atoms import AtomExtractor, Lexicon
from ..model import PRECISION, PRUNE_BELOW, PerceptronModel
from .features import parser_atoms


class ParserModel(PerceptronModel):
    """A PerceptronModel whose templates address parser states (stack, queue, children)."""

    templates: ParseTemplates  # type: ignore[assignment]  # (a TemplateSet in the base class)

    def set_templates(self, templates: Sequence[dict]) -> None:
        self.template_specs = [dict(name=t["name"], parts=[list(p) for p in t["parts"]]) for t in templates]
        self.atom_names = parser_atoms(self.template_specs)
        self.templates = ParseTemplates(self.template_specs, self.atom_names)
        self.atoms = self._atom_extractor()

    def _atom_extractor(self) -> AtomExtractor:
        lexicon = Lexicon(self.lexicon_tables) if self.lexicon_tables else None
        return AtomExtractor(self.atom_names, component="parser", clusters=self.clusters, lexicon=lexicon,
                             casing=self.casing)

    def __reduce__(self):
        return (_rebuild_parser_model, (self.template_specs, self.n_buckets, self.weights,
                                        self.clusters, self.lexicon_tables, self.allowed_keys,
                                        self.precision, self.prune_below, self.casing))


def _rebuild_parser_model(templates, n_buckets, weights, clusters, lexicon_tables, allowed_keys=None,
                          precision="float32", prune_below=0.0, casing=None):
    model = ParserModel(templates, n_buckets, precision, prune_below)
    model.clusters = clusters
    model.casing = casing
    model.lexicon_tables = lexicon_tables
    model.allowed_keys = allowed_keys
    model.set_templates(templates)
    model.weights = weights
    return model


@registry.architectures("spacy-structperc.ParserPerceptron.v1")
def build_parser_perceptron(features: List[dict], n_buckets: int = 1 << 21, precision: str = PRECISION,
                            prune_below: float = PRUNE_BELOW) -> ParserModel:
    """Averaged perceptron weights over parser-state templates (see parser_features.v1).
    precision and prune_below: as for spacy-structperc.AveragedPerceptron.v1."""
    return ParserModel(features, n_buckets, precision, prune_below)
