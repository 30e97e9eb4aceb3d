"""The parser on real trees: UD English EWT and the Penn Treebank WSJ sample."""
import numpy
import pytest
import spacy
from spacy.pipeline._parser_internals import nonproj as spacy_nonproj
from spacy.tokens import Doc
from spacy.training import Example

from spacy_structperc._core.arcstandard import ArcStandardSystem, ParseTemplates
from spacy_structperc._core.weights import AveragedWeights
from spacy_structperc.parser.features import parser_atoms, parser_templates

from conllu_data import read_conllu

N_TRAIN_SENTS = 2000
N_DEV_SENTS = 600
N_EPOCHS = 2
# Measured 0.7971 dev UAS (LAS 0.7669) (first 600 dev sentences, gold tags) with greedy decoding,
# lookahead depth 1, the first 2,000 training sentences in file order and 2 epochs.
# Floor ~1.5 points below.
UAS_FLOOR = 0.782
LAS_FLOOR = 0.752


@pytest.fixture(scope="module")
def ewt_train(data_dir):
    return read_conllu(data_dir / "ud_en_ewt" / "en_ewt-ud-train.conllu")


def _system(n_labels):
    specs = parser_templates()
    atoms = parser_atoms(specs)
    weights = AveragedWeights(2 + 2 * n_labels, 1024)
    return ArcStandardSystem(ParseTemplates(specs, atoms), weights, n_labels), len(atoms)


def _gold_arrays(heads, labels, label_ids):
    n = len(heads)
    gold_heads = numpy.array([-1 if h == i else h for i, h in enumerate(heads)], dtype=numpy.int32)
    gold_labels = numpy.array([-1 if h == i else label_ids.setdefault(l, len(label_ids))
                               for i, (h, l) in enumerate(zip(heads, labels))], dtype=numpy.int32)
    return gold_heads, gold_labels


@pytest.mark.slow
def test_oracle_reproduces_every_projective_ewt_training_tree(ewt_train):
    system, n_cols = _system(200)
    label_ids = {}
    n_projective = n_nonprojective = 0
    for doc in ewt_train:
        heads = [t.head.i for t in doc]
        labels = [t.dep_ for t in doc]
        if spacy_nonproj.get_smallest_nonproj_arc_slow(heads) != -1:
            n_nonprojective += 1
            continue
        n_projective += 1
        gold_heads, gold_labels = _gold_arrays(heads, labels, label_ids)
        system.set_sentence(numpy.ones((len(doc), n_cols), dtype=numpy.uint64), gold_heads, gold_labels)
        path = system.oracle_path()
        assert path is not None, doc.text
        assert len(path) == 2 * len(doc) - 1
        got_heads, got_labels = system.run(path)
        assert got_heads.tolist() == gold_heads.tolist() and got_labels.tolist() == gold_labels.tolist()
    assert n_projective + n_nonprojective == 12544
    # spaCy counts 288 non-projective trees (the issue says 280: it counts per its own definition)
    assert n_nonprojective == 288


@pytest.mark.slow
def test_projectivize_then_deprojectivize_restores_nonprojective_ewt_trees(ewt_train):
    """Through the parser's own path: the oracle parses the projectivized tree, set_annotations
    writes it (decorated labels included) and deprojectivizes it."""
    nlp = spacy.blank("en")
    parser = nlp.add_pipe("structperc_parser", config={"min_label_freq": 1})
    nonprojective = [d for d in ewt_train
                     if spacy_nonproj.get_smallest_nonproj_arc_slow([t.head.i for t in d]) != -1]
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]), d)
                for d in nonprojective]
    nlp.initialize(lambda: examples)
    system = parser.system
    restored = 0
    written = []
    for eg in examples:
        gold = ([t.head.i for t in eg.reference], [t.dep_ for t in eg.reference])
        heads, deps = eg.get_aligned_parse(projectivize=True)
        # What the scheme itself restores: spaCy's projectivize -> Doc -> deprojectivize.
        direct = Doc(nlp.vocab, words=[t.text for t in eg.reference], heads=heads, deps=deps)
        spacy_nonproj.deprojectivize(direct)
        scheme_restores = ([t.head.i for t in direct], [t.dep_ for t in direct]) == gold
        # Ours: the oracle parses the projectivized tree and the component writes it.
        gold_heads, gold_labels = parser._gold(eg, 0, len(eg.predicted), heads, deps)
        system.set_sentence(parser.model.atoms(eg.predicted), gold_heads, gold_labels)
        path = system.oracle_path()
        assert path is not None   # the projectivized tree is always reachable
        h, l = system.run(path)
        out_heads = numpy.where(h >= 0, h, numpy.arange(len(h)))
        out_labels = numpy.where(h >= 0, l, len(parser.cfg["labels"]))
        doc = eg.predicted
        parser.set_annotations([doc], [(out_heads, out_labels)])
        assert not any("||" in t.dep_ for t in doc)
        ours_restores = ([t.head.i for t in doc], [t.dep_ for t in doc]) == gold
        assert ours_restores == scheme_restores, eg.reference.text
        restored += ours_restores
        written.append((doc, out_heads, out_labels))
    # One batch (an empty Doc and projective trees among them) writes what one Doc at a time does.
    batch, predictions = [], []
    for k, (doc, h, l) in enumerate(written[:60]):
        batch.append(Doc(nlp.vocab, words=[t.text for t in doc]))
        predictions.append((h, l))
        if k % 7 == 3:
            batch.append(Doc(nlp.vocab, words=[]))
            predictions.append((numpy.zeros((0,), dtype=numpy.int64), numpy.zeros((0,), dtype=numpy.int64)))
        if k % 5 == 1:
            n = len(doc)
            batch.append(Doc(nlp.vocab, words=[t.text for t in doc]))
            predictions.append((numpy.arange(n), numpy.full((n,), len(parser.cfg["labels"]))))
    parser.set_annotations(batch, predictions)
    one_by_one = [Doc(nlp.vocab, words=[t.text for t in d]) for d in batch]
    for d, p in zip(one_by_one, predictions):
        parser.set_annotations([d], [p])
    assert any(len(d) == 0 for d in batch)
    for a, b in zip(batch, one_by_one):
        assert [(t.head.i, t.dep_) for t in a] == [(t.head.i, t.dep_) for t in b]
    assert len(examples) == 288
    # Measured: 262 of 288 come back exactly; the others are the HEAD scheme's own
    # ambiguity (another token with the original head's label is found first).
    assert restored == 262, restored


