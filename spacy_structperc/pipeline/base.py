"""PerceptronPipe: what every structured-perceptron component shares.

Labels, initialization checks, averaging (predict always reads averaged weights), the no-op
optimizer hooks spaCy's training loop calls, serialization without pickle, and pickling for
multiprocessing.
"""
import dataclasses
import hashlib
import json
import threading
import weakref
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, Type, TypeVar, Union

import numpy
import srsly
from spacy import util
from spacy.attrs import ORTH
from spacy.language import Language
from spacy.pipeline import Pipe, TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.util import minibatch, registry
from spacy.vocab import Vocab

from ..errors import Errors
from .._core.weights import AveragedWeights
from ..atoms import DOC_ATOMS
from ..model import PerceptronModel

# Doc attributes a feature atom reads, as spaCy's `requires` names them.
REQUIRED_ATTR_NAMES = {"tag": "token.tag", "pos": "token.pos"}


class PipeModel(Protocol):
    """What PerceptronPipe asks of its model: PerceptronModel (and ParserModel), the weight
    table of the taggers and the parser, and ClauseModel, the clause identifier's three
    functions. Subclasses narrow `model` to the class they hold."""

    @property
    def is_initialized(self) -> bool: ...

    @property
    def weights(self) -> Optional[AveragedWeights]:
        """The weight table the decoders read (None before initialize)."""

    @property
    def atom_names(self) -> Sequence[str]:
        """The atoms the feature templates read (the pipe's `requires` come from these)."""

    def to_bytes(self, component: str = "") -> bytes: ...

    def to_file(self, path: Any) -> None: ...

    # Loading is parse (every check, nothing changes) then apply (nothing can fail).
    def parse_bytes(self, data: bytes, component: str = "") -> dict: ...

    def parse_file(self, path: Any, component: str = "") -> dict: ...

    def apply(self, fields: dict) -> None: ...


