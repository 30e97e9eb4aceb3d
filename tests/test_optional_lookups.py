"""spacy-lookups-data is the optional extra [lookups]: needed only to initialize a component whose
features use Brown clusters or the lexicon, never to run a trained pipeline."""
import sys

import pytest
import spacy
from spacy.training import Example

import spacy_structperc  # noqa: F401

DATA = [("I like green eggs", ["PRP", "VBP", "JJ", "NNS"]), ("Eat blue ham", ["VB", "JJ", "NN"])]


def tagger_nlp(**features):
    nlp = spacy.blank("en")
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1",
             "features": {"@misc": "spacy-structperc.tagger_features.v1", **features}}
    nlp.add_pipe("structperc_tagger", name="my_tagger", config={"model": model})
    examples = [Example.from_dict(nlp.make_doc(text), {"tags": tags}) for text, tags in DATA]
    return nlp, examples


@pytest.fixture
def without_lookups_data(monkeypatch):
    """Make `import spacy_lookups_data` fail, as it does when the extra is not installed."""
    monkeypatch.setitem(sys.modules, "spacy_lookups_data", None)


@pytest.mark.parametrize("features,what,setting", [
    ({"clusters": True}, "Brown clusters", "clusters = false"),
    ({"lexicon": True}, "lemmatizer tables", "lexicon = false"),
    ({"casing": True}, "word frequencies", "casing = false"),
])
def test_missing_extra_raises_s302_naming_it(without_lookups_data, features, what, setting):
    nlp, examples = tagger_nlp(**features)
    with pytest.raises(ValueError, match=r"\[S302\] Component 'my_tagger' uses " + what) as info:
        nlp.initialize(lambda: examples)
    assert "pip install -e \".[lookups]\"" in str(info.value) and setting in str(info.value)


def test_features_without_lookups_need_no_extra(without_lookups_data):
    nlp, examples = tagger_nlp()
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    assert len(nlp("I like ham")) == 3


def test_trained_pipeline_with_clusters_loads_without_the_extra(monkeypatch, tmp_path):
    nlp, examples = tagger_nlp(clusters=True)
    nlp.initialize(lambda: examples)
    for _ in range(5):
        nlp.update(examples)
    nlp.to_disk(tmp_path / "nlp")
    monkeypatch.setitem(sys.modules, "spacy_lookups_data", None)
    loaded = spacy.load(tmp_path / "nlp")
    assert [t.tag_ for t in loaded("I like green eggs")] == ["PRP", "VBP", "JJ", "NNS"]


def test_lookups_data_is_an_extra_not_a_dependency():
    tomllib = pytest.importorskip("tomllib")
    from pathlib import Path
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("spacy-lookups-data") for d in project["dependencies"])
    assert any(d.startswith("spacy-lookups-data") for d in project["optional-dependencies"]["lookups"])
    assert any(d.startswith("spacy-lookups-data") for d in project["optional-dependencies"]["test"])
