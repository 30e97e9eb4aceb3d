"""The casing atoms (atoms.CASING_ATOMS): how a word is cased and how frequent it is in general
text, from spacy-lookups-data's lexeme_prob, carried by the model that reads them."""
import gzip
import json
import math
import pickle

import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.strings import hash_string

from spacy_structperc import model as model_module
from spacy_structperc.atoms import CASE_SHARE_BINS, AtomExtractor, CasingTable, _h, casing_code, casing_key
from spacy_structperc.model import pack_model_msg
from test_tagger import _model_msg, _with_model, train

# Cased words and their natural log probabilities, as lexeme_prob has them.
PROBS = {"Bush": -10.0, "bush": -11.0, "the": -3.5, "The": -5.9, "LEEDS": -16.0, "Leeds": -13.7,
         "eat": -9.0, "ham": -12.0, "Ham": -15.0, "123": -8.0, "I": -4.0, "i": -7.0}
TRAIN = [("I eat ham in Leeds", ["PRP", "VBP", "NN", "IN", "NNP"]),
         ("Bush eats the ham", ["NNP", "VBZ", "DT", "NN"]),
         ("The ham is in LEEDS", ["DT", "NN", "VBZ", "IN", "NNP"])]
TEXTS = ["BUSH eats ham", "the ham in leeds", "Ham is Bush"]


def expected_code(lower):
    forms = {w: p for w, p in PROBS.items() if w.lower() == lower}
    total = sum(math.exp(p) for p in forms.values())
    capital = sum(math.exp(p) for w, p in forms.items() if w[:1].isupper())
    return casing_code(capital / total, math.log(total))


@pytest.fixture
def lookups(monkeypatch, tmp_path):
    """spacy-lookups-data's English tables, with lexeme_prob replaced by PROBS (gzipped, as the
    package ships its files)."""
    from spacy.util import registry

    path = tmp_path / "en_lexeme_prob.json"
    with gzip.open(str(path) + ".gz", "wt", encoding="utf8") as f:
        json.dump(PROBS, f)
    tables = dict(registry.lookups.get("en"), lexeme_prob=path)
    monkeypatch.setattr(registry.lookups, "get", lambda lang: tables)
    clear = model_module._casing_table.cache_clear
    clear()
    yield
    clear()


def test_codes_bin_the_capital_share_and_the_frequency():
    assert casing_code(0.0, -3.0) == 0 * 16 + 1
    assert casing_code(1.0, -3.0) == len(CASE_SHARE_BINS) * 16 + 1
    assert casing_code(0.5, -19.9) == 3 * 16 + 9
    assert casing_code(0.5, -1e9) & 15 == 15 and casing_code(0.5, -0.1) & 15 == 1
    shares = [casing_code(s, -10.0) >> 4 for s in numpy.linspace(0, 1, 101)]
    assert shares == sorted(shares) and shares[0] == 0 and shares[-1] == len(CASE_SHARE_BINS)
    freqs = [casing_code(0.5, lp) & 15 for lp in numpy.linspace(-40, 0, 101)]
    assert freqs == sorted(freqs, reverse=True)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcXYZ", min_size=1, max_size=4),
                       st.integers(min_value=1, max_value=len(CASE_SHARE_BINS) * 16 + 15).filter(lambda c: c & 15),
                       max_size=30),
       st.lists(st.text(alphabet="abcXYZ", min_size=1, max_size=4), max_size=20))
def test_table_lookup_equals_a_dict_of_lower_cased_words(entries, probes):
    by_key = {casing_key(w): c for w, c in entries.items()}
    keys = numpy.array(sorted(by_key), dtype=numpy.uint32)
    table = CasingTable(keys, numpy.array([by_key[k] for k in keys.tolist()], dtype=numpy.uint8))
    for word in probes + list(entries):
        assert table.code(word) == by_key.get(hash_string(word.lower()) & 0xFFFFFFFF, 0)


def test_table_refuses_inconsistent_arrays():
    keys = numpy.array([1, 2, 3], dtype=numpy.uint32)
    with pytest.raises(ValueError, match="differ in number"):
        CasingTable(keys, numpy.array([17, 17], dtype=numpy.uint8))
    with pytest.raises(ValueError, match="ascending"):
        CasingTable(keys[::-1].copy(), numpy.array([17, 17, 17], dtype=numpy.uint8))
    for bad in (16, (len(CASE_SHARE_BINS) + 1) * 16 + 1):   # no frequency bin; no such share bin
        with pytest.raises(ValueError, match="out of range"):
            CasingTable(keys, numpy.array([17, bad, 17], dtype=numpy.uint8))


