"""structperc_tagger: a structured-perceptron part-of-speech tagger.

Three decoders over one model (see SequenceLabeller): exact Viterbi (first or second order,
Collins 2002), beam search with violation-fixing updates (huang2012), and greedy history-based
decoding with depth-D lookahead and the margin perceptron (tsuruoka2011).
"""
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import POS, TAG
from spacy.parts_of_speech import IDS as UPOS_IDS
from spacy.tokens import Doc
from spacy.training import Example
from spacy.vocab import Vocab

from .._core.atoms import AtomTable
from .. import docarrays
from ..docarrays import TAG_ALTERNATIVES
from . import pos as pos_pass
from ..errors import Errors
from ..atoms import AtomBatch, check_word_dropout
from ..model import PerceptronModel
from ..pipeline.sequence import BatchClasses, Prepared, SequenceLabeller, _choice, batch_arrays

ATTRS = {"tag": TAG, "pos": POS}
# How a tagger with attr = "tag" sets token.pos_ (the `pos` setting; see make_tagger).
POS_SETTINGS = ("map", "predict")


class StructuredTagger(SequenceLabeller):
    """Assigns `token.tag_` (or `token.pos_`) with an averaged structured perceptron.

    With attr = "tag" it also writes `token.pos_` when the training data carried both. With
    pos = "map" each fine-grained tag gets the universal POS it was most often seen with
    (learned at initialize, saved in cfg["pos_of_tag"]), as spaCy's English pipelines map tags
    with their attribute_ruler. With pos = "predict" (the default) a tag seen with several
    (cfg["pos_candidates"]) has its POS predicted among those by a second pass (tagger/pos.py).

    The settings (decoder, lookahead_depth, order, beam_width, update, margin, direction, attr,
    pos, tag_dict_min_count) are documented on the factory, `spacy_structperc.tagger.factory.make_tagger`.
    """

    factory_name = "structperc_tagger"
    learned_cfg = ("labels", "pos_of_tag", "pos_candidates", "pos_templates")

    def __init__(self, vocab: Vocab, model: PerceptronModel, name: str = "tagger", *,
                 decoder: str = "greedy", lookahead_depth: int = 0, order: int = 2,
                 beam_width: int = 4, update: str = "max-violation", margin: float = 40.0,
                 direction: str = "ltr", attr: str = "tag", pos: str = "predict",
                 tag_dict_min_count: int = 0, alternatives: bool = False, scorer=None,
                 word_dropout: float = 0.0, lookahead_gap: Optional[float] = None):
        _choice(name, "attr", attr, tuple(ATTRS))
        check_word_dropout(name, word_dropout)
        if not isinstance(pos, str) or pos not in POS_SETTINGS:
            raise ValueError(Errors.S019.format(name=name, value=pos))
        if not isinstance(tag_dict_min_count, int) or tag_dict_min_count < 0:
            raise ValueError(Errors.S012.format(setting="tag_dict_min_count", name=name,
                                                value=tag_dict_min_count, requirement="an integer >= 0"))
        if not isinstance(alternatives, bool) or (alternatives and attr != "tag"):
            raise ValueError(Errors.S012.format(setting="alternatives", name=name, value=alternatives,
                                                requirement="true or false (true with attr = \"tag\" only)"))
        super().__init__(vocab, model, name, decoder=decoder, lookahead_depth=lookahead_depth,
                         order=order, beam_width=beam_width, update=update, margin=margin,
                         direction=direction, scorer=scorer, attr=attr, pos=pos,
                         tag_dict_min_count=tag_dict_min_count, alternatives=alternatives,
                         word_dropout=float(word_dropout), lookahead_gap=lookahead_gap)
        self._labels_changed()

    # Labels ------------------------------------------------------------------------------------

    def _check_label(self, label: str) -> None:
        if self.cfg["attr"] == "pos" and label not in UPOS_IDS:
            raise ValueError(Errors.S010.format(label=label, name=self.name))

    def _labels_changed(self) -> None:
        super()._labels_changed()
        labels = self.labels
        if self.cfg["attr"] == "pos":
            self._label_values = numpy.array([UPOS_IDS[l] for l in labels], dtype=numpy.uint64)
        else:
            self._label_values = numpy.array([self.vocab.strings.add(l) for l in labels], dtype=numpy.uint64)
        pos_of_tag = self.cfg.get("pos_of_tag") or {}
        # Universal POS per class when tags map to it (0 = none: POS is then left unset).
        self._pos_values = numpy.array([UPOS_IDS.get(pos_of_tag.get(l, ""), 0) for l in labels],
                                       dtype=numpy.uint64)
        self._class_of_value = {int(v): i for i, v in enumerate(self._label_values)}
        self._pos_pass = pos_pass.PosPass(labels, self.cfg.get("pos_candidates") or {},
                                          self.cfg.get("pos_templates") or pos_pass.TEMPLATES,
                                          self.model.templates.atom_names) if self._predicts_pos() else None
        self._class_of_label = {l: i for i, l in enumerate(labels)}
        # Row 0 allows every label; word types in the tag dictionary get their own rows, found
        # by orth id in an AtomTable of one column (a word not in it keeps row 0).
        label_dict = self.model.label_dict
        self._dict_rows = {orth: j + 1 for j, orth in enumerate(label_dict)}
        self._dict_masks = numpy.ones((len(label_dict) + 1, max(1, len(labels))), dtype=numpy.uint8)
        self._dict_table = AtomTable(1)
        for orth, j in self._dict_rows.items():
            self._dict_masks[j] = 0
            self._dict_masks[j, label_dict[orth]] = 1
            self._dict_table.add(orth, [j])

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Take the label set from `labels` (spacy init labels) or from the training examples."""
        attr = self.cfg["attr"]
        self._init_labels(get_examples, labels, lambda eg: (getattr(t, f"{attr}_") for t in eg.reference),
                          attr, nlp)
        self.model.label_dict = self._count_tag_dictionary(get_examples) if self.cfg["tag_dict_min_count"] else {}
        counts = pos_pass.pos_counts(eg.reference for eg in get_examples()) if attr == "tag" else {}
        self.cfg["pos_of_tag"] = {tag: max(sorted(seen), key=seen.__getitem__)
                                  for tag, seen in sorted(counts.items()) if tag in self._class_of_label}
        predict = attr == "tag" and self.cfg["pos"] == "predict"
        self.cfg["pos_candidates"] = pos_pass.count_candidates(counts, self._class_of_label, self.n_classes) \
            if predict else {}
        self.cfg["pos_templates"] = [list(parts) for parts in pos_pass.TEMPLATES] if predict else []
        self._labels_changed()

    def _predicts_pos(self) -> bool:
        """Whether a second pass predicts token.pos_ (attr = "tag", pos = "predict", and some
        tag was seen with more than one universal POS)."""
        return self.cfg["attr"] == "tag" and self.cfg.get("pos") == "predict" \
            and bool(self.cfg.get("pos_candidates"))

    def _decode_prepared(self, prepared: Prepared) -> BatchClasses:
        """SequenceLabeller's, with the second pass's word atoms kept for set_annotations."""
        out = super()._decode_prepared(prepared)
        if self._pos_pass:
            setattr(out, "pos_words", self._pos_pass.words(prepared.atoms.atoms))
        return out

    def pipe_meta_overrides(self) -> Dict[str, Any]:
        """tag_acc is what attr = "tag" is selected on, pos_acc what attr = "pos" is; the other
        would always be 0 (or, for POS mapped from tags, follows from tag_acc)."""
        if self.cfg["attr"] == "pos":
            return {**super().pipe_meta_overrides(), "assigns": ["token.pos"],
                    "default_score_weights": {"pos_acc": 1.0, "tag_acc": None}}
        return {**super().pipe_meta_overrides(), "assigns": ["token.tag", "token.pos"],
                "default_score_weights": {"tag_acc": 1.0, "pos_acc": None}}

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

    def _dict_mask(self, orths: numpy.ndarray) -> numpy.ndarray:
        rows = numpy.zeros((len(orths), 1), dtype=numpy.uint64)
        self._dict_table.gather(orths, rows)
        return self._dict_masks[rows[:, 0].astype(numpy.intp)]

    def _position_mask(self, doc: Doc, gold: Optional[numpy.ndarray]) -> Optional[numpy.ndarray]:
        """The tag dictionary's candidates per token (never excluding a known gold label)."""
        if not self._dict_rows:
            return None
        allowed = self._dict_mask(doc.to_array("ORTH"))
        if gold is not None:
            known = numpy.flatnonzero(gold >= 0)
            allowed[known, gold[known]] = 1   # never forbid what the gold says
        return allowed

    def _position_masks(self, docs: Sequence[Doc], atoms: AtomBatch) -> Optional[numpy.ndarray]:
        return self._dict_mask(atoms.orths) if self._dict_rows else None

    def set_annotations(self, docs: Iterable[Doc], batch_classes: List[numpy.ndarray]) -> None:
        """Write the tags (and their POS) of the whole batch in one docarrays.write."""
        attr = ATTRS[self.cfg["attr"]]
        with_pos = attr == TAG and bool(self._pos_values.any())
        docs = list(docs)
        classes, offsets, _ = batch_arrays(docs, batch_classes, (), self.name)
        if with_pos:
            attrs = [TAG, POS]
            values = numpy.stack([self._label_values[classes], self._pos_values[classes]], axis=1)
            if self._pos_pass and len(classes):
                words = getattr(batch_classes, "pos_words", None)
                if words is None or not (isinstance(batch_classes, BatchClasses) and batch_classes.matches(docs)):
                    words = self._pos_pass.words(self.model.atoms.batch(docs, self.name).atoms)
                self._pos_pass.predict(self.model.weights, classes, offsets, words, values[:, 1])
        else:
            attrs = [attr]
            values = self._label_values[classes].reshape((-1, 1))
        docarrays.write(docs, offsets, attrs, values)
        if self.cfg.get("alternatives"):
            for k, doc in enumerate(docs):
                doc.user_data[TAG_ALTERNATIVES] = self.alternatives(doc, classes[offsets[k]:offsets[k + 1]])

    def set_alternatives(self, on: bool = True) -> None:
        """Turn the `alternatives` setting on or off in a trained (or loaded) tagger: a loaded
        pipeline keeps its saved settings whatever spacy.load's config says. Saved with the
        pipeline. Call it before serving, not while other threads predict."""
        if not isinstance(on, bool) or (on and self.cfg["attr"] != "tag"):
            raise ValueError(Errors.S012.format(setting="alternatives", name=self.name, value=on,
                                                requirement="true or false (true with attr = \"tag\" only)"))
        self.cfg["alternatives"] = on

    def alternatives(self, doc: Doc, classes: numpy.ndarray) -> Dict[str, List]:
        """Each token's runner-up tag along the decoded path: the model's local scores at each
        token, given the tags before it in the decoding direction, as the greedy decoder sees
        them (tag dictionary and masks applied). Returns {"tags": the tags written, "second":
        each token's second-best tag (0 where no other tag is allowed), "margin": best minus
        second-best score}, tags as StringStore hashes: what a later structperc_parser with
        `tag_flips` reads from `doc.user_data[TAG_ALTERNATIVES]`."""
        n = len(doc)
        out: Dict[str, List] = {"tags": [], "second": [], "margin": []}
        if n == 0:
            return out
        self._bind(doc)
        system = self.system
        rtl = self.cfg.get("direction", "ltr") == "rtl"
        path = numpy.asarray(classes, dtype=numpy.int64)
        path = path[::-1] if rtl else path
        second = numpy.zeros((n,), dtype=numpy.int64)
        margin = numpy.full((n,), numpy.inf)
        state = system.initial_state()
        for i, c in enumerate(path.tolist()):
            scores = numpy.asarray(system.action_scores(state), dtype=numpy.float64)
            best = scores[c]
            scores[c] = -numpy.inf
            j = int(numpy.argmax(scores))
            if numpy.isfinite(scores[j]):
                second[i], margin[i] = j + 1, best - scores[j]   # j + 1: 0 is "none"
            state = system.step(state, c)
        if rtl:
            second, margin = second[::-1], margin[::-1]
        values = numpy.concatenate([numpy.zeros((1,), dtype=numpy.uint64), self._label_values])
        out["tags"] = self._label_values[numpy.asarray(classes, dtype=numpy.int64)].tolist()
        out["second"] = values[second].tolist()
        out["margin"] = margin.tolist()
        return out

    # Training ----------------------------------------------------------------------------------

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One online perceptron pass over the examples (SequenceLabeller.update); with a
        second pass (pos = "predict"), then one over their ambiguous tags' universal POS, on
        the gold tags. losses["{name}_pos"] counts its mistakes."""
        examples = list(examples)
        losses = super().update(examples, drop=drop, sgd=sgd, losses=losses)
        if self._pos_pass:
            key = f"{self.name}_pos"
            losses[key] = losses.get(key, 0.0) + self._update_pos(examples)
        return losses

    def _update_pos(self, examples: Sequence[Example]) -> int:
        weights = self.model.weights
        mistakes = 0
        for eg in examples:
            doc = eg.predicted
            if not len(doc):
                continue
            if self.same_tokens(eg):
                gold_pos = eg.reference.to_array(POS).astype(numpy.uint64)
            else:
                gold_pos = numpy.asarray([UPOS_IDS.get(p or "", 0) for p in eg.get_aligned("POS", as_string=True)],
                                         dtype=numpy.uint64)
            if not gold_pos.any():
                continue
            words = self._pos_pass.words(self.model.atoms(doc, self.name))
            mistakes += self._pos_pass.update(weights, self._gold_classes(eg), gold_pos, words)[1]
        return mistakes

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
