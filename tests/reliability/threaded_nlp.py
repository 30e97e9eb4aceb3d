"""Helpers for the thread-safety tests: a small trained pipeline and a threaded run over it.

Runs as a script too (`python threaded_nlp.py N_DOCS N_THREADS`), so a test can watch a
possible crash of the process from outside: a segfault in a decoder would otherwise take the
test session down with it.
"""
import random
import sys
import threading
from typing import Callable, List, Sequence

import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

WORDS = {
    "PRP": ["I", "they", "we", "she"], "VBP": ["like", "eat", "see", "want"],
    "JJ": ["green", "blue", "big", "old"], "NNS": ["eggs", "dogs", "cats", "apples"],
    "NN": ["ham", "dog", "house", "tree"], "DT": ["the", "a", "this"], "IN": ["with", "in", "on"],
    ".": ["."], "NNP": ["London", "Paris", "Smith", "Acme"],
}
# Sentence patterns: tags, heads (index in the pattern), labels, entity spans.
PATTERNS = [
    (["PRP", "VBP", "JJ", "NNS", "."], [1, 1, 3, 1, 1], ["nsubj", "ROOT", "amod", "obj", "punct"], []),
    (["DT", "NN", "VBP", "DT", "JJ", "NN", "IN", "NNP", "."], [1, 2, 2, 5, 5, 2, 7, 2, 2],
     ["det", "nsubj", "ROOT", "det", "amod", "obj", "case", "obl", "punct"], [(7, 8, "GPE")]),
    (["NNP", "VBP", "NNS", "IN", "DT", "NN"], [1, 1, 1, 5, 5, 1],
     ["nsubj", "ROOT", "obj", "case", "det", "obl"], [(0, 1, "PERSON")]),
]


def random_sentence(rng: random.Random):
    tags, heads, deps, ents = rng.choice(PATTERNS)
    words = [rng.choice(WORDS[t]) for t in tags]
    return words, tags, heads, deps, ents


def gold_doc(vocab, sentences) -> Doc:
    """One Doc of several sentences (heads shifted into the Doc)."""
    words, tags, heads, deps, ents, starts = [], [], [], [], [], []
    for w, t, h, d, e in sentences:
        offset = len(words)
        words += w
        tags += t
        heads += [x + offset for x in h]
        deps += d
        starts += [True] + [False] * (len(w) - 1)
        ents += [(s + offset, x + offset, label) for s, x, label in e]
    doc = Doc(vocab, words=words, tags=tags, heads=heads, deps=deps, sent_starts=starts)
    doc.ents = [Span(doc, s, e, label=label) for s, e, label in ents]
    doc.spans["chunks"] = [Span(doc, s, e, label="NP") for s, e, _ in ents]
    return doc


def train_pipeline(seed: int = 0, n_train: int = 60, epochs: int = 5, parser_config=None):
    """tagger + chunker + NER + parser, trained on generated sentences (a few seconds)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger")
    nlp.add_pipe("structperc_chunker")
    nlp.add_pipe("structperc_ner", config={"reset_every": 0})
    nlp.add_pipe("structperc_parser", config={"min_label_freq": 1, "min_feature_freq": 1,
                                               **(parser_config or {})})
    return _train(nlp, seed, n_train, epochs)


def _train(nlp, seed: int, n_train: int, epochs: int, clause_keys: Sequence[str] = ()):
    """Initialize and train every component of `nlp` on generated Docs (each sentence a gold
    clause under every key of `clause_keys`)."""
    rng = random.Random(seed)
    egs = []
    for _ in range(n_train):
        gold = gold_doc(nlp.vocab, [random_sentence(rng) for _ in range(rng.randint(1, 3))])
        for key in clause_keys:
            gold.spans[key] = [Span(gold, s.start, s.end, label="S") for s in gold.sents]
        predicted = Doc(nlp.vocab, words=[t.text for t in gold], tags=[t.tag_ for t in gold])
        egs.append(Example(predicted, gold))
    nlp.initialize(lambda: egs)
    for _ in range(epochs):
        for name, pipe in nlp.pipeline:
            pipe.update(egs)
    return nlp


RERANKER = {"learner": "perceptron", "k": 4, "folds": 2, "settings": {"epochs": 3}}


def train_full_pipeline(seed: int = 0, n_train: int = 30, epochs: int = 2):
    """Every kind of saved file: tagger, chunker, NER, parser, a parser with a reranker
    ("parser_rr"), a clause identifier in primal form ("structperc_clauses") and one in dual
    form ("clauses_dual"), each sentence a gold clause."""
    nlp = spacy.blank("en")
    nlp.add_pipe("structperc_tagger")
    nlp.add_pipe("structperc_chunker")
    nlp.add_pipe("structperc_ner", config={"reset_every": 0})
    nlp.add_pipe("structperc_parser", config={"min_label_freq": 1, "min_feature_freq": 1})
    nlp.add_pipe("structperc_parser", name="parser_rr", config={
        "min_label_freq": 1, "min_feature_freq": 1, "decoder": "beam", "beam_width": 4,
        "reranker": RERANKER})
    nlp.add_pipe("structperc_clauses")
    nlp.add_pipe("structperc_clauses", name="clauses_dual", config={
        "spans_key": "clauses_dual", "model": {"form": "dual", "degree": 2}})
    return _train(nlp, seed, n_train, epochs, ("clauses", "clauses_dual"))


def annotations(doc: Doc) -> tuple:
    """Everything the four components write, as plain values."""
    return (tuple(t.tag_ for t in doc), tuple(t.head.i for t in doc), tuple(t.dep_ for t in doc),
            tuple((e.start, e.end, e.label_) for e in doc.ents),
            tuple((s.start, s.end, s.label_) for s in doc.spans.get("chunks", [])),
            tuple(bool(t.is_sent_start) for t in doc))


def random_texts(n: int, seed: int = 1, max_sents: int = 12) -> List[List[str]]:
    rng = random.Random(seed)
    return [sum((random_sentence(rng)[0] for _ in range(rng.randint(1, max_sents))), [])
            for _ in range(n)]


def run_threads(annotate: Callable[[int], tuple], n_items: int, n_threads: int) -> List[list]:
    """Every thread annotates every item (each in its own order); per thread, results by item."""
    results = [[None] * n_items for _ in range(n_threads)]
    errors: List[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def work(k):
        order = list(range(n_items))
        random.Random(k).shuffle(order)
        try:
            barrier.wait()
            for i in order:
                results[k][i] = annotate(i)
        except BaseException as e:   # reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def count_differences(expected: Sequence[tuple], results: List[list]) -> int:
    return sum(got != want for per_thread in results for got, want in zip(per_thread, expected))


def main(n_docs: int, n_threads: int) -> int:
    nlp = train_pipeline()
    texts = random_texts(n_docs)
    expected = [annotations(nlp(Doc(nlp.vocab, words=w))) for w in texts]
    results = run_threads(lambda i: annotations(nlp(Doc(nlp.vocab, words=texts[i]))), n_docs, n_threads)
    diffs = count_differences(expected, results)
    print(f"differences {diffs}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
