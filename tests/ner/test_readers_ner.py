"""The CoNLL-2003 (IOB1) and IOB2 (JNLPBA) readers and their conversion to .spacy."""
import warnings

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Corpus
from spacy.util import registry

from spacy_structperc.convert import main as convert_main
from spacy_structperc.readers import (chunks_to_iob1, doc_ner_tags, format_conll2003, format_iob2,
                                      read_conll2003, read_iob2)
from spacy_structperc.scorers import iob_to_chunks

from conftest import resolve_data_dir

# IOB1 as in CoNLL-2003: I- everywhere, B- only where an entity follows one of the same type.
# "Maccabi" starts a new ORG right after "Hapoel Haifa"; "Atlanta" is eng.train's anomaly, B-MISC
# after O, which conlleval reads as I-MISC would be read (the start of an entity).
CONLL2003 = """\
-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- O O

Hapoel NNP I-NP I-ORG
Haifa NNP I-NP I-ORG
Maccabi NNP I-NP B-ORG
Tel NNP I-NP I-ORG
Aviv NNP I-NP I-ORG
in IN I-PP O
Atlanta NNP I-NP B-MISC
"""

IOB2 = """\
###MEDLINE:95369245

IL-2\tB-DNA
gene\tI-DNA
expression\tO
and\tO
NF-kappa\tB-protein
B\tI-protein
activation\tO

CD28\tB-protein
surface\tI-protein
receptor\tI-protein

###MEDLINE:95333264

T\tB-cell_type
cells\tI-cell_type
respond\tO
"""


def _write(tmp_path, text, name):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def _conll2003(path, **kwargs):
    return registry.readers.get("spacy-structperc.conll2003_reader.v1")(path, **kwargs)


def _iob2(path, **kwargs):
    return registry.readers.get("spacy-structperc.iob2_reader.v1")(path, **kwargs)


def _ents(doc):
    return [(e.start, e.end, e.label_) for e in doc.ents]


def _columns(text, keep=(0, 1, 3)):
    """The token lines' word, POS and NER columns, sentences separated by "", DOCSTARTs dropped."""
    out = []
    for line in text.splitlines():
        if line.startswith("-DOCSTART-"):
            continue
        fields = line.split()
        out.append(" ".join(fields[k] for k in keep) if fields else "")
    return "\n".join(out).strip("\n").replace("\n\n\n", "\n\n")


# CoNLL-2003 --------------------------------------------------------------------------------------------

def test_conll2003_reader_yields_pos_on_predicted_and_ents_on_reference(tmp_path):
    examples = list(_conll2003(_write(tmp_path, CONLL2003, "eng.x"))(spacy.blank("en")))
    assert len(examples) == 3
    eg = examples[0]
    assert [t.text for t in eg.predicted] == ["EU", "rejects", "German", "call", "."]
    assert [t.tag_ for t in eg.predicted] == ["NNP", "VBZ", "JJ", "NN", "."]
    assert [t.tag_ for t in eg.reference] == [t.tag_ for t in eg.predicted]
    assert eg.predicted.ents == () and [t.ent_iob_ for t in eg.predicted] == [""] * 5
    assert [(e.text, e.label_) for e in eg.reference.ents] == [("EU", "ORG"), ("German", "MISC")]
    assert [t.ent_iob_ for t in eg.reference] == ["B", "O", "B", "O", "O"]  # O is annotated, not missing


def test_conll2003_b_after_same_type_i_starts_a_new_entity(tmp_path):
    examples = list(_conll2003(_write(tmp_path, CONLL2003, "eng.x"))(spacy.blank("en")))
    assert _ents(examples[2].reference) == [(0, 2, "ORG"), (2, 5, "ORG"), (6, 7, "MISC")]
    assert chunks_to_iob1(7, _ents(examples[2].reference)) == \
        ["I-ORG", "I-ORG", "B-ORG", "I-ORG", "I-ORG", "O", "I-MISC"]


