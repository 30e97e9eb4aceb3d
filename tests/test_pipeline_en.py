"""The English pipeline of configs/pipeline_en.cfg, end to end: components trained on tiny slices
of their own corpora, assembled with the real config, saved, loaded, and fed raw text. (Packaging
it, with the plugin's own wheel, into a fresh virtual environment: tests/test_project_workflow.py,
through the project's own workflow.)"""
import re
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Span
from spacy.util import load_config, load_model_from_config, registry

import spacy_structperc  # noqa: F401
from spacy_structperc.documents import DOCUMENTS_CORPUS

REPO_ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "I went home. Then I slept.",
    "Apple is looking at buying a U.K. startup for $1 billion, the company said in London on Monday.",
    "The quick brown fox jumped over the lazy dog.",
    "",
]
EPOCHS = 3
# The parts save their weights in float32 (the configs' float16 rounds a few scores), so a saved
# part predicts exactly as the one in memory and the assembled pipeline must equal the parts.
EXACT = {"model": {"precision": "float32"}}
pytestmark = pytest.mark.slow   # trains four components (about 15 s)


def train(nlp, examples, epochs=EPOCHS):
    nlp.initialize(lambda: examples)
    for epoch in range(epochs):
        for _, pipe in nlp.pipeline:
            if hasattr(pipe, "start_epoch"):
                pipe.start_epoch(epoch)
        nlp.update(examples)
    return nlp


def tagger_parser(data_dir, tmp_path):
    from spacy.tokens import DocBin

    from conllu_data import read_conllu

    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger", name="tagger", config=EXACT)
    nlp.add_pipe("structperc_parser", name="parser", config=EXACT)
    path = tmp_path / "ewt.spacy"
    DocBin(docs=read_conllu(data_dir / "ud_en_ewt" / "en_ewt-ud-train.conllu", limit=300)).to_disk(path)
    return train(nlp, list(registry.readers.get(DOCUMENTS_CORPUS)(path, sentences_per_doc=10)(nlp)))


def pos(data_dir, tagger_parser_nlp, tmp_path):
    """configs/pos.cfg in miniature: a universal POS tagger that reads the fine tags of the
    tagger + parser pipeline's tagger (sourced). It trains on that tagger's own tags of its
    training text instead of jackknifed ones (tests/pipeline/test_jackknife.py): what is tested
    here is the assembly."""
    from spacy.tokens import DocBin

    from conllu_data import read_conllu

    path = tmp_path / "ewt_sentences.spacy"
    DocBin(docs=read_conllu(data_dir / "ud_en_ewt" / "en_ewt-ud-train.conllu", limit=300)).to_disk(path)
    nlp = spacy.blank("en", vocab=tagger_parser_nlp.vocab)
    nlp.add_pipe("tagger", source=tagger_parser_nlp)
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "precision": "float32",
             "features": {"@misc": "spacy-structperc.tagger_features.v1", "tags": 2}}
    upos = nlp.add_pipe("structperc_tagger", name="upos", config={"attr": "pos", "model": model})
    tagger = nlp.get_pipe("tagger")
    examples = list(spacy.training.Corpus(path, gold_preproc=True)(nlp))
    for eg in examples:
        tagger(eg.predicted)
    upos.initialize(lambda: examples, nlp=nlp)
    for _ in range(EPOCHS):
        upos.update(examples)
    return nlp


