"""The clause identifier's model: word templates and the three learned functions.

The start filter, the end filter and the phrase scorer are each a `LinearFunction` of the core:
in primal form an averaged perceptron over hashed features (the fast default), or in dual form a
voted kernel perceptron (`form = "dual"`, a polynomial kernel of `degree`, carreras2003's setting
with degree 2) from `spacy_structperc._core.dual`. Saved as msgpack of numpy buffers (primal)
or of the kernel perceptron's own bytes (dual), never pickle.
"""
import io
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy
import srsly
from spacy.util import registry

from .._core.span_ranker import ATOM_NAMES, LinearFunction, ObjectFunction, PrimalFunction, SpanRecognizer
from .._core.templates import TemplateSet
from .._core.weights import AveragedWeights
from ..errors import Errors
from ..model import _verify_checksum, check_header, pack_model_msg

# Version 2 as the weights files: the format that ends with a checksum of its payload.
FORMAT_VERSION = 2
MODEL_KIND = "spacy-structperc.ClauseRanker"
FUNCTIONS = ("start", "end", "score")
FORMS = ("primal", "dual")


class DualFunction:
    """A dual-form (voted) kernel perceptron as the search sees a function: scores with the
    current perceptron while training ("last") and with `prediction` ("averaged" or "voted")
    otherwise. `spacy_structperc._core.dual.DualPerceptron` does the work."""

    def __init__(self, perceptron, prediction: str = "averaged"):
        self.perceptron = perceptron
        self.prediction = prediction
        self.mode = prediction
        # The kernel perceptron scores through scratch buffers of its own: one thread at a time.
        self._lock = threading.Lock()

    def score(self, keys) -> float:
        with self._lock:
            return self.perceptron.score(keys, mode=self.mode)

    def update(self, keys, delta: float) -> None:
        self.perceptron.update(keys, delta)

    def tick(self) -> None:
        self.perceptron.tick()

    def set_averaged(self, value: bool) -> None:
        self.mode = self.prediction if value else "last"

    def to_bytes(self) -> bytes:
        return self.perceptron.to_bytes()

    def __reduce__(self):
        return (DualFunction, (self.perceptron, self.prediction))