def test_conll2003_round_trip_equals_the_input_normalised_as_conlleval_reads_it(tmp_path):
    nlp = spacy.blank("en")
    examples = list(_conll2003(_write(tmp_path, CONLL2003, "eng.x"))(nlp))
    written = format_conll2003([eg.reference for eg in examples])
    expected = CONLL2003.replace("Atlanta NNP I-NP B-MISC", "Atlanta NNP I-NP I-MISC")
    assert _columns(written) == _columns(expected)
    assert "B-ORG" in written and "B-MISC" not in written
    # and reading the written file gives the same entities again
    again = list(_conll2003(_write(tmp_path, written, "eng.y"))(nlp))
    assert [_ents(eg.reference) for eg in again] == [_ents(eg.reference) for eg in examples]


@pytest.mark.parametrize("docstart", ["-DOCSTART- -X- O O", "-DOCSTART- -X- -X- O"])
def test_docstart_lines_start_documents_and_are_not_tokens(tmp_path, docstart):
    text = CONLL2003.replace("-DOCSTART- -X- O O", docstart)
    sentences = read_conll2003(_write(tmp_path, text, "eng.testb"))
    assert [s.document for s in sentences] == [0, 0, 1]
    assert [s.line for s in sentences] == [3, 9, 14]
    assert all("-DOCSTART-" not in s.words for s in sentences)
    # a DOCSTART line straight after a token line still ends the sentence
    squeezed = text.replace("Blackburn NNP I-NP I-PER\n\n", "Blackburn NNP I-NP I-PER\n")
    assert [len(s.words) for s in read_conll2003(_write(tmp_path, squeezed, "eng.z"))] == [5, 2, 7]


def test_conll2003_without_pos_and_parts(tmp_path):
    nlp = spacy.blank("en")
    path = _write(tmp_path, CONLL2003, "eng.x")
    eg = next(iter(_conll2003(path, pos=False)(nlp)))
    assert [t.tag_ for t in eg.predicted] == [""] * 5 and [t.tag_ for t in eg.reference] == [""] * 5
    assert len(eg.reference.ents) == 2
    train = list(_conll2003(path, part="train", heldout=1)(nlp))
    heldout = list(_conll2003(path, part="heldout", heldout=1)(nlp))
    assert len(train) == 2 and heldout[0].reference[0].text == "Hapoel"
    assert len(list(_conll2003(path, limit=1)(nlp))) == 1


@pytest.mark.parametrize("line", ["EU NNP I-ORG", "EU NNP I-NP I-ORG extra", "EU NNP I-NP E-ORG",
                                  "EU NNP I-NP B-", "EU NNP I-NP ORG"])
def test_conll2003_malformed_line_names_file_and_line(tmp_path, line):
    path = _write(tmp_path, CONLL2003.replace("EU NNP I-NP I-ORG", line), "eng.x")
    with pytest.raises(ValueError, match=r"S030.*eng\.x, line 3"):
        list(_conll2003(path)(spacy.blank("en")))


# IOB2 --------------------------------------------------------------------------------------------------

def test_iob2_reader_skips_headers_and_round_trips(tmp_path):
    nlp = spacy.blank("en")
    path = _write(tmp_path, IOB2, "task2.iob2")
    examples = list(_iob2(path)(nlp))
    assert len(examples) == 3
    assert [(e.text, e.label_) for e in examples[0].reference.ents] == \
        [("IL-2 gene", "DNA"), ("NF-kappa B", "protein")]
    assert examples[0].predicted.ents == () and [t.tag_ for t in examples[0].predicted] == [""] * 7
    assert [s.document for s in read_iob2(path)] == [0, 0, 1]
    expected = "".join(line + "\n" for line in IOB2.splitlines() if not line.startswith("###"))
    expected = expected.lstrip("\n").replace("\n\n\n", "\n\n") + "\n"  # a blank line ends every sentence
    assert format_iob2([eg.reference for eg in examples]) == expected


def test_iob2_accepts_whitespace_separated_columns_with_the_tag_last(tmp_path):
    text = "IL-2 NN B-DNA\ngene NN I-DNA\nexpression NN O\n"
    eg = next(iter(_iob2(_write(tmp_path, text, "spaces.txt"))(spacy.blank("en"))))
    assert [t.text for t in eg.reference] == ["IL-2", "gene", "expression"]
    assert _ents(eg.reference) == [(0, 2, "DNA")]


