"""structperc_clauses: training, serialization, pickling, displaCy, bad input and the CLI."""
import pickle
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import spacy
import srsly
from spacy import displacy
from spacy.tokens import Doc, Span
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc.clauses.conll2001 import clause_tags

REPO_ROOT = Path(__file__).resolve().parents[2]

# (words, tags, chunks as (start, end, type), clauses as (start, end exclusive))
TRAIN_DATA = [
    ("He said that the market would fall .".split(), ["PRP", "VBD", "IN", "DT", "NN", "MD", "VB", "."],
     [(0, 1, "NP"), (1, 2, "VP"), (2, 3, "SBAR"), (3, 5, "NP"), (5, 7, "VP")],
     [(0, 8), (2, 7), (3, 7)]),
    ("The man who left was tired .".split(), ["DT", "NN", "WP", "VBD", "VBD", "JJ", "."],
     [(0, 2, "NP"), (2, 3, "NP"), (3, 4, "VP"), (4, 5, "VP"), (5, 6, "ADJP")],
     [(0, 7), (2, 4), (3, 4)]),
    ("They want to go home .".split(), ["PRP", "VBP", "TO", "VB", "NN", "."],
     [(0, 1, "NP"), (1, 2, "VP"), (2, 4, "VP"), (4, 5, "NP")],
     [(0, 6), (2, 5)]),
    ("Prices rose , and analysts expect more gains .".split(),
     ["NNS", "VBD", ",", "CC", "NNS", "VBP", "JJR", "NNS", "."],
     [(0, 1, "NP"), (1, 2, "VP"), (4, 5, "NP"), (5, 6, "VP"), (6, 8, "NP")],
     [(0, 9), (0, 2), (4, 8)]),
]


def gold_doc(vocab, words, tags, chunks, clauses):
    doc = Doc(vocab, words=words, tags=tags)
    doc.spans["chunks"] = [Span(doc, s, e, label=k) for s, e, k in chunks]
    doc.spans["clauses"] = [Span(doc, s, e, label="S") for s, e in clauses]
    return doc


def input_doc(vocab, words, tags, chunks):
    doc = Doc(vocab, words=words, tags=tags)
    doc.spans["chunks"] = [Span(doc, s, e, label=k) for s, e, k in chunks]
    return doc


def examples(vocab):
    return [Example(input_doc(vocab, w, t, c), gold_doc(vocab, w, t, c, cl)) for w, t, c, cl in TRAIN_DATA]


def clauses_of(doc, key="clauses"):
    return sorted(((s.start, s.end) for s in doc.spans[key]), key=lambda c: (c[0], -c[1]))


def make_nlp(config=None):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_clauses", config=config or {})
    return nlp


def train(nlp, n_iter=30):
    egs = examples(nlp.vocab)
    nlp.initialize(lambda: egs)
    for _ in range(n_iter):
        nlp.update(egs)
    return nlp


def predict(nlp):
    return [clauses_of(nlp(input_doc(nlp.vocab, w, t, c))) for w, t, c, _ in TRAIN_DATA]


EXPECTED = [sorted(cl, key=lambda c: (c[0], -c[1])) for *_, cl in TRAIN_DATA]


@pytest.fixture(scope="module")
def trained():
    return train(make_nlp())


def test_overfits_four_sentences(trained):
    assert predict(trained) == EXPECTED
    scores = trained.evaluate(examples(trained.vocab))
    assert scores["spans_clauses_f"] == 1.0


def test_save_and_reload_give_the_same_clauses(trained, tmp_path):
    trained.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    assert predict(loaded) == EXPECTED
    other = make_nlp()
    other.from_bytes(trained.to_bytes())
    assert predict(other) == EXPECTED
    # The saved model is msgpack, not pickle.
    data = (tmp_path / "model" / "structperc_clauses" / "model").read_bytes()
    assert srsly.msgpack_loads(data)["kind"] == "spacy-structperc.ClauseRanker"


