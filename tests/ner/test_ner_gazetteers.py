"""structperc_ner's gazetteers: matching, jackknifing, saving, and the optional open lists."""
import sys

import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, Span
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc.ner import gazetteers as gaz

from conftest import require_module
from spacy_structperc.ner.gazetteers import ALL_FOLDS, Gazetteer, GazetteerBuilder, fold_of

WORDS_MODEL = {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "precision": "float32",
               "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False}}
TRAIN_DATA = [
    ("John Smith works for Acme Corp in Boston .", [(0, 2, "PER"), (4, 6, "ORG"), (7, 8, "LOC")]),
    ("Mary lives in New York City .", [(0, 1, "PER"), (3, 6, "LOC")]),
    ("Acme Corp hired Peter Jones yesterday .", [(0, 2, "ORG"), (3, 5, "PER")]),
    ("Boston and Paris are cities .", [(0, 1, "LOC"), (2, 3, "LOC")]),
    ("Globex Inc bought Initech from Ann Lee .", [(0, 2, "ORG"), (3, 4, "ORG"), (5, 7, "PER")]),
    ("Ann Lee visited Paris .", [(0, 2, "PER"), (3, 4, "LOC")]),
]
TEXTS = ["Peter Jones met Ann Lee in Paris .", "Initech and Acme Corp moved to New York City .",
         "Boston is far from Paris .", "Mary Smith works for Globex Inc ."]


def examples_of(nlp, data=TRAIN_DATA):
    out = []
    for text, ents in data:
        gold = Doc(nlp.vocab, words=text.split())
        gold.set_ents([Span(gold, s, e, label) for s, e, label in ents], default="outside")
        out.append(Example(Doc(nlp.vocab, words=text.split()), gold))
    return out


def train(n_iter=15, **config):
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "reset_every": 0, **config})
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    for epoch in range(n_iter):
        ner.start_epoch(epoch)
        nlp.update(examples, losses={})
    return nlp


def ents_of(doc):
    return [(e.start, e.end, e.label_) for e in doc.ents]


# Matching against brute force ----------------------------------------------------------------

@st.composite
def lists_and_text(draw):
    vocab = list(range(1, 7))   # a small vocabulary makes matches and overlaps common
    n_types = draw(st.integers(1, 4))
    folds = draw(st.integers(2, 5))
    max_length = draw(st.integers(1, 4))
    entries = {}
    for _ in range(draw(st.integers(0, 25))):
        key = tuple(draw(st.lists(st.sampled_from(vocab), min_size=1, max_size=max_length)))
        t = draw(st.integers(0, n_types - 1))
        mask = draw(st.sampled_from([ALL_FOLDS, 1 << draw(st.integers(0, folds - 1)),
                                     (1 << draw(st.integers(0, folds - 1))) | 1]))
        entries.setdefault(key, {})
        entries[key][t] = entries[key].get(t, 0) | mask
    groups = [draw(st.sampled_from(gaz.GROUPS)) for _ in range(n_types)]
    words = draw(st.lists(st.sampled_from(vocab + [99]), min_size=0, max_size=30))
    starts = [i == 0 or draw(st.booleans()) and draw(st.booleans()) for i in range(len(words))]
    fold = draw(st.one_of(st.none(), st.integers(0, folds - 1)))
    g = Gazetteer([f"T{t}" for t in range(n_types)], groups, entries, folds, max_length)
    return g, words, starts, fold


def brute_force_matches(g, words, starts, fold):
    out = []
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + g.max_length) + 1):
            if any(starts[i + 1:j]):
                break   # a match never crosses a sentence start
            types = tuple(sorted(t for t, m in g.entries.get(tuple(words[i:j]), {}).items()
                                 if m and (fold is None or m & ~(1 << fold) & ALL_FOLDS)))
            if types:
                out.append((i, j, types))
    return out


