"""Model files: a checksum of the payload, all-or-nothing loading, coded errors naming the pipe.

Every damaged file raises a coded ValueError and leaves the component exactly as it was."""
import hashlib
import json
import re

import srsly
import numpy
import pytest
import spacy
from spacy.tokens import Doc

from threaded_nlp import annotations, random_texts, train_full_pipeline, train_pipeline
from spacy_structperc.model import pack_model_msg
from spacy_structperc.pipeline.base import dump_cfg, load_cfg

PIPES = ("structperc_tagger", "structperc_chunker", "structperc_ner", "structperc_parser")
# train_full_pipeline's components: the four above, a parser with a reranker, and the clause
# identifier in primal and in dual (kernel perceptron) form.
ALL_PIPES = PIPES + ("parser_rr", "structperc_clauses", "clauses_dual")
CODED = r"^\[S\d{3}\] "


@pytest.fixture(scope="module")
def nlp():
    return train_pipeline(n_train=30, epochs=2)


@pytest.fixture(scope="module")
def full():
    return train_full_pipeline()


@pytest.fixture(scope="module")
def other():
    # Different data, so different weights (and a different parser label set).
    return train_pipeline(seed=7, n_train=12, epochs=1)


def state(pipe):
    # a digest: pytest's diff of two unequal byte strings of a model's size takes minutes
    return hashlib.blake2b(pipe.to_bytes(), digest_size=16).hexdigest(), dict(pipe.cfg), pipe.labels


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


@pytest.mark.parametrize("name", ["structperc_clauses", "clauses_dual"])
def test_every_single_byte_flip_of_a_clause_model_is_refused(full, name):
    # The dual form's functions are kernel perceptrons (their own checksummed bytes) inside the
    # checksummed model map.
    pipe = full.get_pipe(name)
    good = pipe.model.to_bytes()
    before = state(pipe)
    rng = numpy.random.default_rng(1)
    for pos in sorted(set(rng.integers(0, len(good), 150).tolist()) | {0, len(good) - 1}):
        damaged = bytearray(good)
        damaged[pos] ^= int(rng.integers(1, 256))
        with pytest.raises(ValueError, match=r"^\[S(006|007|120|121|122)\]"):
            pipe.model.parse_bytes(bytes(damaged), name)
    assert state(pipe) == before


@pytest.mark.parametrize("change", [{"form": "kernel"}, {"context": 9}, {"n_buckets": 0},
                                    {"kernel": {"degree": 2}}, {"form": "swap"}])
def test_clause_model_fields_are_checked_behind_the_checksum(full, change):
    """What a writer that got the contents wrong would produce: a valid checksum over settings
    the model does not take, or functions of the other form (S006, the component unchanged)."""
    for name in ("structperc_clauses", "clauses_dual"):
        pipe = full.get_pipe(name)
        before = state(pipe)
        msg = srsly.msgpack_loads(pipe.model.to_bytes())
        if change == {"form": "swap"}:
            msg["form"] = "primal" if msg["form"] == "dual" else "dual"
        else:
            msg.update(change)
        with pytest.raises(ValueError, match=rf"^\[S006\].*'{name}'"):
            pipe.from_bytes(_with_model(pipe, pack_model_msg(msg)))
        assert state(pipe) == before


def _flip_sweep(pipe, path, positions, rng):
    """Flip one byte of `path` at each position and load the component's directory: every flip
    either raises a coded error naming the pipe or loads exactly the component that was saved
    (a flip that changes nothing read, e.g. JSON whitespace). Returns (refused, harmless)."""
    good = path.read_bytes()
    before = state(pipe)
    refused = harmless = 0
    for pos in positions:
        damaged = bytearray(good)
        damaged[pos] ^= int(rng.integers(1, 256))
        path.write_bytes(bytes(damaged))
        weights, cfg = pipe.model.weights, dict(pipe.cfg)
        try:
            pipe.from_disk(path.parent, exclude=["vocab"])
        except ValueError as e:
            assert re.match(CODED, str(e)) and f"'{pipe.name}'" in str(e), (pos, str(e))
            # untouched (the full state is compared at the end: saving a chunker costs 20 ms)
            assert pipe.model.weights is weights and pipe.cfg == cfg
            refused += 1
        else:
            harmless += 1
            assert state(pipe) == before, f"flip at byte {pos} of {path.name} loaded a different {pipe.name}"
    path.write_bytes(good)
    assert state(pipe) == before
    return refused, harmless


