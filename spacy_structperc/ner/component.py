"""structperc_ner: named entities with the latent-variable perceptron (sun2009).

Every BIO class (O, B-X, I-X) owns `n_latent` hidden sub-states; the weights have one column per
sub-state, so each node feature is conjoined with the sub-state and the edge features link
sub-states. Decoding is exact Viterbi over sub-states, then projection to BIO classes: only
valid BIO sequences exist in the latent space, so only valid ones come out. Training follows
sun2009 Eq. 8: when the projection of the best latent path z is wrong, the weights move towards
h*, the best latent path whose projection is the gold, and away from z.

Two details from the paper matter in practice:
- the weights start at small seeded noise (||theta|| ~ 0, not 0): with zeros every sub-state of
  a label ties and they would never split. Rows are created when a feature is first updated, and
  start at noise then (`init_scale`, `seed`);
- modified parameter averaging: at the start of every k-th pass over the data (`reset_every`),
  the current weights are replaced by the averaged ones. spaCy does not tell components about
  epochs, so the training loop must call `start_epoch`: `configs/ner.cfg` does it with the
  `spacy-structperc.epoch_hook.v1` callback in `[training.before_update]`.

`n_latent = 1` is the plain structured perceptron (Collins 2002) over the same features.

The labels the sub-states belong to are BIO classes or, with `scheme = "bilou"`, BILOU classes
(see `encoding`); predictions are BIO classes either way, and doc.ents are written from them.

With document features (features.document: what a word's other occurrences in the Doc say,
atoms.CONTEXT_ATOMS), a Doc is meant to be a whole text: training reads documents (the CoNLL-2003
reader's `documents = true`), and a Doc with sentence boundaries is trained and decoded one
sentence at a time, as sentence Docs are; only those features look beyond the sentence.

Gazetteers (`gazetteers`, gazetteers.py) add atoms from name lists the component carries and
saves in its own block; a training Doc reads the lists jackknifed (its fold's entries left out).
Two-stage aggregation (`two_stage`, aggregation.py) decodes twice: the second pass reads what the
first said about each word's other occurrences in the Doc, so it is also trained and decoded a
sentence at a time, as with document features.
"""
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
import srsly
from spacy import util
from spacy.attrs import ENT_IOB, ENT_KB_ID, ENT_TYPE, ORTH, SENT_START
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.vocab import Vocab

from .. import docarrays
from .._core import viterbi
from ..errors import Errors, Warnings, warn
from ..model import PerceptronModel
from ..atoms import AtomBatch
from ..pipeline.bio import BIOLabels, batch_chunks, latent_transitions
from ..atoms import CONTEXT_ATOMS, check_word_dropout, hide_words, template
from ..pipeline.sequence import BatchClasses, Prepared, SequenceLabeller, _choice, batch_arrays, batch_windows
from . import encoding, gazetteers as gaz
from .aggregation import MAX_STAGE_TYPES, STAGE_ATOMS, stage_atoms
from .model import NerPerceptronModel

GAZETTEER_BLOCK = "gazetteers"
# What two-stage aggregation passes on (aggregation.py): every label, or the entity types only.
AGGREGATE = ("all", "entities")


def extra_templates(sources: Sequence[str], two_stage: bool) -> List[dict]:
    """The templates the component adds to its model's: gazetteer matches of `sources` (the
    atom alone, with the word's shape, and at the neighbours) and the two-stage atoms (alone and
    with the shape). All are label-level (tied): the latent states of a label share them."""
    t: List[dict] = []
    for atom in gaz.group_atoms(sources):
        t.append(dict(template(f"label:{atom}", (0, atom)), tied=True))
        t.append(dict(template(f"label:{atom},sh0", (0, atom), (0, "short_shape")), tied=True))
        if atom.startswith("gz_"):
            t.append(dict(template(f"label:{atom}-1", (-1, atom)), tied=True))
            t.append(dict(template(f"label:{atom}+1", (1, atom)), tied=True))
    if two_stage:
        for atom in STAGE_ATOMS:
            t.append(dict(template(f"label:{atom}", (0, atom)), tied=True))
            t.append(dict(template(f"label:{atom},sh0", (0, atom), (0, "short_shape")), tied=True))
    return t

IOB_I, IOB_O, IOB_B = 1, 2, 3   # spaCy's token.ent_iob codes; 0 = no annotation


