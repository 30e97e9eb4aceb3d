"""`train-distributed`: any component's config trained by iterative parameter mixing.

McDonald, Hall and Mann (2010): the training set is cut into S shards; every epoch each shard
trains one pass from the current mix, and the S resulting weight vectors are mixed (uniformly,
or weighted by each shard's mistakes) into the seed of the next epoch.

The driver initializes the pipeline as `spacy train` does (`init_nlp`), writes the shards where
the workers can read them (a local folder or any fsspec URL), sends the initialized pipeline once
as `nlp.to_bytes()` and, every epoch, the mixed training state of each perceptron component (see
`mixing.py`). Workers keep the pipeline and their shard between epochs; a worker that dies loses
nothing: its task is pure (the mix, the shard, the epoch and the seed fix its result), so Dask
runs it again elsewhere and the epoch's mix is the one it would have been.
"""
import json
import os
import random
import resource
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import Errors
from .mixing import load_pipe_state, mix_pipe_states, mixable_pipes, mixing_coefficients, pipe_state

MIXING = ("uniform", "mistakes")
_WORKER_NLP: Dict[str, Any] = {}      # run token -> the worker's pipeline (one run at a time)
_WORKER_SHARDS: Dict[str, Any] = {}   # shard URL -> its examples


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Shards ----------------------------------------------------------------------------------------

def write_shards(examples: Sequence, n_shards: int, shard_dir: str) -> List[str]:
    """Deal the examples round-robin into `n_shards` shards; write each as two DocBins (the
    reference docs, and the predicted docs' tokens, so workers rebuild the same Examples the
    config's reader made). Returns one URL prefix per shard."""
    import fsspec
    from spacy.tokens import DocBin

    if len(examples) < n_shards:
        raise ValueError(Errors.S343.format(n_examples=len(examples), n_shards=n_shards))
    fs, _, (root,) = fsspec.get_fs_token_paths(shard_dir)
    fs.makedirs(root, exist_ok=True)
    urls = []
    for s in range(n_shards):
        ref, pred = DocBin(store_user_data=True), DocBin(attrs=["ORTH", "SPACY"], store_user_data=False)
        for eg in examples[s::n_shards]:
            ref.add(eg.reference)
            pred.add(eg.predicted)
        prefix = f"{shard_dir.rstrip('/')}/shard-{s:03d}"
        for suffix, db in ((".reference.spacy", ref), (".predicted.spacy", pred)):
            with fsspec.open(prefix + suffix, "wb") as f:
                f.write(db.to_bytes())
        urls.append(prefix)
    return urls


def read_shard(url: str, nlp) -> List:
    import fsspec
    from spacy.tokens import DocBin
    from spacy.training import Example

    try:
        with fsspec.open(url + ".reference.spacy", "rb") as f:
            refs = list(DocBin().from_bytes(f.read()).get_docs(nlp.vocab))
        with fsspec.open(url + ".predicted.spacy", "rb") as f:
            preds = list(DocBin().from_bytes(f.read()).get_docs(nlp.vocab))
    except (OSError, ValueError) as e:
        raise ValueError(Errors.S344.format(url=url, reason=f"{type(e).__name__}: {e}")) from None
    return [Example(p, r) for p, r in zip(preds, refs)]


# The task a worker runs ------------------------------------------------------------------------

def _worker_pipeline(payload: Dict[str, Any]):
    nlp = _WORKER_NLP.get(payload["token"])
    if nlp is None:
        from spacy import util
        from thinc.api import Config

        _WORKER_NLP.clear()     # a new run: drop the last one's pipeline and shards
        _WORKER_SHARDS.clear()
        config = Config().from_str(payload["config"], interpolate=False)
        nlp = util.load_model_from_config(config, auto_fill=False, validate=False)
        nlp.from_bytes(payload["nlp"])
        _WORKER_NLP[payload["token"]] = nlp
    return nlp


