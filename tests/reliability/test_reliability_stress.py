"""Stress: four threads sharing one nlp of tagger + chunker + NER + parser annotate 2,000 UD
English EWT sentences byte-identically to one thread, without crashing.

The models are small ones trained in the test on slices (tagger and parser on 1,000 EWT
training sentences, chunker on 500 CoNLL-2000 sentences, NER on 500 CoNLL-2003 sentences, two
passes each): thread safety does not depend on accuracy. The annotating run happens in a child
process, so a crash fails the test instead of ending the session."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import require_corpus

HERE = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent('''
    import queue, sys, threading
    sys.path.insert(0, {tests_dir!r})
    import spacy
    from spacy.tokens import Doc
    from spacy.training import Example
    from conllu_data import read_conllu
    from spacy_structperc.readers import create_conll2000_reader, create_conll2003_reader

    data = {data!r}
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("structperc_tagger")
    chunker = nlp.add_pipe("structperc_chunker")
    ner = nlp.add_pipe("structperc_ner", config={{"reset_every": 0}})
    parser = nlp.add_pipe("structperc_parser")
    ewt = read_conllu(data + "/ud_en_ewt/en_ewt-ud-train.conllu", limit=1000)
    ewt_egs = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in ewt]
    chunk_egs = list(create_conll2000_reader(data + "/conll2000/train.txt", limit=500)(nlp))
    ner_egs = list(create_conll2003_reader(data + "/conll2003/eng.train", limit=500)(nlp))
    for pipe, egs in ((tagger, ewt_egs), (parser, ewt_egs), (chunker, chunk_egs), (ner, ner_egs)):
        pipe.initialize(lambda egs=egs: egs, nlp=nlp)
        for _ in range(2):
            pipe.update(egs)

    test = read_conllu(data + "/ud_en_ewt/en_ewt-ud-dev.conllu", limit=2000)
    words = [[t.text for t in d] for d in test]
    expected = [d.to_bytes() for d in nlp.pipe(Doc(nlp.vocab, words=w) for w in words)]
    got = [None] * len(words)
    jobs = queue.Queue()
    for start in range(0, len(words), 25):
        jobs.put(start)
    errors = []

    def work():
        try:
            while True:
                try:
                    start = jobs.get_nowait()
                except queue.Empty:
                    return
                docs = nlp.pipe(Doc(nlp.vocab, words=w) for w in words[start:start + 25])
                for k, doc in enumerate(docs):
                    got[start + k] = doc.to_bytes()
        except BaseException as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    diffs = sum(a != b for a, b in zip(got, expected))
    print("sentences", len(words), "differences", diffs, "errors", errors)
    sys.exit(1 if diffs or errors else 0)
''')


@pytest.mark.slow
def test_four_threads_annotate_2000_ewt_sentences_like_one_thread(data_dir, tmp_path):
    require_corpus(data_dir / "conll2000" / "train.txt")
    require_corpus(data_dir / "conll2003" / "eng.train")
    script = tmp_path / "stress.py"
    script.write_text(SCRIPT.format(tests_dir=str(HERE.parent), data=str(data_dir)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "sentences 2000 differences 0 errors []" in proc.stdout
