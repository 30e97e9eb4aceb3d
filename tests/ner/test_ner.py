"""structperc_ner through spaCy's API: training, modified averaging, I/O and bad input."""
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
from spacy import displacy
from spacy.tokens import Doc
from spacy.training import Example

import spacy_structperc  # noqa: F401
from spacy_structperc.pipeline.bio import classes_to_chunks
from spacy_structperc.pipeline.base import create_epoch_hook

REPO_ROOT = Path(__file__).resolve().parents[2]

TRAIN_DATA = [
    ("John Smith works for Acme Corp in Boston .", [(0, 2, "PER"), (4, 6, "ORG"), (7, 8, "LOC")]),
    ("Mary lives in New York City .", [(0, 1, "PER"), (3, 6, "LOC")]),
    ("Acme Corp hired Peter Jones yesterday .", [(0, 2, "ORG"), (3, 5, "PER")]),
    ("Boston and Paris are cities .", [(0, 1, "LOC"), (2, 3, "LOC")]),
]
WORDS_MODEL = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
               "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False}}


def gold_doc(vocab, text, ents):
    words = text.split()
    doc = Doc(vocab, words=words)
    doc.set_ents([spacy.tokens.Span(doc, s, e, label) for s, e, label in ents], default="outside")
    return doc


def examples_of(nlp, data=TRAIN_DATA):
    return [Example(Doc(nlp.vocab, words=t.split()), gold_doc(nlp.vocab, t, e)) for t, e in data]


def ents_of(doc):
    return [(e.start, e.end, e.label_) for e in doc.ents]


def make_nlp(**config):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner", config={"model": WORDS_MODEL, **config})
    return nlp


def train(nlp, n_iter=20, data=TRAIN_DATA):
    examples = examples_of(nlp, data)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    for epoch in range(n_iter):
        ner.start_epoch(epoch)
        nlp.update(examples, losses={})
    return nlp


@pytest.fixture(scope="module")
def trained():
    return train(make_nlp())


@pytest.mark.parametrize("n_latent", [1, 2, 4])
def test_overfits_the_training_sentences(n_latent):
    nlp = train(make_nlp(n_latent=n_latent))
    for text, ents in TRAIN_DATA:
        assert ents_of(nlp(text)) == ents


def test_label_level_and_core_latent_features_overfit_too():
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False,
                          "latent": "core", "label_level": True}}
    nlp = train(make_nlp(model=model))
    for text, ents in TRAIN_DATA:
        assert ents_of(nlp(text)) == ents


def test_leave_out_drops_the_named_templates_and_refuses_unknown_names():
    """ner_features.v1's leave_out (as parser_features.v1's): the named templates go, the rest
    keep their order; a name the set lacks is S020. A model with the smaller set still learns."""
    from spacy_structperc.ner.features import ner_features
    full = ner_features(pos=False, latent="core", label_level=True)
    names = [full[2]["name"], full[12]["name"]]
    assert ner_features(pos=False, latent="core", label_level=True, leave_out=names) == \
        [t for t in full if t["name"] not in names]
    with pytest.raises(ValueError, match=r"\[S020\].*ner_features.*'w9'"):
        ner_features(pos=False, leave_out=["w0", "w9"])
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": False,
                          "latent": "core", "label_level": True, "leave_out": names}}
    nlp = train(make_nlp(model=model))
    assert not set(names) & {t["name"] for t in nlp.get_pipe("structperc_ner").model.template_specs}
    for text, ents in TRAIN_DATA:
        assert ents_of(nlp(text)) == ents


def test_modified_averaging_resets_exactly_every_k_epochs():
    nlp = make_nlp(reset_every=3)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    hook = create_epoch_hook()
    reset_at = []
    for epoch in range(10):
        for step in range(3):          # the hook runs before every step; it acts once per epoch
            before = ner.n_resets
            if step == 0 and epoch > 0:
                weights = ner.model.weights
                weights.average()
                keys, averaged = weights.to_arrays(averaged=True, prune=False)
            hook(nlp, {"epoch": epoch, "step": epoch * 3 + step})
            if ner.n_resets > before:
                reset_at.append(epoch)
                # The current weights are now the average of all weights so far.
                keys_now, current = ner.model.weights.to_arrays(averaged=False, prune=False)
                assert numpy.array_equal(keys_now, keys)
                assert numpy.allclose(current, averaged, atol=1e-4)
            nlp.update(examples[step:step + 1], losses={})
    # Passes q = epoch + 1 = 3, 6, 9 start from the averaged weights.
    assert reset_at == [2, 5, 8]
    assert ner.n_resets == 3