@pytest.mark.parametrize("name", ALL_PIPES)
def test_every_single_byte_flip_of_a_saved_cfg_is_refused_or_harmless(full, name, tmp_path):
    """Every byte of the cfg (labels and settings): damage that changes what it says is S310
    (its checksum) or S311; only flips inside JSON whitespace load, and load the same cfg."""
    pipe = full.get_pipe(name)
    pipe.to_disk(tmp_path, exclude=["vocab"])
    path = tmp_path / "cfg"
    text = path.read_bytes()
    refused, harmless = _flip_sweep(pipe, path, range(len(text)), numpy.random.default_rng(2))
    n_space = sum(c in b" \n\t\r" for c in text)
    assert harmless <= n_space and refused >= len(text) - n_space


@pytest.mark.parametrize("name", ALL_PIPES)
def test_every_single_byte_flip_of_a_saved_model_file_is_refused(full, name, tmp_path):
    pipe = full.get_pipe(name)
    pipe.to_disk(tmp_path, exclude=["vocab"])
    path = tmp_path / "model"
    rng = numpy.random.default_rng(3)
    n = path.stat().st_size
    positions = sorted(set(rng.integers(0, n, 60).tolist()) | {0, n - 1})
    refused, harmless = _flip_sweep(pipe, path, positions, rng)
    assert harmless == 0 and refused == len(positions)


def test_cfg_checks_behind_the_checksum(full):
    """A cfg with a valid checksum (or one saved before the checksum existed) must still hold
    this component's settings, of their types (S311), and be a JSON table."""
    pipe = full.get_pipe("structperc_tagger")
    before = state(pipe)
    good = load_cfg(dump_cfg(pipe.cfg), pipe.name)
    assert good == pipe.cfg
    legacy = {k: v for k, v in good.items()}
    for cfg, reason in (({**good, "beam_widht": 4}, "unknown setting"),
                        ({**good, "beam_width": "4"}, "'beam_width'"),
                        ({**good, "margin": True}, "'margin'"),
                        ({**good, "labels": ["NN", 3]}, "'labels'")):
        for text in (dump_cfg(cfg), json.dumps(cfg)):   # behind a valid checksum; legacy
            msg = srsly.msgpack_loads(pipe.to_bytes())
            msg["cfg"] = text
            with pytest.raises(ValueError, match=r"^\[S311\].*'structperc_tagger'.*" + reason):
                pipe.from_bytes(srsly.msgpack_dumps(msg))
    for text, code in (("[1]", "S311"), ("{", "S311"), (b"\xff{}", "S311"),
                       (dump_cfg(good).replace('"ltr"', '"rtl"'), "S310")):
        with pytest.raises(ValueError, match=code):
            load_cfg(text, "x")
    # A cfg saved before the checksum (srsly's JSON, no "checksum") still loads.
    msg = srsly.msgpack_loads(pipe.to_bytes())
    msg["cfg"] = srsly.json_dumps(legacy)
    pipe.from_bytes(srsly.msgpack_dumps(msg))
    assert state(pipe) == before
    assert 0.1 + 0.2 == load_cfg(dump_cfg({"x": 0.1 + 0.2}), "x")["x"]   # exact floats


def test_loading_a_saved_pipeline_runs_no_pickle(full, tmp_path, monkeypatch):
    """Saved files are msgpack and JSON read as data: with pickle and numpy's pickle path
    disabled, every component (reranker and kernel perceptrons included) loads and predicts
    as saved."""
    import pickle
    texts = random_texts(6, seed=5)
    expected = [_all_annotations(full(Doc(full.vocab, words=w))) for w in texts]
    full.to_disk(tmp_path / "nlp")

    def refuse(*args, **kwargs):
        raise AssertionError("pickle used while loading a saved pipeline")

    for attr in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, attr, refuse)
    real_load = numpy.load
    monkeypatch.setattr(numpy, "load", lambda *a, allow_pickle=False, **k:
                        refuse() if allow_pickle else real_load(*a, allow_pickle=False, **k))
    loaded = spacy.load(tmp_path / "nlp")
    monkeypatch.undo()
    assert [_all_annotations(loaded(Doc(loaded.vocab, words=w))) for w in texts] == expected


def _all_annotations(doc):
    return annotations(doc) + tuple((k, tuple((s.start, s.end) for s in doc.spans[k]))
                                    for k in sorted(doc.spans))


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
            with pytest.raises(ValueError, match=r"^\[S(006|120|121|123|128|310|311)\].*" + name):
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
    # A sequence labeller checks its inputs when it reads the batch: predict raises what
    # nlp.pipe raises, the pipeline-contract S300 naming the pipe (and, after it, the factory).
    with pytest.raises(ValueError, match=r"^\[S300\] Component 'my_chunker' \(structperc_chunker\)"):
        chunker.predict([untagged])
