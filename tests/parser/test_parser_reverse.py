"""The right-to-left second opinion (reranking/reverse.py): reversed trees and Docs, a
pipeline's score of given trees, its k-best in the original order, and unions of lists."""
import numpy
import pytest
from spacy.tokens import Doc

from spacy_structperc.reranking.reverse import (TreeScorer, reverse_heads, reverse_tree, reversed_doc,
                                                union)

from test_parser import TRAIN_DATA, examples, make_nlp, train


def _random_tree(rng, n):
    """A random tree over n words (heads -1 for the root), by attaching each word in a random
    order to an already attached one."""
    order = rng.permutation(n)
    heads = numpy.full((n,), -1, dtype=numpy.int64)
    for j, d in enumerate(order[1:], start=1):
        heads[d] = order[rng.integers(0, j)]
    return heads


def test_reversing_a_tree_twice_gives_it_back_and_mirrors_every_arc():
    rng = numpy.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        heads = _random_tree(rng, n)
        labels = rng.integers(1, 1 << 40, size=n).astype(numpy.uint64)
        rh, rl = reverse_tree((heads, labels))
        for d in range(n):
            if heads[d] < 0:
                assert rh[n - 1 - d] == -1
            else:
                assert rh[n - 1 - d] == n - 1 - heads[d]
            assert rl[n - 1 - d] == labels[d]
        h2, l2 = reverse_tree((rh, rl))
        assert numpy.array_equal(h2, heads) and numpy.array_equal(l2, labels)
    assert len(reverse_heads(numpy.zeros((0,), dtype=numpy.int64))) == 0


def test_reversed_doc_mirrors_words_tags_and_gold_arcs():
    nlp, _ = make_nlp()
    words, tags, heads, deps = TRAIN_DATA[2]
    doc = Doc(nlp.vocab, words=words, tags=tags, heads=heads, deps=deps)
    rev = reversed_doc(doc, gold=True)
    n = len(words)
    assert [t.text for t in rev] == words[::-1]
    assert [t.tag_ for t in rev] == tags[::-1]
    assert [t.head.i for t in rev] == [n - 1 - heads[i] for i in reversed(range(n))]
    assert [t.dep_ for t in rev] == deps[::-1]
    back = reversed_doc(rev, gold=True)
    assert [t.head.i for t in back] == heads and [t.dep_ for t in back] == deps
    assert not reversed_doc(doc).has_annotation("DEP")


def _trained(reverse, epochs=30):
    nlp, parser = make_nlp({"decoder": "beam", "beam_width": 4})
    data = TRAIN_DATA[:3]     # projective trees
    if reverse:
        data = [(w[::-1], t[::-1], [len(w) - 1 - h[i] for i in reversed(range(len(w)))], d[::-1])
                for w, t, h, d in data]
    egs = examples(nlp, data)
    nlp.initialize(lambda: egs)
    for _ in range(epochs):
        parser.update(egs)
    return nlp


@pytest.fixture(scope="module")
def l2r():
    return _trained(False)


@pytest.fixture(scope="module")
def r2l():
    return _trained(True)


def _gold_tree(nlp, i):
    words, tags, heads, deps = TRAIN_DATA[i]
    doc = Doc(nlp.vocab, words=words, tags=tags)
    h = numpy.array([-1 if heads[j] == j else heads[j] for j in range(len(words))])
    labels = numpy.array([nlp.vocab.strings.add(d) for d in deps], dtype=numpy.uint64)
    return doc, (h, labels)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_trees_score_is_the_beam_score_of_its_canonical_path(l2r, r2l, reverse):
    """Arc-standard can reach one tree by several paths (a head's left and right dependents in
    either order); the tree's score is that of its canonical path (the gold path training
    uses), which is the beam's score whenever the beam found the tree by that path."""
    from spacy_structperc._core import beam

    nlp = r2l if reverse else l2r
    scorer = TreeScorer(nlp, reverse=reverse)
    system = scorer.parser.system
    n_canonical = n_all = 0
    for i in range(3):
        doc, _ = _gold_tree(l2r, i)
        cands = scorer.kbest(doc, 6, width=8)
        got = scorer.score(doc, [(h, l) for _, h, l in cands])
        assert numpy.isfinite(got).all()
        view = reversed_doc(doc) if reverse else doc
        system.set_sentence(scorer.parser.model.atoms(view), allow_break=False)
        paths = [p for _, p in beam.kbest(system, 8, 6, key=lambda p: b"".join(x.tobytes() for x in system.run(p)))]
        assert len(paths) == len(cands) >= 3
        for (score, _, _), path, mine in zip(cands, paths, got):
            heads, labels = system.run(path)
            system.set_sentence(scorer.parser.model.atoms(view), heads.astype(numpy.int32),
                                labels.astype(numpy.int32), False)
            canonical = system.oracle_path()
            assert mine == pytest.approx(system.score_path(canonical), rel=1e-6, abs=1e-6)
            if numpy.array_equal(canonical, path):
                assert mine == pytest.approx(score, rel=1e-5, abs=1e-4)
                n_canonical += 1
            n_all += 1
    assert n_canonical >= n_all // 2


