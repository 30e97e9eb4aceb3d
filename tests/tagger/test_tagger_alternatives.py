"""structperc_tagger's `alternatives`: each token's runner-up tag and the margin of its local
scores along the decoded path, in doc.user_data, for a parser's reranker with tag_flips."""
import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_structperc.docarrays import TAG_ALTERNATIVES

from test_tagger import TEST_TEXTS, make_nlp, train

# No label history: a token's local scores do not depend on the tags before it, so flipping one
# token changes a path's score by exactly minus its margin (score_path), an independent check.
NO_HISTORY = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
              "features": {"@misc": "spacy-structperc.tagger_features.v1", "history": 0,
                           "history_words": False}}
TEXTS = TEST_TEXTS + ["green eggs I like", "They like ham is", ""]


def _trained(**config):
    nlp, tagger = make_nlp({"alternatives": True, **config})
    train(nlp, n_iter=4)   # few epochs: margins small enough that runner-ups differ across tokens
    return nlp, tagger


@pytest.mark.parametrize("direction", ["ltr", "rtl"])
def test_the_margin_is_the_score_lost_by_the_runner_up(direction):
    nlp, tagger = _trained(model=NO_HISTORY, direction=direction)
    for doc in nlp.pipe(TEXTS):
        entry = doc.user_data[TAG_ALTERNATIVES]
        tags = [nlp.vocab.strings[t] for t in entry["tags"]]
        assert tags == [t.tag_ for t in doc]
        if not len(doc):
            continue
        tagger._bind(doc)
        order = slice(None, None, -1) if direction == "rtl" else slice(None)
        label_class = {v: i for i, v in enumerate(tagger._label_values.tolist())}
        path = numpy.array([label_class[t] for t in entry["tags"]])[order]
        base = tagger.system.score_path(path)
        for i, (second, margin) in enumerate(zip(entry["second"], entry["margin"])):
            assert second != entry["tags"][i] and margin >= 0
            flipped = numpy.array([label_class[t] for t in entry["tags"]])
            flipped[i] = label_class[second]
            assert tagger.system.score_path(flipped[order]) == pytest.approx(base - margin, abs=1e-3)
            # and no other tag loses less
            for other in label_class.values():
                if other not in (label_class[entry["tags"][i]], label_class[second]):
                    alt = numpy.array([label_class[t] for t in entry["tags"]])
                    alt[i] = other
                    assert tagger.system.score_path(alt[order]) <= base - margin + 1e-3


def test_with_history_the_runner_up_is_scored_after_the_decoded_tags():
    """With label history the local scores at a token depend on the tags before it: the margin
    is that of the scores the greedy decoder compared, given the decoded tags."""
    nlp, tagger = _trained()
    doc = nlp("They like green ham")
    entry = doc.user_data[TAG_ALTERNATIVES]
    label_class = {v: i for i, v in enumerate(tagger._label_values.tolist())}
    tagger._bind(doc)
    system = tagger.system
    state = system.initial_state()
    for i, tag in enumerate(entry["tags"]):
        scores = system.action_scores(state)
        c = label_class[tag]
        assert int(numpy.argmax(scores)) == c
        assert scores[c] - scores[label_class[entry["second"][i]]] == pytest.approx(entry["margin"][i], abs=1e-3)
        state = system.step(state, c)


def test_off_by_default_and_switched_on_a_loaded_tagger(tmp_path):
    nlp, tagger = make_nlp()
    train(nlp, n_iter=2)
    assert TAG_ALTERNATIVES not in nlp("They eat ham").user_data
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    loaded.get_pipe("structperc_tagger").set_alternatives(True)
    assert len(loaded("They eat ham").user_data[TAG_ALTERNATIVES]["margin"]) == 3
    loaded.to_disk(tmp_path / "m2")
    assert TAG_ALTERNATIVES in spacy.load(tmp_path / "m2")("They eat ham").user_data   # saved


def test_a_tag_the_dictionary_rules_out_is_no_runner_up():
    nlp, tagger = _trained(tag_dict_min_count=1)
    doc = nlp("They eat ham")   # every word seen in training with one tag only
    entry = doc.user_data[TAG_ALTERNATIVES]
    assert entry["second"] == [0, 0, 0]
    assert all(m == float("inf") for m in entry["margin"])


def test_bad_alternatives_settings_are_coded_errors():
    with pytest.raises(ValueError, match="S012"):
        make_nlp({"alternatives": True, "attr": "pos"})
    _, tagger = make_nlp()
    with pytest.raises(ValueError, match="S012"):
        tagger.set_alternatives("yes")
    assert tagger.cfg["alternatives"] is False


def test_set_alternatives_refuses_a_pos_tagger():
    _, tagger = make_nlp({"attr": "pos"})
    with pytest.raises(ValueError, match="S012"):
        tagger.set_alternatives(True)
    tagger.set_alternatives(False)


def test_docs_given_tags_by_hand_keep_no_stale_entry():
    """The entry is written with the tags: a Doc tagged later by hand is not the tagger's."""
    nlp, _ = _trained()
    doc = Doc(nlp.vocab, words=["They", "eat", "ham"])
    assert TAG_ALTERNATIVES not in doc.user_data
    nlp.get_pipe("structperc_tagger")(doc)
    assert len(doc.user_data[TAG_ALTERNATIVES]["tags"]) == 3