@settings(max_examples=200, deadline=None)
@given(lists_and_text())
def test_matching_equals_brute_force_ngram_lookup(case):
    g, words, starts, fold = case
    expected = brute_force_matches(g, words, starts, fold)
    assert sorted(g.matches(words, starts, fold)) == sorted(expected)
    # The exact atoms: each token takes the longest match of its group covering it (the earliest
    # of equal length), its position in it and its types.
    columns = g.atoms(numpy.array(words, dtype=numpy.uint64), numpy.array(starts, dtype=bool),
                      ["gz_train", "gz_open"], fold)
    for gi, column in enumerate(columns):
        want = [0] * len(words)
        best = [0] * len(words)
        for i, j, types in sorted(expected, key=lambda m: (m[0], m[1])):
            mine = tuple(t for t in types if g.groups[t] == gaz.GROUPS[gi])
            for k in range(i, j):
                if mine and j - i > best[k]:
                    best[k] = j - i
                    pos = 3 if j - i == 1 else 0 if k == i else 2 if k == j - 1 else 1
                    want[k] = g._value(gi, pos, mine)
        assert column.tolist() == want


def test_more_matches_than_tokens_are_all_found():
    """Every n-gram of a run of one word is an entry: about max_length matches per token, more
    than the scan's first arrays hold."""
    g = Gazetteer(["T0"], ["train"], {(1,) * k: {0: ALL_FOLDS} for k in range(1, 5)}, 2, 4)
    words, starts = [1] * 30, [True] + [False] * 29
    expected = brute_force_matches(g, words, starts, None)
    assert len(expected) > len(words) + 16
    assert sorted(g.matches(words, starts)) == sorted(expected)


# Jackknifing ---------------------------------------------------------------------------------

def test_jackknifed_lists_never_contain_a_docs_own_entities():
    nlp = spacy.blank("en")
    examples = examples_of(nlp)
    builder = GazetteerBuilder(folds=3)
    gaz.add_training_entities(builder, examples)
    g = builder.build()
    folds = [fold_of(eg.predicted.to_array("ORTH"), 3) for eg in examples]
    assert len(set(folds)) > 1   # the check below is empty otherwise
    for eg, fold in zip(examples, folds):
        # An entity string is visible to a Doc only if a Doc of another fold has it.
        elsewhere = {(tuple(t.lower_ for t in e), e.label_) for other, f in zip(examples, folds) if f != fold
                     for e in other.reference.ents}
        words = eg.predicted.to_array("LOWER")
        starts = numpy.zeros((len(words),), dtype=bool)
        starts[0] = True
        for i, j, types in g.matches(words, starts, fold):
            for t in types:
                assert (tuple(tok.lower_ for tok in eg.predicted[i:j]), g.types[t]) in elsewhere
        # Every entity is in the full lists used for prediction.
        found = {(i, j, g.types[t]) for i, j, types in g.matches(words, starts, None) for t in types}
        assert {(e.start, e.end, e.label_) for e in eg.reference.ents} <= found


def test_training_reads_the_jackknifed_lists_and_prediction_the_full_ones():
    nlp = train(n_iter=1, gazetteers=["train"], gazetteer_folds=3)
    ner = nlp.get_pipe("structperc_ner")
    column = ner.model.atom_names.index("gz_train")
    doc = Doc(nlp.vocab, words="Globex Inc bought Initech from Ann Lee .".split())
    fold = ner._fold(doc)
    trained_with = ner.model.atoms(doc, ner.name, fold=fold)[:, column]
    predicted_with = ner.model.atoms(doc, ner.name)[:, column]
    assert (predicted_with[[0, 1, 3, 5, 6]] != 0).all()
    # Globex Inc and Initech appear in this Doc only: its own lists do not have them.
    assert (trained_with[[0, 1, 3]] == 0).all()


# Saving --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained():
    return train(gazetteers=["train"], gazetteer_folds=3)