@pytest.mark.parametrize("line", ["IL-2", "IL-2\tB-DNA\textra", "IL-2\tX-DNA", "IL-2\tB-", "IL-2\tDNA"])
def test_iob2_malformed_line_names_file_and_line(tmp_path, line):
    path = _write(tmp_path, IOB2.replace("IL-2\tB-DNA", line), "task2.iob2")
    with pytest.raises(ValueError, match=r"S031.*task2\.iob2, line 3"):
        list(_iob2(path)(spacy.blank("en")))


def test_iob2_inconsistent_tags_warn_once_per_file_and_read_as_conlleval(tmp_path):
    text = IOB2.replace("gene\tI-DNA", "gene\tI-RNA").replace("cells\tI-cell_type", "cells\tO") \
        .replace("respond\tO", "respond\tI-protein")
    paths = [_write(tmp_path, text, "a.iob2"), _write(tmp_path, text, "b.iob2")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        examples = [eg for path in paths for eg in _iob2(path)(spacy.blank("en"))]
    messages = [str(w.message) for w in caught if "W010" in str(w.message)]
    assert len(messages) == 2  # one per file
    assert "a.iob2: 2 tag(s)" in messages[0] and "line 4" in messages[0] and "b.iob2" in messages[1]
    assert _ents(examples[0].reference)[:2] == [(0, 1, "DNA"), (1, 2, "RNA")]
    assert _ents(examples[2].reference) == [(0, 1, "cell_type"), (2, 3, "protein")]


def test_iob2_parts_hold_out_the_last_sentences(tmp_path):
    nlp = spacy.blank("en")
    path = _write(tmp_path, IOB2, "task2.iob2")
    train = list(_iob2(path, part="train", heldout=1)(nlp))
    heldout = list(_iob2(path, part="heldout", heldout=1)(nlp))
    assert [eg.reference.text for eg in train + heldout] == [eg.reference.text for eg in _iob2(path)(nlp)]
    assert len(train) == 2 and heldout[0].reference[0].text == "T"
    assert len(list(_iob2(path, part="train", heldout=5)(nlp))) == 0
    with pytest.raises(ValueError, match="S032"):
        _iob2(path, part="dev")
    with pytest.raises(ValueError, match="S036"):
        _iob2(path, heldout=-1)
    with pytest.raises(ValueError, match="S036"):
        _conll2003(path, limit=1.5)


# Missing and empty input --------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [_conll2003, _iob2])
def test_missing_path_empty_file_and_no_path_are_coded_errors(tmp_path, make):
    nlp = spacy.blank("en")
    with pytest.raises(FileNotFoundError, match=r"S034.*missing\.txt"):
        list(make(tmp_path / "missing.txt")(nlp))
    with pytest.raises(ValueError, match=r"S035.*empty\.txt"):
        list(make(_write(tmp_path, "", "empty.txt"))(nlp))
    with pytest.raises(ValueError, match=r"S035.*headers\.txt"):
        list(make(_write(tmp_path, "-DOCSTART- -X- O O\n\n\n", "headers.txt"))(nlp))
    with pytest.raises(ValueError, match="S033"):
        list(make(None)(nlp))


# Conversion to .spacy -----------------------------------------------------------------------------------

def test_conll2003_conversion_round_trips_through_spacy_corpus(tmp_path):
    nlp = spacy.blank("en")
    path = _write(tmp_path, CONLL2003, "eng.train")
    out = tmp_path / "out"
    assert convert_main([str(path), str(out), "--format", "conll2003"]) == 0
    from_text = list(_conll2003(path)(nlp))
    from_corpus = list(Corpus(out / "eng.train.spacy")(nlp))
    assert [_ents(eg.reference) for eg in from_corpus] == [_ents(eg.reference) for eg in from_text]
    tags = [[t.tag_ for t in eg.reference] for eg in from_text]
    assert [[t.tag_ for t in eg.reference] for eg in from_corpus] == tags
    # the reader reads the .spacy file too and keeps POS on the predicted Doc
    eg = next(iter(_conll2003(out / "eng.train.spacy")(nlp)))
    assert [t.tag_ for t in eg.predicted][:2] == ["NNP", "VBZ"] and eg.predicted.ents == ()
    eg = next(iter(_conll2003(out / "eng.train.spacy", pos=False)(nlp)))
    assert [t.tag_ for t in eg.reference] == [""] * 5 and len(eg.reference.ents) == 2
    # whole documents: two Docs, with sentence starts, the same entities
    assert convert_main([str(path), str(tmp_path / "docs"), "--format", "conll2003", "--n-sents", "0"]) == 0
    docs = list(DocBin().from_disk(tmp_path / "docs" / "eng.train.spacy").get_docs(nlp.vocab))
    assert [len(list(d.sents)) for d in docs] == [2, 1]
    assert [t.ent_iob_ for t in docs[0]] == [t for eg in from_text[:2] for t in (x.ent_iob_ for x in eg.reference)]
    assert [doc_ner_tags(d, "IOB1") for d in docs][1] == chunks_to_iob1(7, _ents(from_text[2].reference))
    assert convert_main([str(tmp_path / "missing"), str(out), "--format", "conll2003"]) == 1


def test_iob2_conversion_with_heldout(tmp_path):
    nlp = spacy.blank("en")
    path = _write(tmp_path, IOB2, "Genia4ERtask2.iob2")
    assert convert_main([str(path), str(tmp_path / "out"), "--format", "iob2", "--heldout", "1"]) == 0
    train = list(Corpus(tmp_path / "out" / "Genia4ERtask2.train.spacy")(nlp))
    heldout = list(Corpus(tmp_path / "out" / "Genia4ERtask2.heldout.spacy")(nlp))
    from_text = list(_iob2(path)(nlp))
    assert [_ents(eg.reference) for eg in train + heldout] == [_ents(eg.reference) for eg in from_text]
    assert len(train) == 2 and len(heldout) == 1


# The real corpora (counts from SOURCE.md) ----------------------------------------------------------------

def _count(sentences):
    return len(sentences), sum(len(iob_to_chunks(s.ner)) for s in sentences)


@pytest.mark.slow
def test_conll2003_counts_match_source(require_corpus):
    folder = resolve_data_dir() / "conll2003"
    for name, docs, sents, tokens, ents in [("eng.train", 946, 14041, 203621, 23499),
                                            ("eng.testa", 216, 3250, 51362, 5942),
                                            ("eng.testb", 231, 3453, 46435, 5648)]:
        require_corpus(folder / name)
        sentences = read_conll2003(folder / name)
        assert _count(sentences) == (sents, ents), name
        assert sum(len(s.words) for s in sentences) == tokens
        assert sentences[-1].document + 1 == docs
    types = {}
    for s in read_conll2003(folder / "eng.train"):
        for _, _, kind in iob_to_chunks(s.ner):
            types[kind] = types.get(kind, 0) + 1
    assert types == {"LOC": 7140, "MISC": 3438, "ORG": 6321, "PER": 6600}
    examples = list(_conll2003(folder / "eng.testb")(spacy.blank("en")))
    assert len(examples) == 3453 and sum(len(eg.reference.ents) for eg in examples) == 5648


@pytest.mark.slow
def test_jnlpba_counts_match_source(require_corpus):
    folder = resolve_data_dir() / "jnlpba"
    for name, sents, tokens, ents in [("train/Genia4ERtask1.iob2", 18546, 492551, 51301),
                                      ("test/Genia4EReval1.iob2", 3856, 101039, 8662)]:
        require_corpus(folder / name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # SOURCE.md: 0 IOB2 violations
            sentences = read_iob2(folder / name)
        assert _count(sentences) == (sents, ents), name
        assert sum(len(s.words) for s in sentences) == tokens
    require_corpus(folder / "train/Genia4ERtask2.iob2")
    task2 = read_iob2(folder / "train/Genia4ERtask2.iob2")
    assert _count(task2) == (18546, 51301) and task2[-1].document + 1 == 2000
