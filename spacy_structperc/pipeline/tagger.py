"""structperc_tagger: a structured-perceptron part-of-speech tagger.

Three decoders over one model: exact Viterbi (first or second order, Collins 2002), beam search
with violation-fixing updates (huang2012), and greedy history-based decoding with depth-D
lookahead and the margin perceptron (tsuruoka2011).
"""
from typing import Dict, Iterable, List, Optional

import numpy
from spacy.attrs import POS, TAG
from spacy.parts_of_speech import IDS as UPOS_IDS
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab

from .._core import beam, lookahead, viterbi
from .._core.tagging import TagSystem
from ..errors import Errors
from ..model import PerceptronModel
from .base import PerceptronPipe

DECODERS = ("greedy", "viterbi", "beam")
DIRECTIONS = ("ltr", "rtl")
ATTRS = {"tag": TAG, "pos": POS}


def _choice(name: str, setting: str, value, options) -> None:
    if value not in options:
        raise ValueError(Errors.S008.format(setting=setting, value=value, name=name, options=list(options)))


class StructuredTagger(PerceptronPipe):
    """Assigns `token.tag_` (or `token.pos_`) with an averaged structured perceptron."""

    factory_name = "structperc_tagger"

    def __init__(self, vocab: Vocab, model: PerceptronModel, name: str = "tagger", *,
                 decoder: str = "greedy", lookahead_depth: int = 0, order: int = 2,
                 beam_width: int = 4, update: str = "max-violation", margin: float = 40.0,
                 direction: str = "ltr", attr: str = "tag", tag_dict_min_count: int = 0,
                 scorer=None):
        _choice(name, "decoder", decoder, DECODERS)
        _choice(name, "direction", direction, DIRECTIONS)
        _choice(name, "attr", attr, tuple(ATTRS))
        _choice(name, "update", update, beam.UPDATE_METHODS)
        _choice(name, "order", order, (1, 2))
        for setting, value, low in (("lookahead_depth", lookahead_depth, 0), ("beam_width", beam_width, 1),
                                    ("tag_dict_min_count", tag_dict_min_count, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=value,
                                                    requirement=f"an integer >= {low}"))
        if not margin >= 0:
            raise ValueError(Errors.S012.format(setting="margin", name=name, value=margin, requirement=">= 0"))
        if decoder == "viterbi" and model.templates.max_history > order:
            raise ValueError(Errors.S011.format(name=name, history=model.templates.max_history,
                                                decoder=decoder, order=order))
        super().__init__(vocab, model, name, scorer=scorer, decoder=decoder,
                         lookahead_depth=lookahead_depth, order=order, beam_width=beam_width,
                         update=update, margin=float(margin), direction=direction, attr=attr,
                         tag_dict_min_count=tag_dict_min_count)
        self._system: Optional[TagSystem] = None
        self._labels_changed()

    # Labels ------------------------------------------------------------------------------------

    def _check_label(self, label: str) -> None:
        if self.cfg["attr"] == "pos" and label not in UPOS_IDS:
            raise ValueError(Errors.S010.format(label=label, name=self.name))

    def _labels_changed(self) -> None:
        self._system = None
        labels = self.labels
        if self.cfg["attr"] == "pos":
            self._label_values = numpy.array([UPOS_IDS[l] for l in labels], dtype=numpy.uint64)
        else:
            self._label_values = numpy.array([self.vocab.strings.add(l) for l in labels], dtype=numpy.uint64)
        self._class_of_value = {int(v): i for i, v in enumerate(self._label_values)}
        self._class_of_label = {l: i for i, l in enumerate(labels)}
        # Row 0 allows every label; word types in the tag dictionary get their own rows.
        label_dict = self.model.label_dict
        self._dict_rows = {orth: j + 1 for j, orth in enumerate(label_dict)}
        self._dict_masks = numpy.ones((len(label_dict) + 1, max(1, len(labels))), dtype=numpy.uint8)
        for orth, j in self._dict_rows.items():
            self._dict_masks[j] = 0
            self._dict_masks[j, label_dict[orth]] = 1

    @property
    def system(self) -> TagSystem:
        weights = self.model.weights
        if self._system is None or self._system.weights is not weights:
            self._system = TagSystem(self.model.templates, weights)
        return self._system

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Take the label set from `labels` (spacy init labels) or from the training examples."""
        attr = self.cfg["attr"]
        self._init_labels(get_examples, labels, lambda eg: (getattr(t, f"{attr}_") for t in eg.reference),
                          attr, nlp)
        self.model.label_dict = self._count_tag_dictionary(get_examples) if self.cfg["tag_dict_min_count"] else {}
        self._labels_changed()

    def _count_tag_dictionary(self, get_examples) -> Dict[int, List[int]]:
        """Words seen at least `tag_dict_min_count` times may only take the labels seen with them
        (Ratnaparkhi 1996): fewer candidates to search, and fewer absurd errors."""
        counts: Dict[int, Dict[int, int]] = {}
        attr = ATTRS[self.cfg["attr"]]
        for eg in get_examples():
            ref = eg.reference
            for orth, value in zip(ref.to_array("ORTH").tolist(), ref.to_array(attr).tolist()):
                clas = self._class_of_value.get(value)
                if clas is not None:
                    seen = counts.setdefault(orth, {})
                    seen[clas] = seen.get(clas, 0) + 1
        min_count = self.cfg["tag_dict_min_count"]
        return {orth: sorted(seen) for orth, seen in sorted(counts.items())
                if sum(seen.values()) >= min_count}

    # Decoding ----------------------------------------------------------------------------------

    def _bind(self, doc: Doc, gold=None):
        atoms = self.model.atoms(doc)
        allowed = None
        if self._dict_rows:
            rows_of = self._dict_rows
            allowed = self._dict_masks[[rows_of.get(o, 0) for o in doc.to_array("ORTH").tolist()]]
            if gold is not None:
                known = numpy.flatnonzero(gold >= 0)
                allowed[known, gold[known]] = 1   # never forbid what the gold says
        if self.cfg["direction"] == "rtl":
            atoms = atoms[::-1]
            gold = gold[::-1] if gold is not None else None
            allowed = allowed[::-1] if allowed is not None else None
        self.system.set_sentence(atoms, gold, allowed)

    def _decode(self) -> numpy.ndarray:
        decoder = self.cfg["decoder"]
        if decoder == "viterbi":
            return viterbi.viterbi(self.system, self.cfg["order"])[0]
        if decoder == "beam":
            return beam.decode(self.system, self.cfg["beam_width"])
        return lookahead.decode(self.system, self.cfg["lookahead_depth"])

    def predict(self, docs: Iterable[Doc]) -> List[numpy.ndarray]:
        """Label every token of every doc, with averaged weights."""
        self.begin_predict()
        out = []
        for doc in docs:
            if len(doc) == 0:
                out.append(numpy.zeros((0,), dtype=numpy.int32))
                continue
            self._bind(doc)
            classes = self._decode()
            out.append(classes[::-1] if self.cfg["direction"] == "rtl" else classes)
        return out

    def set_annotations(self, docs: Iterable[Doc], batch_classes: List[numpy.ndarray]) -> None:
        attr = ATTRS[self.cfg["attr"]]
        for doc, classes in zip(docs, batch_classes):
            if len(doc):
                doc.from_array([attr], self._label_values[classes].reshape((-1, 1)))

    # Training ----------------------------------------------------------------------------------

    def _gold_classes(self, eg: Example) -> numpy.ndarray:
        attr = self.cfg["attr"]
        if self.same_tokens(eg):
            values = eg.reference.to_array(ATTRS[attr]).tolist()
            lut = self._class_of_value
            classes = [lut.get(v, -2) if v else -1 for v in values]
            if -2 in classes:
                bad = eg.reference[classes.index(-2)]
                raise ValueError(Errors.S004.format(label=getattr(bad, f"{attr}_"), name=self.name))
        else:
            aligned = eg.get_aligned(attr.upper(), as_string=True)
            classes = []
            for label in aligned:
                if not label:
                    classes.append(-1)
                elif label in self._class_of_label:
                    classes.append(self._class_of_label[label])
                else:
                    raise ValueError(Errors.S004.format(label=label, name=self.name))
        return numpy.asarray(classes, dtype=numpy.int32)

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One online perceptron pass over the examples.

        losses[name] counts wrongly labelled tokens (decoded with the current weights, before each
        update). For beam training, `{name}_updates` and `{name}_invalid_updates` count updates and
        those standard updates that were not violations (huang2012 Fig. 5).
        """
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        validate_examples(examples, f"{type(self).__name__}.update")
        self._require_initialized()
        self.begin_update()
        weights = self.model.weights
        system = self.system
        decoder = self.cfg["decoder"]
        mistakes = n_updates = n_invalid = 0
        for eg in examples:
            doc = eg.predicted
            if len(doc):
                gold = self._gold_classes(eg)
                if (gold >= 0).any():
                    self._bind(doc, gold)
                    if decoder == "viterbi":
                        wrong, _ = viterbi.train_viterbi(system, self.cfg["order"])
                        mistakes += wrong
                        n_updates += wrong > 0
                    elif decoder == "beam":
                        if (gold < 0).any():
                            self._complete_gold(gold)
                        result = beam.train(system, self.cfg["beam_width"], self.cfg["update"])
                        mistakes += result["wrong"]
                        n_updates += result["updated"]
                        n_invalid += result["invalid"]
                    else:
                        updates, errors, _ = lookahead.train(system, self.cfg["lookahead_depth"], self.cfg["margin"])
                        mistakes += errors
                        n_updates += updates
            weights.next_example()
        losses[self.name] += mistakes
        losses[f"{self.name}_updates"] = losses.get(f"{self.name}_updates", 0.0) + n_updates
        if decoder == "beam" and self.cfg["update"] in ("standard", "hybrid"):
            losses[f"{self.name}_invalid_updates"] = losses.get(f"{self.name}_invalid_updates", 0.0) + n_invalid
        return losses

    def _complete_gold(self, gold: numpy.ndarray) -> None:
        """Fill missing gold labels with the model's best guess consistent with the known ones."""
        system = self.system
        atoms, allowed_before = system._bound_atoms(), system._bound_allowed()
        if self.cfg["direction"] == "rtl":
            gold = gold[::-1]
        known = gold >= 0
        allowed = numpy.ones((len(gold), len(self.labels)), dtype=numpy.uint8)
        if allowed_before is not None:
            allowed &= allowed_before
        allowed[known] = 0
        allowed[known, gold[known]] = 1
        system.set_sentence(atoms, None, allowed)
        completed = lookahead.decode(system, 0)
        system.set_sentence(atoms, completed, allowed_before)
