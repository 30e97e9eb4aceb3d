"""Batch decoding (_core/batch.pyx) and the word-type atom table (_core/atoms.pyx).

A batch call must decode each window or span exactly as binding it alone (`set_sentence`) and
calling the decoder's own `decode` does; the references below do exactly that, one piece at a
time, with the Python-level API.
"""
import numpy
import pytest

from spacy_structperc._core import batch, beam, lookahead, viterbi
from spacy_structperc._core.atoms import AtomTable

from structperc_problems import SECOND_ORDER_MIXED, make_system, random_atoms
from test_parser_core import ATOMS, make_system as make_parser, random_atoms as random_parser_atoms
from test_parser_core import randomize as randomize_parser

SHIFT, BREAK = 0, 1


def random_weights(templates, weights, atoms_list, m, rng, scale=1.0):
    """Random weights on every static and history feature (two labels of history) the rows of
    each array in `atoms_list` can fire, counted fully in the averaged weights."""
    keys = set()
    for atoms in atoms_list:
        for i in range(len(atoms)):
            keys.update(templates.static_keys(atoms, i).tolist())
            for h1 in range(-1, m):
                for h2 in range(-1, m):
                    keys.update(templates.history_keys(atoms, i, [h1, h2]).tolist())
    for key in sorted(keys):
        for c in range(m):
            weights.add(key, c, float(rng.normal(scale=scale)))
    # An update counts in the average by the examples that follow it (Daume's averaging).
    for _ in range(100 * max(1, weights.clock)):
        weights.next_example()


def _tag_reference(system, decoder, param, atoms, allowed, windows, start_mask):
    out = numpy.zeros((len(atoms),), dtype=numpy.int32)
    for a, b, ka, kb in windows.tolist():
        if a == b:
            continue
        mask = None if allowed is None else allowed[a:b].copy()
        if start_mask is not None:
            mask = numpy.ones((b - a, system.n_actions), dtype=numpy.uint8) if mask is None else mask
            mask[-1] &= start_mask
        system.set_sentence(atoms[a:b], None, mask)
        if decoder == "viterbi":
            got = viterbi.viterbi(system, param)[0]
        elif decoder == "beam":
            got = beam.decode(system, param)
        else:
            got = lookahead.decode(system, param)
        out[ka:kb] = got[ka - a:kb - a]
    return out


def _random_windows(rng, n_rows):
    """Sentences of 0-7 rows, some bound with margins kept only in their middle."""
    rows, start = [], 0
    while start < n_rows:
        end = min(n_rows, start + int(rng.integers(0, 8)))
        if end - start >= 4 and rng.random() < 0.5:
            rows.append((start, end, start + 1, end - 1))
            rows.append((start, start + 2, start, start + 1))
            rows.append((end - 2, end, end - 1, end))
        else:
            rows.append((start, end, start, end))
        start = end
    return numpy.array(rows, dtype=numpy.int64)


@pytest.mark.parametrize("decoder,param", [("greedy", 0), ("greedy", 2), ("viterbi", 2), ("beam", 3)])
@pytest.mark.parametrize("masks", ["none", "positions", "transitions+start"])
def test_tag_batch_equals_each_window_decoded_alone(decoder, param, masks):
    rng = numpy.random.default_rng(7)
    m = 3
    trans = None
    if masks == "transitions+start":
        trans = numpy.ones((m + 1, m), dtype=numpy.uint8)
        trans[0, 2] = trans[m, 1] = 0
    templates, weights, system = make_system(SECOND_ORDER_MIXED, m, n_buckets=256, allowed_transitions=trans)
    atoms = random_atoms(rng, 60, vocab=9)
    random_weights(templates, weights, [atoms], m, rng)
    allowed = None
    if masks == "positions":
        allowed = (rng.random((60, m)) < 0.7).astype(numpy.uint8)
        allowed[numpy.arange(60), rng.integers(0, m, 60)] = 1
    start_mask = numpy.array([1, 0, 1], dtype=numpy.uint8) if masks == "transitions+start" else None
    for trial in range(3):
        windows = _random_windows(rng, 60)
        want = _tag_reference(system, decoder, param, atoms, allowed, windows, start_mask)
        got = batch.tag(system, decoder, param, atoms, allowed, windows, start_mask)
        assert got.tolist() == want.tolist()
    # The system is left bound to an empty sentence, not to a window of the batch.
    assert system.n_tokens == 0