def test_reset_every_zero_never_resets_and_never_warns():
    nlp = make_nlp(reset_every=0)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for epoch in range(6):
            ner.start_epoch(epoch)
            nlp.update(examples)
    assert ner.n_resets == 0


def test_training_without_the_epoch_hook_warns_once():
    nlp = make_nlp(reset_every=2)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    with pytest.warns(UserWarning, match=r"\[W003\]"):
        nlp.update(examples)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp.update(examples)


def test_partially_annotated_tokens_teach_nothing(trained):
    nlp = make_nlp(reset_every=0)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    words = "Unknown words here".split()
    unannotated = Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words))
    keys_before = ner.model.weights.to_arrays(averaged=False)[0]
    losses = ner.update([unannotated], losses={})
    assert losses["structperc_ner"] == 0 and losses["structperc_ner_updates"] == 0
    assert numpy.array_equal(ner.model.weights.to_arrays(averaged=False)[0], keys_before)
    # Half-annotated: the missing tokens are free; the known ones are scored.
    ref = Doc(nlp.vocab, words=["Boston", "is", "big"], ents=["B-LOC", "O", ""])
    classes = ner._gold_classes(Example(Doc(nlp.vocab, words=ref.text.split()), ref))
    assert classes.tolist()[2] == -1 and classes.tolist()[1] == 0


def test_misaligned_tokenization_trains_on_aligned_entities():
    nlp = make_nlp()
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    ref = gold_doc(nlp.vocab, "John Smith works in New York .", [(0, 2, "PER"), (4, 6, "LOC")])
    pred = Doc(nlp.vocab, words=["John", "Smith", "works", "in", "New", "York."])
    classes = ner._gold_classes(Example(pred, ref)).tolist()
    assert classes[:4] == [1 + 2 * ner.labels.index("PER"), 2 + 2 * ner.labels.index("PER"), 0, 0]
    assert classes[5] == -1          # 'York.' aligns with two gold tokens: unknown, not wrong


def test_unknown_gold_label_raises_naming_it(trained):
    ner = trained.get_pipe("structperc_ner")
    eg = Example(Doc(trained.vocab, words=["Rex", "barks"]),
                 gold_doc(trained.vocab, "Rex barks", [(0, 1, "ANIMAL")]))
    with pytest.raises(ValueError, match=r"\[S004\].*ANIMAL"):
        ner.update([eg])


def test_entity_types_must_be_strings():
    nlp = make_nlp()
    with pytest.raises(ValueError, match=r"\[S003\]"):
        nlp.get_pipe("structperc_ner").add_label(5)


def test_calling_before_initialize_raises():
    nlp = make_nlp()
    with pytest.raises(ValueError, match=r"\[S001\]"):
        nlp("Boston is big")


def test_bad_settings_raise():
    for config in ({"n_latent": 0}, {"reset_every": -1}, {"init_scale": 2.0}, {"order": 3}):
        with pytest.raises(ValueError, match=r"\[S0(08|12)\]"):
            make_nlp(**config)


def test_pos_features_need_tags():
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_ner")   # factory default is words only: no tags needed
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": True}}
    nlp2 = spacy.blank("en")
    nlp2.add_pipe("structperc_ner", config={"model": model})
    examples = examples_of(nlp2)
    for eg in examples:
        for t in eg.predicted:
            t.tag_ = "NNP"
    nlp2.initialize(lambda: examples)
    with pytest.raises(ValueError, match=r"\[S300\].*TAG"):
        nlp2("Boston is big")


def test_empty_and_very_long_docs(trained):
    assert ents_of(trained(Doc(trained.vocab, words=[]))) == []
    words = ("John Smith works for Acme Corp in Boston . " * 600).split()
    doc = trained(Doc(trained.vocab, words=words))
    assert len(doc) == 5400
    assert ents_of(doc)[:3] == [(0, 2, "PER"), (4, 6, "ORG"), (7, 8, "LOC")]


