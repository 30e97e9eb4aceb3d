"""Where prediction time goes: seconds per stage of each component, so the next bottleneck shows.

    from spacy_structperc.profile import predict_stages
    stages = predict_stages(nlp, docs)   # {"tagger": {"atoms": ..., "decode": ..., "write": ...,
                                         #             "total": ...}, "parser": {...}, ...}
"""
import time
from typing import Any, Dict, Iterable, List, Optional, Union

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import minibatch

from .pipeline.base import PerceptronPipe

STAGES = ("atoms", "decode", "write")


def predict_stages(nlp: Language, docs: Iterable[Union[Doc, str]], *,
                   batch_size: Optional[int] = None) -> Dict[str, Dict[str, float]]:
    """Annotate `docs` with `nlp`'s pipeline, batch by batch as `nlp.pipe` does, and return the
    seconds each component spent in each stage, by component name.

    The stages of a structured-perceptron component are "atoms" (reading the Docs: atom
    extraction, position masks, the windows or sentences to decode), "decode" (the Cython
    decoders, GIL released) and "write" (set_annotations); "total" is their sum. Other
    components (spaCy's own, the clause identifier, a parser with a reranker) get "total"
    only. Texts are tokenized first, timed as "tokenizer". The Docs are annotated in place,
    as `nlp.pipe` would annotate them; the timings are of one process and one thread.
    """
    out: Dict[str, Dict[str, float]] = {}
    items = list(docs)
    if any(isinstance(d, str) for d in items):
        start = time.perf_counter()
        items = [nlp.make_doc(d) if isinstance(d, str) else d for d in items]
        out["tokenizer"] = {"total": time.perf_counter() - start}
    size = batch_size if batch_size is not None else nlp.batch_size
    for name, component in nlp.pipeline:
        out[name] = {stage: 0.0 for stage in STAGES} if _staged(component) else {}
        out[name]["total"] = 0.0
    for batch in minibatch(items, size=size):
        batch = list(batch)
        for name, component in nlp.pipeline:
            times = out[name]
            if _staged(component):
                pipe: Any = component
                t0 = time.perf_counter()
                pipe.check_inputs(batch)
                pipe.begin_predict()
                prepared = pipe._prepare(batch)
                t1 = time.perf_counter()
                predictions = pipe._decode_prepared(prepared)
                t2 = time.perf_counter()
                pipe.set_annotations(batch, predictions)
                t3 = time.perf_counter()
                times["atoms"] += t1 - t0
                times["decode"] += t2 - t1
                times["write"] += t3 - t2
                times["total"] += t3 - t0
            else:
                t0 = time.perf_counter()
                batch = _run(component, batch)
                times["total"] += time.perf_counter() - t0
    return out


def _staged(pipe) -> bool:
    return isinstance(pipe, PerceptronPipe) and hasattr(pipe, "_prepare") and \
        getattr(pipe, "reranker", None) is None


def _run(pipe, batch: List[Doc]) -> List[Doc]:
    if hasattr(pipe, "pipe"):
        return list(pipe.pipe(batch, batch_size=len(batch)))
    return [pipe(doc) for doc in batch]