def test_table_from_lexeme_prob_sums_each_words_cased_forms(lookups):
    table = model_module._casing_table("en")
    lowers = {w.lower() for w in PROBS if any(c.isalpha() for c in w)}
    assert len(table) == len(lowers)
    for lower in lowers:
        assert table.code(lower) == table.code(lower.upper()) == expected_code(lower)
    assert table.code("123") == 0 and table.code("unseen") == 0
    # Bush: capitalised e^-10 of e^-10 + e^-11, 73%.
    assert table.code("bush") >> 4 == sum(0.731 >= b for b in CASE_SHARE_BINS)


def test_words_whose_keys_collide_are_left_out(lookups, monkeypatch):
    # Two words with one key: neither is in the table (either code would be a guess).
    monkeypatch.setattr(model_module, "casing_key", lambda w: 7 if w in ("bush", "eat") else casing_key(w))
    table = model_module._casing_table("en")
    assert 7 not in table.keys.tolist() and table.code("ham") == expected_code("ham")
    assert len(table) == len({w.lower() for w in PROBS if any(c.isalpha() for c in w)}) - 2


def test_atoms_read_the_lower_cased_form_whatever_the_case(lookups):
    extractor = AtomExtractor(["cshare", "cfreq", "lower"], casing=model_module._casing_table("en"))
    code = expected_code("leeds")
    for form in ("Leeds", "LEEDS", "leeds"):
        assert extractor.word_atoms(form)[:2] == [_h("cshare", str(code >> 4)), _h("cfreq", str(code & 15))]
    assert extractor.word_atoms("Xyzzy")[:2] == [_h("cshare", "unk"), _h("cfreq", "unk")]
    assert extractor.word_atoms("123")[:2] == [0, 0]


def casing_nlp():
    nlp = spacy.blank("en")
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.tagger_features.v1", "casing": True}}
    nlp.add_pipe("structperc_tagger", config={"model": model})
    return nlp


@pytest.fixture
def trained(lookups):
    nlp = casing_nlp()
    train(nlp, [(text, {"tags": tags}) for text, tags in TRAIN], n_iter=10)
    return nlp


def tags_of(nlp):
    return [[t.tag_ for t in doc] for doc in nlp.pipe(TEXTS)]


def test_the_table_is_saved_with_the_model_and_read_back(trained, tmp_path, monkeypatch):
    expected = tags_of(trained)
    trained.to_disk(tmp_path / "nlp")
    # Loading reads nothing from spacy-lookups-data.
    monkeypatch.setattr(model_module, "_casing_table", lambda lang: pytest.fail("read the lookups"))
    loaded = spacy.load(tmp_path / "nlp")
    assert tags_of(loaded) == expected
    table = loaded.get_pipe("structperc_tagger").model.casing
    assert table.code("LEEDS") == expected_code("leeds") and len(table) == len(trained.get_pipe("structperc_tagger").model.casing)
    assert tags_of(pickle.loads(pickle.dumps(loaded))) == expected
    assert [[t.tag_ for t in trained(text)] for text in TEXTS] == expected


@pytest.mark.parametrize("damage", ["missing", "short", "out-of-range"])
def test_a_damaged_or_missing_table_is_refused(trained, damage):
    tagger = trained.get_pipe("structperc_tagger")
    msg = _model_msg(tagger)
    codes = msg["casing_codes"]
    msg.update({"missing": {"casing_keys": b"", "casing_codes": b""},
                "short": {"casing_codes": codes[:-1]},
                "out-of-range": {"casing_codes": bytes([16]) + codes[1:]}}[damage])
    fresh = casing_nlp()
    fresh.get_pipe("structperc_tagger").from_bytes(tagger.to_bytes())
    before = tags_of(fresh)
    with pytest.raises(ValueError, match="S006"):
        fresh.get_pipe("structperc_tagger").from_bytes(_with_model(tagger, pack_model_msg(msg)))
    assert tags_of(fresh) == before   # the component is left as it was
