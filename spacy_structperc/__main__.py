"""python -m spacy_structperc COMMAND ...

Commands:
  train-distributed CONFIG --output DIR [--scheduler ADDRESS] [--workers N] [--shards N]
                    [--mixing uniform|mistakes] [--shard-dir URL] [--epochs N] [--eval-every N]
                    [--resume] [--worker-timeout S] [--paths.train X ...]
  annotate PIPELINE INPUT OUTPUT [--scheduler ADDRESS] [--workers N] [--partition-size N] [--jsonl]
  average OUTPUT PIPELINE PIPELINE [...] [--components NAME,...] [--prune-below NAME=X,...]
  jackknife CONFIG TRAIN OUTPUT [--folds N] [--component NAME] [--paths.dev X ...]

train-distributed and annotate need the Dask extra: pip install -e ".[dask]" (from the checkout).
"""
import argparse
import sys
from typing import List, Optional


def _int_setting(option: str, value: str) -> int:
    from .errors import Errors

    try:
        return int(value)
    except ValueError:
        raise ValueError(Errors.S012.format(setting=option, name="train-distributed",
                                            requirement="an integer from 0 to 19 or 'auto'", value=value)) from None


def _train(args, extra: List[str]) -> int:
    from spacy.cli._util import parse_config_overrides

    from .distributed._dask import dask_client, require_dask
    from .distributed.train import train_distributed

    from .errors import Errors

    overrides = parse_config_overrides(extra)
    if args.shards is not None and args.shards < 1:
        raise ValueError(Errors.S355.format(value=args.shards))
    if args.simulate:
        train_distributed(args.config, args.output, overrides=overrides, n_shards=args.shards or 1,
                          mixing=args.mixing, shard_dir=args.shard_dir, epochs=args.epochs, simulate=True,
                          eval_every=args.eval_every, resume=args.resume)
        return 0
    require_dask("train-distributed")
    worker_nice = None if args.worker_nice == "auto" else _int_setting("--worker-nice", args.worker_nice)
    if args.scheduler and args.shards is None and not args.resume:
        raise ValueError(Errors.S354)
    with dask_client("train-distributed", args.scheduler, args.workers, args.worker_timeout) as client:
        train_distributed(args.config, args.output, overrides=overrides, client=client,
                          n_shards=args.shards, mixing=args.mixing, shard_dir=args.shard_dir,
                          epochs=args.epochs, eval_every=args.eval_every, worker_nice=worker_nice,
                          resume=args.resume, worker_timeout=args.worker_timeout,
                          startup_seconds=client.structperc_startup_seconds)
    return 0


def _annotate(args, extra: List[str]) -> int:
    from .distributed._dask import dask_client
    from .distributed.annotate import annotate

    if extra:
        raise SystemExit(f"annotate: unknown arguments {extra}")
    with dask_client("annotate", args.scheduler, args.workers) as client:
        print(f"Cluster start-up {client.structperc_startup_seconds:.1f} s", flush=True)
        summary = annotate(args.pipeline, args.input, args.output, client=client,
                           partition_size=args.partition_size, jsonl=args.jsonl,
                           batch_size=args.batch_size, progress=not args.no_progress)
    print(f"{summary['annotated']} partition(s) annotated, {summary['skipped']} already done; "
          f"{summary['docs']} docs, {summary['errors']} error record(s), "
          f"{summary['words_per_second']:.0f} words/s")
    return 0


def _average(args, extra: List[str]) -> int:
    from .averaging import average_pipeline_dirs
    from .errors import Errors

    if extra:
        raise SystemExit(f"average: unknown arguments {extra}")
    components = [x.strip() for x in args.components.split(",") if x.strip()] if args.components else None
    prune_below = {}
    for item in (args.prune_below or "").split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        try:
            prune_below[name.strip()] = float(value)
        except ValueError:
            raise ValueError(Errors.S425.format(name=name.strip(), value=value)) from None
    names = average_pipeline_dirs(args.output, args.inputs, components, prune_below or None)
    print(f"Averaged {', '.join(names)} of {len(args.inputs)} pipelines into {args.output}")
    return 0