def test_tag_batch_raises_the_decoders_error_when_constraints_admit_nothing():
    m = 2
    trans = numpy.ones((m + 1, m), dtype=numpy.uint8)
    trans[:, 1] = 0   # label 1 never allowed by the transitions
    _, _, system = make_system(SECOND_ORDER_MIXED, m, allowed_transitions=trans)
    atoms = random_atoms(numpy.random.default_rng(0), 4)
    allowed = numpy.array([[1, 1], [0, 1], [1, 1], [1, 1]], dtype=numpy.uint8)
    windows = numpy.array([[0, 2, 0, 2], [2, 4, 2, 4]], dtype=numpy.int64)
    with pytest.raises(ValueError, match="no label sequence"):
        batch.tag(system, "viterbi", 2, atoms, allowed, windows)
    with pytest.raises(ValueError, match="no valid action"):
        batch.tag(system, "greedy", 0, atoms, allowed, windows)
    with pytest.raises(ValueError, match="beam search found no complete analysis"):
        batch.tag(system, "beam", 2, atoms, allowed, windows)
    with pytest.raises(ValueError, match="row ranges"):
        batch.tag(system, "greedy", 0, atoms, None, numpy.array([[0, 5, 0, 5]]))
    with pytest.raises(ValueError, match="unknown decoder"):
        batch.tag(system, "exhaustive", 0, atoms, None, windows)


def _parser(rng):
    weights, system = make_parser(n_labels=2, label_candidates=1)
    # Random weights on every feature that random walks over random inputs visit.
    for _ in range(40):
        system.set_sentence(random_parser_atoms(rng, int(rng.integers(1, 9))), allow_break=True)
        randomize_parser(system, weights, rng, walks=1)
    return system


def parse_reference(system, decoder, param, atoms, spans, window, unattached=-7):
    """(heads, labels) of each span (start, end, allow_break) bound alone, or window by window
    (see batch.parse); an unattached token is its own head with label `unattached`."""
    heads = numpy.arange(len(atoms), dtype=numpy.int64)
    labels = numpy.full((len(atoms),), unattached, dtype=numpy.int64)
    for start, end, allow_break in spans.tolist():
        s = start
        while s < end:
            e = min(end, s + window) if allow_break else end
            system.set_sentence(atoms[s:e], allow_break=bool(allow_break))
            actions = beam.decode(system, param) if decoder == "beam" else lookahead.decode(system, param)
            h, l = system.run(actions)
            keep = e - s
            if e < end:
                breaks = numpy.flatnonzero(actions == BREAK)
                if len(breaks):
                    shifted = int((actions[:breaks[-1]] == SHIFT).sum())
                    keep = shifted if shifted > 0 else keep
            attached = h[:keep] >= 0
            heads[s:s + keep][attached] = h[:keep][attached] + s
            labels[s:s + keep][attached] = l[:keep][attached]
            s += keep
    return heads, labels


@pytest.mark.parametrize("decoder,param", [("greedy", 0), ("greedy", 1), ("beam", 4)])
def test_parse_batch_equals_each_span_and_window_parsed_alone(decoder, param):
    rng = numpy.random.default_rng(3)
    system = _parser(rng)
    atoms = rng.integers(1, 5, size=(90, len(ATOMS))).astype(numpy.uint64)
    spans = numpy.array([[0, 0, 0], [0, 6, 0], [6, 7, 0], [7, 40, 1], [40, 41, 1], [41, 45, 0],
                         [45, 90, 1]], dtype=numpy.int64)
    for window in (5, 11, 1000):
        want_heads, want_labels = parse_reference(system, decoder, param, atoms, spans, window)
        heads = numpy.arange(90, dtype=numpy.int64)
        labels = numpy.full((90,), -7, dtype=numpy.int64)
        batch.parse(system, decoder, param, atoms, spans, window, heads, labels)
        assert heads.tolist() == want_heads.tolist(), window
        assert labels.tolist() == want_labels.tolist(), window
    assert system.n_tokens == 0


def test_atom_table_gathers_what_was_added_through_growth_and_key_zero():
    rng = numpy.random.default_rng(0)
    table = AtomTable(3)
    keys = numpy.unique(rng.integers(0, 2 ** 63, size=5000, dtype=numpy.uint64))
    keys = numpy.concatenate([[0], keys])   # 0 (the empty string's id) is a key like any other
    rows = {}
    for k in keys.tolist():
        rows[k] = [k % 97 + 1, k % 89, 5]
        assert table.add(k, rows[k]) == len(rows) - 1
    assert len(table) == len(keys)
    # Adding a key again keeps its first row.
    assert table.add(int(keys[3]), [0, 0, 0]) == 3
    query = numpy.concatenate([keys[::-1], [12345, 67890]]).astype(numpy.uint64)
    out = numpy.full((len(query), 3), 9, dtype=numpy.uint64)
    missing = table.gather(query, out)
    unknown = [i for i, k in enumerate(query.tolist()) if k not in rows]
    assert missing.tolist() == unknown
    for i, k in enumerate(query.tolist()):
        assert out[i].tolist() == (rows[k] if k in rows else [9, 9, 9])
    with pytest.raises(ValueError):
        table.gather(query, numpy.zeros((len(query), 2), dtype=numpy.uint64))
    with pytest.raises(ValueError):
        table.add(1, [1, 2])
