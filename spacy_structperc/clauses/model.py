"""The clause identifier's model: word templates and the three learned functions.

The start filter, the end filter and the phrase scorer are each a `LinearFunction` of the core:
in primal form an averaged perceptron over hashed features (the fast default), or in dual form a
voted kernel perceptron (`form = "dual"`, a polynomial kernel of `degree`, carreras2003's setting
with degree 2) from `spacy_structperc._core.kernel`. Saved as msgpack of numpy buffers (primal)
or of the kernel perceptron's own bytes (dual), never pickle.
"""
import io
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy
import srsly

from .._core.span_ranker import ATOM_NAMES, LinearFunction, ObjectFunction, PrimalFunction, SpanRecognizer
from .._core.templates import TemplateSet
from .._core.weights import AveragedWeights
from ..errors import Errors
from ..model import check_header

FORMAT_VERSION = 1
MODEL_KIND = "spacy-structperc.ClauseRanker"
FUNCTIONS = ("start", "end", "score")
FORMS = ("primal", "dual")


class DualFunction:
    """A dual-form (voted) kernel perceptron as the search sees a function: scores with the
    current perceptron while training ("last") and with `prediction` ("averaged" or "voted")
    otherwise. `spacy_structperc._core.kernel.DualPerceptron` does the work."""

    def __init__(self, perceptron, prediction: str = "averaged"):
        self.perceptron = perceptron
        self.prediction = prediction
        self.mode = prediction

    def score(self, keys) -> float:
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
        self.kernel_settings = {"degree": int(degree), "coef0": float(coef0), "gamma": float(gamma)}
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
            from .._core import kernel
        except ImportError as e:
            raise ValueError(Errors.S208.format(name=name, reason=str(e))) from None
        k = kernel.PolynomialKernel(**self.kernel_settings)
        return ObjectFunction(DualFunction(kernel.DualPerceptron(k, prediction="averaged")))

    def initialize(self, name: str = "clauses") -> None:
        self.functions = {f: self._new_function(name) for f in FUNCTIONS}

    def recognizer(self, max_boundaries: int, max_span: int) -> SpanRecognizer:
        return SpanRecognizer(self.templates, self.functions["start"], self.functions["end"],
                              self.functions["score"], max_boundaries, max_span, self.context)

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
                else:
                    out[f] = {"dual": fn.obj.to_bytes()}
            msg["functions"] = out
        return msg

    def to_bytes(self, component: str = "") -> bytes:
        return srsly.msgpack_dumps(self._msg())

    def to_file(self, path) -> None:
        Path(path).write_bytes(self.to_bytes())

    def from_file(self, path, component: str = "") -> "ClauseModel":
        return self.from_bytes(Path(path).read_bytes(), component)

    def from_bytes(self, data: bytes, component: str = "") -> "ClauseModel":
        try:
            msg = srsly.msgpack_loads(data)
        except Exception as e:
            raise ValueError(Errors.S006.format(name=component, reason=f"not msgpack ({type(e).__name__})")) from None
        check_header(msg, MODEL_KIND, FORMAT_VERSION, component, "clause model")
        try:
            self.set_templates(msg["templates"])
            self.n_buckets = int(msg["n_buckets"])
            self.context = int(msg["context"])
            self.form = str(msg["form"])
            self.kernel_settings = dict(msg["kernel"])
            functions = msg["functions"]
            if functions is None:
                self.functions = None
                return self
            loaded = {}
            for f in FUNCTIONS:
                part = functions[f]
                if "dual" in part:
                    from .._core import kernel
                    perceptron = kernel.DualPerceptron(kernel.PolynomialKernel(**self.kernel_settings))
                    loaded[f] = ObjectFunction(DualFunction(perceptron.from_bytes(part["dual"])))
                    continue
                keys = numpy.frombuffer(part["keys"], dtype="<u8").astype(numpy.uint64)
                weights = numpy.frombuffer(part["weights"], dtype="<f4").astype(numpy.float32)
                if len(weights) != len(keys):
                    raise ValueError(f"{len(keys)} keys for {len(weights)} weights in function {f!r}")
                table = AveragedWeights(1, max(self.n_buckets, 2 * len(keys)))
                table.load_arrays(keys, weights.reshape((len(keys), 1)))
                loaded[f] = PrimalFunction(table)
            self.functions = loaded
        except (KeyError, TypeError, ValueError, ImportError, AttributeError) as e:
            raise ValueError(Errors.S006.format(name=component, reason=f"{type(e).__name__}: {e}")) from None
        return self

    def __reduce__(self):
        return (_rebuild, (self.template_specs, self.n_buckets, self.context, self.form, self.kernel_settings,
                           self.functions))


def _rebuild(templates, n_buckets, context, form, kernel_settings, functions):
    model = ClauseModel(templates, n_buckets, context, form, **kernel_settings)
    model.functions = functions
    return model