class LatentEntityRecognizer(BIOLabels, SequenceLabeller):
    """Finds non-overlapping named entities and writes them to doc.ents, keeping the entities
    already on the Doc.

    The settings (n_latent, order, reset_every, init_scale, seed, scheme) are documented on the factory,
    `spacy_structperc.ner.factory.make_ner`.
    """

    factory_name = "structperc_ner"
    model: NerPerceptronModel
    span_kind = "entity type"
    # Read with the atoms: which Docs carry entities already, and the KB ids the write keeps.
    read_attrs = (ENT_IOB, ENT_KB_ID)
    _write_attrs = [ENT_IOB, ENT_TYPE, ENT_KB_ID]

    def __init__(self, vocab: Vocab, model: PerceptronModel, name: str = "ner", *, n_latent: int = 4,
                 order: int = 1, reset_every: int = 4, init_scale: float = 0.01, seed: int = 0,
                 scheme: str = "bio", gazetteers: Sequence[str] = (), gazetteer_folds: int = 10,
                 two_stage: bool = False, aggregate: str = "all", word_dropout: float = 0.0,
                 scorer=None):
        _choice(name, "scheme", scheme, encoding.SCHEMES)
        _choice(name, "aggregate", aggregate, AGGREGATE)
        gazetteers = list(gazetteers)
        for source in gazetteers:
            if source not in gaz.SOURCES:
                raise ValueError(Errors.S403.format(source=source, name=name, options=list(gaz.SOURCES)))
        if not isinstance(gazetteer_folds, int) or isinstance(gazetteer_folds, bool) or not 2 <= gazetteer_folds <= 63:
            raise ValueError(Errors.S012.format(setting="gazetteer_folds", name=name, value=gazetteer_folds,
                                                requirement="an integer from 2 to 63"))
        if not isinstance(model, NerPerceptronModel):
            model = NerPerceptronModel.adopt(model, extra_templates(gazetteers, bool(two_stage)))
        for setting, value, low in (("n_latent", n_latent, 1), ("reset_every", reset_every, 0),
                                    ("seed", seed, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=value,
                                                    requirement=f"an integer >= {low}"))
        check_word_dropout(name, word_dropout)
        if not (isinstance(init_scale, (int, float)) and 0 <= init_scale < 1):
            raise ValueError(Errors.S012.format(setting="init_scale", name=name, value=init_scale,
                                                requirement="a number in [0, 1)"))
        super().__init__(vocab, model, name, decoder="viterbi", order=order, scorer=scorer,
                         n_latent=n_latent, reset_every=reset_every, init_scale=float(init_scale),
                         seed=seed, scheme=scheme, gazetteers=gazetteers, gazetteer_folds=gazetteer_folds,
                         two_stage=bool(two_stage), aggregate=aggregate, word_dropout=float(word_dropout))
        # Only exact latent Viterbi applies: drop the other decoders' settings.
        for key in ("decoder", "lookahead_depth", "lookahead_gap", "beam_width", "update", "margin", "direction"):
            self.cfg.pop(key, None)
        self._epoch: Optional[int] = None
        self._warned_epochs = False
        self.n_resets = 0
        self._labels_changed()

    # Labels and classes ------------------------------------------------------------------------

    @property
    def n_latent(self) -> int:
        return self.cfg["n_latent"]

    @property
    def scheme(self) -> str:
        return self.cfg["scheme"]

    @property
    def n_labels(self) -> int:
        """Labels the sub-states belong to: O, B-X, I-X (and L-X, U-X with BILOU)."""
        return encoding.n_classes(len(self.labels), self.scheme)

    @property
    def n_classes(self) -> int:
        """Weight columns: n_latent sub-states for each label of the scheme."""
        return self.n_labels * self.n_latent

    @property
    def scheme_class_names(self) -> List[str]:
        """The names of the labels the sub-states belong to (class_names are the BIO classes
        predictions are given in)."""
        return encoding.class_names(self.labels, self.scheme)

    def _labels_changed(self) -> None:
        super()._labels_changed()
        n_types = len(self.labels)
        self._to_bio = encoding.to_bio(n_types, self.scheme)
        # Sub-states that may not end a decoded piece (BILOU's B-X, I-X); None for BIO.
        open_states = numpy.repeat(encoding.open_classes(n_types, self.scheme), self.n_latent)
        self._closing = (~open_states).astype(numpy.uint8) if open_states.any() else None

    def _transitions(self) -> numpy.ndarray:
        return latent_transitions(encoding.transitions(len(self.labels), self.scheme), self.n_latent)

    def _commit(self, staged) -> None:
        # A cfg saved before the scheme setting existed is that of a BIO model.
        if "cfg" in staged and "scheme" not in staged["cfg"]:
            staged["cfg"] = dict(staged["cfg"], scheme="bio")
        # And one saved before the aggregate setting, a two-stage model aggregating every label.
        if "cfg" in staged and "aggregate" not in staged["cfg"]:
            staged["cfg"] = dict(staged["cfg"], aggregate="all")
        # The gazetteer block read with this load (from_bytes / from_disk), checked already.
        gazetteer = self.__dict__.pop("_staged_gazetteer", None)
        fields = staged.get("model")
        if fields is not None:
            uses = [name for spec in fields["templates"] for part in spec["parts"]
                    if part[0] != "hist" for name in [part[1]] if name in gaz.GAZ_ATOMS]
            if uses and gazetteer is None:
                raise ValueError(Errors.S405.format(name=self.name, reason=f"its features read {uses[0]}"))
        super()._commit(staged)
        if fields is not None:
            self.model.set_gazetteer(gazetteer)

    # Serialization: the component's parts (PerceptronPipe) and the gazetteer block --------------

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        data = super().to_bytes(exclude=exclude)
        if self.model.gazetteer is None or GAZETTEER_BLOCK in exclude:
            return data
        msg = srsly.msgpack_loads(data)
        msg[GAZETTEER_BLOCK] = self.model.gazetteer.to_bytes()
        return srsly.msgpack_dumps(msg)

    def to_disk(self, path, *, exclude=tuple()) -> None:
        super().to_disk(path, exclude=exclude)
        path = util.ensure_path(path)
        block = path / GAZETTEER_BLOCK
        if self.model.gazetteer is not None and GAZETTEER_BLOCK not in exclude:
            block.write_bytes(self.model.gazetteer.to_bytes())
        elif block.exists():
            block.unlink()

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()):
        with self._coded_load_errors(None):
            msg = srsly.msgpack_loads(bytes_data)
            block = msg.get(GAZETTEER_BLOCK) if isinstance(msg, dict) else None
            staged = None if block is None or GAZETTEER_BLOCK in exclude else gaz.Gazetteer.from_bytes(block, self.name)
        self.__dict__["_staged_gazetteer"] = staged
        try:
            return super().from_bytes(bytes_data, exclude=exclude)
        finally:
            self.__dict__.pop("_staged_gazetteer", None)

    def from_disk(self, path, *, exclude=tuple()):
        block = Path(util.ensure_path(path)) / GAZETTEER_BLOCK
        with self._coded_load_errors(path):
            staged = None if GAZETTEER_BLOCK in exclude or not block.exists() else \
                gaz.Gazetteer.from_bytes(block.read_bytes(), self.name)
        self.__dict__["_staged_gazetteer"] = staged
        try:
            return super().from_disk(path, exclude=exclude)
        finally:
            self.__dict__.pop("_staged_gazetteer", None)

    def initialize(self, get_examples, *, nlp=None, labels: Optional[Iterable[str]] = None) -> None:
        """Take the entity types from `labels` (spacy init labels) or from the training examples'
        doc.ents."""
        self._init_labels(get_examples, labels, lambda eg: (e.label_ for e in eg.reference.ents),
                          "doc.ents", nlp)
        self.model.set_gazetteer(self._build_gazetteer(get_examples, nlp) if self.cfg["gazetteers"] else None)

    def _build_gazetteer(self, get_examples, nlp) -> gaz.Gazetteer:
        """The name lists of the `gazetteers` sources: the training entities (with the fold of
        their Doc, for jackknifing) and the open lists, tokenized as the pipeline tokenizes."""
        builder = gaz.GazetteerBuilder(self.cfg["gazetteer_folds"])
        sources = self.cfg["gazetteers"]
        if gaz.TRAIN_SOURCE in sources:
            gaz.add_training_entities(builder, get_examples())
        if any(source != gaz.TRAIN_SOURCE for source in sources):
            if nlp is not None:
                tokenizer = nlp.tokenizer
            else:
                tokenizer = util.get_lang_class(self.vocab.lang or "en")(self.vocab).tokenizer
            gaz.add_open_lists(builder, sources, lambda text: [t.text for t in tokenizer(text)], self.name)
        return builder.build()

    @property
    def two_stage(self) -> bool:
        return bool(self.cfg.get("two_stage")) and bool(self.model.atoms.stage_columns)

    def _fold(self, doc: Doc) -> Optional[int]:
        """The jackknife fold of a training Doc (None when no list is mined from training)."""
        g = self.model.gazetteer
        if g is None or "train" not in g.groups:
            return None
        return gaz.fold_of(doc.to_array(ORTH), g.folds)

    def _stage_columns(self, atoms: numpy.ndarray, classes: numpy.ndarray, offsets: numpy.ndarray,
                       words: Optional[numpy.ndarray] = None) -> numpy.ndarray:
        """`atoms` (a copy) with the two-stage columns filled from the first stage's BIO classes;
        `words` (see _words) tells which tokens are the same word (default: atoms')."""
        columns = self.model.atoms.stage_columns
        names = list(columns)
        if len(self.labels) > MAX_STAGE_TYPES:
            raise ValueError(Errors.S406.format(name=self.name, n=len(self.labels)))
        if words is None:
            words = self._words(atoms)
        atoms = atoms.copy()
        entities_only = self.cfg.get("aggregate", "all") == "entities"
        for name, column in zip(names, stage_atoms(words, classes, offsets, names, entities_only)):
            atoms[:, columns[name]] = column
        return atoms

    def _words(self, atoms: numpy.ndarray) -> numpy.ndarray:
        """The lower-case word of each row of `atoms` (zeros when the features read none)."""
        names = self.model.atom_names
        if "lower" not in names:
            return numpy.zeros((len(atoms),), numpy.uint64)
        return atoms[:, names.index("lower")]

    def predict(self, docs: Iterable[Doc]) -> BatchClasses:
        """Class ids for every token of every doc (see SequenceLabeller.predict); with two_stage,
        the batch is decoded twice, the second time with what the first said about each word's
        other occurrences in its Doc."""
        if not self.two_stage:
            return super().predict(docs)
        self.begin_predict()
        prepared = self._prepare(list(docs))
        first = self._decode_prepared(prepared)
        atoms = self._stage_columns(prepared.atoms.atoms, first.classes, first.offsets)
        # A window without any stage atom would decode exactly as in the first stage: only the
        # others are decoded again, and their kept rows replace the first stage's.
        windows = prepared.windows
        staged = numpy.zeros((len(atoms) + 1,), dtype=numpy.int64)
        staged[1:] = numpy.cumsum(atoms[:, list(self.model.atoms.stage_columns.values())].any(axis=1))
        again = windows[staged[windows[:, 1]] > staged[windows[:, 0]]]
        if not len(again):
            return first
        second = self._decode_prepared(prepared._replace(atoms=prepared.atoms._replace(atoms=atoms),
                                                         windows=numpy.ascontiguousarray(again)))
        edges = numpy.zeros((len(atoms) + 1,), dtype=numpy.int64)
        numpy.add.at(edges, again[:, 2], 1)
        numpy.add.at(edges, again[:, 3], -1)
        keep = numpy.cumsum(edges[:-1]) > 0   # the kept rows of the windows decoded again
        return BatchClasses(numpy.where(keep, second.classes, first.classes), first.offsets, first.extra)

    # Decoding ----------------------------------------------------------------------------------

    def _decoder_setting(self) -> Tuple[str, int]:
        return "viterbi", self.cfg["order"]

    def _project(self, classes: numpy.ndarray) -> numpy.ndarray:
        """Sub-states to BIO classes (through the scheme's labels)."""
        return self._to_bio[classes // self.n_latent]

    def _position_mask(self, doc: Doc, gold: Optional[numpy.ndarray]) -> Optional[numpy.ndarray]:
        return self._close_ends(self._preset_mask(doc, gold), [len(doc)], len(doc))

    def _position_masks(self, docs: Sequence[Doc], atoms: AtomBatch) -> Optional[numpy.ndarray]:
        masks = None
        for k in _with_entities(atoms.extra[:, 0], atoms.offsets):
            mask = self._preset_mask(docs[k], None)
            if mask is not None:
                if masks is None:
                    masks = numpy.ones((len(atoms.atoms), self.n_classes), dtype=numpy.uint8)
                masks[atoms.offsets[k]:atoms.offsets[k + 1]] = mask
        return masks

    @property
    def _by_sentence(self) -> bool:
        """Whether the features read the whole Doc (features.document): then a Doc with sentence
        boundaries is decoded and trained a sentence at a time, as the sentence Docs of a corpus
        are, and only the document features see beyond the sentence."""
        return any(name in CONTEXT_ATOMS or name in STAGE_ATOMS for name in self.model.atom_names)

    def _sentences(self, doc: Doc) -> List[Tuple[int, int]]:
        """The pieces of `doc` training binds one at a time: its sentences with document features
        and sentence boundaries, else the whole Doc."""
        if self._by_sentence and len(doc) and doc.has_annotation("SENT_START"):
            return [(sent.start, sent.end) for sent in doc.sents]
        return [(0, len(doc))]

    def _prepare(self, docs: Sequence[Doc]) -> Prepared:
        if not self._by_sentence:
            prepared = super()._prepare(docs)
        else:
            # SequenceLabeller._prepare's atoms, with SENT_START read in the same docarrays.read
            # call, and a sentence a window (see _sentence_windows).
            n_read = len(self.read_attrs)
            atoms = self.model.atoms.batch(docs, self.name, tuple(self.read_attrs) + (SENT_START,),
                                           self._missing_input)
            sent_start = atoms.extra[:, n_read]
            atoms = atoms._replace(extra=numpy.ascontiguousarray(atoms.extra[:, :n_read]))
            prepared = Prepared(atoms, self._position_masks(docs, atoms),
                                self._sentence_windows(docs, atoms.offsets, sent_start))
        if self._closing is None:
            return prepared
        # The true ends of the decoded pieces: a window's end without a margin after it (the end
        # of its Doc or of a group of whole sentences); a window with a margin ends at a token
        # the next window decodes freely.
        windows = prepared.windows
        ends = windows[windows[:, 1] == windows[:, 3], 1]
        return prepared._replace(allowed=self._close_ends(prepared.allowed, ends, len(prepared.atoms.atoms)))

    @staticmethod
    def _sentence_windows(docs: Sequence[Doc], offsets: numpy.ndarray, sent_start: numpy.ndarray) -> numpy.ndarray:
        """The windows of a batch decoded with document features: a sentence a window for a Doc
        with sentence boundaries (one longer than a window is still one: training binds it whole
        too), `batch_windows` for the others, all Docs at once; rows in Doc order, each Doc's in
        text order. `sent_start`: the batch's SENT_START column (1 starts a sentence)."""
        lengths = numpy.diff(offsets)
        nonempty = lengths > 0
        bounded = docarrays.has_sent_starts(docs) & nonempty
        hooked = bounded & docarrays.has_user_hook(docs, "sents")
        from_tokens = bounded & ~hooked
        # Sentences as doc.sents finds them without a hook: from the first token and from each
        # later one whose sent_start is 1, to the next such token or the Doc's end.
        starts = (sent_start == 1) & numpy.repeat(from_tokens, lengths)
        starts[offsets[:-1][from_tokens]] = True
        first = numpy.flatnonzero(starts)
        doc_of = numpy.searchsorted(offsets, first, side="right") - 1
        ends = numpy.minimum(numpy.append(first[1:], offsets[-1]), offsets[doc_of + 1])
        pieces = [numpy.stack([first, ends, first, ends], axis=1)]
        owners = [doc_of]
        # A "sents" user hook's sentences, as it gives them.
        for k in numpy.flatnonzero(hooked).tolist():
            a = int(offsets[k])
            rows = numpy.array([(a + s.start, a + s.end) for s in docs[k].sents], dtype=numpy.int64).reshape((-1, 2))
            pieces.append(rows[:, [0, 1, 0, 1]])
            owners.append(numpy.full((len(rows),), k, dtype=numpy.int64))
        # The Docs without boundaries: one batch_windows call on them as a batch of their own,
        # its rows moved back to theirs.
        free = numpy.flatnonzero(nonempty & ~bounded)
        if len(free):
            sub_offsets = numpy.zeros((len(free) + 1,), dtype=numpy.int64)
            numpy.cumsum(lengths[free], out=sub_offsets[1:])
            rows = batch_windows([docs[k] for k in free.tolist()], sub_offsets)
            sub_doc = numpy.searchsorted(sub_offsets, rows[:, 2], side="right") - 1
            pieces.append(rows + (offsets[free] - sub_offsets[:-1])[sub_doc][:, None])
            owners.append(free[sub_doc])
        windows = numpy.concatenate(pieces).astype(numpy.int64, copy=False)
        order = numpy.argsort(numpy.concatenate(owners), kind="stable")
        return numpy.ascontiguousarray(windows[order])

    def _close_ends(self, allowed: Optional[numpy.ndarray], ends, n: int) -> Optional[numpy.ndarray]:
        """`allowed` (None: all) with the sub-states that may not end a piece forbidden at the
        last token of each piece ending before row `ends[i]` (BILOU; BIO changes nothing)."""
        if self._closing is None or n == 0:
            return allowed
        if allowed is None:
            allowed = numpy.ones((n, self.n_classes), dtype=numpy.uint8)
        rows = numpy.asarray(ends, dtype=numpy.int64) - 1
        allowed[rows[rows >= 0]] &= self._closing
        return allowed

    def _preset_mask(self, doc: Doc, gold: Optional[numpy.ndarray]) -> Optional[numpy.ndarray]:
        """Entities already on the Doc (an entity_ruler before this component, say) are
        constraints, as for spaCy's ner: their tokens keep their entity, and the token after one
        may not continue it. Tokens merely marked O are free. An entity whose type is not one of
        this component's labels is decoded as O and put back by set_annotations. The latent
        sub-states of a class are allowed or forbidden together; a known gold class (training)
        is never forbidden."""
        ents = doc.ents
        if not ents:
            return None
        n, m, w = len(doc), self.n_labels, encoding.width(self.scheme)
        allowed = numpy.ones((n, m), dtype=numpy.uint8)
        inside = numpy.zeros((m,), dtype=bool)
        inside[2::w] = True   # the I-X classes
        if w == 4:
            inside[3::w] = True   # and L-X
        for ent in ents:
            k = self._type_by_hash.get(ent.label)
            allowed[ent.start:ent.end] = 0
            if k is None:
                allowed[ent.start:ent.end, 0] = 1
            elif w == 2:
                allowed[ent.start, 1 + 2 * k] = 1
                allowed[ent.start + 1:ent.end, 2 + 2 * k] = 1
            elif ent.end - ent.start == 1:
                allowed[ent.start, 4 + 4 * k] = 1                     # U-X
            else:
                allowed[ent.start, 1 + 4 * k] = 1                     # B-X I-X* L-X
                allowed[ent.start + 1:ent.end - 1, 2 + 4 * k] = 1
                allowed[ent.end - 1, 3 + 4 * k] = 1
            if ent.end < n:
                allowed[ent.end, inside] = 0
        if gold is not None:
            known = numpy.flatnonzero(gold >= 0)
            allowed[known, gold[known]] = 1
        return numpy.ascontiguousarray(numpy.repeat(allowed, self.n_latent, axis=1))

    def set_annotations(self, docs: Iterable[Doc], batch_classes: List[numpy.ndarray]) -> None:
        """Write the entities to doc.ents, as `doc.ents = entities` would (the tokens outside them
        become O), keeping the entities a Doc already has. A Doc without entities gets its
        ENT_IOB, ENT_TYPE and ENT_KB_ID as from_array sets them, all such Docs in one
        docarrays.write (the KB ids of tokens outside entities kept, as doc.ents leaves them);
        the others go through doc.ents."""
        docs = list(docs)
        classes, offsets, read = batch_arrays(docs, batch_classes, self.read_attrs, self.name)
        self._label_hashes_for(docs)
        hashes = numpy.asarray(self._label_hashes, dtype=numpy.uint64)
        starts, ends, kinds, doc_of = batch_chunks(classes, offsets)
        values = numpy.empty((len(classes), 3), dtype=numpy.uint64)
        inside = classes != 0
        values[:, 0] = numpy.where(inside, IOB_I, IOB_O)
        values[starts, 0] = IOB_B
        values[:, 1] = 0
        if len(starts):
            values[inside, 1] = numpy.repeat(hashes[kinds], ends - starts)
        values[:, 2] = numpy.where(inside, 0, read[:, 1])
        preset = _with_entities(read[:, 0], offsets)
        if not preset:
            docarrays.write(docs, offsets, self._write_attrs, values)
            return
        # The Docs without entities in one write (their rows only), the others one by one.
        lengths = numpy.diff(offsets)
        plain = numpy.ones((len(docs),), dtype=bool)
        plain[preset] = False
        plain_offsets = numpy.zeros((int(plain.sum()) + 1,), dtype=numpy.int64)
        numpy.cumsum(lengths[plain], out=plain_offsets[1:])
        docarrays.write([doc for doc, p in zip(docs, plain.tolist()) if p], plain_offsets, self._write_attrs,
                        values[numpy.repeat(plain, lengths)])
        bounds = offsets.tolist()
        per_doc = numpy.searchsorted(doc_of, numpy.arange(len(docs) + 1)).tolist()
        for k in preset:
            a, i, j = bounds[k], per_doc[k], per_doc[k + 1]
            self._set_with_preset(docs[k], zip((starts[i:j] - a).tolist(), (ends[i:j] - a).tolist(),
                                               kinds[i:j].tolist()))

    def _set_with_preset(self, doc: Doc, chunks: Iterable[Tuple[int, int, int]]) -> None:
        """doc.ents = the Doc's entities and the found `chunks` (start, end, type index) that do
        not overlap them."""
        hashes = self._label_hashes
        found = [Span(doc, s, e, label=hashes[k]) for s, e, k in chunks]
        preset = list(doc.ents)
        taken = numpy.zeros((len(doc),), dtype=bool)
        for ent in preset:
            taken[ent.start:ent.end] = True
        doc.ents = preset + [span for span in found if not taken[span.start:span.end].any()]

    # Training ----------------------------------------------------------------------------------

    def start_epoch(self, epoch: int) -> bool:
        """Tell the component that training pass `epoch` (0-based, as spaCy counts) is under way.

        Call it before each update (the epoch hook does); it acts once per new epoch. At the start
        of pass q = epoch + 1 with q % reset_every == 0 the current weights are replaced by the
        averaged ones (sun2009 §3.1). Returns whether they were.
        """
        if epoch == self._epoch:
            return False
        self._epoch = epoch
        k = self.cfg["reset_every"]
        q = epoch + 1
        if k and q > 1 and q % k == 0 and self.model.is_initialized:
            self.model.weights.reset_to_average()
            self.n_resets += 1
            return True
        return False

    def begin_update(self) -> None:
        super().begin_update()
        self.model.weights.set_noise(self.cfg["init_scale"], self.cfg["seed"])
        self.model.weights.set_tie_width(self.n_latent)
        if self.cfg["reset_every"] and self._epoch is None and not self._warned_epochs:
            warn(Warnings.W003.format(name=self.name, k=self.cfg["reset_every"]))
            self._warned_epochs = True

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
               losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """One latent-perceptron pass over the examples.

        losses[name] counts tokens whose projected label was wrong before each update;
        losses[name + "_updates"] counts updates.
        """
        losses = self.start_update(examples, losses)
        weights = self.model.weights
        mistakes = n_updates = 0
        for eg in examples:
            doc = eg.predicted
            pieces = self._sentences(doc) if len(doc) else [(0, 0)]
            if len(doc):
                gold, options = encoding.from_bio(self._gold_classes(eg), len(self.labels), self.scheme)
                if not ((gold >= 0).any() or options is not None):
                    pieces = [(0, 0)] * len(pieces)
                else:
                    # _bind, with the gold kept out of the preset-entity constraints' way.
                    atoms = self.model.atoms(doc, self.name, fold=self._fold(doc))
                    words = self._words(atoms)
                    atoms = hide_words(atoms, self.model.atom_names, self.cfg.get("word_dropout", 0.0),
                                       (self.cfg["seed"], weights.clock))
                    allowed = self._close_ends(self._preset_mask(doc, gold), [e for _, e in pieces], len(doc))
                    if self.two_stage:
                        # The first stage is trained too (it decodes at prediction time), and its
                        # decisions before each update give the second stage its atoms.
                        first = numpy.zeros((len(doc),), dtype=numpy.int64)
                        for start, end in pieces:
                            if end > start:
                                _, path = self._train_piece(atoms, gold, options, allowed, start, end)
                                first[start:end] = self._project(path)
                            weights.next_example()
                        atoms = self._stage_columns(atoms, first, numpy.array([0, len(doc)], dtype=numpy.int64), words)
            for start, end in pieces:
                # One update per sentence: a Doc of one sentence is one piece, and with document
                # features a Doc of many is trained sentence by sentence (see _sentences).
                if end > start and ((gold[start:end] >= 0).any() or
                                    options is not None and not options[start:end].all()):
                    wrong, h = self._train_piece(atoms, gold, options, allowed, start, end, with_update=True)
                    mistakes += wrong
                    n_updates += h is not None
                weights.next_example()
        losses[self.name] += mistakes
        losses[f"{self.name}_updates"] = losses.get(f"{self.name}_updates", 0.0) + n_updates
        return losses

    def _train_piece(self, atoms, gold, options, allowed, start: int, end: int, with_update: bool = False):
        """One latent-perceptron step on tokens start:end: (wrong tokens, h* or None) with
        with_update, else (wrong tokens, the decoded path before the step). A piece without
        gold is only decoded."""
        system = self.system
        n_latent, order = self.n_latent, self.cfg["order"]
        piece_allowed = None if allowed is None else allowed[start:end]
        if not ((gold[start:end] >= 0).any() or options is not None and not options[start:end].all()):
            system.set_sentence(atoms[start:end], None, piece_allowed)
            return 0, (None if with_update else viterbi.viterbi(system, order)[0])
        piece_gold = gold[start:end]
        if options is not None:
            piece_gold = self._complete_options(atoms[start:end], piece_allowed, piece_gold, options[start:end])
        system.set_sentence(atoms[start:end], None, piece_allowed)
        wrong, _, h, z = viterbi.train_latent(system, piece_gold, n_latent, order)
        return wrong, (h if with_update else z)

    def _complete_options(self, atoms: numpy.ndarray, allowed: Optional[numpy.ndarray],
                          gold: numpy.ndarray, options: numpy.ndarray) -> numpy.ndarray:
        """The gold with the tokens whose class the scheme cannot tell from the annotation (a B-X
        or I-X before a missing token: BILOU's B-X or U-X, I-X or L-X) given the class the model
        likes best of their options. The entity type is known, so it is taught; left missing,
        nothing about them would be (the decoding constrained to the options is never wrong)."""
        mask = numpy.repeat(options, self.n_latent, axis=1)
        if allowed is not None:
            mask &= allowed
        self.system.set_sentence(atoms, None, mask)
        best = viterbi.viterbi(self.system, self.cfg["order"])[0] // self.n_latent
        rows = numpy.flatnonzero(~options.all(axis=1))
        gold = gold.copy()
        gold[rows] = best[rows]
        return gold

    def _check_iob(self, ref: Doc, iob: numpy.ndarray, types: numpy.ndarray) -> None:
        """I-X must continue an entity of type X (or a token whose annotation is missing, which
        may be one). Doc.from_array and .spacy files can hold other sequences; unchecked, they
        stopped training with an uncoded 'no label sequence satisfies the constraints'."""
        inside = numpy.flatnonzero(iob == IOB_I)
        if not len(inside):
            return
        prev = numpy.where(inside > 0, inside - 1, 0)
        ok = (inside > 0) & ((iob[prev] == 0) | (((iob[prev] == IOB_B) | (iob[prev] == IOB_I))
                                                 & (types[prev] == types[inside])))
        if ok.all():
            return
        i = int(inside[numpy.flatnonzero(~ok)[0]])
        names = {0: "missing", IOB_I: "I", IOB_O: "O", IOB_B: "B"}
        previous = "the start" if i == 0 else \
            f"{names[int(iob[i - 1])]}{'-' + ref[i - 1].ent_type_ if ref[i - 1].ent_type_ else ''}"
        raise ValueError(Errors.S124.format(name=self.name, i=i, text=ref[i].text,
                                            iob=f"I-{ref[i].ent_type_}", prev=previous,
                                            example=ref.text[:80]))

    def _gold_classes(self, eg: Example) -> numpy.ndarray:
        """BIO classes (not sub-states) from eg.reference's entities; -1 where the reference has
        no entity annotation or the tokens do not align, so those tokens teach nothing."""
        if self.same_tokens(eg):
            ref = eg.reference
            iob = ref.to_array(ENT_IOB)
            types = ref.to_array(ENT_TYPE)
            self._check_iob(ref, iob, types)
            classes = numpy.full((len(ref),), -1, dtype=numpy.int32)
            classes[iob == IOB_O] = 0
            for i in numpy.flatnonzero((iob == IOB_B) | (iob == IOB_I)).tolist():
                k = self._type_by_hash.get(int(types[i]))
                if k is None:
                    raise ValueError(Errors.S004.format(label=ref.vocab.strings[int(types[i])], name=self.name))
                classes[i] = (1 if iob[i] == IOB_B else 2) + 2 * k
            return classes
        classes = numpy.full((len(eg.predicted),), -1, dtype=numpy.int32)
        for i, tag in enumerate(eg.get_aligned_ner()):
            if tag is None or tag == "-":
                continue
            if tag == "O":
                classes[i] = 0
                continue
            move, label = tag.split("-", 1)
            k = self._type_of.get(label)
            if k is None:
                raise ValueError(Errors.S004.format(label=label, name=self.name))
            classes[i] = (1 if move in ("B", "U") else 2) + 2 * k
        return classes


def _with_entities(iob: numpy.ndarray, offsets: numpy.ndarray) -> List[int]:
    """The Docs of a batch (Doc k's tokens are rows offsets[k]:offsets[k + 1]) with a token
    marked B or I: those that may carry entities already."""
    marked = numpy.flatnonzero((iob == IOB_B) | (iob == IOB_I))
    return numpy.unique(numpy.searchsorted(offsets, marked, side="right") - 1).tolist()