def test_the_reversed_models_best_tree_comes_back_in_the_original_order(l2r, r2l):
    scorer = TreeScorer(r2l, reverse=True)
    for i in range(3):
        doc, gold = _gold_tree(l2r, i)
        cands = scorer.kbest(doc, 4)
        score, heads, labels = cands[0]
        assert numpy.array_equal(heads, gold[0]) and numpy.array_equal(labels, gold[1])
        scores = scorer.score(doc, [(h, l) for _, h, l in cands])
        assert scores[0] == pytest.approx(score, rel=1e-5, abs=1e-4)
        assert scores[0] > scores[1:].max()


def test_unknown_labels_and_nonprojective_trees_score_minus_infinity(l2r):
    scorer = TreeScorer(l2r)
    doc, (heads, labels) = _gold_tree(l2r, 2)
    unknown = labels.copy()
    unknown[0] = l2r.vocab.strings.add("no-such-label")
    crossing = (numpy.array([1, -1, 4, 1, 2]), labels)   # 0->1 ... 3->1 crosses 2->4
    got = scorer.score(doc, [(heads, labels), (heads, unknown), crossing])
    assert numpy.isfinite(got[0]) and got[1] == -numpy.inf and got[2] == -numpy.inf


def test_union_keeps_first_occurrences_in_order_with_their_source():
    a = (numpy.array([-1, 0]), numpy.array([1, 2], dtype=numpy.uint64))
    b = (numpy.array([1, -1]), numpy.array([3, 1], dtype=numpy.uint64))
    c = (numpy.array([-1, 0]), numpy.array([1, 5], dtype=numpy.uint64))
    trees, source = union([a, b], [b, c, a])
    assert [t[0].tolist() for t in trees] == [[-1, 0], [1, -1], [-1, 0]]
    assert [t[1].tolist() for t in trees] == [[1, 2], [3, 1], [1, 5]]
    assert source.tolist() == [0, 0, 1]
    empty, source = union()
    assert empty == [] and len(source) == 0


def test_a_pipeline_without_a_structperc_parser_is_a_coded_error():
    import spacy

    with pytest.raises(ValueError, match=r"\[S250\]"):
        TreeScorer(spacy.blank("en"))


# A reranker block with a right-to-left model (reverse > 0, learner "none") ---------------------

REVERSE_BLOCK = {"learner": "none", "k": 4, "reverse": 0.3, "union": True}


def _pipeline(block=REVERSE_BLOCK, epochs=25, data=TRAIN_DATA[:3]):
    return train({"decoder": "beam", "beam_width": 4, "reranker": block}, epochs, data)


@pytest.fixture(scope="module")
def bidirectional():
    return _pipeline()


def _parse(nlp, words, tags):
    doc = nlp(Doc(nlp.vocab, words=words, tags=tags))
    return [(t.head.i, t.dep_) for t in doc]


def test_parser_atoms_are_per_word_so_a_reversed_span_is_its_atoms_reversed(bidirectional):
    nlp, parser = bidirectional
    for words, tags, _, _ in TRAIN_DATA:
        doc = Doc(nlp.vocab, words=words, tags=tags)
        assert numpy.array_equal(parser.model.atoms(reversed_doc(doc)), parser.model.atoms(doc)[::-1])