def test_round_trip_before_initialize_then_train():
    nlp = make_nlp()
    other = make_nlp()
    other.from_bytes(nlp.to_bytes())
    assert predict(train(other)) == EXPECTED


def test_pipe_equals_call(trained):
    docs = [input_doc(trained.vocab, w, t, c) for w, t, c, _ in TRAIN_DATA] * 3
    piped = [clauses_of(d) for d in trained.pipe(docs, batch_size=2)]
    called = [clauses_of(trained(input_doc(trained.vocab, w, t, c))) for w, t, c, _ in TRAIN_DATA] * 3
    assert piped == called


def test_pickle_round_trip(trained):
    pipe = trained.get_pipe("structperc_clauses")
    copy = pickle.loads(pickle.dumps(pipe))
    docs = [input_doc(trained.vocab, w, t, c) for w, t, c, _ in TRAIN_DATA]
    assert [c for c in copy.predict(docs)] == [c for c in pipe.predict(docs)]


def test_displacy_renders_the_clauses(trained):
    w, t, c, _ = TRAIN_DATA[0]
    doc = trained(input_doc(trained.vocab, w, t, c))
    html = displacy.render(doc, style="span", options={"spans_key": "clauses"}, jupyter=False)
    # One label box per clause start: 3 clauses, each labelled S.
    assert "market" in html
    assert len(re.findall(r">\s*S\s*<", html)) == 3


def test_dual_form_learns_and_reloads():
    nlp = train(make_nlp({"model": {"form": "dual", "degree": 2}}), n_iter=20)
    assert predict(nlp) == EXPECTED
    other = make_nlp({"model": {"form": "dual", "degree": 2}})
    other.from_bytes(nlp.to_bytes())
    assert predict(other) == EXPECTED


def test_dual_linear_kernel_learns_as_the_primal_perceptron_does():
    # Degree 1, coef0 0: the dual perceptron is the primal one, prediction by prediction.
    primal = train(make_nlp(), n_iter=8)
    dual = train(make_nlp({"model": {"form": "dual", "degree": 1, "coef0": 0.0}}), n_iter=8)
    p_pipe, d_pipe = primal.get_pipe("structperc_clauses"), dual.get_pipe("structperc_clauses")
    for w, t, c, _ in TRAIN_DATA:
        for nlp, pipe in ((primal, p_pipe), (dual, d_pipe)):
            pipe.begin_predict()
        rp, rd = p_pipe.recognizer, d_pipe.recognizer
        atoms = p_pipe._atoms(input_doc(primal.vocab, w, t, c))
        rp.set_sentence(*atoms)
        rd.set_sentence(*d_pipe._atoms(input_doc(dual.vocab, w, t, c)))
        assert rp.start_scores == pytest.approx(rd.start_scores, abs=1e-3)
        assert rp.end_scores == pytest.approx(rd.end_scores, abs=1e-3)
        assert rp.recognize() == rd.recognize()


def test_methods_and_settings_are_checked():
    for config in ({"method": "svm"}, {"max_boundaries": 0}, {"max_span": -1}, {"spans_key": ""}):
        with pytest.raises(ValueError, match=r"\[S0(08|12)\]"):
            make_nlp(config)
    with pytest.raises(ValueError, match=r"\[S207\]"):
        make_nlp({"model": {"form": "kernel"}})


def test_uninitialized_and_empty_training_raise_naming_the_pipe():
    nlp = make_nlp()
    with pytest.raises(ValueError, match=r"\[S001\].*structperc_clauses"):
        nlp(input_doc(nlp.vocab, *TRAIN_DATA[0][:3]))
    no_clauses = [Example(input_doc(nlp.vocab, w, t, c), input_doc(nlp.vocab, w, t, c)) for w, t, c, _ in TRAIN_DATA]
    with pytest.raises(ValueError, match=r"\[S204\].*structperc_clauses"):
        nlp.initialize(lambda: no_clauses)