@pytest.mark.slow
def test_short_ewt_run_reaches_dev_uas_floor(data_dir):
    ewt = data_dir / "ud_en_ewt"
    train_docs = read_conllu(ewt / "en_ewt-ud-train.conllu", N_TRAIN_SENTS)
    dev_docs = read_conllu(ewt / "en_ewt-ud-dev.conllu", N_DEV_SENTS)
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_parser", config={"lookahead_depth": 1, "min_feature_freq": 2})

    def examples(docs):   # gold tokens and gold tags: this measures the parser alone
        return [Example(Doc(nlp.vocab, words=[t.text for t in d], tags=[t.tag_ for t in d]), d) for d in docs]

    train, dev = examples(train_docs), examples(dev_docs)
    nlp.initialize(lambda: train)
    epoch_losses = []
    for _ in range(N_EPOCHS):
        losses = {}
        for i in range(0, len(train), 100):
            nlp.update(train[i:i + 100], losses=losses)
        epoch_losses.append(losses["structperc_parser"])
    assert epoch_losses[1] < epoch_losses[0]
    scores = nlp.evaluate(dev)
    assert scores["dep_uas"] >= UAS_FLOOR, scores["dep_uas"]
    assert scores["dep_las"] >= LAS_FLOOR, scores["dep_las"]


@pytest.mark.slow
def test_oracle_reproduces_every_ptb_sample_tree(data_dir, require_corpus):
    folder = data_dir / "ptb_sample_dep"
    require_corpus(folder / "wsj_0001.dp")
    system, n_cols = _system(1)
    n_trees = 0
    for path in sorted(folder.glob("wsj_*.dp")):
        for block in path.read_text(encoding="utf8").strip().split("\n\n"):
            rows = [line.split("\t") for line in block.splitlines() if line.strip()]
            gold_heads = numpy.array([int(r[2]) - 1 for r in rows], dtype=numpy.int32)
            gold_labels = numpy.where(gold_heads >= 0, 0, -1).astype(numpy.int32)
            system.set_sentence(numpy.ones((len(rows), n_cols), dtype=numpy.uint64), gold_heads, gold_labels)
            path_ = system.oracle_path()
            assert path_ is not None
            assert system.run(path_)[0].tolist() == gold_heads.tolist()
            n_trees += 1
    assert n_trees == 3914


def test_a_tree_without_tags_is_counted_as_missing_tags_not_an_error():
    """A training Doc whose reference has a tree but no tags (a dependency-only corpus beside a
    tagged one) initializes: its tags are missing, so min_feature_freq counts the tagged Docs
    alone, and training reads the tags on the predicted side. Without any tags anywhere,
    training still names the missing annotation (S009)."""
    from test_parser import TRAIN_DATA, examples, make_nlp

    nlp, parser = make_nlp({"min_feature_freq": 2})
    egs = examples(nlp)
    words, tags, heads, deps = TRAIN_DATA[0]
    untagged = Example(Doc(nlp.vocab, words=words, tags=tags), Doc(nlp.vocab, words=words, heads=heads, deps=deps))
    nlp.initialize(lambda: egs)
    counted = set(parser.model.allowed_keys.tolist())
    nlp2, parser2 = make_nlp({"min_feature_freq": 2})
    nlp2.initialize(lambda: egs + [untagged])
    assert set(parser2.model.allowed_keys.tolist()) == counted
    for _ in range(20):
        parser2.update(egs + [untagged])
    doc = parser2(Doc(nlp2.vocab, words=words, tags=tags))
    assert [t.head.i for t in doc] == heads
    nlp3, parser3 = make_nlp()
    bare = Example(Doc(nlp3.vocab, words=words), Doc(nlp3.vocab, words=words, heads=heads, deps=deps))
    nlp3.initialize(lambda: [bare])
    with pytest.raises(ValueError, match="S009"):
        parser3.update([bare])