def test_the_reversed_model_learns_the_training_trees(bidirectional):
    nlp, parser = bidirectional
    for words, tags, heads, deps in TRAIN_DATA[:3]:
        assert _parse(nlp, words, tags) == list(zip(heads, deps))
    # the reversed model alone (its own k-best through the same system) finds them too
    system = parser._reranking.reverse_system()
    for words, tags, heads, deps in TRAIN_DATA[:3]:
        atoms = parser.model.atoms(Doc(nlp.vocab, words=words, tags=tags))[::-1].copy()
        (_, h, c), = parser._span_kbest(system, atoms, False, 1, 4)
        h, _ = reverse_tree((h, c))
        assert h.tolist() == [-1 if heads[i] == i else heads[i] for i in range(len(words))]


def test_the_choice_is_the_best_of_base_plus_weight_times_the_reversed_score(bidirectional):
    """Recompute the choice from the two models' scores (TreeScorer over the same weights)."""
    nlp, parser = bidirectional
    rng = numpy.random.default_rng(4)
    vocab = ["I", "like", "eggs", "ham", "they", "eat", "with", "green", ".", "blue"]
    tagset = ["PRP", "VBP", "NNS", "NN", "IN", "JJ", "."]
    rr = parser._reranking
    for _ in range(15):
        n = int(rng.integers(2, 9))
        words = [vocab[i] for i in rng.integers(0, len(vocab), n)]
        tags = [tagset[i] for i in rng.integers(0, len(tagset), n)]
        doc = Doc(nlp.vocab, words=words, tags=tags)
        atoms = parser.model.atoms(doc)
        cands = parser._span_kbest(parser.system, atoms, True, 4, 4)
        rev = [(s, h, c) for s, h, c in parser._span_kbest(rr.reverse_system(), atoms[::-1].copy(), True, 4, 4)]
        trees = [(h, c) for _, h, c in cands]
        keys = {h.tobytes() + c.tobytes() for h, c in trees}
        rev_beam = {}
        for sc, h, c in rev:
            h, c = reverse_tree((h, c))
            c = numpy.where(h >= 0, c, len(parser.cfg["labels"]))
            rev_beam.setdefault(h.tobytes() + c.tobytes(), sc)
            if h.tobytes() + c.tobytes() not in keys:
                keys.add(h.tobytes() + c.tobytes())
                trees.append((h, c))
        assert len(trees) > len(cands), "the reversed list should add trees"
        got = rr.choose(*rr.rescored(doc.to_array("LOWER"), doc.to_array("TAG"), atoms, True, cands, 4, 4))
        assert any(numpy.array_equal(got[0], h) and numpy.array_equal(got[1], c) for h, c in trees)
        
        def path_score(system, atoms, h, c, allow_break):
            labels = numpy.where(h >= 0, c, -1).astype(numpy.int32)
            system.set_sentence(atoms, h.astype(numpy.int32), labels, allow_break)
            path = system.oracle_path()
            return -numpy.inf if path is None else system.score_path(path)

        def total(tree, base=None):
            # each model's score: its beam's where its beam found the tree, else the canonical path's
            h, c = tree
            fwd = base if base is not None else path_score(parser.system, atoms, h, c, True)
            key = h.tobytes() + c.tobytes()
            bwd = rev_beam[key] if key in rev_beam else \
                path_score(rr.reverse_system(), atoms[::-1].copy(), *reverse_tree((h, c)), True)
            return fwd + 0.3 * bwd

        best = max(total(t, cands[i][0] if i < len(cands) else None) for i, t in enumerate(trees))
        mine = [i for i, t in enumerate(trees) if numpy.array_equal(t[0], got[0]) and numpy.array_equal(t[1], got[1])][0]
        assert total(trees[mine], cands[mine][0] if mine < len(cands) else None) == pytest.approx(best)


def test_the_reversed_model_survives_save_load_and_pickle(bidirectional, tmp_path):
    import pickle

    import spacy

    nlp, parser = bidirectional
    words = [["They", "like", "blue", "eggs"], ["Eat", "green", "ham", "."], ["I", "eat", "eggs", "with", "ham"]]
    tags = [["PRP", "VBP", "JJ", "NNS"], ["VB", "JJ", "NN", "."], ["PRP", "VBP", "NNS", "IN", "NN"]]
    before = [_parse(nlp, w, t) for w, t in zip(words, tags)]
    nlp.to_disk(tmp_path / "m")
    assert (tmp_path / "m" / "structperc_parser" / "reranker").read_bytes()[:5] == b"SPRS\x01"
    loaded = spacy.load(tmp_path / "m")
    assert [_parse(loaded, w, t) for w, t in zip(words, tags)] == before
    assert [_parse(pickle.loads(pickle.dumps(nlp)), w, t) for w, t in zip(words, tags)] == before
    assert loaded.get_pipe("structperc_parser").to_bytes() == loaded.get_pipe("structperc_parser").to_bytes()


