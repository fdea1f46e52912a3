"""The demo's three sample answers are true: as the demo runs them offline (default settings, no
cross-encoder), each answer's first three passages hold the golden evidence of its question."""

from __future__ import annotations

import pytest

from rag_core.config import load_config
from rag_core.ingest.corpus import DocumentStore
from rag_core.demo import SAMPLE_QUESTIONS
from rag_core.evaluate.golden import load_golden
from rag_core.paths import SAMPLE_GOLDEN_FILE
from rag_core.evaluate.relevance import build_qrels
from rag_core.service import answer_query

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("question", SAMPLE_QUESTIONS)
def test_each_sample_answer_cites_its_evidence_in_the_first_three_passages(question, sample_store, monkeypatch):
    monkeypatch.delenv("RAG_RERANK_MODEL")  # the demo's settings: the default cross-encoder, unavailable offline
    config = load_config()
    result = answer_query(question, sample_store, config, use_llm=False)
    assert "rerank" not in result.retrieval.stages  # no stand-in re-ranked these passages
    [golden] = [query for query in load_golden(SAMPLE_GOLDEN_FILE) if query.query == question]
    documents = DocumentStore(sample_store).corpus().by_id
    relevant = set(build_qrels([golden], documents, [hit.chunk for hit in result.retrieval.ranking])["chunk"][golden.id])
    top3 = [hit.chunk.id for hit in result.retrieval.hits[:3]]
    assert relevant & set(top3), f"{question!r}: none of {top3} holds the evidence"
    assert result.answer.mode == "extractive" and top3[0] in {hit.chunk.id for hit in result.retrieval.hits}
