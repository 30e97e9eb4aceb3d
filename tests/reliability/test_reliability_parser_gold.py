"""The parser's training state: missing heads read as missing, the feature filter kept by pickle
and by to_bytes, so continued training on a copy equals continued training on the original."""
import pickle
import sys
from pathlib import Path

import numpy
import spacy
from spacy.tokens import Doc
from spacy.training import Example

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parser"))
from test_parser import TEST_WORDS, TRAIN_DATA, examples, tagged, train  # noqa: E402

from spacy_structperc.parser.nonproj import projective_gold  # noqa: E402


def test_missing_heads_are_missing_not_roots():
    nlp, parser = train(epochs=1)
    words = ["a", "b", "c", "d", "e", "f"]
    heads = [2, None, 3, 3, None, 3]
    deps = ["amod", None, "obj", "ROOT", None, "punct"]
    ref = Doc(nlp.vocab, words=words, heads=heads, deps=deps)
    eg = Example(Doc(nlp.vocab, words=words), ref)
    h, d = projective_gold(eg)
    gold_heads, _ = parser._gold(eg, 0, len(words), h, d)
    assert gold_heads.tolist() == [2, -2, 3, -1, -2, 3]


def roots_per_sentence(nlp, docs):
    n_roots = n_sents = 0
    for doc in nlp.pipe(docs):
        n_sents += len(list(doc.sents))
        n_roots += sum(t.head.i == t.i for t in doc)
    return n_roots / n_sents


def test_training_on_references_without_heads_teaches_nothing():
    nlp, parser = train()
    before = roots_per_sentence(nlp, [tagged(nlp, w) for w in TEST_WORDS])
    unannotated = [Example(Doc(nlp.vocab, words=w, tags=t), Doc(nlp.vocab, words=w, tags=t))
                   for w, t, _, _ in TRAIN_DATA]
    for _ in range(2):
        losses = parser.update(unannotated)
        assert losses[f"{parser.name}_updates"] == 0
    # (The averaged weights still move towards the current ones: the clock ticks per example.)
    assert roots_per_sentence(nlp, [tagged(nlp, w) for w in TEST_WORDS]) == before == 1.0


def test_partially_annotated_trees_never_teach_a_missing_head_as_root():
    # Half the heads missing (deterministically): every update is towards an action the known
    # heads decide, so a parser trained only on such trees still finds one root per sentence.
    rng = numpy.random.default_rng(0)
    partial = []
    for words, tags, heads, deps in TRAIN_DATA * 3:
        keep = rng.random(len(words)) < 0.5
        partial.append((words, tags, [h if k else None for h, k in zip(heads, keep)],
                        [d if k else None for d, k in zip(deps, keep)]))
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("structperc_parser", config={"min_label_freq": 1, "min_feature_freq": 1})
    full = examples(nlp)
    nlp.initialize(lambda: full)
    egs = [Example(Doc(nlp.vocab, words=w, tags=t), Doc(nlp.vocab, words=w, tags=t, heads=h, deps=d))
           for w, t, h, d in partial]
    for _ in range(10):
        parser.update(egs)
    assert roots_per_sentence(nlp, [tagged(nlp, w) for w in TEST_WORDS]) == 1.0


def _continue(nlp, parser, epochs=2):
    egs = examples(nlp)
    for _ in range(epochs):
        parser.update(egs)
    return parser.model.to_bytes()


def test_pickled_parser_keeps_its_feature_filter_and_trains_like_the_original():
    nlp, parser = train({"min_feature_freq": 2}, epochs=2)
    assert parser.model.allowed_keys is not None and len(parser.model.allowed_keys)
    copy = pickle.loads(pickle.dumps(nlp))
    copy_parser = copy.get_pipe("structperc_parser")
    assert numpy.array_equal(copy_parser.model.allowed_keys, parser.model.allowed_keys)
    assert _continue(copy, copy_parser) == _continue(nlp, parser)


def test_reloaded_parser_keeps_its_feature_filter(tmp_path):
    # to_bytes saves the averaged weights (not the accumulators), so continued training starts
    # from the average; what it may learn is still restricted to the same features.
    nlp, parser = train({"min_feature_freq": 2}, epochs=2)
    data = parser.to_bytes()
    nlp.to_disk(tmp_path / "nlp")
    blank = spacy.blank("en")
    blank.add_pipe("structperc_parser", config={"min_label_freq": 1, "min_feature_freq": 2})
    blank.get_pipe("structperc_parser").from_bytes(data)
    allowed = set(parser.model.allowed_keys.tolist())
    for copy in (spacy.load(tmp_path / "nlp"), blank):
        copy_parser = copy.get_pipe("structperc_parser")
        assert numpy.array_equal(copy_parser.model.allowed_keys, parser.model.allowed_keys)
        _continue(copy, copy_parser, epochs=3)
        keys, _ = copy_parser.model.weights.sorted_rows(averaged=True, prune=False)
        assert set(keys.tolist()) <= allowed


def test_where_the_oracle_does_not_know_training_follows_only_actions_consistent_with_known_heads():
    import math
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from test_parser_core import make_system, random_atoms, randomize
    weights, system = make_system(n_labels=2)
    rng = numpy.random.default_rng(0)
    system.set_sentence(random_atoms(rng, 4))
    randomize(system, weights, rng)
    # Token 0's head is 2 (known), token 1's is missing, 2 is the root, 3 hangs from 2.
    system.set_sentence(random_atoms(numpy.random.default_rng(0), 4),
                        numpy.array([2, -2, -1, 2]), numpy.array([0, -1, -1, 1]))
    state = system.step(system.step(system.initial_state(), 0), 0)   # stack: 0 1
    assert system.gold(state) == -1
    scores = system.action_scores(state)
    left, right = 2, 3   # label 0: LEFT-ARC attaches 0 under 1 (contradicts head 2); RIGHT-ARC 1 under 0
    assert scores[left] == -math.inf and scores[left + 2] == -math.inf
    assert scores[right] != -math.inf and scores[0] != -math.inf