def chunker(data_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_chunker", name="chunker", config=EXACT)
    reader = registry.readers.get("spacy-structperc.conll2000_reader.v1")(
        data_dir / "conll2000" / "train.txt", part="all", limit=300)
    return train(nlp, list(reader(nlp)))


def clauses(data_dir, chunker_nlp):
    """The clause identifier on ptb_clauses, with the file's tags and the trained chunker's chunks
    on its input (as configs/clauses.cfg trains it behind a tagger and a sourced chunker)."""
    nlp = spacy.blank("en", vocab=chunker_nlp.vocab)   # the chunker writes labels of its vocab
    nlp.add_pipe("structperc_clauses", name="clauses")
    reader = registry.readers.get("spacy-structperc.conll2001_reader.v1")(
        data_dir / "ptb_clauses" / "train.txt", pos=True, chunks=False, limit=300)
    examples = list(reader(nlp))
    chunker_pipe = chunker_nlp.get_pipe("chunker")
    for eg in examples:
        chunker_pipe(eg.predicted)
    return train(nlp, examples)


def ner(data_dir):
    nlp = spacy.blank("en")
    model = {"@architectures": "spacy-structperc.AveragedPerceptron.v1", "precision": "float32",
             "features": {"@misc": "spacy-structperc.ner_features.v1", "pos": True}}
    nlp.add_pipe("structperc_ner", name="ner", config={"model": model})
    reader = registry.readers.get("spacy-structperc.conll2003_reader.v1")(
        data_dir / "conll2003" / "eng.train", limit=300)
    return train(nlp, list(reader(nlp)))


@pytest.fixture(scope="module")
def parts(data_dir, require_corpus, tmp_path_factory):
    """The four trained pipelines, in memory: what the assembled pipeline is built from."""
    require_corpus(data_dir / "conll2000" / "train.txt")
    require_corpus(data_dir / "conll2003" / "eng.train")
    require_corpus(data_dir / "ptb_clauses" / "train.txt")
    chunker_nlp = chunker(data_dir)
    tagger_parser_nlp = tagger_parser(data_dir, tmp_path_factory.mktemp("ewt"))
    return {"tagger_parser": tagger_parser_nlp, "pos": pos(data_dir, tagger_parser_nlp, tmp_path_factory.mktemp("pos")), "chunker": chunker_nlp,
            "clauses": clauses(data_dir, chunker_nlp), "ner": ner(data_dir)}


@pytest.fixture(scope="module")
def assembled_dir(parts, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline_en")
    overrides = {}
    for name, nlp in parts.items():
        nlp.to_disk(tmp / name)
        overrides[f"paths.{name}"] = str(tmp / name)
    # What `spacy assemble configs/pipeline_en.cfg ...` does.
    config = load_config(REPO_ROOT / "configs" / "pipeline_en.cfg", overrides=overrides, interpolate=False)
    nlp = load_model_from_config(config, auto_fill=True)
    nlp.to_disk(tmp / "assembled")
    return tmp / "assembled"


@pytest.fixture(scope="module")
def pipeline(assembled_dir):
    return spacy.load(assembled_dir)


def test_assembled_pipeline_has_every_component_in_order(pipeline):
    assert pipeline.pipe_names == ["tagger", "upos", "parser", "chunker", "clauses", "ner"]
    assert pipeline.analyze_pipes()["problems"] == {name: [] for name in pipeline.pipe_names}
    assert set(pipeline.get_pipe("ner").labels) == {"PER", "ORG", "LOC", "MISC"}


def annotations(doc):
    """Everything the six components write: per token, then chunks, clauses and entities."""
    return ([(t.text, t.tag_, t.pos_, t.head.i, t.dep_, t.is_sent_start, t.ent_iob_, t.ent_type_) for t in doc],
            [(s.start, s.end, s.label_) for s in doc.spans.get("chunks", [])],
            [(s.start, s.end, s.label_) for s in doc.spans.get("clauses", [])],
            [(e.start, e.end, e.label_) for e in doc.ents])


def run_parts(parts, text, preset=()):
    """The trained pipelines one after another, each fed the previous one's output: the tagger
    and parser pipeline on the text, the universal POS tagger's pipe after it (which overwrites
    the fine tagger's token.pos_), then the chunker, clause and NER pipes; `preset` entities
    (start, end, label) are put on the Doc before the NER."""
    doc = parts["tagger_parser"](text)
    doc = parts["pos"].get_pipe("upos")(doc)
    for name in ("chunker", "clauses"):
        doc = parts[name].get_pipe(name)(doc)
    doc.ents = [Span(doc, s, e, label=label) for s, e, label in preset]
    return parts["ner"].get_pipe("ner")(doc)


@pytest.mark.parametrize("text", TEXTS)
def test_raw_text_gets_every_annotation(pipeline, parts, text):
    """Assembling (sourcing each component into one config, saving, loading) loses and changes
    nothing: the pipeline annotates a raw text exactly as its trained parts do, run in turn."""
    doc = pipeline(text)
    assert annotations(doc) == annotations(run_parts(parts, text))
    if not text:
        assert len(doc) == 0
        return
    # ... and the parts do annotate: every layer is there, so the equality above is not vacuous.
    for attr in ("TAG", "POS", "DEP", "SENT_START", "ENT_IOB"):
        assert doc.has_annotation(attr), attr
    assert all(t.tag_ and t.pos_ and t.dep_ for t in doc)
    assert sum(1 for t in doc if t.dep_ == "ROOT") == len(list(doc.sents))
    assert len(doc.spans["chunks"]) > 0 and len(doc.spans["clauses"]) > 0


def test_ewt_dev_texts_get_what_the_parts_give(pipeline, parts, data_dir):
    """The same on 100 raw texts of EWT dev (about 0.5 s), through nlp.pipe: the few TEXTS above
    are too easy to show a lost detail (the chunker's Brown clusters dropped at loading change
    no chunk of theirs, but those of most of these texts)."""
    conllu = (data_dir / "ud_en_ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf8")
    texts = re.findall(r"^# text = (.*)$", conllu, flags=re.M)[:100]
    assert len(texts) == 100
    for text, doc in zip(texts, pipeline.pipe(texts)):
        assert annotations(doc) == annotations(run_parts(parts, text)), text


def test_pipe_matches_call_and_keeps_preset_entities(pipeline, parts, assembled_dir):
    """nlp.pipe equals nlp(); and an entity already on the Doc (here from an entity_ruler put
    before "ner" in the loaded pipeline) is kept, through both, with every other layer as the
    parts give it and the NER's own entities around it."""
    texts = [t for t in TEXTS if t] + ["Peter Jones of the Boston Globe flew to London on Monday."]
    for text, doc in zip(texts, pipeline.pipe(texts, batch_size=2)):
        assert annotations(doc) == annotations(pipeline(text))
    ruled = spacy.load(assembled_dir)
    ruler = ruled.add_pipe("entity_ruler", before="ner")
    ruler.add_patterns([{"label": "ORG", "pattern": "Boston Globe"}, {"label": "PRODUCT", "pattern": "Apple"}])
    own = 0
    for text, piped in zip(texts, ruled.pipe(texts, batch_size=2)):
        one = ruled(text)
        assert annotations(piped) == annotations(one)
        # The preset entities, by hand: "Apple" (a label this NER lacks) and "Boston Globe".
        preset = {"Apple": (0, 1, "PRODUCT"), "Boston Globe": (4, 6, "ORG")}
        kept = [span for name, span in preset.items() if name in text]
        assert set(kept) <= set(annotations(one)[3]), annotations(one)[3]
        # The rest as the parts give it, with the same entities set on the Doc before their NER.
        assert annotations(one) == annotations(run_parts(parts, text, kept))
        own += len(set(annotations(one)[3]) - set(kept))
    assert any("Boston Globe" in t for t in texts) and any("Apple" in t for t in texts)
    assert own > 0   # the NER still finds entities of its own next to the preset ones

