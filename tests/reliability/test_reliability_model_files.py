"""Model files: a checksum of the payload, all-or-nothing loading, coded errors naming the pipe.

Every damaged file raises a coded ValueError and leaves the component exactly as it was."""
import srsly
import numpy
import pytest
import spacy
from spacy.tokens import Doc

from threaded_nlp import annotations, random_texts, train_pipeline
from spacy_structperc.model import pack_model_msg

PIPES = ("structperc_tagger", "structperc_chunker", "structperc_ner", "structperc_parser")


@pytest.fixture(scope="module")
def nlp():
    return train_pipeline(n_train=30, epochs=2)


@pytest.fixture(scope="module")
def other():
    # Different data, so different weights (and a different parser label set).
    return train_pipeline(seed=7, n_train=12, epochs=1)


def state(pipe):
    return pipe.to_bytes(), dict(pipe.cfg), pipe.labels


def _model_msg(pipe):
    return srsly.msgpack_loads(srsly.msgpack_loads(pipe.to_bytes())["model"])


def _with_model(pipe, model_bytes):
    msg = srsly.msgpack_loads(pipe.to_bytes())
    msg["model"] = model_bytes
    return srsly.msgpack_dumps(msg)


@pytest.mark.parametrize("name", PIPES)
def test_every_single_byte_flip_of_a_model_is_refused(nlp, name):
    pipe = nlp.get_pipe(name)
    good = pipe.model.to_bytes()
    before = state(pipe)
    rng = numpy.random.default_rng(0)
    positions = sorted(set(rng.integers(0, len(good), 150).tolist()) | {0, len(good) - 1})
    for k, pos in enumerate(positions):
        damaged = bytearray(good)
        damaged[pos] ^= int(rng.integers(1, 256))
        with pytest.raises(ValueError, match=r"^\[S(006|007|120|121|122)\]"):
            pipe.model.parse_bytes(bytes(damaged), name)
        if k % 20 == 0:   # through the component too (slower: it reads the vocab)
            with pytest.raises(ValueError, match=r"^\[S(006|007|120|121|122)\]"):
                pipe.from_bytes(_with_model(pipe, bytes(damaged)))
    assert state(pipe) == before


def test_truncated_model_file_is_refused(nlp, tmp_path):
    nlp.to_disk(tmp_path / "nlp")
    path = tmp_path / "nlp" / "structperc_parser" / "model"
    data = path.read_bytes()
    for cut in (1, 17, len(data) // 2):
        path.write_bytes(data[:-cut])
        with pytest.raises(ValueError, match=r"^\[S(006|120|121)\]"):
            spacy.load(tmp_path / "nlp")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_weights_are_refused(nlp, bad):
    pipe = nlp.get_pipe("structperc_tagger")
    msg = _model_msg(pipe)
    weights = numpy.frombuffer(msg["weights"], dtype="<f4").copy()
    weights[len(weights) // 2] = bad
    msg["weights"] = weights.tobytes()
    before = state(pipe)
    with pytest.raises(ValueError, match=r"\[S122\].*'structperc_tagger'.* 1 weight"):
        pipe.from_bytes(_with_model(pipe, pack_model_msg(msg)))
    assert state(pipe) == before


@pytest.mark.parametrize("name", PIPES)
def test_failed_load_leaves_the_component_as_it_was(nlp, other, name):
    pipe = nlp.get_pipe(name)
    texts = random_texts(5, seed=3)
    predictions = [annotations(nlp(Doc(nlp.vocab, words=w))) for w in texts]
    before = state(pipe)
    # Another pipe's cfg (other labels) with a model whose columns do not fit them.
    donor = other.get_pipe(name)
    msg = _model_msg(donor)
    msg["n_classes"] += 1
    msg["weights"] += b"\0" * 4 * msg["n_rows"]
    with pytest.raises(ValueError, match=r"^\[S006\]"):
        pipe.from_bytes(_with_model(donor, pack_model_msg(msg)))
    assert state(pipe) == before
    assert [annotations(nlp(Doc(nlp.vocab, words=w))) for w in texts] == predictions


@pytest.mark.parametrize("name", PIPES)
def test_from_disk_gives_coded_errors_and_changes_nothing(nlp, name, tmp_path):
    pipe = nlp.get_pipe(name)
    pipe.to_disk(tmp_path / name)
    before = state(pipe)
    cases = {"model": [b"", b"\x00\x01 broken", srsly.msgpack_dumps([1, 2])],
             "cfg": [b"[1, 2]", b"{not json", b'{"labels": 7}']}
    for part, contents in cases.items():
        good = (tmp_path / name / part).read_bytes()
        for data in contents:
            (tmp_path / name / part).write_bytes(data)
            with pytest.raises(ValueError, match=r"^\[S(006|120|121|123)\].*" + name):
                pipe.from_disk(tmp_path / name)
            assert state(pipe) == before
        (tmp_path / name / part).write_bytes(good)
    (tmp_path / name / "model").unlink()
    with pytest.raises(ValueError, match=r"^\[S(006|123)\]"):
        pipe.from_disk(tmp_path / name)
    assert state(pipe) == before


def test_damaged_parser_header_reason_names_the_field(nlp):
    pipe = nlp.get_pipe("structperc_parser")
    msg = _model_msg(pipe)
    msg["n_classes"] = "many"
    with pytest.raises(ValueError, match=r"\[S006\].*'n_classes'") as info:
        pipe.from_bytes(_with_model(pipe, pack_model_msg(msg)))
    assert "not supported" not in str(info.value)


def test_errors_name_the_pipe_not_the_factory(nlp):
    blank = spacy.blank("en")
    parser = blank.add_pipe("structperc_parser", name="my_parser")
    with pytest.raises(ValueError, match=r"\[S001\] Component 'my_parser'") as info:
        parser.predict([Doc(blank.vocab, words=["a"])])
    assert "structperc" not in str(info.value)
    parser.from_bytes(nlp.get_pipe("structperc_parser").to_bytes())
    untagged = Doc(blank.vocab, words=["They", "like", "eggs"])
    with pytest.raises(ValueError, match=r"\[S009\].*component 'my_parser'"):
        parser.predict([untagged])
    chunker = blank.add_pipe("structperc_chunker", name="my_chunker")
    chunker.from_bytes(nlp.get_pipe("structperc_chunker").to_bytes())
    with pytest.raises(ValueError, match=r"\[S009\].*component 'my_chunker'"):
        chunker.predict([untagged])
