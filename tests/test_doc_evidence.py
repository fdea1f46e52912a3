"""Soft document evidence (``doc_evidence``, issue 17 item 1) and the document names it ranks by: initials,
abbreviations written in mixed case, and the form and period a filing states on its first page."""

from __future__ import annotations

import pytest
from conftest import run_cli
from pdf_factory import write_pdf

from rag_core.config import ConfigError, RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents
from rag_core.records import Document, ScoredId
from rag_core.retrieve.doc_evidence import DocumentPrior
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.routing import capitals, document_name, filing_facts, initials, routing_query

BM25 = dict(mode="bm25", rerank_depth=0, chunk_size=40, overlap=5)


def test_initials_and_mixed_case_abbreviations_meet():
    assert initials("JOHNSON_JOHNSON_2022Q4_EARNINGS") == ["jj"]
    assert initials("American Express Co") == ["ae"]
    assert initials("Advanced Micro Devices Inc 2021") == ["am", "amd"]
    assert initials("ADOBE_2015_10K") == []  # one word: no initials
    assert capitals("Was JnJ or AmEx or AMD or Adobe") == ["JJ", "AE"]  # all capitals or one: left as written
    assert "jj" in routing_query("JnJ revenue").split()


def test_a_filing_states_its_form_and_period_on_its_first_page():
    quarterly = Document.from_pages("x.pdf", ["UNITED STATES SECURITIES AND EXCHANGE COMMISSION FORM 10-Q\n"
                                              "For the quarterly period ended\nJuly 2, 2023", "Balance sheet"], "h")
    assert filing_facts(quarterly) == ["10-Q", "quarterly report", "2023", "FY2023", "Q3", "quarter", "quarterly"]
    annual = Document.from_pages("y.pdf", ["Form 10-K. For the fiscal year ended December 31, 2022"], "h")
    assert filing_facts(annual) == ["10-K", "annual report", "2022", "FY2022", "fiscal year", "annual"]
    late = Document.from_pages("z.pdf", ["Cover", "Contents", "FORM 10-K for the year ended May 1, 2020"], "h")
    assert filing_facts(late) == []  # only the first two pages are read
    name = document_name(Document.from_pages("johnson_johnson_2022q4.pdf", ["FORM 8-K"], "h"))
    assert name.split()[-4:] == ["jj", "8-K", "current", "report"]


def test_the_prior_reorders_by_document_rank_with_weighted_rrf():
    config = RagConfig(doc_evidence="prior", doc_evidence_weight=2.0, rrf_k=60)
    fused = [ScoredId("a1", 0.9), ScoredId("b1", 0.8), ScoredId("a2", 0.7)]
    combined = DocumentPrior("prior", config).combine(fused, {"a1": "A", "a2": "A", "b1": "B"},
                                                      [ScoredId("B", 1.0), ScoredId("A", 0.5)])
    # lists [a1, b1, a2] (weight 1) and by document [b1, a1, a2] (weight 2)
    expected = {"a1": 1 / 61 + 2 / 62, "b1": 1 / 62 + 2 / 61, "a2": 1 / 63 + 2 / 63}
    assert [hit.id for hit in combined] == ["b1", "a1", "a2"]
    assert all(hit.score == pytest.approx(expected[hit.id]) for hit in combined)
    with pytest.raises(ConfigError, match="doc_evidence is the soft alternative to route_docs"):
        RagConfig(doc_evidence="prior", route_docs=1)
    with pytest.raises(ConfigError, match="doc_evidence must be one of none, prior, search"):
        RagConfig(doc_evidence="hard")


def _filings(folder):
    write_pdf(folder / "johnson_johnson_2022q4_earnings.pdf",
              ["FORM 8-K. Johnson & Johnson reports results for the quarter.",
               "Pharmaceutical sales were 13 billion dollars."])
    write_pdf(folder / "acme_2022_10k.pdf",
              ["FORM 10-K. For the fiscal year ended December 31, 2022. Acme.",
               "Pharmaceutical sales: pharmaceutical sales were 9 billion dollars, sales of pharmaceutical goods."])
    return Corpus.of(read_documents(folder).documents)


def test_document_evidence_costs_a_wrong_document_rank_not_recall(tmp_path):
    corpus = _filings(tmp_path / "docs")
    question = "What were JnJ pharmaceutical sales?"
    plain = Pipeline(RagConfig(**BM25), corpus, tmp_path / "store").retrieve(question)
    assert plain.hits[0].chunk.doc_id == "acme_2022_10k.pdf"  # more matching words
    hard = Pipeline(RagConfig(route_docs=1, **BM25), corpus, tmp_path / "store").retrieve(question)
    assert {hit.chunk.doc_id for hit in hard.hits} == {"johnson_johnson_2022q4_earnings.pdf"}  # Acme is gone
    for evidence in ("prior", "search"):
        soft = Pipeline(RagConfig(doc_evidence=evidence, doc_evidence_weight=2.0, doc_evidence_docs=1, **BM25), corpus,
                        tmp_path / "store").retrieve(question)
        assert soft.hits[0].chunk.doc_id == "johnson_johnson_2022q4_earnings.pdf"  # "JnJ" ~ the initials "jj"
        assert "acme_2022_10k.pdf" in {hit.chunk.doc_id for hit in soft.hits}  # ranked lower, still there
        assert soft.routed[0].id == "johnson_johnson_2022q4_earnings.pdf" and "doc_evidence" in soft.latency_ms
    # A question naming no document (route_when named) gets no prior: the plain ranking.
    unnamed = Pipeline(RagConfig(doc_evidence="prior", **BM25), corpus, tmp_path / "store").retrieve("pharmaceutical sales")
    assert unnamed.routed == [] and [hit.chunk.id for hit in unnamed.hits] == [
        hit.chunk.id for hit in Pipeline(RagConfig(**BM25), corpus, tmp_path / "store").retrieve("pharmaceutical sales").hits]


def test_explain_shows_the_document_scores(tmp_path):
    _filings(tmp_path / "docs")
    store = tmp_path / "store"
    flags = ["--mode", "bm25", "--rerank-depth", "0", "--chunk-size", "40", "--overlap", "5"]
    assert run_cli("ingest", "--input", str(tmp_path / "docs"), *flags, store=store).returncode == 0
    done = run_cli("query", "What were JnJ pharmaceutical sales?", "--no-llm", "--explain", "--doc-evidence", "prior",
                   *flags, store=store)
    assert done.returncode == 0, done.stderr
    assert "document evidence (prior, weight 1; best documents, score): #1 johnson_johnson_2022q4_earnings.pdf" in done.stdout