def test_decoded_labels_are_always_valid_bio_with_random_weights(trained):
    nlp = make_nlp(n_latent=3, reset_every=0)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("structperc_ner")
    ner.model.weights.set_noise(5.0, 1)     # huge noise: arbitrary scores for every feature seen
    nlp.update(examples)
    rng = numpy.random.default_rng(0)
    vocab_words = [w for t, _ in TRAIN_DATA for w in t.split()]
    for _ in range(30):
        words = [str(w) for w in rng.choice(vocab_words, size=int(rng.integers(1, 12)))]
        classes = ner.predict([Doc(nlp.vocab, words=words)])[0].tolist()
        for i, c in enumerate(classes):
            if c > 0 and c % 2 == 0:     # an I- class continues its own type
                assert i > 0 and classes[i - 1] in (c - 1, c)
        assert all(s < e for s, e, _ in classes_to_chunks(classes))


def _predict(nlp):
    return [ents_of(nlp(t)) for t, _ in TRAIN_DATA]


def test_overfit_save_and_reload(trained, tmp_path):
    expected = _predict(trained)
    trained.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert _predict(loaded) == expected
    assert loaded.get_pipe("structperc_ner").cfg["n_latent"] == 4
    assert list(loaded.get_pipe("structperc_ner").labels) == ["LOC", "ORG", "PER"]


def test_corrupt_model_file_raises_naming_the_component(trained, tmp_path):
    trained.to_disk(tmp_path / "nlp")
    (tmp_path / "nlp" / "structperc_ner" / "model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match=r"\[S006\].*structperc_ner"):
        spacy.load(tmp_path / "nlp")


def test_pipe_equals_call_and_pickle(trained):
    texts = [t for t, _ in TRAIN_DATA] * 3
    assert [ents_of(d) for d in trained.pipe(texts, batch_size=2)] == [ents_of(trained(t)) for t in texts]
    clone = pickle.loads(pickle.dumps(trained))
    assert _predict(clone) == _predict(trained)


def test_displacy_renders_the_entities(trained):
    html = displacy.render(trained(TRAIN_DATA[0][0]), style="ent")
    assert "Acme Corp" in html and "ORG" in html


def test_scorer_reports_ents_prf_and_per_type(trained):
    scores = trained.evaluate(examples_of(trained))
    assert scores["ents_f"] == 1.0
    assert set(scores["ents_per_type"]) == {"PER", "ORG", "LOC"}


def _tiny_conll2003() -> str:
    lines = ["-DOCSTART- -X- O O", ""]
    for text, ents in TRAIN_DATA:
        words = text.split()
        tags = ["O"] * len(words)
        for s, e, label in ents:
            for i in range(s, e):
                tags[i] = f"I-{label}"
        lines += [f"{w} NNP I-NP {t}" for w, t in zip(words, tags)] + [""]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_spacy_train_cli_with_the_conll2003_reader(tmp_path):
    (tmp_path / "train.txt").write_text(_tiny_conll2003())
    cmd = [sys.executable, "-m", "spacy", "train", str(REPO_ROOT / "configs" / "ner.cfg"),
           "--output", str(tmp_path / "out"),
           "--paths.train", str(tmp_path / "train.txt"), "--paths.dev", str(tmp_path / "train.txt"),
           "--components.ner.model.features.clusters", "false",
           # ner.cfg itself has modified averaging off (n_latent 1); on here, so that W003
           # would show if the config's epoch hook did not reach the component.
           "--components.ner.n_latent", "2", "--components.ner.reset_every", "4",
           "--training.max_epochs", "20", "--training.eval_frequency", "10"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "W003" not in result.stderr       # the epoch hook reached the component
    best = tmp_path / "out" / "model-best"
    assert srsly.read_json(best / "meta.json")["performance"]["ents_f"] == 1.0
    loaded = spacy.load(best)
    doc = Doc(loaded.vocab, words=TRAIN_DATA[1][0].split())
    for t in doc:
        t.tag_ = "NNP"
    assert ents_of(loaded(doc)) == TRAIN_DATA[1][1]


def test_a_doc_of_another_vocab_gets_its_entities(trained):
    """As for the chunker: entity labels are added to a foreign Doc's strings (was E084)."""
    from spacy.vocab import Vocab

    texts = [t for t, _ in TRAIN_DATA]
    expected = [ents_of(d) for d in trained.pipe(Doc(trained.vocab, words=t.split()) for t in texts)]
    ner = trained.get_pipe("structperc_ner")
    got = [ents_of(d) for d in ner.pipe(Doc(Vocab(), words=t.split()) for t in texts)]
    assert got == expected and any(expected)