def _batches(payload: Dict[str, Any], examples: List) -> Iterator[List]:
    size = max(1, int(payload.get("batch_words", 1000)))
    batch, n = [], 0
    for eg in examples:
        batch.append(eg)
        n += len(eg.reference)
        if n >= size:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def train_shard(payload: Dict[str, Any], states: Dict[str, Dict], shard_url: str, epoch: int,
                shard_index: int) -> Dict[str, Any]:
    """One epoch over one shard from the mixed `states`: the shard's new states and statistics."""
    start = time.perf_counter()
    nlp = _worker_pipeline(payload)
    examples = _WORKER_SHARDS.get(shard_url)
    if examples is None:
        examples = _WORKER_SHARDS[shard_url] = read_shard(shard_url, nlp)
    for name, state in states.items():
        load_pipe_state(nlp.get_pipe(name), state)
    for _, pipe in nlp.pipeline:
        start_epoch = getattr(pipe, "start_epoch", None)
        if start_epoch is not None:
            start_epoch(epoch - 1)   # spaCy's epochs, as the epoch hook sees them, count from 0
    order = list(examples)
    random.Random(f"{payload['seed']}:{epoch}:{shard_index}").shuffle(order)
    losses: Dict[str, float] = {}
    for batch in _batches(payload, order):
        nlp.update(batch, sgd=False, losses=losses, exclude=payload["frozen"],
                   annotates=payload["annotating"])
    return {
        "states": {name: pipe_state(nlp.get_pipe(name)) for name in states},
        "mistakes": {name: float(losses.get(name, 0.0)) for name in states},
        "examples": len(order),
        "words": sum(len(eg.reference) for eg in order),
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": _peak_rss_mb(),
        "pid": os.getpid(),
    }


def _stats(result: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in result.items() if k != "states"}


def _component_state(result: Dict[str, Any], name: str) -> Dict:
    return result["states"][name]


# Executors: where the shards train -------------------------------------------------------------

class SequentialExecutor:
    """Every shard in this process, one after another: serial training (one shard), and the
    simulation of a larger cluster (accuracy does not need real cores)."""

    def __init__(self, payload: Dict[str, Any], shard_urls: List[str]):
        self.payload, self.shard_urls = payload, shard_urls
        self.n_workers = 1

    def run_epoch(self, states, epoch):
        results = [train_shard(self.payload, states, url, epoch, i) for i, url in enumerate(self.shard_urls)]
        stats = [_stats(r) for r in results]

        def fetch(name):
            for r in results:
                yield r["states"].pop(name)
        return stats, fetch

    def worker_peak_rss_mb(self) -> List[float]:
        return [_peak_rss_mb()]

    def close(self):
        _WORKER_NLP.pop(self.payload["token"], None)
        _WORKER_SHARDS.clear()


class DaskExecutor:
    """Shards as Dask tasks; the pipeline bytes are broadcast once, the mixed states per epoch."""

    def __init__(self, client, payload: Dict[str, Any], shard_urls: List[str]):
        self.client, self.payload, self.shard_urls = client, payload, shard_urls
        [self._payload_f] = client.scatter([payload], broadcast=True, hash=False)
        self.n_workers = len(client.scheduler_info()["workers"])

    def run_epoch(self, states, epoch):
        client, token = self.client, self.payload["token"][:12]
        [states_f] = client.scatter([states], broadcast=True, hash=False)
        futures = [client.submit(train_shard, self._payload_f, states_f, url, epoch, i, pure=False,
                                 key=f"structperc-train-{token}-e{epoch}-s{i}")
                   for i, url in enumerate(self.shard_urls)]
        stats = client.gather([client.submit(_stats, f, pure=False, key=f"structperc-stats-{token}-e{epoch}-s{i}")
                               for i, f in enumerate(futures)])
        del states_f

        def fetch(name):
            # In shard order (a deterministic mix), one shard's state on the driver at a time.
            for i, f in enumerate(futures):
                yield client.submit(_component_state, f, name, pure=False,
                                    key=f"structperc-state-{token}-e{epoch}-s{i}-{name}").result()
        return stats, fetch

    def worker_peak_rss_mb(self) -> List[float]:
        return sorted(self.client.run(_peak_rss_mb).values())

    def close(self):
        pass


# The driver ------------------------------------------------------------------------------------

def _score_row(scores: Dict[str, Any], keys: Sequence[str]) -> List[str]:
    out = []
    for key in keys:
        value = scores.get(key)
        out.append(f"{value * 100:.2f}" if isinstance(value, (int, float)) else "-")
    return out


