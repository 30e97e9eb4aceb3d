"""DocBin writing and reading without srsly's per-Doc codec lookups (distributed/_docbin.py)."""


def test_add_docs_fills_a_docbin_as_docbin_add_does():
    """The annotate writer's bulk add gives the bytes DocBin.add gives (strings, spans, cats)."""
    import spacy
    from spacy.tokens import DocBin, Span

    from spacy_structperc.distributed._docbin import add_docs, get_docs, set_user_data

    nlp = spacy.blank("en")
    docs = [nlp(f"Ms. Smith saw {i} red birds in Paris .") for i in range(30)]
    for i, doc in enumerate(docs):
        doc[1].tag_, doc[2].lemma_, doc[2].dep_ = "NNP", "see", "ROOT"
        doc.ents = [Span(doc, 7, 8, label="GPE")]
        doc.spans["sc"] = [Span(doc, 0, 2, label=f"PERSON{i % 3}")]
        doc.cats = {"news": float(i % 2)}
        doc.user_data["line"] = i
    slow = DocBin(store_user_data=True)
    for doc in docs:
        slow.add(doc)
    fast = DocBin()
    add_docs(fast, docs)
    set_user_data(fast, [dict(d.user_data) for d in docs])
    assert fast.to_bytes() == slow.to_bytes()
    back = list(get_docs(DocBin().from_bytes(fast.to_bytes()), nlp.vocab))
    assert [d.user_data["line"] for d in back] == list(range(30))
    assert back[4].spans["sc"][0].label_ == "PERSON1" and back[4][2].lemma_ == "see"


def test_docbin_bytes_at_a_fast_level_hold_the_message_to_bytes_packs():
    import zlib

    import spacy
    from spacy.tokens import DocBin, Span

    from spacy_structperc.distributed._docbin import add_docs, docbin_bytes, get_docs, set_user_data

    nlp = spacy.blank("en")
    docs = [nlp(f"Ms. Smith saw {i} red birds in Paris .") for i in range(40)]
    for i, doc in enumerate(docs):
        doc[1].tag_, doc[2].dep_ = "NNP", "ROOT"
        doc.ents = [Span(doc, 7, 8, label="GPE")]
        doc.user_data["line"] = i
    db = DocBin()
    add_docs(db, docs)
    set_user_data(db, [dict(d.user_data) for d in docs])
    fast = docbin_bytes(db, level=1)
    assert zlib.decompress(fast) == zlib.decompress(db.to_bytes())
    assert fast != db.to_bytes()          # another level, the same message
    back = list(get_docs(DocBin().from_bytes(fast), nlp.vocab))
    assert [d.user_data["line"] for d in back] == list(range(40))
    assert [t.tag_ for t in back[7]] == [t.tag_ for t in docs[7]] and back[7].ents[0].label_ == "GPE"
    empty = DocBin()
    assert zlib.decompress(docbin_bytes(empty)) == zlib.decompress(empty.to_bytes())
