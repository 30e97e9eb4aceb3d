"""TemplateSet: which features fire, and how their hashes are kept apart."""
import pickle

import numpy
import pytest

from spacy_structperc._core.templates import TemplateSet


def _atoms(*rows):
    return numpy.array(rows, dtype=numpy.uint64).reshape((len(rows), -1))


def test_absent_atom_fires_no_feature():
    ts = TemplateSet([{"name": "w0", "parts": [[0, "w"]]},
                      {"name": "s0", "parts": [[0, "s"]]},
                      {"name": "w0,s0", "parts": [[0, "w"], [0, "s"]]}], ["w", "s"])
    atoms = _atoms([5, 0], [6, 7])
    assert len(ts.static_keys(atoms, 1)) == 3
    present = ts.static_keys(atoms, 0)
    # Only "w0" fires at position 0: "s0" reads the absent atom, and so does the conjunction.
    assert len(present) == 1
    assert present[0] == ts.static_keys(_atoms([5, 9]), 0)[0]


def test_absent_atom_blocks_history_conjunction_but_not_pure_history():
    ts = TemplateSet([{"name": "t-1", "parts": [["hist", 1]]},
                      {"name": "t-1,w0", "parts": [["hist", 1], [0, "w"]]}], ["w"])
    assert len(ts.history_keys(_atoms([3]), 0, [1])) == 2
    assert len(ts.history_keys(_atoms([0]), 0, [1])) == 1


def test_template_seeds_separate_identical_values():
    ts = TemplateSet([{"name": "a", "parts": [[0, "w"]]},
                      {"name": "b", "parts": [[0, "x"]]},
                      {"name": "c", "parts": [[0, "w"]]}], ["w", "x"])
    keys = ts.static_keys(_atoms([42, 42]), 0).tolist()
    assert len(keys) == 3 and len(set(keys)) == 3
    # Same template and value -> same key, whichever sentence it comes from.
    assert keys == ts.static_keys(_atoms([1, 1], [42, 42]), 1).tolist()
    assert keys[0] != ts.static_keys(_atoms([43, 42]), 0).tolist()[0]


def test_keys_are_never_zero_and_stable_across_pickling():
    specs = [{"name": "w0", "parts": [[0, "w"]]}, {"name": "t-1", "parts": [["hist", 1]]}]
    ts = TemplateSet(specs, ["w"])
    copy = pickle.loads(pickle.dumps(ts))
    atoms = _atoms(*[[v] for v in range(1, 200)])
    for i in range(len(atoms)):
        k = ts.static_keys(atoms, i)
        assert k.tolist() == copy.static_keys(atoms, i).tolist()
        assert (k != 0).all()
        h = ts.history_keys(atoms, i, [i % 5])
        assert h.tolist() == copy.history_keys(atoms, i, [i % 5]).tolist()
        assert (h != 0).all()


def test_padding_before_and_after_the_sentence_fires_distinct_features():
    ts = TemplateSet([{"name": "w-1", "parts": [[-1, "w"]]},
                      {"name": "w+1", "parts": [[1, "w"]]}], ["w"])
    a = _atoms([5], [6], [7])
    b = _atoms([8], [9])
    # At the edges the out-of-range neighbour is a real (padding) value, not an absent one.
    first_a, first_b = ts.static_keys(a, 0).tolist(), ts.static_keys(b, 0).tolist()
    last_a, last_b = ts.static_keys(a, 2).tolist(), ts.static_keys(b, 1).tolist()
    assert len(first_a) == 2 and len(last_a) == 2
    assert first_a[0] == first_b[0]        # "previous word is <s>" is the same feature everywhere
    assert last_a[1] == last_b[1]          # "next word is </s>" too
    assert first_a[0] != ts.static_keys(a, 1).tolist()[0]
    # The same template reading before-the-start and after-the-end gives different keys.
    before = ts.static_keys(a, -2).tolist()[1]   # w+1 at position -2 reads position -1
    after = ts.static_keys(a, 2).tolist()[1]     # w+1 at position 2 reads position 3
    assert before != after
    assert ts.static_keys(a, 10).tolist()[0] == ts.static_keys(a, 5).tolist()[0]


def test_history_before_start_differs_from_every_label():
    ts = TemplateSet([{"name": "t-2,t-1", "parts": [["hist", 2], ["hist", 1]]}], ["w"])
    atoms = _atoms([1])
    keys = {tuple(ts.history_keys(atoms, 0, h).tolist()) for h in
            ([-1, -1], [0, -1], [-1, 0], [0, 0], [1, 0], [0, 1])}
    assert len(keys) == 6
    assert ts.max_history == 2 and ts.n_history == 1 and ts.n_static == 0 and ts.pure_history


@pytest.mark.parametrize("k", [0, 5, -1])
def test_history_offset_outside_1_to_4_is_rejected(k):
    with pytest.raises(ValueError, match="history offset"):
        TemplateSet([{"name": "bad", "parts": [["hist", k]]}], ["w"])


@pytest.mark.parametrize("k", [1, 4])
def test_history_offsets_1_and_4_are_accepted(k):
    ts = TemplateSet([{"name": "ok", "parts": [["hist", k]]}], ["w"])
    assert ts.max_history == k


def test_unknown_atom_name_is_rejected():
    with pytest.raises(ValueError, match="nope"):
        TemplateSet([{"name": "w0", "parts": [[0, "nope"]]}], ["w"])


def test_malformed_templates_are_rejected():
    with pytest.raises(ValueError):
        TemplateSet([{"name": "empty", "parts": []}], ["w"])
    with pytest.raises(ValueError):
        TemplateSet([{"name": "triple", "parts": [[0, "w", 1]]}], ["w"])
    with pytest.raises(ValueError):
        TemplateSet([{"name": "long", "parts": [[i, "w"] for i in range(7)]}], ["w"])


def test_static_and_history_templates_are_split_and_mixed_ones_flagged():
    ts = TemplateSet([{"name": "w0", "parts": [[0, "w"]]},
                      {"name": "t-1", "parts": [["hist", 1]]},
                      {"name": "t-1,w0", "parts": [["hist", 1], [0, "w"]]}], ["w"])
    assert (ts.n_static, ts.n_history, ts.max_history, len(ts)) == (1, 2, 1, 3)
    assert not ts.pure_history
