"""Bad training input gets coded errors: invalid IOB in NER gold, and corpus files that are
empty, missing, not UTF-8 or start with a byte-order mark."""
import numpy
import pytest
import spacy
from spacy.attrs import ENT_IOB, ENT_TYPE, ORTH
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from spacy_structperc.readers import (conll2000_docs, read_conll2000, read_conll2003, read_iob2)

READERS = {
    "conll2000": (read_conll2000, "{w} NN B-NP\n", "spacy-structperc.conll2000_reader.v1"),
    "conll2003": (read_conll2003, "{w} NN I-NP B-PER\n", "spacy-structperc.conll2003_reader.v1"),
    "iob2": (read_iob2, "{w}\tB-protein\n", "spacy-structperc.iob2_reader.v1"),
}


def invalid_iob_doc(vocab):
    words = ["Mr", "Smith", "went", "to", "Paris"]
    doc = Doc(vocab, words=words)
    # O then I-PER: no entity to continue. Doc.from_array accepts it (as .spacy files may hold it).
    iob = numpy.array([2, 1, 2, 2, 3], dtype=numpy.uint64)
    types = numpy.array([0, vocab.strings.add("PER"), 0, 0, vocab.strings.add("LOC")], dtype=numpy.uint64)
    doc.from_array([ENT_IOB, ENT_TYPE], numpy.stack([iob, types], axis=1))
    return doc


def test_invalid_iob_in_ner_gold_raises_a_coded_error_naming_the_example():
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner", name="my_ner", config={"reset_every": 0})
    ref = invalid_iob_doc(nlp.vocab)
    eg = Example(Doc(nlp.vocab, words=[t.text for t in ref]), ref)
    ner.initialize(lambda: [eg], labels=["PER", "LOC"])
    with pytest.raises(ValueError, match=r"\[S124\].*'my_ner'.*token 1 'Smith'.*I-PER.*'O'.*Mr Smith"):
        ner.update([eg])


def _mr_smith_went(vocab, iob, types):
    """A reference Doc set through from_array: Doc(ents=...) would turn an I after a missing
    token into a B, so only this way does the gold hold I-PER after a missing annotation."""
    doc = Doc(vocab, words=["Mr", "Smith", "went"])
    hashes = [vocab.strings.add(t) if t else 0 for t in types]
    doc.from_array([ENT_IOB, ENT_TYPE], numpy.array([iob, hashes], dtype=numpy.uint64).T)
    return doc


def _train_mr_smith(iob, types, epochs=3):
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner", config={"reset_every": 0})
    eg = Example(Doc(nlp.vocab, words=["Mr", "Smith", "went"]), _mr_smith_went(nlp.vocab, iob, types))
    ner.initialize(lambda: [eg], labels=["PER"])
    losses = [ner.update([eg])["structperc_ner"] for _ in range(epochs)]
    doc = nlp(Doc(nlp.vocab, words=["Mr", "Smith", "went"]))
    return losses, [(e.start, e.end, e.label_) for e in doc.ents], ner.to_bytes()


def test_iob_continuing_a_missing_annotation_is_accepted():
    """Gold (missing, I-PER, O): 'Mr' is unannotated, and 'Smith' continues an entity, so the only
    reading of the gold is B-PER I-PER O. The missing token is left to the constrained decoder
    (not learned as O, not counted as an error): the model learns exactly what the complete
    annotation (B-PER, I-PER, O) teaches, byte for byte, and finds 'Mr Smith' as one PER."""
    missing, ents, model = _train_mr_smith([0, 1, 2], ["", "PER", ""])
    complete, ents_complete, model_complete = _train_mr_smith([3, 1, 2], ["PER", "PER", ""])
    assert ents == ents_complete == [(0, 2, "PER")]
    assert model == model_complete
    # First pass, all O predicted: the complete gold counts 'Mr' and 'Smith' wrong, the partial
    # one only 'Smith'; both are learned by the second pass.
    assert complete[0] == 2 and missing[0] == 1 and missing[-1] == complete[-1] == 0


@pytest.mark.parametrize("name", sorted(READERS))
def test_byte_order_mark_is_not_part_of_the_first_word(name, tmp_path):
    read, line, _ = READERS[name]
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + (line.format(w="Confidence") + line.format(w="in")).encode("utf8"))
    assert read(path)[0][0] == ["Confidence", "in"]


@pytest.mark.parametrize("name", sorted(READERS))
def test_latin1_file_gives_a_coded_error_naming_file_and_line(name, tmp_path):
    read, line, reader = READERS[name]
    path = tmp_path / "latin1.txt"
    path.write_bytes((line.format(w="Confidence") + "\n" + line.format(w="café")).encode("latin-1"))
    with pytest.raises(ValueError, match=rf"\[S125\] {path}.*line 3.*{reader}"):
        read(path)


@pytest.mark.parametrize("name", sorted(READERS))
def test_empty_and_missing_files_give_coded_errors(name, tmp_path):
    read, _, reader = READERS[name]
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf8")
    with pytest.raises(ValueError, match=rf"\[S035\].*{reader}"):
        read(tmp_path / "empty.txt")
    with pytest.raises(FileNotFoundError, match=rf"\[S034\].*{reader}"):
        read(tmp_path / "missing.txt")


def test_conll2000_reader_with_a_missing_path_gives_a_coded_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"\[S034\]"):
        conll2000_docs(spacy.blank("en").vocab, tmp_path / "missing.spacy")
