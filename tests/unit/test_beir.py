"""Reading a BEIR dataset (rag_core.evaluate.beir) from the tiny fixture in tests/fixtures/beir-tiny.

The fixture: 8 corpus documents (d3 has an empty title), 4 queries, and qrels/test.tsv with graded
scores (2 and 1) and zeros: q1 -> d1 (2), d2 (1); q2 -> d3, d4 (1), d1 (0); q3 -> d6 (2), d5 (1);
q4 -> d8 (0) only, so q4 is left out of the test split. qrels/dev.tsv holds q4 -> d8 (1).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from rag_core.evaluate.beir import load_beir
from rag_core.evaluate.golden import Evidence, GoldenSetError
from rag_core.records import Chunk
from rag_core.evaluate.relevance import build_qrels

BEIR_TINY = Path(__file__).parents[1] / "fixtures" / "beir-tiny"


@pytest.fixture
def beir_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture, for tests that break it."""
    return Path(shutil.copytree(BEIR_TINY, tmp_path / "beir-tiny"))


def test_corpus_entries_become_one_page_documents():
    documents, _ = load_beir(BEIR_TINY)
    assert [document.doc_id for document in documents] == [f"d{i}" for i in range(1, 9)]
    d1 = documents[0]
    assert d1.text == "Photosynthesis\n\nPlants convert light, water and carbon dioxide into glucose and oxygen."
    assert d1.n_pages == 1 and d1.page_text(1) == d1.text
    assert d1.content_hash == hashlib.sha256(d1.text.encode("utf-8")).hexdigest()
    d3 = documents[2]  # empty title: the text alone
    assert d3.text == "The mitochondrion produces most of the cell's ATP through respiration."


def test_qrels_become_document_level_evidence():
    _, queries = load_beir(BEIR_TINY)
    assert [query.id for query in queries] == ["q1", "q2", "q3"]  # q4 has only a zero score
    q1, q2, q3 = queries
    assert q1.query == "How do plants make glucose?"
    assert q1.answer is None
    assert q1.evidence == (Evidence("d1"), Evidence("d2"))  # graded 2 and 1: both relevant
    assert q2.evidence == (Evidence("d3"), Evidence("d4"))  # d1 has score 0
    assert q3.evidence == (Evidence("d6"), Evidence("d5"))
    assert all(item.page is None and item.text is None for query in queries for item in query.evidence)


def test_other_split():
    _, queries = load_beir(BEIR_TINY, split="dev")
    assert [(query.id, query.evidence) for query in queries] == [("q4", (Evidence("d8"),))]


def test_doc_qrels_from_beir_match_the_tsv():
    documents, queries = load_beir(BEIR_TINY)
    chunks = [Chunk(f"{d.doc_id}-c", d.doc_id, d.text, 0, len(d.text), 1, 1) for d in documents]
    qrels = build_qrels(queries, {d.doc_id: d for d in documents}, chunks)
    assert qrels["doc"] == {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1, "d4": 1}, "q3": {"d6": 1, "d5": 1}}
    assert qrels["page"]["q2"] == {"d3#p1": 1, "d4#p1": 1}
    assert qrels["chunk"]["q1"] == {"d1-c": 1, "d2-c": 1}


def test_missing_files_name_the_path(beir_copy):
    with pytest.raises(FileNotFoundError, match=r"qrels/train\.tsv.*available splits: dev, test"):
        load_beir(beir_copy, split="train")
    (beir_copy / "corpus.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match=r"beir-tiny/corpus\.jsonl"):
        load_beir(beir_copy)


def test_malformed_lines_name_file_and_line(beir_copy):
    queries = beir_copy / "queries.jsonl"
    queries.write_text(queries.read_text() + '{"_id": "q5", "text": \n')
    with pytest.raises(GoldenSetError, match=r"queries\.jsonl:5: malformed JSON"):
        load_beir(beir_copy)

    shutil.copy(BEIR_TINY / "queries.jsonl", queries)
    qrels = beir_copy / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q3\td7\n")
    with pytest.raises(GoldenSetError, match=r"test\.tsv:10: expected query-id<TAB>corpus-id<TAB>score"):
        load_beir(beir_copy)


def test_duplicate_corpus_id_is_an_error(beir_copy):
    corpus = beir_copy / "corpus.jsonl"
    corpus.write_text(corpus.read_text() + '{"_id": "d2", "title": "", "text": "again"}\n')
    with pytest.raises(GoldenSetError, match=r"corpus\.jsonl:9: duplicate corpus id 'd2'"):
        load_beir(beir_copy)


def test_qrels_for_unknown_documents_are_skipped_with_a_warning(beir_copy):
    qrels = beir_copy / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q3\td99\t1\nq9\td1\t1\n")
    with pytest.warns(UserWarning, match="1 queries not in queries.jsonl and 1 documents not in corpus.jsonl"):
        _, queries = load_beir(beir_copy)
    assert [query.id for query in queries] == ["q1", "q2", "q3"]
    assert queries[2].evidence == (Evidence("d6"), Evidence("d5"))
