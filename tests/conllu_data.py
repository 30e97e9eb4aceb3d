"""Reading UD CoNLL-U files for the data-backed tests (tagger, parser)."""
from spacy.training.converters import conllu_to_docs


def read_conllu(path, limit=None):
    """Docs of one sentence each, via spaCy's CoNLL-U converter, reading at most `limit` sentences."""
    blocks, current = [], []
    with open(path, encoding="utf8") as f:
        for line in f:
            current.append(line)
            if not line.strip():
                if any(l.strip() for l in current):
                    blocks.append("".join(current))
                current = []
                if limit and len(blocks) >= limit:
                    break
    if any(l.strip() for l in current):
        blocks.append("".join(current))
    return list(conllu_to_docs("".join(blocks), n_sents=1, no_print=True))