def test_a_damaged_reversed_model_is_refused_and_the_component_kept(bidirectional):
    import srsly

    nlp, parser = bidirectional
    data = srsly.msgpack_loads(parser.to_bytes())
    reranker = bytearray(data["reranker"])
    reranker[-100] ^= 0xFF
    data["reranker"] = bytes(reranker)
    nlp2, parser2 = _pipeline(epochs=1)
    before = parser2.to_bytes()
    with pytest.raises(ValueError, match="S248"):
        parser2.from_bytes(srsly.msgpack_dumps(data))
    assert parser2.to_bytes() == before


def test_partial_gold_trees_are_left_out_of_the_reversed_training():
    words, tags, heads, deps = TRAIN_DATA[0]
    partial = (words, tags, [heads[0], None, heads[2], heads[3]], [deps[0], "", deps[2], deps[3]])
    nlp, parser = _pipeline(epochs=2, data=[partial, TRAIN_DATA[1]])
    assert parser._reranking.reverse_model is not None
    assert len(nlp(Doc(nlp.vocab, words=words, tags=tags))) == 4


def test_prediction_from_threads_equals_one_thread(bidirectional):
    from concurrent.futures import ThreadPoolExecutor

    nlp, _ = bidirectional
    rng = numpy.random.default_rng(1)
    vocab = ["I", "like", "eggs", "ham", "they", "eat", "with", "green", "."]
    inputs = [[vocab[i] for i in rng.integers(0, len(vocab), int(rng.integers(1, 12)))] for _ in range(40)]
    one = [_parse(nlp, w, ["NN"] * len(w)) for w in inputs]
    with ThreadPoolExecutor(8) as pool:
        many = list(pool.map(lambda w: _parse(nlp, w, ["NN"] * len(w)), inputs * 3))
    assert many == one * 3


@pytest.mark.parametrize("block", [
    {"learner": "none"}, {"learner": "perceptron", "reverse": 0.3}, {"learner": "none", "reverse": -1},
    {"learner": "none", "reverse": "much"}, {"learner": "none", "reverse": 0.3, "union": "yes"}])
def test_bad_reverse_blocks_are_coded_errors(block):
    import spacy

    with pytest.raises(ValueError, match="S244"):
        spacy.blank("en").add_pipe("structperc_parser", config={"decoder": "beam", "reranker": block})


def test_score_trees_walks_each_trees_oracle_path_as_score_path_does(bidirectional):
    """ArcStandardSystem.score_trees (the batch the reranker scores with) against set_sentence
    + oracle_path + score_path, one tree at a time, on random trees, crossing ones included."""
    nlp, parser = bidirectional
    system = parser.system
    rng = numpy.random.default_rng(7)
    n_labels = len(parser.cfg["labels"])
    n_finite = n_inf = 0
    for _ in range(20):
        n = int(rng.integers(1, 9))
        doc = Doc(nlp.vocab, words=[["I", "eat", "ham", "with", "eggs", "."][i] for i in rng.integers(0, 6, n)],
                  tags=[["PRP", "VBP", "NN", "IN", "NNS", "."][i] for i in rng.integers(0, 6, n)])
        atoms = parser.model.atoms(doc)
        trees = [(_random_tree(rng, n), rng.integers(0, n_labels, n)) for _ in range(6)]
        heads = numpy.array([h for h, _ in trees], dtype=numpy.int32)
        labels = numpy.where(heads >= 0, numpy.array([c for _, c in trees]), -1).astype(numpy.int32)
        got = system.score_trees(atoms, heads, labels, False)
        for (h, _), l, g in zip(trees, labels, got):
            system.set_sentence(atoms, h.astype(numpy.int32), l, False)
            path = system.oracle_path()
            want = -numpy.inf if path is None else system.score_path(path)
            assert g == pytest.approx(want, rel=1e-9, abs=1e-9) if path is not None else g == -numpy.inf
            n_finite += path is not None
            n_inf += path is None
    assert n_finite > 20 and n_inf > 5
    with pytest.raises(ValueError):
        system.score_trees(atoms, heads[:, :-1], labels, False)



