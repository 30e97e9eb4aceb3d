"""The CoNLL-2000 reader, the conversion script and the conlleval-style chunk scorer."""
import warnings

import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example
from spacy.util import registry

from spacy_structperc.convert import main as convert_main
from spacy_structperc.scorers import ChunkCounts, chunks_to_iob, iob_to_chunks, score_chunks

# CoNLL-2000 format, IOB2 and consistent: B- starts every chunk.
CONLL = """\
Confidence NN B-NP
in IN B-PP
the DT B-NP
pound NN I-NP
is VBZ B-VP
widely RB I-VP
expected VBN I-VP
. . O

Chancellor NNP O
of IN B-PP
the DT B-NP
Exchequer NNP I-NP
Nigel NNP B-NP
Lawson NNP I-NP

Rockwell NNP B-NP
said VBD B-VP
"""


def _write(tmp_path, text, name="train.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def _reader(path, **kwargs):
    return registry.readers.get("spacy-structperc.conll2000_reader.v1")(path, **kwargs)


def _to_conll(doc, key="chunks"):
    tags = chunks_to_iob(len(doc), [(s.start, s.end, s.label_) for s in doc.spans[key]])
    return "".join(f"{t.text} {t.tag_} {c}\n" for t, c in zip(doc, tags))


# conlleval's reading of IOB -------------------------------------------------------------------------
# Each case was worked through by hand with conlleval's startOfChunk / endOfChunk rules.

IOB_CASES = [
    (["B-NP", "I-NP", "O", "B-VP", "I-VP"], [(0, 2, "NP"), (3, 5, "VP")]),
    (["I-NP", "I-NP", "B-PP"], [(0, 2, "NP"), (2, 3, "PP")]),          # I- first starts a chunk
    (["B-VP", "I-NP", "I-NP"], [(0, 1, "VP"), (1, 3, "NP")]),          # I-NP after B-VP
    (["O", "I-NP", "O"], [(1, 2, "NP")]),                              # I-NP after O
    (["B-NP", "I-VP", "I-VP", "I-NP"], [(0, 1, "NP"), (1, 3, "VP"), (3, 4, "NP")]),
    (["B-NP", "B-NP", "I-NP"], [(0, 1, "NP"), (1, 3, "NP")]),          # B- after the same type
    (["O", "O"], []),
    ([], []),
]


@pytest.mark.parametrize("tags,chunks", IOB_CASES)
def test_iob_is_read_as_conlleval_reads_it(tags, chunks):
    assert iob_to_chunks(tags) == chunks


# (gold, predicted) sentences and conlleval's counts (correct, found = predicted chunks, gold chunks),
# worked out by hand. A chunk is correct only when its type and both boundaries match.
COUNT_CASES = {
    "exact": ([["B-NP", "I-NP", "B-VP"]], [["B-NP", "I-NP", "B-VP"]], (2, 2, 2)),
    "split-chunk": ([["B-NP", "I-NP", "O", "B-VP", "I-VP"]], [["B-NP", "I-NP", "O", "B-VP", "B-VP"]], (1, 3, 2)),
    "wrong-type-same-span": ([["B-NP", "I-NP"]], [["B-VP", "I-VP"]], (0, 1, 1)),
    "wrong-end": ([["B-NP", "I-NP", "I-NP"]], [["B-NP", "I-NP", "O"]], (0, 1, 1)),
    # I-NP after O in the prediction starts a chunk (1, 3); gold B-NP at 1 is the same chunk.
    "I-after-O-matches-B": ([["O", "B-NP", "I-NP"]], [["O", "I-NP", "I-NP"]], (1, 1, 1)),
    # Predicted I-NP after B-VP: VP(0,1) and NP(1,3), both correct against the IOB2 gold.
    "I-after-other-type": ([["B-VP", "B-NP", "I-NP"]], [["B-VP", "I-NP", "I-NP"]], (2, 2, 2)),
    # Gold I-VP after I-NP is itself read conlleval's way: NP(0,2), VP(2,3).
    "inconsistent-gold": ([["B-NP", "I-NP", "I-VP"]], [["B-NP", "I-NP", "B-VP"]], (2, 2, 2)),
    "nothing-predicted": ([["B-NP", "O"]], [["O", "O"]], (0, 0, 1)),
    "two-sentences": ([["B-NP"], ["B-PP", "B-NP", "I-NP"]], [["B-NP"], ["B-PP", "B-NP", "B-NP"]], (2, 4, 3)),
}


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_counts_equal_conlleval(case):
    gold, pred, (correct, found, n_gold) = COUNT_CASES[case]
    counts = ChunkCounts()
    for g, p in zip(gold, pred):
        counts.add_tags(g, p)
    assert counts.totals() == (correct, found, n_gold)


def test_precision_recall_f_and_per_type():
    counts = ChunkCounts()
    # gold: NP NP VP; predicted: NP (right), NP (wrong end), VP (right), PP (spurious)
    counts.add_tags(["B-NP", "O", "B-NP", "I-NP", "B-VP"], ["B-NP", "O", "B-NP", "B-PP", "B-VP"])
    scores = counts.scores("spans_chunks")
    assert scores["spans_chunks_p"] == pytest.approx(2 / 4)
    assert scores["spans_chunks_r"] == pytest.approx(2 / 3)
    assert scores["spans_chunks_f"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert scores["spans_chunks_per_type"]["NP"] == pytest.approx({"p": 0.5, "r": 0.5, "f": 0.5})
    assert scores["spans_chunks_per_type"]["PP"] == {"p": 0.0, "r": 0.0, "f": 0.0}
    assert scores["spans_chunks_per_type"]["VP"] == {"p": 1.0, "r": 1.0, "f": 1.0}


def test_registered_scorer_scores_examples_by_spans_key():
    nlp = spacy.blank("en")
    scorer = registry.scorers.get("spacy-structperc.chunk_scorer.v1")()
    gold = Doc(nlp.vocab, words=["the", "dog", "barks"])
    gold.spans["np"] = [Span(gold, 0, 2, "NP"), Span(gold, 2, 3, "VP")]
    pred = Doc(nlp.vocab, words=["the", "dog", "barks"])
    pred.spans["np"] = [Span(pred, 0, 1, "NP"), Span(pred, 1, 2, "NP"), Span(pred, 2, 3, "VP")]
    unannotated = Example(Doc(nlp.vocab, words=["x"]), Doc(nlp.vocab, words=["x"]))
    scores = scorer([Example(pred, gold), unannotated], spans_key="np")
    assert scores["spans_np_p"] == pytest.approx(1 / 3)
    assert scores["spans_np_r"] == pytest.approx(1 / 2)
    # Different tokenization: the predicted chunk is mapped onto the reference tokens.
    pred2 = Doc(nlp.vocab, words=["the", "dog", "bark", "s"])
    pred2.spans["np"] = [Span(pred2, 0, 2, "NP"), Span(pred2, 2, 4, "VP")]
    scores = scorer([Example(pred2, gold)], spans_key="np")
    assert scores["spans_np_f"] == 1.0


# The reader -------------------------------------------------------------------------------------------

def test_reader_yields_pos_on_predicted_and_chunks_on_reference(tmp_path):
    nlp = spacy.blank("en")
    examples = list(_reader(_write(tmp_path, CONLL), heldout=0)(nlp))
    assert len(examples) == 3
    eg = examples[0]
    assert [t.text for t in eg.predicted] == ["Confidence", "in", "the", "pound", "is", "widely", "expected", "."]
    assert [t.tag_ for t in eg.predicted] == ["NN", "IN", "DT", "NN", "VBZ", "RB", "VBN", "."]
    assert "chunks" not in eg.predicted.spans
    assert [(s.text, s.label_) for s in eg.reference.spans["chunks"]] == [
        ("Confidence", "NP"), ("in", "PP"), ("the pound", "NP"), ("is widely expected", "VP")]
    assert [t.tag_ for t in eg.reference] == [t.tag_ for t in eg.predicted]


def test_reader_round_trips_a_conll2000_file(tmp_path):
    nlp = spacy.blank("en")
    examples = list(_reader(_write(tmp_path, CONLL), heldout=0)(nlp))
    assert "\n".join(_to_conll(eg.reference) for eg in examples) == CONLL


def test_reader_parts_hold_out_the_last_sentences(tmp_path):
    nlp = spacy.blank("en")
    path = _write(tmp_path, CONLL)
    train = list(_reader(path, part="train", heldout=1)(nlp))
    heldout = list(_reader(path, part="heldout", heldout=1)(nlp))
    assert [eg.reference.text for eg in train + heldout] == \
        [eg.reference.text for eg in _reader(path, heldout=1)(nlp)]
    assert len(train) == 2 and heldout[0].reference[0].text == "Rockwell"
    assert len(list(_reader(path, limit=2)(nlp))) == 2
    with pytest.raises(ValueError, match="S016"):
        _reader(path, part="dev")


@pytest.mark.parametrize("line", ["pound NN", "pound NN I-NP extra", "pound NN X-NP", "pound NN B-"])
def test_malformed_line_raises_naming_file_and_line(tmp_path, line):
    text = CONLL.replace("pound NN I-NP", line)
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"S015.*train\.txt, line 4"):
        list(_reader(path)(spacy.blank("en")))


def test_inconsistent_iob_warns_once_per_file_and_starts_chunks(tmp_path):
    text = CONLL.replace("in IN B-PP", "in IN I-PP").replace("Nigel NNP B-NP", "Nigel NNP I-VP")
    path = _write(tmp_path, text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        examples = list(_reader(path)(spacy.blank("en")))
    messages = [str(w.message) for w in caught if "W002" in str(w.message)]
    # I-PP after B-NP, I-VP after I-NP, and then I-NP after that I-VP
    assert len(messages) == 1 and "3 chunk tag(s)" in messages[0] and "line 2" in messages[0]
    assert [(s.start, s.end, s.label_) for s in examples[0].reference.spans["chunks"]][:2] == \
        [(0, 1, "NP"), (1, 2, "PP")]
    assert ("Nigel", "VP") in [(s.text, s.label_) for s in examples[1].reference.spans["chunks"]]


def test_convert_writes_docbins_the_reader_can_read(tmp_path):
    path = _write(tmp_path, CONLL)
    assert convert_main([str(path), str(tmp_path / "out"), "--heldout", "1"]) == 0
    nlp = spacy.blank("en")
    train = list(DocBin().from_disk(tmp_path / "out" / "train.train.spacy").get_docs(nlp.vocab))
    heldout = list(DocBin().from_disk(tmp_path / "out" / "train.heldout.spacy").get_docs(nlp.vocab))
    assert len(train) == 2 and len(heldout) == 1
    from_text = list(_reader(path, heldout=0)(nlp))
    assert [_to_conll(d) for d in train + heldout] == [_to_conll(eg.reference) for eg in from_text]
    examples = list(_reader(tmp_path / "out" / "train.train.spacy")(nlp))
    assert [t.tag_ for t in examples[0].predicted][:2] == ["NN", "IN"]
    assert convert_main([str(tmp_path / "missing.txt"), str(tmp_path / "out")]) == 1


def test_scoring_the_reference_against_itself_is_perfect(tmp_path):
    nlp = spacy.blank("en")
    examples = [Example(eg.reference.copy(), eg.reference)
                for eg in _reader(_write(tmp_path, CONLL), heldout=0)(nlp)]
    scores = score_chunks(examples)
    assert scores["spans_chunks_f"] == 1.0
    assert sorted(scores["spans_chunks_per_type"]) == ["NP", "PP", "VP"]


# Every reader opens its files the same way (readers.text_lines / read_docbin) -----------------------
# Before the shared opening, the clause readers gave a bare UnicodeDecodeError without file or line
# for a Latin-1 file, the CoNLL-2001 reader kept a BOM on the first word, the UD clause reader
# read a BOM as a malformed line (S205 at line 1) and returned 0 sentences for an empty or
# comments-only file, a DEPREL `_` was a label named "_", and a damaged .spacy file gave zlib's
# or msgpack's own error.

def _conllu(words):
    n = len(words)
    rows = [f"{i}\t{w}\t{w.lower()}\tNOUN\tNN\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
            for i, w in enumerate(words, 1)]
    assert n == len(rows)
    return "# text = " + " ".join(words) + "\n" + "\n".join(rows) + "\n\n"


def _text_readers():
    from spacy_structperc.clauses import conll2001, ud
    from spacy_structperc.readers import (CONLL2000_READER, CONLL2003_READER, IOB2_READER, read_conll2000,
                                          read_conll2003, read_iob2)
    line = lambda template: (lambda words: "".join(template.format(w=w) for w in words) + "\n")
    # name: (sentence text of some words, first sentence's words of a file, registered reader name)
    return {
        "conll2000": (line("{w} NN B-NP\n"), lambda p: read_conll2000(p)[0][0], CONLL2000_READER),
        "conll2003": (line("{w} NN I-NP B-PER\n"), lambda p: read_conll2003(p)[0].words, CONLL2003_READER),
        "iob2": (line("{w}\tB-protein\n"), lambda p: read_iob2(p)[0].words, IOB2_READER),
        "conll2001": (line("{w} NN (S*S)\n"), lambda p: conll2001.read_conll2001(p)[0].words, conll2001.READER),
        "ud_clauses": (_conllu, lambda p: list(ud.read_conllu_sentences(p))[0]["words"], ud.READER),
    }


TEXT_READERS = ["conll2000", "conll2003", "iob2", "conll2001", "ud_clauses"]


@pytest.mark.parametrize("name", TEXT_READERS)
def test_every_reader_drops_a_byte_order_mark(name, tmp_path):
    sentence, first_words, _ = _text_readers()[name]
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + sentence(["Confidence", "in"]).encode("utf8"))
    assert first_words(path) == ["Confidence", "in"]


@pytest.mark.parametrize("name", TEXT_READERS)
def test_every_reader_reads_windows_line_ends_as_unix_ones(name, tmp_path):
    sentence, first_words, _ = _text_readers()[name]
    text = sentence(["Confidence", "in"]) + sentence(["the", "pound"])
    (tmp_path / "lf.txt").write_bytes(text.encode("utf8"))
    (tmp_path / "crlf.txt").write_bytes(text.replace("\n", "\r\n").encode("utf8"))
    assert first_words(tmp_path / "crlf.txt") == first_words(tmp_path / "lf.txt") == ["Confidence", "in"]


@pytest.mark.parametrize("name", TEXT_READERS)
def test_every_reader_names_file_line_and_byte_of_text_that_is_not_utf8(name, tmp_path):
    sentence, first_words, reader = _text_readers()[name]
    path = tmp_path / "latin1.txt"
    good = sentence(["Confidence"])
    data = (good + sentence(["café"])).encode("latin-1")
    path.write_bytes(data)
    byte = data.index(b"\xe9")
    n_line = data.count(b"\n", 0, byte) + 1
    assert n_line > 2
    with pytest.raises(ValueError, match=rf"^\[S125\] {path}.*line {n_line}, byte {byte}.*{reader}"):
        first_words(path)


@pytest.mark.parametrize("name", TEXT_READERS)
@pytest.mark.parametrize("content", ["", "\n\n", "\ufeff", "# a comment only\n# and another\n"])
def test_every_reader_refuses_a_file_without_sentences(name, content, tmp_path):
    sentence, first_words, reader = _text_readers()[name]
    if content.startswith("#") and name != "ud_clauses":
        return   # a comment is CoNLL-U's; elsewhere it is a malformed line (S015, S030, S031, S200)
    (tmp_path / "empty.txt").write_bytes(content.encode("utf8"))
    with pytest.raises(ValueError, match=rf"^\[S035\].*{reader}"):
        first_words(tmp_path / "empty.txt")
    with pytest.raises(FileNotFoundError, match=rf"^\[S034\].*{reader}"):
        first_words(tmp_path / "missing.txt")


def _docbin_readers():
    from spacy_structperc.clauses.conll2001 import conll2001_docs
    from spacy_structperc.documents import DocumentsCorpus
    from spacy_structperc.readers import CONLL2003_READER, IOB2_READER, conll2000_docs, ner_docs

    nlp = spacy.blank("en")
    return {
        "conll2000": lambda p: conll2000_docs(nlp.vocab, p),
        "conll2003": lambda p: ner_docs(nlp.vocab, p, reader=CONLL2003_READER),
        "iob2": lambda p: ner_docs(nlp.vocab, p, reader=IOB2_READER),
        "conll2001": lambda p: conll2001_docs(nlp.vocab, p),
        "documents": lambda p: list(DocumentsCorpus(p)(nlp)) if p.exists() else DocumentsCorpus(p),
    }


@pytest.mark.parametrize("name", ["conll2000", "conll2003", "iob2", "conll2001", "documents"])
def test_every_reader_refuses_a_damaged_or_empty_spacy_file(name, tmp_path):
    read = _docbin_readers()[name]
    vocab = spacy.blank("en").vocab
    DocBin(docs=[Doc(vocab, words=["Confidence", "in", "the", "pound"])]).to_disk(tmp_path / "good.spacy")
    good = (tmp_path / "good.spacy").read_bytes()
    assert len(read(tmp_path / "good.spacy")) == 1
    for cut in (0, 1, len(good) // 2, len(good) - 1):
        (tmp_path / "bad.spacy").write_bytes(good[:cut])
        with pytest.raises(ValueError, match=rf"^\[S210\] {tmp_path / 'bad.spacy'}"):
            read(tmp_path / "bad.spacy")
    DocBin().to_disk(tmp_path / "none.spacy")
    with pytest.raises(ValueError, match=r"^\[S035\]"):
        read(tmp_path / "none.spacy")
    with pytest.raises((FileNotFoundError, ValueError), match=r"^\[S034\]"):
        read(tmp_path / "missing.spacy")


def test_a_conllu_underscore_is_missing_never_a_label_named_underscore(tmp_path):
    from spacy_structperc.clauses.ud import conllu_clause_docs

    rows = ["1\tThey\tthey\tPRON\tPRP\t_\t2\tnsubj\t_\t_",
            "2\tsaw\tsee\tVERB\tVBD\t_\t0\troot\t_\t_",
            "3\tit\tit\t_\t_\t_\t2\t_\t_\t_",
            "4\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_"]
    (tmp_path / "x.conllu").write_text("\n".join(rows) + "\n\n", encoding="utf8")
    doc = conllu_clause_docs(spacy.blank("en").vocab, tmp_path / "x.conllu")[0]
    assert "_" not in [t.dep_ for t in doc] + [t.tag_ for t in doc] + [t.pos_ for t in doc]
    it = doc[2]
    assert (it.dep_, it.tag_, it.pos_, it.has_head(), it.has_dep()) == ("", "", "", False, False)
    assert [(t.dep_, t.head.i) for t in doc if t.i != 2] == [("nsubj", 1), ("ROOT", 1), ("punct", 1)]
    assert [(s.start, s.end) for s in doc.spans["clauses"]] == [(0, 4)]


@pytest.mark.parametrize("file_format", ["conll2001", "ud-clauses"])
def test_convert_reports_a_coded_error_for_clause_files_that_are_not_utf8(file_format, tmp_path, capsys):
    text = _text_readers()["conll2001" if file_format == "conll2001" else "ud_clauses"][0](["café"])
    (tmp_path / "in.txt").write_bytes(text.encode("latin-1"))
    assert convert_main([str(tmp_path / "in.txt"), str(tmp_path / "out"), "--format", file_format]) == 1
    assert "[S125]" in capsys.readouterr().err
