"""CoNLL-2001 clause files: reading, bad input, writing, and the exact-span clause scorer."""
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_structperc.clauses.conll2001 import (clause_tags, conll2001_docs, create_conll2001_reader,
                                                format_conll2001, parse_clause_tags, read_conll2001)
from spacy_structperc.clauses.scorer import score_clauses

SAMPLE = """When WRB (S(S*
you PRP (S*
do VBP *
n't RB *
have VB *
options NNS *S)S)
, , *
it PRP *
is VBZ *
easy JJ *
to TO (S*
fight VB *S)
. . *S)

Yes UH (S*S)
"""

ORIGINAL = """-DOCSTART- -X- -X- X X *

He PRP B-NP S X (S*
left VBD B-VP X X *
. . O X E *S)
"""


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def test_reads_nested_clauses_words_and_tags(tmp_path):
    sentences = read_conll2001(_write(tmp_path, SAMPLE))
    assert len(sentences) == 2
    first = sentences[0]
    assert first.words[:3] == ["When", "you", "do"] and first.tags[2] == "VBP"
    # (S When (S you ... options) , it is easy (S to fight) .) and (S When ... options)
    assert first.clauses == [(0, 13), (0, 6), (1, 6), (10, 12)]
    assert first.chunks is None
    # A one-token sentence with its clause.
    assert sentences[1].words == ["Yes"] and sentences[1].clauses == [(0, 1)]


def test_reads_the_original_files_extra_columns_and_chunks(tmp_path):
    (sentence,) = read_conll2001(_write(tmp_path, ORIGINAL))
    assert sentence.words == ["He", "left", "."]
    assert sentence.chunks == ["B-NP", "B-VP", "O"]
    assert sentence.clauses == [(0, 3)]
    nlp = spacy.blank("en")
    (doc,) = conll2001_docs(nlp.vocab, tmp_path / "data.txt")
    assert [(s.start, s.end, s.label_) for s in doc.spans["chunks"]] == [(0, 1, "NP"), (1, 2, "VP")]
    assert [(s.start, s.end, s.label_) for s in doc.spans["clauses"]] == [(0, 3, "S")]


@pytest.mark.parametrize("text,line,code", [
    ("a DT (S*\nb NN *\n", 1, "S201"),          # never closed: names the line that opened it
    ("a DT *\nb NN *S)\n", 2, "S201"),          # closed, never opened
    ("a DT (S*\nb NN *S)S)\n", 2, "S201"),
    ("a DT (S\n", 1, "S200"),                   # not a clause tag
    ("a (S*\n", 1, "S200"),                     # too few fields
])
def test_bad_brackets_and_lines_raise_coded_errors_naming_file_and_line(tmp_path, text, line, code):
    path = _write(tmp_path, "ok DT (S*S)\n\n" + text)
    with pytest.raises(ValueError) as err:
        read_conll2001(path)
    message = str(err.value)
    assert message.startswith(f"[{code}]")
    assert f"{path}, line {line + 2}" in message


def test_clause_tags_round_trip():
    tags = ["(S(S*", "*", "*S)", "(S*", "*S)S)"]
    clauses = parse_clause_tags(tags)
    assert clauses == [(0, 5), (0, 3), (3, 5)]
    assert clause_tags(5, clauses) == tags


def test_format_conll2001_writes_what_is_read(tmp_path):
    nlp = spacy.blank("en")
    docs = conll2001_docs(nlp.vocab, _write(tmp_path, SAMPLE))
    again = _write(tmp_path, format_conll2001(docs), "again.txt")
    assert [s.clauses for s in read_conll2001(again)] == [s.clauses for s in read_conll2001(tmp_path / "data.txt")]


def test_registered_reader_gives_inputs_without_clauses(tmp_path):
    nlp = spacy.blank("en")
    reader = spacy.registry.readers.get("spacy-structperc.conll2001_reader.v1")(_write(tmp_path, ORIGINAL), pos=False, chunks=False)
    (eg,) = list(reader(nlp))
    assert "clauses" not in eg.predicted.spans and "chunks" not in eg.predicted.spans
    assert not eg.predicted.has_annotation("TAG")
    assert len(eg.reference.spans["clauses"]) == 1
    with pytest.raises(ValueError, match=r"\[S202\]"):
        list(create_conll2001_reader(None)(nlp))


def _example(words, gold, pred, key="clauses"):
    nlp = spacy.blank("en")
    ref = Doc(nlp.vocab, words=words)
    ref.spans[key] = [Span(ref, s, e, label="S") for s, e in gold]
    doc = Doc(nlp.vocab, words=words)
    doc.spans[key] = [Span(doc, s, e, label="S") for s, e in pred]
    return Example(doc, ref)


def test_scorer_counts_exact_spans_by_hand():
    words = list("abcdefghij")
    # Gold: (0,10) (2,6). Predicted: (0,10) right, (3,6) wrong start, (6,8) spurious.
    eg = _example(words, [(0, 10), (2, 6)], [(0, 10), (3, 6), (6, 8)])
    s = score_clauses([eg])
    assert s["spans_clauses_p"] == pytest.approx(1 / 3)
    assert s["spans_clauses_r"] == pytest.approx(1 / 2)
    assert s["spans_clauses_f"] == pytest.approx(0.4)
    # Two examples pool their counts: 1 + 2 correct of 3 + 2 found, 2 + 3 gold.
    eg2 = _example(words, [(0, 10), (1, 5), (6, 9)], [(1, 5), (6, 9)])
    s = score_clauses([eg, eg2])
    assert s["spans_clauses_p"] == pytest.approx(3 / 5)
    assert s["spans_clauses_r"] == pytest.approx(3 / 5)
    # Nothing predicted: P = R = F = 0; an unannotated reference is skipped.
    assert score_clauses([_example(words, [(0, 10)], [])])["spans_clauses_f"] == 0.0
    nlp = spacy.blank("en")
    skipped = Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words))
    assert score_clauses([eg, skipped])["spans_clauses_f"] == pytest.approx(0.4)


def test_convert_writes_clauses_to_spacy_files(tmp_path):
    from spacy_structperc.convert import main

    src = _write(tmp_path, SAMPLE, "train.txt")
    assert main([str(src), str(tmp_path / "out"), "--format", "conll2001"]) == 0
    nlp = spacy.blank("en")
    docs = conll2001_docs(nlp.vocab, tmp_path / "out" / "train.spacy")
    assert [[(s.start, s.end) for s in d.spans["clauses"]] for d in docs] == [
        [(0, 13), (0, 6), (1, 6), (10, 12)], [(0, 1)]]
    assert docs[0][2].tag_ == "VBP"
    bad = _write(tmp_path, "a DT (S*\n", "bad.txt")
    assert main([str(bad), str(tmp_path / "out"), "--format", "conll2001"]) == 1