def test_doc_without_tags_raises_naming_the_pipe(trained):
    with pytest.raises(ValueError, match=r"\[S300\].*structperc_clauses"):
        trained(Doc(trained.vocab, words=["He", "left"]))


# The maximal MD / VB* / TO runs of TRAIN_DATA's tags (not its VP chunks: "want to go" is one
# run, "left was" too).
VERB_RUNS = [[(1, 2), (5, 7)], [(3, 5)], [(1, 4)], [(1, 2), (5, 6)]]


def test_docs_without_chunks_still_get_clauses():
    """Without doc.spans["chunks"] the verb groups come from the tags (maximal MD / VB* / TO
    runs) and the chunk features stay silent: the pattern elements are those of VP chunks over
    the hand-listed runs, and trained and run on such Docs the identifier still overfits the
    four sentences to their hand-annotated clauses, as with chunks."""
    nlp = make_nlp()
    read = nlp.get_pipe("structperc_clauses")._atoms
    for (w, t, _, _), runs in zip(TRAIN_DATA, VERB_RUNS):
        atoms, elements, is_vp = read(Doc(nlp.vocab, words=w, tags=t))
        as_chunks, chunk_elements, chunk_is_vp = read(input_doc(nlp.vocab, w, t, [(a, b, "VP") for a, b in runs]))
        assert is_vp.nonzero()[0].tolist() == [a for a, _ in runs]
        assert elements.tolist() == chunk_elements.tolist() and is_vp.tolist() == chunk_is_vp.tolist()
        assert not atoms[:, 3].any() and as_chunks[:, 3].all()
    egs = [Example(Doc(nlp.vocab, words=w, tags=t), gold_doc(nlp.vocab, w, t, [], cl)) for w, t, _, cl in TRAIN_DATA]
    for eg in egs:
        del eg.reference.spans["chunks"]
    nlp.initialize(lambda: egs)
    for _ in range(30):
        nlp.update(egs)
    found = [clauses_of(nlp(Doc(nlp.vocab, words=w, tags=t))) for w, t, _, _ in TRAIN_DATA]
    assert found == EXPECTED


def test_empty_one_token_and_very_long_docs():
    nlp = train(make_nlp({"max_boundaries": 20}))
    assert clauses_of(nlp(Doc(nlp.vocab, words=[], tags=[]))) == []
    one = clauses_of(nlp(Doc(nlp.vocab, words=["Go"], tags=["VB"])))
    assert one in ([], [(0, 1)])
    # 1,000 tokens in one sentence: at most 20 starts and 20 ends, so the search stays small.
    w, t, c, _ = TRAIN_DATA[0]
    words, tags = (w[:-1] * 143)[:999] + ["."], (t[:-1] * 143)[:999] + ["."]
    doc = nlp(Doc(nlp.vocab, words=words, tags=tags))
    pipe = nlp.get_pipe("structperc_clauses")
    assert len(pipe.recognizer.starts) <= 20 and len(pipe.recognizer.ends) <= 20
    spans = clauses_of(doc)
    assert not any(a < c < b < d for (a, b) in spans for (c, d) in spans)


def test_a_document_gets_each_sentence_s_own_clauses(trained):
    """Prediction runs over the whole Doc at once; the clauses are those of each sentence alone,
    with sentences as doc.sents gives them (SENT_START, or a user hook)."""
    words, tags, chunks, offsets = [], [], [], []
    for w, t, c, _ in TRAIN_DATA:
        offsets.append(len(words))
        chunks += [(s + len(words), e + len(words), k) for s, e, k in c]
        words, tags = words + w, tags + t
    alone = [[(s + o, e + o) for s, e in clauses] for clauses, o in zip(predict(trained), offsets)]
    expected = sorted((c for cl in alone for c in cl), key=lambda c: (c[0], -c[1]))
    doc = Doc(trained.vocab, words=words, tags=tags, sent_starts=[i in offsets for i in range(len(words))])
    doc.spans["chunks"] = [Span(doc, s, e, label=k) for s, e, k in chunks]
    assert clauses_of(trained(doc)) == expected
    # The same sentences through a sents hook, with no SENT_START at all.
    doc = input_doc(trained.vocab, words, tags, chunks)
    bounds = list(zip(offsets, offsets[1:] + [len(words)]))
    doc.user_hooks["sents"] = lambda d: (d[s:e] for s, e in bounds)
    assert (doc.to_array("SENT_START")[1:] != 1).all()
    assert clauses_of(trained(doc)) == expected


