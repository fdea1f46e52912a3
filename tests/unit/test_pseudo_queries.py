"""Pseudo-queries from documents alone (rag_core/finetune/pseudo_queries.py): the exact pairs of a
known PDF read as ingest reads it, BEIR-style titles, headings shared by several documents, table rows,
seeded choices and the sample size; the split by document (rag_core/finetune/self_supervised.py)."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from rag_core.config import ConfigError
from rag_core.finetune.data import TrainingQuery
from rag_core.finetune.pseudo_queries import PseudoQueryRecipe, build_pseudo_queries, document_headings
from rag_core.finetune.self_supervised import split_by_document
from rag_core.ingest.chunkers.recursive import chunk_corpus
from rag_core.ingest.files import read_documents
from rag_core.records import Document

SENTENCE = "Inspectors check every blade with dye penetrant on its leading edge."


def _known_pdf(root: Path) -> Path:
    """One page: a heading in a large font, then two short paragraphs."""
    root.mkdir(parents=True, exist_ok=True)
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((56, 80), "Turbine Blade Inspection", fontsize=18)
    page.insert_textbox(pymupdf.Rect(56, 100, 540, 140), f"Blades crack. {SENTENCE}", fontsize=10)
    page.insert_textbox(pymupdf.Rect(56, 150, 540, 190), "Cracked blades go. Spares wait north.", fontsize=10)
    pdf.save(root / "manual.pdf")
    return root


def _doc(doc_id: str, text: str, headings: tuple[tuple[int, str], ...] = ()) -> Document:
    return Document(doc_id, text, (0,), "hash-" + doc_id, headings=headings)


def test_the_pairs_of_a_known_pdf(tmp_path):
    documents = read_documents(_known_pdf(tmp_path / "docs"), workers=1).documents
    [chunk] = chunk_corpus(documents, 256, 0)
    assert documents[0].headings == ((0, "Turbine Blade Inspection"),)  # what extraction found, as ingest reads it
    recipe = PseudoQueryRecipe(keep_share=0.0, min_query_words=8)  # one sentence is long enough to be a query
    found = build_pseudo_queries(documents, [chunk], recipe)
    assert [(q.id, q.kind, q.text, q.positive, q.chunks) for q in found] == [
        ("manual.pdf#heading-1", "heading", "Turbine Blade Inspection",
         f"Blades crack. {SENTENCE} Cracked blades go. Spares wait north.", (chunk.id,)),
        ("manual.pdf#ict-1", "ict", SENTENCE,
         "Turbine Blade Inspection Blades crack. Cracked blades go. Spares wait north.", (chunk.id,)),
    ]
    kept = build_pseudo_queries(documents, [chunk], PseudoQueryRecipe(keep_share=1.0, min_query_words=8))
    assert kept[1].positive == " ".join(chunk.text.split())  # ICT's "keep the sentence" case
    assert build_pseudo_queries(documents, [chunk], PseudoQueryRecipe(kinds=("heading",)))[0] == found[0]


def test_a_lone_short_first_line_is_a_title_and_shared_headings_are_left_out():
    beir = _doc("d1", "Statins lower LDL cholesterol.\n\nIn a trial of 400 adults statins lowered LDL by a third.")
    assert document_headings(beir) == [(0, "Statins lower LDL cholesterol.")]
    assert document_headings(_doc("d2", "One long paragraph only, with no title above it.")) == []
    body = "Results\n\nThe pump ran for six hundred hours without a fault in the trial."
    generic = [_doc("a", body, ((0, "Results"),)), _doc("b", body.replace("pump", "fan"), ((0, "Results"),))]
    found = build_pseudo_queries(generic, chunk_corpus(generic, 256, 0), PseudoQueryRecipe(kinds=("heading",)))
    assert found == []  # "Results" names a section of both documents: no passage to find
    [title] = build_pseudo_queries([beir], chunk_corpus([beir], 256, 0), PseudoQueryRecipe(kinds=("heading",)))
    assert (title.text, title.positive) == ("Statins lower LDL cholesterol.",
                                            "In a trial of 400 adults statins lowered LDL by a third.")


def test_table_rows_are_their_label_with_the_column_headers():
    text = ("Quarterly revenue by segment, in millions.\n\n| Segment | 2023 | 2022 |\n| --- | --- | --- |\n"
            "| Cloud services | 1,234 | 1,100 |\n| 2021 | 5 | 6 |\n")
    document = _doc("report.pdf", text)
    chunks = chunk_corpus([document], 256, 0)
    [row] = build_pseudo_queries([document], chunks, PseudoQueryRecipe(kinds=("table_row",)))
    assert (row.text, row.positive, row.chunks) == ("Cloud services 2023 2022", " ".join(text.split()),
                                                    (chunks[0].id,))  # the numeric label "2021" is no query


def test_choices_are_seeded_and_the_sample_is_capped():
    sentences = " ".join(f"Sentence number {i} talks about the valve and its seal." for i in range(8))
    documents = [_doc(f"d{n}", f"Title of manual {n}\n\n{sentences}") for n in range(6)]
    chunks = chunk_corpus(documents, 256, 0)
    first = build_pseudo_queries(documents, chunks, PseudoQueryRecipe(seed=3, kinds=("ict",)))
    assert first == build_pseudo_queries(documents, chunks, PseudoQueryRecipe(seed=3, kinds=("ict",)))
    assert len(first) == 6 and {q.text for q in first} <= {s.strip() + "." for s in sentences.split(".") if s.strip()}
    others = [build_pseudo_queries(documents, chunks, PseudoQueryRecipe(seed=s, kinds=("ict",))) for s in range(4, 9)]
    assert any([q.text for q in other] != [q.text for q in first] for other in others)
    sample = build_pseudo_queries(documents, chunks, PseudoQueryRecipe(max_queries=5))
    everything = build_pseudo_queries(documents, chunks, PseudoQueryRecipe())
    assert len(everything) == 12 and len(sample) == 5 and set(sample) <= set(everything)


def test_the_validation_split_keeps_each_document_on_one_side():
    documents = [_doc(f"d{n}", f"Manual {n} title\n\nThe seal of valve {n} wears out. Replace it every year.")
                 for n in range(20)]
    pseudo = build_pseudo_queries(documents, chunk_corpus(documents, 256, 0), PseudoQueryRecipe(min_query_words=4))
    queries = [TrainingQuery(q.id, q.text, (q.id + "/positive",), ()) for q in pseudo]
    train, validation = split_by_document(queries, pseudo, 0.25, 0, 100)
    doc_of = {q.id: q.doc_id for q in pseudo}
    assert len(train) + len(validation) == len(queries) == 40
    assert {doc_of[q.id] for q in train}.isdisjoint({doc_of[q.id] for q in validation})
    assert len({doc_of[q.id] for q in validation}) == 5  # round(0.25 * 20) documents validate
    _, capped = split_by_document(queries, pseudo, 0.25, 0, 3)
    assert len(capped) == 3 and set(capped) <= set(validation)


def test_a_recipe_with_unknown_kinds_is_refused():
    with pytest.raises(ConfigError, match="heading, ict, table_row"):
        PseudoQueryRecipe(kinds=("questions",))
    with pytest.raises(ConfigError, match="keep_share"):
        PseudoQueryRecipe(keep_share=1.5)
