"""Long Docs: decoding is bounded by windows of sentences (or of WINDOW tokens with margins), so
time and memory per token do not grow with the Doc. Speed itself is measured by
benchmarks/bench_long_docs.py; the slow test here only holds generous bounds."""
import time
from pathlib import Path

import numpy
import pytest
from spacy.tokens import Doc

from threaded_nlp import random_texts, train_pipeline
from spacy_structperc.parser import component as parser_module
from spacy_structperc.pipeline import sequence
from spacy_structperc.pipeline.sequence import decode_windows

FACTORIES = ("structperc_tagger", "structperc_chunker", "structperc_ner", "structperc_parser")
DECODERS = [
    ("structperc_tagger", {"decoder": "greedy", "lookahead_depth": 1}),
    ("structperc_tagger", {"decoder": "viterbi", "order": 2}),
    ("structperc_tagger", {"decoder": "beam", "beam_width": 8}),
    ("structperc_chunker", {"decoder": "greedy"}),
    ("structperc_ner", {}),
    ("structperc_parser", {"decoder": "greedy", "lookahead_depth": 1}),
    ("structperc_parser", {"decoder": "beam", "beam_width": 8}),
]


@pytest.fixture(scope="module")
def nlp():
    return train_pipeline(n_train=40, epochs=3)


def long_doc(nlp, n_tokens, seed=11, sents=False):
    words, starts = [], []
    for text in random_texts(n_tokens // 5, seed=seed):
        words.extend(text)
        starts.extend([True] + [False] * (len(text) - 1))
        if len(words) >= n_tokens:
            break
    doc = Doc(nlp.vocab, words=words[:n_tokens], sent_starts=starts[:n_tokens] if sents else None)
    return nlp.get_pipe("structperc_tagger")(doc)


def test_windows_keep_every_token_once_and_respect_sentences(nlp):
    for sents in (False, True):
        doc = long_doc(nlp, 5321, sents=sents)
        windows = decode_windows(doc, window=500, margin=20)
        kept = numpy.zeros(len(doc), dtype=int)
        for a, b, ka, kb in windows:
            assert a <= ka < kb <= b and b - a <= 540
            kept[ka:kb] += 1
        assert (kept == 1).all()
        if sents:
            starts = {s.start for s in doc.sents} | {len(doc)}
            assert all(ka in starts and kb in starts for _, _, ka, kb in windows)
    short = long_doc(nlp, 300)
    assert decode_windows(short, window=500, margin=20) == [(0, 300, 0, 300)]


@pytest.mark.parametrize("factory,config", DECODERS[:5], ids=lambda x: str(x))
def test_labellers_decode_long_docs_in_windows_as_they_decode_them_whole(nlp, factory, config, monkeypatch):
    pipe = nlp.get_pipe(factory)
    saved = dict(pipe.cfg)
    pipe.cfg.update(config)
    try:
        doc = long_doc(nlp, 3000)
        whole = pipe.predict([doc])[0]   # 3,000 tokens: more than one window
        monkeypatch.setattr(sequence, "WINDOW", 10 ** 6)
        monkeypatch.setattr(sequence.decode_windows, "__defaults__", (10 ** 6, 50))
        reference = pipe.predict([doc])[0]
    finally:
        pipe.cfg.clear()
        pipe.cfg.update(saved)
    assert (whole == reference).mean() >= 0.999


@pytest.mark.parametrize("config", [{"decoder": "greedy"}, {"decoder": "beam", "beam_width": 8}], ids=str)
def test_parser_parses_long_docs_in_windows_ending_at_its_own_sentences(nlp, config, monkeypatch):
    pipe = nlp.get_pipe("structperc_parser")
    saved = dict(pipe.cfg)
    pipe.cfg.update(config)
    try:
        doc = long_doc(nlp, 2500)
        monkeypatch.setattr(parser_module, "PARSE_WINDOW", 400)
        heads, _ = pipe.predict([doc])[0]
        monkeypatch.setattr(parser_module, "PARSE_WINDOW", 10 ** 6)
        whole, _ = pipe.predict([doc])[0]
    finally:
        pipe.cfg.clear()
        pipe.cfg.update(saved)
    # Greedy decisions depend on the state only, so windows change nothing but the cut
    # sentences; a beam over the whole Doc ranks hypotheses by everything before them, so its
    # search differs more (93% agreement here, on models trained for a few seconds).
    assert (heads == whole).mean() >= (0.98 if config["decoder"] == "greedy" else 0.9)
    parsed = Doc(nlp.vocab, words=[t.text for t in doc])
    pipe.set_annotations([parsed], [(heads, numpy.full(len(doc), len(pipe.cfg["labels"])))])
    for sent in parsed.sents:
        assert sum(t.head.i == t.i for t in sent) == 1


def _peak_rss_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.slow
@pytest.mark.parametrize("factory,config", DECODERS, ids=lambda x: str(x))
def test_50k_token_doc_without_boundaries_within_time_and_memory_bounds(nlp, factory, config):
    """Bounds: 30 s and 300 MB added peak RSS per decoder (measured on 2 loaded cores: 0.1-5 s
    and a few MB; before windows, the parser's beam took 153 s and Viterbi ~1 GB)."""
    pipe = nlp.get_pipe(factory)
    saved = dict(pipe.cfg)
    pipe.cfg.update(config)
    doc = long_doc(nlp, 50_000)
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    before = _peak_rss_mb()
    start = time.perf_counter()
    try:
        pipe.predict([doc])
    finally:
        pipe.cfg.clear()
        pipe.cfg.update(saved)
    assert time.perf_counter() - start < 30
    assert _peak_rss_mb() - before < 300