def train_distributed(config_path, output, *, overrides: Optional[Dict[str, Any]] = None,
                      client=None, n_shards: Optional[int] = None, mixing: str = "uniform",
                      shard_dir: Optional[str] = None, epochs: Optional[int] = None,
                      simulate: bool = False, printer: Optional[Callable[[str], None]] = print,
                      on_epoch: Optional[Callable[[Dict[str, Any], Any], None]] = None) -> Dict[str, Any]:
    """Train the pipeline of `config_path` by iterative parameter mixing; save `model-best` and
    `model-last` under `output`. With `client`, shards train on its cluster (one shard per worker
    unless `n_shards`); with `simulate`, all shards train in this process one after another.
    `on_epoch(row, nlp)` is called after every epoch's mix and evaluation. Returns the log (also
    written to `output/ipm_log.json`)."""
    from spacy import util
    from spacy.schemas import ConfigSchemaTraining
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import create_evaluation_callback
    from spacy.util import registry, resolve_dot_names

    if mixing not in MIXING:
        raise ValueError(Errors.S345.format(value=mixing, options=list(MIXING)))
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    config = util.load_config(config_path, overrides=overrides or {}, interpolate=False)
    nlp = init_nlp(config, use_gpu=-1)
    resolved = nlp.config.interpolate()
    T = registry.resolve(resolved["training"], schema=ConfigSchemaTraining)
    train_corpus, dev_corpus = resolve_dot_names(resolved, [T["train_corpus"], T["dev_corpus"]])
    n_epochs = int(epochs if epochs is not None else T["max_epochs"])
    if n_epochs < 1:
        raise ValueError(Errors.S346.format(value=n_epochs))
    frozen, annotating = list(T["frozen_components"]), list(T["annotating_components"])
    pipes = mixable_pipes(nlp, frozen)
    if client is None and not simulate:
        raise ValueError("train_distributed needs a Dask client, or simulate=True")
    if n_shards is None:
        n_shards = 1 if client is None else len(client.scheduler_info()["workers"])
    examples = list(train_corpus(nlp))
    urls = write_shards(examples, n_shards, shard_dir or str(output / "shards"))
    del examples
    batcher_size = nlp.config["training"].get("batcher", {}).get("size", 1000)
    payload = {
        "token": uuid.uuid4().hex, "config": nlp.config.to_str(), "nlp": nlp.to_bytes(),
        "frozen": frozen, "annotating": annotating, "seed": T["seed"] if T["seed"] is not None else 0,
        "batch_words": batcher_size if isinstance(batcher_size, int) else 1000,
    }
    executor = SequentialExecutor(payload, urls) if client is None else DaskExecutor(client, payload, urls)
    del payload
    evaluate = create_evaluation_callback(nlp, dev_corpus, T["score_weights"])
    score_keys = [k for k, v in T["score_weights"].items() if v]
    before_to_disk = T["before_to_disk"] or (lambda n: n)
    names = [name for name, _ in pipes]
    if printer:
        printer(f"Iterative parameter mixing: {n_shards} shard(s) on "
                f"{'this process' if client is None else str(executor.n_workers) + ' worker(s)'}, "
                f"{mixing} mixing, {n_epochs} epoch(s)")
        header = ["E", "SECONDS", *[f"MISTAKES/SHARD {n.upper()}" for n in names],
                  *[k.upper() for k in score_keys], "SCORE"]
        printer("  ".join(f"{h:>12}" for h in header))
    log: Dict[str, Any] = {"config": str(config_path), "n_shards": n_shards, "mixing": mixing,
                           "n_workers": executor.n_workers, "epochs": []}
    best = None
    try:
        for epoch in range(1, n_epochs + 1):
            start = time.perf_counter()
            states = {name: pipe_state(pipe) for name, pipe in pipes}
            stats, fetch = executor.run_epoch(states, epoch)
            del states
            for name, pipe in pipes:
                coefs = mixing_coefficients([s["mistakes"][name] for s in stats], mixing)
                mix_pipe_states(pipe, zip(fetch(name), coefs))
            train_seconds = time.perf_counter() - start
            score, scores = evaluate()
            row = {"epoch": epoch, "train_seconds": train_seconds,
                   "seconds": time.perf_counter() - start, "score": score,
                   "scores": {k: v for k, v in scores.items() if isinstance(v, (int, float))},
                   "mistakes": {n: [s["mistakes"][n] for s in stats] for n in names},
                   "shard_seconds": [s["seconds"] for s in stats],
                   "shard_words": [s["words"] for s in stats],
                   "worker_peak_rss_mb": sorted({s["pid"]: s["peak_rss_mb"] for s in stats}.values())}
            log["epochs"].append(row)
            nlp.meta["performance"] = {**row["scores"], "score": score}
            if best is None or score > best:
                best = score
                before_to_disk(nlp).to_disk(output / "model-best")
            if printer:
                cells = [str(epoch), f"{row['seconds']:.1f}",
                         *["/".join(f"{m:.0f}" for m in row["mistakes"][n]) for n in names],
                         *_score_row(scores, score_keys), f"{score:.2f}"]
                printer("  ".join(f"{c:>12}" for c in cells))
            if on_epoch is not None:
                on_epoch(row, nlp)
        before_to_disk(nlp).to_disk(output / "model-last")
    finally:
        executor.close()
    log["best_score"] = best
    (output / "ipm_log.json").write_text(json.dumps(log, indent=2))
    return log
