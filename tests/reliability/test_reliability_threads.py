"""Thread safety: one nlp shared by several threads annotates exactly as one thread does.

Each component keeps its decoding state (the transition system: bound sentence, feature keys,
score caches) per thread; the weights are shared and only read. The run happens in a child
process, so a crash (which the shared state used to cause) fails the test instead of ending it.
"""
import subprocess
import sys
from pathlib import Path

from threaded_nlp import annotations, random_texts, run_threads, count_differences, train_pipeline
from spacy.tokens import Doc

HERE = Path(__file__).resolve().parent


def test_four_threads_sharing_one_nlp_neither_crash_nor_differ():
    proc = subprocess.run([sys.executable, str(HERE / "threaded_nlp.py"), "300", "4"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "differences 0" in proc.stdout


def test_each_thread_has_its_own_decoding_state():
    nlp = train_pipeline(n_train=20, epochs=1)
    parser = nlp.get_pipe("structperc_parser")
    tagger = nlp.get_pipe("structperc_tagger")
    mine = (parser.system, tagger.system)
    theirs = run_threads(lambda i: (nlp.get_pipe("structperc_parser").system,
                                    nlp.get_pipe("structperc_tagger").system), 1, 2)
    assert theirs[0][0][0] is not theirs[1][0][0] and mine[0] not in (theirs[0][0][0], theirs[1][0][0])
    assert theirs[0][0][1] is not theirs[1][0][1] and mine[1] not in (theirs[0][0][1], theirs[1][0][1])
    # Reused by later calls of the same thread; rebuilt when the labels change.
    assert parser.system is mine[0]
    parser.add_label("xcomp")
    assert parser.system is not mine[0]


def test_threads_with_nlp_pipe_batches_agree_with_one_thread():
    nlp = train_pipeline(n_train=30, epochs=2)
    texts = random_texts(40, seed=5)
    expected = [annotations(d) for d in nlp.pipe(Doc(nlp.vocab, words=w) for w in texts)]
    results = run_threads(lambda i: [annotations(d) for d in nlp.pipe(
        (Doc(nlp.vocab, words=w) for w in texts), batch_size=7)], 1, 3)
    assert count_differences([expected], results) == 0