def test_clauses_stay_inside_sentences_and_crossing_gold_is_left_out():
    nlp = train(make_nlp())
    w0, t0, c0, cl0 = TRAIN_DATA[0]
    w1, t1, c1, cl1 = TRAIN_DATA[2]
    words, tags = w0 + w1, t0 + t1
    starts = [i in (0, len(w0)) for i in range(len(words))]
    doc = nlp(Doc(nlp.vocab, words=words, tags=tags, sent_starts=starts))
    n = len(w0)
    assert all(e <= n or s >= n for s, e in clauses_of(doc))
    # Gold with a clause across the boundary, and two crossing clauses: warned and left out.
    ref = Doc(nlp.vocab, words=words, tags=tags, sent_starts=starts)
    ref.spans["clauses"] = [Span(ref, s, e, label="S") for s, e in [(0, len(words)), (0, 8), (2, 7), (5, 10)]]
    eg = Example(Doc(nlp.vocab, words=words, tags=tags, sent_starts=starts), ref)
    with pytest.warns(UserWarning, match=r"\[W200\]") as record:
        nlp.update([eg])
    messages = " ".join(str(r.message) for r in record)
    assert "cross a sentence boundary" in messages and "cross another gold clause" in messages


# spacy train through the CLI --------------------------------------------------------------------

TINY = "".join(
    "".join(f"{w} {t} {_chunk} {tag}\n" for w, t, _chunk, tag in zip(words, tags, iob, clause_tags(len(words), cl)))
    + "\n"
    for words, tags, chunks, cl in TRAIN_DATA
    for iob in [[next((("B-" if i == s else "I-") + k for s, e, k in chunks if s <= i < e), "O")
                 for i in range(len(words))]]
)


@pytest.mark.slow
def test_spacy_train_cli_on_a_tiny_corpus(tmp_path):
    # configs/clauses.cfg: the tagger trains and annotates, the chunker is sourced (here a tiny one
    # trained on the same sentences' chunks), the clause identifier trains on their predictions.
    chunker = spacy.blank("en")
    chunker.add_pipe("structperc_chunker", name="chunker",
                     config={"model": {"features": {"clusters": False}}})
    egs = [Example(Doc(chunker.vocab, words=w, tags=t), gold_doc(chunker.vocab, w, t, c, cl))
           for w, t, c, cl in TRAIN_DATA]
    chunker.initialize(lambda: egs)
    for _ in range(20):
        chunker.update(egs)
    chunker.to_disk(tmp_path / "chunker")
    (tmp_path / "train.txt").write_text(TINY)
    cmd = [sys.executable, "-m", "spacy", "train", str(REPO_ROOT / "configs" / "clauses.cfg"),
           "--output", str(tmp_path / "out"), "--paths.train", str(tmp_path / "train.txt"),
           "--paths.dev", str(tmp_path / "train.txt"), "--paths.chunker", str(tmp_path / "chunker"),
           "--training.max_epochs", "40", "--training.eval_frequency", "5"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    best = tmp_path / "out" / "model-best"
    meta = srsly.read_json(best / "meta.json")
    assert meta["performance"]["spans_clauses_f"] == 1.0
    loaded = spacy.load(best)
    assert loaded.pipe_names == ["tagger", "chunker", "clauses"]
    doc = loaded(" ".join(TRAIN_DATA[0][0]))
    assert clauses_of(doc) == EXPECTED[0]
