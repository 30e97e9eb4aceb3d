"""The reranker's saved file (structperc_parser with a `reranker` block: `reranker` next to `cfg`
and `model`, and the "reranker" entry of to_bytes) against the guide's rule for saved files: a
damaged file never loads silently, and a failed load leaves the component as it was.

Each failed on the code before the fix: the file was msgpack of the learner's dict with no
checksum (a flipped weight loaded as another reranker); the parser took its base model before it
read the reranker (a damaged reranker left the parser half loaded, with an uncoded error); a
missing reranker file loaded as "no reranker" (the beam's 1-best)."""
import hashlib
import re

import numpy
import pytest
from spacy.tokens import Doc

from threaded_nlp import random_texts, train_full_pipeline

CODED = r"^\[S\d{3}\] "


@pytest.fixture(scope="module")
def full():
    return train_full_pipeline()


@pytest.fixture(scope="module")
def other():
    return train_full_pipeline(seed=7, n_train=12, epochs=1)


def parses(nlp, pipe):
    docs = [Doc(nlp.vocab, words=w, tags=[t.tag_ for t in nlp.get_pipe("structperc_tagger")(
        Doc(nlp.vocab, words=w))]) for w in random_texts(6, seed=9)]
    return [tuple(map(tuple, pipe.predict([d])[0])) for d in docs]


def state(pipe):
    # a digest: pytest's diff of two unequal byte strings of this size takes minutes
    return hashlib.blake2b(pipe.to_bytes(), digest_size=16).hexdigest(), dict(pipe.cfg)


def test_every_single_byte_flip_of_the_reranker_file_is_refused(full, tmp_path):
    pipe = full.get_pipe("parser_rr")
    pipe._reranking.fit_if_stale()
    assert pipe._reranking.model is not None
    pipe.to_disk(tmp_path, exclude=["vocab"])
    path = tmp_path / "reranker"
    good = path.read_bytes()
    before = state(pipe)
    rng = numpy.random.default_rng(4)
    silent = []
    for pos in sorted(set(rng.integers(0, len(good), 80).tolist())):
        damaged = bytearray(good)
        damaged[pos] ^= int(rng.integers(1, 256))
        path.write_bytes(bytes(damaged))
        try:
            pipe.from_disk(tmp_path, exclude=["vocab"])
        except Exception as e:
            assert re.match(CODED, str(e)) and "'parser_rr'" in str(e), (pos, repr(e))
        else:
            if state(pipe) != before:
                silent.append(pos)
        path.write_bytes(good)
        pipe.from_disk(tmp_path, exclude=["vocab"])
    assert not silent, f"{len(silent)} single-byte flips of the reranker file loaded silently"


def test_a_damaged_reranker_leaves_the_parser_as_it_was(full, other, tmp_path):
    pipe = full.get_pipe("parser_rr")
    before, predictions = state(pipe), parses(full, pipe)
    donor = other.get_pipe("parser_rr")
    donor._reranking.fit_if_stale()
    donor.to_disk(tmp_path, exclude=["vocab"])
    (tmp_path / "reranker").write_bytes(b"\x81\xa7learner\xa5bogus")
    with pytest.raises(ValueError, match=CODED + ".*'parser_rr'"):
        pipe.from_disk(tmp_path, exclude=["vocab"])
    assert state(pipe) == before and parses(full, pipe) == predictions


def test_a_missing_reranker_file_is_refused(full, tmp_path):
    pipe = full.get_pipe("parser_rr")
    pipe._reranking.fit_if_stale()
    pipe.to_disk(tmp_path, exclude=["vocab"])
    (tmp_path / "reranker").unlink()
    with pytest.raises(ValueError, match=CODED + ".*'parser_rr'"):
        pipe.from_disk(tmp_path, exclude=["vocab"])


def test_a_reranker_saved_before_the_checksum_still_loads(full, tmp_path):
    # The first format: plain msgpack of the learner's dict and its feature version.
    import srsly

    from spacy_structperc.reranking.features import FEATURES_VERSION

    pipe = full.get_pipe("parser_rr")
    pipe._reranking.fit_if_stale()
    before, predictions = state(pipe), parses(full, pipe)
    pipe.to_disk(tmp_path, exclude=["vocab"])
    legacy = srsly.msgpack_dumps({**pipe._reranking.model.to_dict(), "features_version": FEATURES_VERSION})
    (tmp_path / "reranker").write_bytes(legacy)
    pipe.from_disk(tmp_path, exclude=["vocab"])
    assert state(pipe) == before and parses(full, pipe) == predictions
