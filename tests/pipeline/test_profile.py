"""The per-stage profile of prediction (spacy_structperc.profile) annotates as nlp.pipe does."""
import sys
from pathlib import Path

from spacy.tokens import Doc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from threaded_nlp import annotations, random_texts, train_pipeline  # noqa: E402

from spacy_structperc.profile import STAGES, predict_stages  # noqa: E402


def test_predict_stages_times_every_stage_and_annotates_as_nlp_pipe():
    nlp = train_pipeline(n_train=20, epochs=1)
    texts = random_texts(30, seed=2)
    expected = [annotations(d) for d in nlp.pipe(Doc(nlp.vocab, words=w) for w in texts)]
    docs = [Doc(nlp.vocab, words=w) for w in texts]
    stages = predict_stages(nlp, docs, batch_size=7)
    assert [annotations(d) for d in docs] == expected
    assert list(stages) == nlp.pipe_names
    for name, times in stages.items():
        assert set(times) == set(STAGES) | {"total"}
        assert all(t > 0 for t in times.values())
        assert abs(sum(times[s] for s in STAGES) - times["total"]) < 1e-9
    raw = predict_stages(nlp, [" ".join(w) for w in texts[:3]])
    assert list(raw) == ["tokenizer"] + nlp.pipe_names
