"""The harness every benchmark script shares, as one name: ``import _common as C``.

Every script (tagger, chunker, NER, parser, ...) has the same shape: convert the corpus once into
a work dir, run each system in its own child process so that its peak memory can be read from that
child alone, and merge one JSON file of rows under ``benchmarks/results/``. The parts live in:

- ``_machine.py``: the repository's folders, child environments (one thread), timing, peak and
  current RSS, the machine and git revision, a fingerprint of the code;
- ``_corpus.py``: where the corpora are, CoNLL-U -> DocBin, un-annotated copies, scoring, the
  timed ``nlp.pipe`` pass;
- ``_training.py``: ``train_epochs`` in-process, ``spacy train`` in a subprocess, spaCy's and
  CRFsuite's peers;
- ``_results.py``: rows, merging them into the results file under a lock, relative paths;
- ``_runner.py``: children (``run_child``), the options every script has, ``Job`` and ``Bench``.

None of them imports spaCy at module level, so a child's peak RSS only counts what the measured
system itself loads.
"""
from _corpus import (conllu_to_docbins, count_tokens, default_data_dir, default_data_root, examples,  # noqa: F401
                     find_split_file, load_docs, materialize_averages, per_type_f, ptb_to_docbin, score_token_attrs,
                     time_pipe, time_pipe_best_of, unannotated_copies)
from _machine import (BENCH_DIR, DEFAULT_WORK_DIR, REPO_ROOT, RESULTS_DIR, SINGLE_THREAD_ENV,  # noqa: F401
                      Timer, child_env, code_fingerprint, current_rss_mb, dir_bytes, git_revision,
                      load_average, machine_info, now_iso, peak_rss_mb, slug)
from _results import (ABSOLUTE_PATH, ROW_KEYS, SYSTEM_ROOTS, load_results, locked, make_row,  # noqa: F401
                      merge_rows, relative_path, relative_paths, save_results, write_results)
from _runner import Bench, Job, add_run_args, csv, parse_only, run_child, run_job, show_metrics  # noqa: F401
from _training import (GOLD_PREPROC_OVERRIDES, config_reads_documents,  # noqa: F401
                       crf_fit, crf_ner_features, crf_setting, crf_tag, parse_spacy_train_log,
                       spacy_init_config, spacy_train, train_epochs, train_spacy_peer)
