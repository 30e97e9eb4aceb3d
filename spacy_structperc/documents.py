"""A corpus of multi-sentence documents with gold tokens, for training sentence segmentation.

spaCy's `Corpus` either splits every Doc into its sentences (`gold_preproc = true`: gold tokens,
but the model never sees where a sentence ends) or re-tokenizes the text (`gold_preproc = false`:
boundaries, but tokens that do not align with the gold ones teach the parser nothing). A
parser that must find sentence boundaries in raw text needs both: Docs of several sentences, with
the gold tokens and no sentence starts on the predicted side. This reader gives that, merging
`sentences_per_doc` consecutive sentences (e.g. of UD English EWT converted one sentence per
Doc) into one Doc.
"""
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Union

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry

from .errors import Errors
from .jackknife import stored_tags
from .readers import read_docbin

DOCUMENTS_CORPUS = "spacy-structperc.documents_corpus.v1"


def merge_sentences(docs: Iterable[Doc], sentences_per_doc: int) -> Iterator[Doc]:
    """Consecutive Docs merged `sentences_per_doc` sentences at a time (0: as they are).

    A merged Doc keeps every annotation of its parts, with a sentence start at each part's
    first token (Doc.from_docs), and a space between parts.
    """
    if sentences_per_doc <= 0:
        yield from docs
        return
    group: List[Doc] = []
    n_sents = 0
    for doc in docs:
        if not len(doc):
            continue
        group.append(doc)
        has_sents = doc.has_annotation("SENT_START") or doc.has_annotation("DEP")
        n_sents += sum(1 for _ in doc.sents) if has_sents else 1
        if n_sents >= sentences_per_doc:
            yield _merged(group)
            group, n_sents = [], 0
    if group:
        yield _merged(group)


def _merged(group: List[Doc]) -> Doc:
    if len(group) == 1:
        return group[0]
    merged = Doc.from_docs(group, ensure_whitespace=True)
    if not merged.has_annotation("DEP"):
        # Parsed parts are sentences through their heads; others need their start marked.
        start = 0
        for doc in group:
            merged[start].is_sent_start = True
            start += len(doc)
    return merged


def predicted_doc(reference: Doc, tags: Optional[List[str]] = None) -> Doc:
    """The words and spaces of `reference`, nothing else (but `tags`, when given): what a
    component sees at the start of a pipeline (or behind a tagger), with the gold tokenization."""
    return Doc(reference.vocab, words=[t.text for t in reference],
               spaces=[bool(t.whitespace_) for t in reference], tags=tags)


class DocumentsCorpus:
    """Examples of multi-sentence documents with gold tokens (see the module docstring)."""

    def __init__(self, path: Optional[Union[str, Path]], *, sentences_per_doc: int = 0, limit: int = 0,
                 gold_preproc: bool = True, predicted_tags: bool = False):
        if path is None:
            raise ValueError(Errors.S033.format(reader=DOCUMENTS_CORPUS))
        for setting, value in (("sentences_per_doc", sentences_per_doc), ("limit", limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(Errors.S036.format(setting=setting, reader=DOCUMENTS_CORPUS, value=value))
        self.path = Path(path)
        if not self.path.exists():
            raise ValueError(Errors.S034.format(path=self.path, reader=DOCUMENTS_CORPUS))
        self.sentences_per_doc = sentences_per_doc
        self.limit = limit
        self.gold_preproc = gold_preproc
        if predicted_tags and (sentences_per_doc or not gold_preproc):
            raise ValueError(Errors.S433.format(reader=DOCUMENTS_CORPUS))
        self.predicted_tags = predicted_tags

    def __call__(self, nlp: Language) -> Iterator[Example]:
        docs = read_docbin(nlp.vocab, self.path, DOCUMENTS_CORPUS)   # S034, S210, S035 as every reader
        for i, reference in enumerate(merge_sentences(docs, self.sentences_per_doc)):
            if self.limit and i >= self.limit:
                break
            if self.predicted_tags:
                yield Example(predicted_doc(reference, stored_tags(reference, i, self.path)), reference)
            elif self.gold_preproc or reference.has_unknown_spaces:
                yield Example(predicted_doc(reference), reference)
            else:
                yield Example(nlp.make_doc(reference.text), reference)


@registry.readers(DOCUMENTS_CORPUS)
def create_documents_corpus(path: Optional[Union[str, Path]], sentences_per_doc: int = 0,
                            limit: int = 0, gold_preproc: bool = True, predicted_tags: bool = False
                            ) -> Callable[[Language], Iterable[Example]]:
    """Read a .spacy file into Examples of whole documents, never split into sentences.

    sentences_per_doc: merge that many consecutive sentences (Docs) into one Doc; 0 keeps the
    Docs as stored. limit: stop after that many Docs (0: all). gold_preproc: true gives the
    predicted Docs the gold tokens; false tokenizes the text with the pipeline's tokenizer, as
    spacy.Corpus.v1 does (the Docs are still not split into sentences). predicted_tags: the
    predicted Docs carry the tags stored with each Doc by `python -m spacy_structperc jackknife`
    (spacy_structperc/jackknife.py), for a component trained behind a tagger that is not run
    on the training text (S037 for a Doc without them); the gold annotation is the reference's.
    """
    return DocumentsCorpus(path, sentences_per_doc=sentences_per_doc, limit=limit,
                           gold_preproc=gold_preproc, predicted_tags=predicted_tags)