class ClauseModel:
    def __init__(self, features: Sequence[dict], n_buckets: int = 1 << 18, context: int = 3,
                 form: str = "primal", degree: int = 2, coef0: float = 1.0, gamma: float = 1.0,
                 name: str = "clauses"):
        if form not in FORMS:
            raise ValueError(Errors.S207.format(value=form, name=name, options=list(FORMS)))
        for setting, value, ok, req in (
                ("n_buckets", n_buckets, isinstance(n_buckets, int) and n_buckets > 0, "a positive integer"),
                ("context", context, isinstance(context, int) and 0 <= context <= 6, "an integer in 0..6"),
                ("degree", degree, isinstance(degree, int) and degree >= 1, "an integer >= 1")):
            if not ok:
                raise ValueError(Errors.S012.format(setting=setting, name=name, value=value, requirement=req))
        self.n_buckets = int(n_buckets)
        self.context = int(context)
        self.form = form
        self.kernel_settings: Dict[str, Any] = {"degree": int(degree), "coef0": float(coef0), "gamma": float(gamma)}
        self.functions: Optional[Dict[str, LinearFunction]] = None
        self.set_templates(features)

    def set_templates(self, features: Sequence[dict]) -> None:
        self.template_specs = [dict(name=t["name"], parts=[list(p) for p in t["parts"]]) for t in features]
        self.templates = TemplateSet(self.template_specs, list(ATOM_NAMES))

    # Functions ---------------------------------------------------------------------------------

    @property
    def is_initialized(self) -> bool:
        return self.functions is not None

    @property
    def weights(self):
        """The start filter's weights (primal form), where the shared pipe code looks for them."""
        fn = self.functions["start"] if self.functions else None
        return fn.weights if isinstance(fn, PrimalFunction) else None

    def _new_function(self, name: str) -> LinearFunction:
        if self.form == "primal":
            return PrimalFunction(AveragedWeights(1, self.n_buckets))
        try:
            from .._core import dual, kernel
        except ImportError as e:
            raise ValueError(Errors.S208.format(name=name, reason=str(e))) from None
        k = kernel.PolynomialKernel(**self.kernel_settings)
        return ObjectFunction(DualFunction(dual.DualPerceptron(k, prediction="averaged")))

    def initialize(self, name: str = "clauses") -> None:
        self.functions = {f: self._new_function(name) for f in FUNCTIONS}

    def recognizer(self, max_boundaries: int, max_span: int) -> SpanRecognizer:
        # The component checks initialization (S001) before it asks for a recognizer.
        assert self.functions is not None, "ClauseModel.recognizer before initialize"
        fns = self.functions
        return SpanRecognizer(self.templates, fns["start"], fns["end"], fns["score"],
                              max_boundaries, max_span, self.context)

    def set_averaged(self, value: bool) -> None:
        for fn in (self.functions or {}).values():
            fn.set_averaged(value)

    def average(self) -> None:
        for fn in (self.functions or {}).values():
            if isinstance(fn, PrimalFunction):
                fn.weights.average()

    # Serialization -----------------------------------------------------------------------------

    def _msg(self) -> dict:
        msg = {"kind": MODEL_KIND, "format_version": FORMAT_VERSION, "templates": self.template_specs,
               "n_buckets": self.n_buckets, "context": self.context, "form": self.form,
               "kernel": self.kernel_settings, "functions": None}
        if self.functions is not None:
            out = {}
            for f, fn in self.functions.items():
                if isinstance(fn, PrimalFunction):
                    keys, weights = fn.weights.to_arrays(averaged=True, prune=True)
                    out[f] = {"keys": keys.astype("<u8").tobytes(), "weights": weights.astype("<f4").tobytes()}
                elif isinstance(fn, ObjectFunction):
                    out[f] = {"dual": fn.obj.to_bytes()}
                else:
                    raise TypeError(f"cannot serialize a {type(fn).__name__} ({f!r})")
            msg["functions"] = out
        return msg

    @property
    def atom_names(self) -> Sequence[str]:
        """The atoms the word templates read (the pipe declares token.tag from these)."""
        return ATOM_NAMES

    def to_bytes(self, component: str = "") -> bytes:
        """msgpack with a checksum of the payload as its last entry, as the other models."""
        return pack_model_msg(self._msg())

    def to_file(self, path) -> None:
        Path(path).write_bytes(self.to_bytes())

    def from_file(self, path, component: str = "") -> "ClauseModel":
        self.apply(self.parse_file(path, component))
        return self

    def from_bytes(self, data: bytes, component: str = "") -> "ClauseModel":
        self.apply(self.parse_bytes(data, component))
        return self

    def parse_file(self, path, component: str = "") -> dict:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ValueError(Errors.S006.format(name=component, reason=f"cannot read {path} ({type(e).__name__})")) from None
        return self.parse_bytes(data, component)

    def parse_bytes(self, data: bytes, component: str = "") -> dict:
        """Everything a model file holds, checked (checksum first) and decoded, without changing
        this model: loading is all-or-nothing."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(Errors.S006.format(name=component, reason=f"expected bytes, got {type(data).__name__}"))
        if not len(data):
            raise ValueError(Errors.S128.format(name=component, what="model"))
        if not _verify_checksum(data, component):
            raise ValueError(Errors.S121.format(name=component))
        try:
            msg = srsly.msgpack_loads(data)
        except Exception as e:
            raise ValueError(Errors.S006.format(name=component, reason=f"not msgpack ({type(e).__name__})")) from None
        check_header(msg, MODEL_KIND, FORMAT_VERSION, component, "clause model")
        try:
            fields = {"templates": msg["templates"], "n_buckets": int(msg["n_buckets"]),
                      "context": int(msg["context"]), "form": str(msg["form"]),
                      "kernel": dict(msg["kernel"]), "functions": None,
                      # the shared pipe code checks weight columns against labels: one, always
                      "weights": None, "n_classes": 1}
            # fails here, not half-way through apply
            TemplateSet([dict(name=t["name"], parts=[list(p) for p in t["parts"]]) for t in fields["templates"]],
                        list(ATOM_NAMES))
            # the settings the constructor checks, checked again (a file is not a config)
            if fields["form"] not in FORMS or not 0 <= fields["context"] <= 6 or fields["n_buckets"] < 1:
                raise ValueError(f"form {fields['form']!r}, context {fields['context']} or n_buckets "
                                 f"{fields['n_buckets']} is not a setting the model takes")
            if set(fields["kernel"]) != {"degree", "coef0", "gamma"}:
                raise ValueError(f"the kernel settings are {sorted(fields['kernel'])}")
            functions = msg["functions"]
            if functions is not None:
                loaded: Dict[str, LinearFunction] = {}
                for f in FUNCTIONS:
                    part = functions[f]
                    if ("dual" in part) != (fields["form"] == "dual"):
                        raise ValueError(f"function {f!r} is not in the model's form {fields['form']!r}")
                    if "dual" in part:
                        from .._core import dual, kernel
                        perceptron = dual.DualPerceptron(kernel.PolynomialKernel(**fields["kernel"]))
                        loaded[f] = ObjectFunction(DualFunction(perceptron.from_bytes(part["dual"])))
                        continue
                    keys = numpy.frombuffer(part["keys"], dtype="<u8").astype(numpy.uint64)
                    weights = numpy.frombuffer(part["weights"], dtype="<f4").astype(numpy.float32)
                    if len(weights) != len(keys):
                        raise ValueError(f"{len(keys)} keys for {len(weights)} weights in function {f!r}")
                    if not numpy.isfinite(weights).all():
                        raise ValueError(Errors.S122.format(name=component, n=int((~numpy.isfinite(weights)).sum())))
                    table = AveragedWeights(1, max(fields["n_buckets"], 2 * len(keys)))
                    table.load_arrays(keys, weights.reshape((len(keys), 1)))
                    loaded[f] = PrimalFunction(table)
                fields["functions"] = loaded
        except ValueError as e:
            if str(e).startswith("[S"):
                raise
            raise ValueError(Errors.S006.format(name=component, reason=f"ValueError: {e}")) from None
        except (KeyError, TypeError, ImportError, AttributeError) as e:
            raise ValueError(Errors.S006.format(name=component, reason=f"{type(e).__name__}: {e}")) from None
        return fields

    def apply(self, fields: dict) -> None:
        """Take the parsed contents of a model file (from parse_bytes / parse_file)."""
        self.set_templates(fields["templates"])
        self.n_buckets = fields["n_buckets"]
        self.context = fields["context"]
        self.form = fields["form"]
        self.kernel_settings = fields["kernel"]
        self.functions = fields["functions"]

    def __reduce__(self):
        return (_rebuild, (self.template_specs, self.n_buckets, self.context, self.form, self.kernel_settings,
                           self.functions))


def _rebuild(templates, n_buckets, context, form, kernel_settings, functions):
    model = ClauseModel(templates, n_buckets, context, form, **kernel_settings)
    model.functions = functions
    return model


@registry.architectures("spacy-structperc.ClauseRanker.v1")
def build_clause_ranker(features: List[dict], n_buckets: int = 1 << 18, context: int = 3,
                        form: str = "primal", degree: int = 2, coef0: float = 1.0,
                        gamma: float = 1.0) -> ClauseModel:
    """Start filter, end filter and phrase scorer (carreras2003 §3).

    features: word templates for the filters (spacy-structperc.clause_features.v1).
    context: L_p, the words around a phrase's start and end its features read (3 in the paper).
    form: "primal" (averaged perceptron, the default) or "dual" (voted kernel perceptron with a
    polynomial kernel (gamma * x.y + coef0) ** degree; carreras2003 used degree 2).
    """
    return ClauseModel(features, n_buckets, context, form, degree, coef0, gamma)