def test_score_trees_of_near_identical_trees_equal_their_own_paths_scores(bidirectional):
    """score_trees reuses a walk's action scores while the next tree's path repeats it: on
    k-best-like lists (a tree, a copy, trees with one or two words reattached or relabelled,
    crossing ones among them, in random order) every score must still equal the tree's own path
    score exactly."""
    nlp, parser = bidirectional
    system = parser.system
    rng = numpy.random.default_rng(11)
    n_labels = len(parser.cfg["labels"])
    words, tags = ["I", "eat", "ham", "with", "eggs", "."], ["PRP", "VBP", "NN", "IN", "NNS", "."]
    n_shared = 0
    for _ in range(15):
        n = int(rng.integers(3, 10))
        idx = rng.integers(0, 6, n)
        doc = Doc(nlp.vocab, words=[words[i] for i in idx], tags=[tags[i] for i in idx])
        atoms = parser.model.atoms(doc)
        base = _random_tree(rng, n)
        base_labels = rng.integers(0, n_labels, n)
        trees = [(base.copy(), base_labels.copy()), (base.copy(), base_labels.copy())]
        for _ in range(8):
            h, l = base.copy(), base_labels.copy()
            for _ in range(int(rng.integers(1, 3))):
                d = int(rng.choice(numpy.flatnonzero(h >= 0)))
                below = {d}
                while True:   # d's subtree: a new head from outside it keeps h a tree
                    more = {x for x in range(n) if h[x] in below} - below
                    if not more:
                        break
                    below |= more
                h[d] = rng.choice([x for x in range(n) if x not in below])
                if rng.random() < 0.3:
                    l[d] = rng.integers(0, n_labels)
            trees.append((h, l))
        rng.shuffle(trees)
        heads = numpy.array([h for h, _ in trees], dtype=numpy.int32)
        labels = numpy.where(heads >= 0, numpy.array([l for _, l in trees]), -1).astype(numpy.int32)
        got = system.score_trees(atoms, heads, labels, False)
        for h, l, g in zip(heads, labels, got):
            system.set_sentence(atoms, h, l, False)
            path = system.oracle_path()
            if path is None:
                assert g == -numpy.inf
            else:
                assert g == system.score_path(path)
                n_shared += 1
    assert n_shared > 25

def test_the_reversed_model_has_the_parsers_feature_filter_counted_on_reversed_trees(tmp_path):
    """min_feature_freq = 2: the reversed model updates only features seen at least twice along
    the reversed gold derivations (its own count, not the forward parser's), and keeps the
    filter through save and load."""
    import collections

    import spacy

    from spacy_structperc._core.arcstandard import ArcStandardSystem

    data = TRAIN_DATA[:3] * 2 + [TRAIN_DATA[3]]   # the last sentence once: its own keys stay out
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("structperc_parser", config={
        "min_label_freq": 1, "min_feature_freq": 2, "decoder": "beam", "beam_width": 4, "reranker": REVERSE_BLOCK})
    egs = examples(nlp, data)
    nlp.initialize(lambda: egs)
    model = parser._reranking.reverse_model
    allowed = set(model.allowed_keys.tolist())
    counts = collections.Counter()
    system = ArcStandardSystem(model.templates, model.weights, len(parser.cfg["labels"]),
                               parser.cfg["label_candidates"])
    from spacy_structperc.parser.nonproj import projective_gold

    for eg in egs:
        heads, deps = projective_gold(eg, parser.name)
        h, l = parser._gold(eg, 0, len(eg.reference), heads, deps)
        rh, rl = reverse_tree((h, l))
        system.set_sentence(parser.model.atoms(eg.reference)[::-1].copy(), rh, rl, True)
        counts.update(system.oracle_keys().tolist())
    assert allowed == {k for k, c in counts.items() if c >= 2}
    assert allowed != set(parser.model.allowed_keys.tolist())
    for _ in range(3):
        parser.update(egs)
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m").get_pipe("structperc_parser")._reranking.reverse_model
    assert set(loaded.allowed_keys.tolist()) == allowed