class PerceptronPipe(TrainablePipe):
    """Base class of spacy-structperc's trainable components."""

    factory_name = "structperc"
    # cfg entries that initialize learns (not constructor settings), restored when unpickling.
    learned_cfg: Tuple[str, ...] = ("labels",)
    model: PipeModel

    def __init__(self, vocab: Vocab, model: PipeModel, name: str, *, scorer=None, **cfg):
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg = dict(sorted({"labels": [], **cfg}.items()))
        self._decoding = _DecodingState()

    # Labels ------------------------------------------------------------------------------------

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def n_classes(self) -> int:
        """Weight columns: one per label, unless a component encodes its labels (B-X/I-X/O)."""
        return len(self.labels)

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        if not isinstance(label, str):
            raise ValueError(Errors.S003.format(value=label, type=type(label).__name__))
        if label in self.cfg["labels"]:
            return 0
        self._check_label(label)
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        if isinstance(self.model, PerceptronModel) and self.model.is_initialized:
            self.model.resize(self.n_classes)
        self._labels_changed()
        return 1

    def _check_label(self, label: str) -> None:
        """Component-specific label validation."""

    # Contracts: what the component reads and writes -------------------------------------------
    # spaCy keeps one FactoryMeta (requires, assigns, default_score_weights) per factory, but what
    # a component reads (token.tag only when its features read POS) and which scores it reports
    # (tag_acc or pos_acc, spans_key) depend on its settings. The factory hands the component
    # its Language (`_bind_language`); whenever spaCy links the pipeline it sets `name` on every
    # component after recording the factory's meta, and the component then records its own meta
    # for itself, so nlp.analyze_pipes() and nlp.config describe this instance.

    @property
    def name(self) -> str:
        return _PIPE_NAME.__get__(self, type(self))

    @name.setter
    def name(self, value: str) -> None:
        _PIPE_NAME.__set__(self, value)
        nlp_ref = self.__dict__.get("_language")
        nlp = nlp_ref() if nlp_ref is not None else None
        if nlp is not None and value in nlp.component_names and nlp.get_pipe(value) is self:
            meta = nlp.get_pipe_meta(value)
            overrides = self.pipe_meta_overrides()
            if any(getattr(meta, key) != v for key, v in overrides.items()):
                nlp._pipe_meta[value] = dataclasses.replace(meta, **overrides)

    def _bind_language(self, nlp) -> None:
        """Let the component describe itself in `nlp`'s pipe meta (called by the factories)."""
        self.__dict__["_language"] = weakref.ref(nlp)

    @property
    def required_attrs(self) -> Dict[str, int]:
        """The Doc attributes the feature templates read, e.g. {"tag": TAG}."""
        return {name: DOC_ATOMS[name] for name in self.model.atom_names if name in DOC_ATOMS}

    def pipe_meta_overrides(self) -> Dict[str, Any]:
        """The FactoryMeta fields that depend on this component's settings."""
        return {"requires": [REQUIRED_ATTR_NAMES[name] for name in self.required_attrs]}

    def _missing_input_fix(self, attr: str) -> str:
        return (f"Add a component that sets it before '{self.name}', e.g. "
                f"nlp.add_pipe(\"structperc_tagger\", before=\"{self.name}\") trained on the same tag "
                f"set (or sourced from a trained pipeline), or train '{self.name}' with a feature "
                f"set that does not read it.")

    def check_inputs(self, docs: Iterable[Doc]) -> None:
        """Raise S300 (naming this pipe and the fix) if a Doc lacks an attribute the features read."""
        required = self.required_attrs
        if not required:
            return
        for doc in docs:
            if not len(doc):
                continue
            for name, attr in required.items():
                if not doc.has_annotation(attr):
                    raise self._missing_input(name)

    def _missing_input(self, name: str) -> ValueError:
        """The S300 error for Docs without the annotation feature atom `name` reads."""
        return ValueError(Errors.S300.format(
            name=self.name, factory=self.factory_name, attr=f"token.{name}_", ATTR=name.upper(),
            why=f"its features use the '{name}' of each word", fix=self._missing_input_fix(name)))

    def __call__(self, doc: Doc) -> Doc:
        try:
            self.check_inputs((doc,))
        except Exception as e:
            self.get_error_handler()(self.name, self, [doc], e)
            return doc
        return super().__call__(doc)

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size):
            try:
                self.check_inputs(docs)
            except Exception as e:
                error_handler(self.name, self, docs, e)
                continue
            yield from super().pipe(docs, batch_size=batch_size)

    def _labels_changed(self) -> None:
        """Rebuild whatever caches depend on the label set."""
        self._decoding.invalidate()

    # Decoding state ----------------------------------------------------------------------------
    # A transition system is the decoder's scratch space: the bound sentence, extracted feature
    # keys and score caches, all written while the GIL is released. One system shared by two
    # threads corrupts both decodings (issue 12), so each thread gets its own (thread-local,
    # built on first use and reused by later calls of that thread); the weights they read are
    # shared and never written during prediction. A lock around prediction would also be safe,
    # but would serialize the nogil decoders that make threads worth using.

    def _thread_system(self, build: Callable[[], Any]) -> Any:
        """This thread's transition system for the current weights and labels, built by `build`
        when there is none or it is stale."""
        weights = self.model.weights
        slot = self._decoding.slot()
        system = slot.get("system")
        if system is None or slot.get("generation") != self._decoding.generation or \
                system.weights is not weights or system.n_actions != weights.n_classes:
            slot.clear()
            slot["generation"] = self._decoding.generation
            system = build()
            slot["system"] = system
        return system

    def _thread_extra(self) -> Dict[str, Any]:
        """Per-thread values that belong with this thread's system (cleared with it)."""
        return self._decoding.slot()

    def _require_initialized(self) -> None:
        if not self.model.is_initialized or not self.labels:
            raise ValueError(Errors.S001.format(name=self.name))

    def _init_labels(self, get_examples: Callable[[], Iterable[Example]], labels: Optional[Iterable[str]],
                     collect: Callable[[Example], Iterable[str]], attr: str, nlp=None) -> None:
        validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
        first = list(islice(get_examples(), 1))
        if not first and labels is None:
            raise ValueError(Errors.S005.format(name=self.name))
        # Labels added before initialize are kept, as spaCy's own components keep them.
        if labels is not None:
            labels = list(labels)
            for label in labels:   # validate all before changing anything
                if not isinstance(label, str):
                    raise ValueError(Errors.S003.format(value=label, type=type(label).__name__))
                self._check_label(label)
            for label in labels:
                self.add_label(label)
        else:
            found: set = set()
            for eg in get_examples():
                found.update(label for label in collect(eg) if label)
            for label in sorted(found):
                self.add_label(label)
        if not self.labels:
            raise ValueError(Errors.S002.format(name=self.name, attr=attr))
        model = self.model
        assert isinstance(model, PerceptronModel), "_init_labels initializes a weight table"
        model.load_resources(nlp.lang if nlp is not None else self.vocab.lang, self.name)
        model.initialize(self.n_classes)
        self._labels_changed()

    # Training hooks spaCy calls ----------------------------------------------------------------

    @property
    def is_trainable(self) -> bool:
        return True

    @property
    def is_resizable(self) -> bool:
        return True

    def get_loss(self, examples: Iterable[Example], scores) -> Tuple[float, Any]:
        """Not available: see S301."""
        raise NotImplementedError(Errors.S301.format(
            name=self.name, factory=self.factory_name, method="get_loss",
            why="a structured perceptron has no differentiable loss and no gradient to return. "
                "update() decodes each example and moves the weights by the difference between the "
                "gold and the predicted features; the count of its mistakes is in losses[name]."))

    def rehearse(self, examples: Iterable[Example], *, drop: float = 0.0, sgd=None,
                 losses: Optional[Dict[str, float]] = None) -> Dict[str, float]:
        """Not available: see S301."""
        raise NotImplementedError(Errors.S301.format(
            name=self.name, factory=self.factory_name, method="rehearse",
            why="rehearsal pulls a model towards its own earlier output distribution, and a "
                "perceptron has no distribution to pull towards (only the argmax of its scores). "
                "To keep a trained component from forgetting, mix its original training data into "
                "the new data, or list it in [training] frozen_components."))

    def finish_update(self, sgd=None) -> None:
        """The perceptron updates in `update`; there is no gradient for an optimizer to apply."""

    @contextmanager
    def use_params(self, params: dict):
        """Averaged weights are used for prediction already, so there is nothing to swap in."""
        yield

    def _allow_extra_label(self) -> None:
        pass

    def begin_update(self) -> None:
        if self.model.weights is not None:
            self.model.weights.set_use_averages(False)

    def start_update(self, examples: Iterable[Example], losses: Optional[Dict[str, float]]) -> Dict[str, float]:
        """What every `update` does first: the losses dict (with this pipe's entry), spaCy's check
        of the examples, the initialization check and training (not averaged) weights."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        validate_examples(examples, f"{type(self).__name__}.update")
        self._require_initialized()
        self.begin_update()
        return losses

    def begin_predict(self) -> None:
        self._require_initialized()
        self.model.weights.set_use_averages(True)

    @staticmethod
    def same_tokens(eg: Example) -> bool:
        x, y = eg.predicted, eg.reference
        return len(x) == len(y) and numpy.array_equal(x.to_array(ORTH), y.to_array(ORTH))

    # Serialization -----------------------------------------------------------------------------

    def _model_bytes(self) -> bytes:
        return self.model.to_bytes(self.name)

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        serialize = {
            "cfg": lambda: dump_cfg(self.cfg).encode("utf8"),
            "vocab": lambda: self.vocab.to_bytes(exclude=exclude),
            "model": self._model_bytes,
        }
        return util.to_bytes(serialize, exclude)

    def to_disk(self, path, *, exclude=tuple()) -> None:
        path = util.ensure_path(path)
        serialize = {
            "cfg": lambda p: write_cfg(p, self.cfg),
            "vocab": lambda p: self.vocab.to_disk(p, exclude=exclude),
            "model": lambda p: self.model.to_file(p),
        }
        util.to_disk(path, serialize, exclude)

    # Loading is all-or-nothing: every part is read and checked first (the cfg and the model file
    # against their checksums, the cfg's settings against this component's, the model's weights
    # against the labels of the new cfg), and only then does the component take them. A failed load raises a coded error and leaves the component as it
    # was (the shared vocab may have gained strings, which changes nothing).

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()):
        staged: Dict[str, Any] = {}
        deserialize = {
            "cfg": lambda b: staged.__setitem__("cfg", load_cfg(b, self.name)),
            "vocab": lambda b: staged.__setitem__("vocab", lambda: self.vocab.from_bytes(b, exclude=exclude)),
            "model": lambda b: staged.__setitem__("model", self.model.parse_bytes(b, self.name)),
        }
        with self._coded_load_errors(None):
            msg = srsly.msgpack_loads(bytes_data)
            util.from_dict(msg, deserialize, exclude)
            # spaCy skips an entry the data lacks: the component would keep its own under the
            # saved others (a damaged key name did that silently).
            for key in ("cfg", "model"):
                if key not in exclude and key not in msg:
                    raise ValueError(Errors.S129.format(name=self.name, key=key))
            self._commit(staged)
        return self

    def from_disk(self, path, *, exclude=tuple()):
        path = util.ensure_path(path)
        staged: Dict[str, Any] = {}
        deserialize = {
            "cfg": lambda p: staged.__setitem__("cfg", load_cfg(Path(p).read_bytes(), self.name)),
            "vocab": lambda p: staged.__setitem__("vocab", lambda: self.vocab.from_disk(p, exclude=exclude)),
            "model": lambda p: staged.__setitem__("model", self.model.parse_file(p, self.name)),
        }
        with self._coded_load_errors(path):
            util.from_disk(path, deserialize, exclude)
            self._commit(staged)
        return self

    @contextmanager
    def _coded_load_errors(self, path):
        try:
            yield
        except Exception as e:
            if isinstance(e, ValueError) and str(e).startswith("[S"):   # ours, naming the problem
                raise
            reason = f"{type(e).__name__}: {e}"
            if path is not None:
                raise ValueError(Errors.S123.format(name=self.name, path=path, reason=reason)) from None
            raise ValueError(Errors.S006.format(name=self.name, reason=reason)) from None

    def _commit(self, staged: Dict[str, Any]) -> None:
        """Check the staged parts against each other, then take them."""
        cfg = dict(self.cfg)
        if "cfg" in staged:
            self._check_cfg(staged["cfg"])
            cfg.update(staged["cfg"])
        fields = staged.get("model")
        if fields is not None and fields["weights"] is not None:
            expected = self._n_classes_with(cfg)
            if fields["n_classes"] != expected:
                raise ValueError(Errors.S006.format(
                    name=self.name, reason=f"{fields['n_classes']} weight columns where its labels need {expected}"))
        if "vocab" in staged:
            staged["vocab"]()
        self.cfg = cfg
        if fields is not None:
            self.model.apply(fields)
        self._labels_changed()

    def _check_cfg(self, saved: Dict[str, Any]) -> None:
        """Raise S311 unless a loaded cfg holds only this component's settings, each a value of
        the type it has here, and labels that are strings. Behind the checksum this catches
        cfgs of another version; for a cfg saved before the checksum, damage that changes a
        name or a type."""
        unknown = sorted(set(saved) - set(self.cfg) - set(self.learned_cfg))
        if unknown:
            raise ValueError(Errors.S311.format(name=self.name, reason=f"unknown setting(s) {unknown}"))
        labels = saved.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
            raise ValueError(Errors.S311.format(name=self.name, reason="'labels' is not a list of strings"))
        for key, value in saved.items():
            current = self.cfg.get(key)
            if current is None or value is None:
                continue
            expected = float if type(current) is float else type(current)
            if not (type(value) is expected or expected is float and type(value) is int):
                raise ValueError(Errors.S311.format(
                    name=self.name, reason=f"'{key}' is {value!r}, where a {expected.__name__} belongs"))

    def _n_classes_with(self, cfg: Dict[str, Any]) -> int:
        """n_classes as it would be with settings `cfg`."""
        current = self.cfg
        self.cfg = cfg
        try:
            return self.n_classes
        finally:
            self.cfg = current

    def __reduce__(self):
        settings = {k: v for k, v in self.cfg.items() if k not in self.learned_cfg}
        learned = {k: self.cfg[k] for k in self.learned_cfg if k in self.cfg}
        return (_unpickle_pipe, (type(self), self.vocab, self.model, self.name, self.scorer,
                                 settings, learned))


# A saved cfg is JSON with a blake2b-128 of its settings under CFG_CHECKSUM_KEY: a label or a
# setting changed by damage would otherwise load as a different, valid component. The digest is
# over the settings' canonical JSON (sorted keys, Python's exact float repr), so whitespace
# changes nothing and any changed value is caught. A cfg without the key (saved before it
# existed) loads after the checks of PerceptronPipe._check_cfg.
CFG_CHECKSUM_KEY = "checksum"


P = TypeVar("P", bound=PerceptronPipe)


def build_pipe(cls: Type[P], nlp: Language, name: str, model: Any, **settings: Any) -> P:
    """The component `cls` with a factory's model and settings (every argument of the factory
    but nlp, which gives the vocab, and the component learns its Language for its pipe meta).

    Every factory's body is `return build_pipe(Cls, **locals())`: each setting is written where
    it is declared (default_config), typed in the factory's signature (spaCy validates a config
    against it) and documented in its docstring, and spelled out nowhere else."""
    pipe = cls(nlp.vocab, model, name, **settings)
    pipe._bind_language(nlp)
    return pipe


@registry.callbacks("spacy-structperc.epoch_hook.v1")
def create_epoch_hook() -> Callable[[Any, Dict[str, Any]], None]:
    """A [training.before_update] callback that tells every component with a `start_epoch`
    method which epoch training is in (structperc_ner's modified parameter averaging needs it)."""
    def before_update(nlp, args: Dict[str, Any]) -> None:
        for _, pipe in nlp.pipeline:
            start_epoch = getattr(pipe, "start_epoch", None)
            if start_epoch is not None:
                start_epoch(args["epoch"])
    return before_update


def _cfg_digest(cfg: Dict[str, Any]) -> str:
    canonical = json.dumps(cfg, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.blake2b(canonical.encode("ascii"), digest_size=16).hexdigest()


def dump_cfg(cfg: Dict[str, Any]) -> str:
    """A component's cfg as saved: JSON with the checksum of its settings."""
    return json.dumps({**cfg, CFG_CHECKSUM_KEY: _cfg_digest(cfg)}, indent=2, sort_keys=True) + "\n"


def write_cfg(path: Union[str, Path], cfg: Dict[str, Any]) -> None:
    Path(path).write_text(dump_cfg(cfg), encoding="utf8")


def load_cfg(data: Union[str, bytes], name: str) -> Dict[str, Any]:
    """The settings of a saved cfg, checked against its checksum (S310) and for being a JSON
    table (S311); empty data is S128."""
    if not len(data):
        raise ValueError(Errors.S128.format(name=name, what="cfg"))
    try:
        cfg = json.loads(data)
    except ValueError as e:   # JSONDecodeError and UnicodeDecodeError
        raise ValueError(Errors.S311.format(name=name, reason=f"not JSON ({type(e).__name__})")) from None
    if not isinstance(cfg, dict):
        raise ValueError(Errors.S311.format(name=name, reason="it is not a settings table"))
    if CFG_CHECKSUM_KEY in cfg:
        digest = cfg.pop(CFG_CHECKSUM_KEY)
        try:
            matches = digest == _cfg_digest(cfg)
        except (TypeError, ValueError):   # not JSON-able as loaded: cannot be what was written
            matches = False
        if not matches:
            raise ValueError(Errors.S310.format(name=name))
    return cfg


_PIPE_NAME = Pipe.__dict__["name"]   # spaCy's slot for the name, which its Cython code reads


class _DecodingState:
    """Per-thread slots for a component's decoding state, invalidated together."""

    def __init__(self):
        self._local = threading.local()
        self.generation = 0

    def slot(self) -> Dict[str, Any]:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = {}
        return slot

    def invalidate(self) -> None:
        # Other threads see the new generation and rebuild; their old systems die with them.
        self.generation += 1
        self.slot().clear()


def _unpickle_pipe(cls, vocab, model, name, scorer, settings, learned):
    pipe = cls(vocab, model, name, scorer=scorer, **settings)
    pipe.cfg.update(learned)
    pipe._labels_changed()
    return pipe