def _jackknife(args, extra: List[str]) -> int:
    from spacy.cli._util import parse_config_overrides

    from .jackknife import jackknife_tags

    summary = jackknife_tags(args.config, args.train, args.output, folds=args.folds,
                             component=args.component, overrides=parse_config_overrides(extra))
    accuracy = f", {100 * summary['accuracy']:.2f}% of them the gold tag" if summary["accuracy"] is not None else ""
    print(f"Tagged {summary['docs']} Docs ({summary['tokens']} tokens) over {summary['folds']} folds{accuracy}: "
          f"{args.output}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_structperc")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train-distributed", help="train a config by iterative parameter mixing on Dask")
    t.add_argument("config")
    t.add_argument("--output", "-o", required=True)
    t.add_argument("--scheduler", default=None, help="address of a Dask scheduler (default: a LocalCluster)")
    t.add_argument("--workers", type=int, default=None, help="LocalCluster worker processes (default: cores)")
    t.add_argument("--shards", type=int, default=None,
                   help="training shards, which decide the model (default: --workers, i.e. the LocalCluster's "
                        "configured worker count, one per core unless given; needed with --scheduler)")
    t.add_argument("--resume", action="store_true",
                   help="continue a run that stopped with S352 from OUTPUT/checkpoint (same config and options)")
    t.add_argument("--worker-timeout", type=float, default=120.0,
                   help="seconds to wait for a Dask worker when none is there (at the start, or after "
                        "losing all of them) before stopping with a coded error (default: 120)")
    t.add_argument("--mixing", default="uniform", help="uniform | mistakes")
    t.add_argument("--shard-dir", default=None, help="where workers read shards (folder or fsspec URL)")
    t.add_argument("--epochs", type=int, default=None, help="default: [training] max_epochs")
    t.add_argument("--eval-every", type=int, default=1,
                   help="evaluate the mix every N epochs and after the last (default: every epoch)")
    t.add_argument("--worker-nice", default="auto",
                   help="nice value of the workers' training threads, 0-19, or 'auto' (the default: 3 "
                        "when the LocalCluster has a worker per core and the machine is otherwise idle "
                        "at the start, so the driver's evaluation gets a core; else 0)")
    t.add_argument("--simulate", action="store_true", help="train the shards in this process, in turn")
    a = sub.add_parser("annotate", help="annotate text / JSONL / .spacy files over Dask partitions")
    a.add_argument("pipeline")
    a.add_argument("input")
    a.add_argument("output")
    a.add_argument("--scheduler", default=None)
    a.add_argument("--workers", type=int, default=None)
    a.add_argument("--partition-size", type=int, default=1000)
    a.add_argument("--batch-size", type=int, default=256)
    a.add_argument("--jsonl", action="store_true", help="also write the annotations as JSON lines")
    a.add_argument("--no-progress", action="store_true")
    v = sub.add_parser("average", help="average the weights of copies of a pipeline trained with different seeds")
    v.add_argument("output")
    v.add_argument("inputs", nargs="+", metavar="pipeline")
    v.add_argument("--components", default=None,
                   help="comma-separated components to average (default: every structured-perceptron "
                        "component); the others are the first pipeline's")
    v.add_argument("--prune-below", default=None,
                   help="NAME=X,...: save those components' rows only where a weight exceeds X (as "
                        "model.prune_below; train the copies with 0 and set it here)")
    j = sub.add_parser("jackknife", help="tag each fold of a training file with a tagger trained on the other folds")
    j.add_argument("config", help="the tagger's training config (spacy train's)")
    j.add_argument("train", help="the .spacy training file to tag (its Docs split into folds)")
    j.add_argument("output", help="the .spacy file to write: the same Docs, each with its jackknifed tags")
    j.add_argument("--folds", type=int, default=5)
    j.add_argument("--component", default="tagger", help="the pipe whose tags are taken (default: tagger)")
    args, extra = parser.parse_known_args(argv)
    if args.command == "train-distributed":
        return _train(args, extra)
    if args.command == "average":
        return _average(args, extra)
    if args.command == "jackknife":
        return _jackknife(args, extra)
    return _annotate(args, extra)


if __name__ == "__main__":
    sys.exit(main())