def test_a_saved_model_with_gazetteers_reloads_to_identical_output(trained, tmp_path):
    expected = [ents_of(d) for d in trained.pipe(TEXTS)]
    trained.to_disk(tmp_path / "nlp")
    assert (tmp_path / "nlp" / "structperc_ner" / "gazetteers").exists()
    loaded = spacy.load(tmp_path / "nlp")
    assert [ents_of(d) for d in loaded.pipe(TEXTS)] == expected
    ner = loaded.get_pipe("structperc_ner")
    assert ner.model.gazetteer.entries == trained.get_pipe("structperc_ner").model.gazetteer.entries
    again = spacy.blank("en")
    again.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "gazetteers": ["train"],
                                             "gazetteer_folds": 3, "reset_every": 0})
    again.get_pipe("structperc_ner").from_bytes(trained.get_pipe("structperc_ner").to_bytes())
    assert [ents_of(d) for d in again.pipe(TEXTS)] == expected


def test_a_damaged_gazetteer_block_is_refused_with_a_coded_error(trained, tmp_path):
    trained.to_disk(tmp_path / "nlp")
    block = tmp_path / "nlp" / "structperc_ner" / "gazetteers"
    data = bytearray(block.read_bytes())
    data[len(data) // 2] ^= 0xFF
    block.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"\[S400\].*structperc_ner"):
        spacy.load(tmp_path / "nlp")
    block.write_bytes(b"not a block")
    with pytest.raises(ValueError, match=r"\[S401\]"):
        spacy.load(tmp_path / "nlp")
    block.unlink()
    with pytest.raises(ValueError, match=r"\[S405\]"):
        spacy.load(tmp_path / "nlp")


def test_a_damaged_block_in_bytes_leaves_the_component_as_it_was(trained):
    ner = trained.get_pipe("structperc_ner")
    import srsly
    msg = srsly.msgpack_loads(ner.to_bytes())
    block = bytearray(msg["gazetteers"])
    block[len(block) // 2] ^= 0xFF
    msg["gazetteers"] = bytes(block)
    before = [ents_of(d) for d in trained.pipe(TEXTS)]
    with pytest.raises(ValueError, match=r"\[S400\]"):
        ner.from_bytes(srsly.msgpack_dumps(msg))
    assert [ents_of(d) for d in trained.pipe(TEXTS)] == before


# Settings and the optional extra -------------------------------------------------------------

def test_unknown_source_is_refused():
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=r"\[S403\]"):
        nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "gazetteers": ["wikipedia"]})


@pytest.mark.parametrize("source,package", [("pycountry", "pycountry"), ("census", "names")])
def test_an_open_source_without_its_package_names_the_extra(monkeypatch, source, package):
    monkeypatch.setitem(sys.modules, package, None)   # the import raises ImportError
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, "gazetteers": [source]})
    with pytest.raises(ValueError, match=r"\[S404\].*gazetteers"):
        nlp.initialize(lambda: examples_of(nlp))


def test_census_lists_type_first_names_and_surnames():
    """The census source (the names package): first names and surnames, each typed, matched
    lower-cased like every list."""
    require_module("names")
    nlp = spacy.blank("en")
    builder = GazetteerBuilder(folds=3)
    gaz.add_open_lists(builder, ["census"], lambda text: [t.text for t in nlp.make_doc(text)], "ner")
    g = builder.build()
    doc = nlp.make_doc("Mary Smith met John Zzyzx .")
    starts = numpy.zeros((len(doc),), dtype=bool)
    starts[0] = True
    found = {(i, j, g.types[t]) for i, j, types in g.matches(doc.to_array("LOWER"), starts, None) for t in types}
    assert {(0, 1, "first name"), (1, 2, "surname"), (3, 4, "first name")} <= found
    assert not any(i == 4 for i, _, _ in found)
    assert len(g.entries) > 90000


@pytest.mark.parametrize("n_latent", [1, 3])
def test_the_latent_model_trains_with_gazetteers_and_two_stage(n_latent):
    require_module("pycountry")
    nlp = train(n_iter=10, n_latent=n_latent, gazetteers=["train", "pycountry"], gazetteer_folds=3,
                two_stage=True)
    ner = nlp.get_pipe("structperc_ner")
    assert "gz_open" in ner.model.atom_names and "agg" in ner.model.atom_names
    assert ents_of(nlp("Ann Lee visited Paris .")) == [(0, 2, "PER"), (3, 4, "LOC")]
