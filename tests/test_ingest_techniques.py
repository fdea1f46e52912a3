"""Tables as Markdown rows, contextual chunk text, metadata and filters, document routing: on small
PDFs the tests write, through the real PyMuPDF, BM25 and CLI."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from pdf_factory import write_headed_pdf, write_pdf, write_table_pdf
from rag_core.config import ConfigError, RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import load_golden
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents
from rag_core.retrieve.filters import FilterError, parse_where
from rag_core.retrieve.index import Index
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.routing import split_letters_digits
from rag_core.service import ingest_directory

BM25 = dict(mode="bm25", rerank_depth=0, chunk_size=40, overlap=5)


def test_tables_become_markdown_rows_with_header_cells_and_pages_stay_right(tmp_path):
    write_table_pdf(tmp_path / "docs" / "b.pdf", "Revenue by region for 2019.", ["Region", "Revenue", "Growth"],
                    [["North", "120", "5%"], ["South", "80", "7%"]], "Totals are unaudited.")
    write_pdf(tmp_path / "docs" / "a.pdf", ["First page of a.", "Second page of a."])
    plain = {doc.doc_id: doc for doc in read_documents(tmp_path / "docs").documents}
    tables = {doc.doc_id: doc for doc in read_documents(tmp_path / "docs", extract_tables=True,
                                                          cache_dir=tmp_path / "cache").documents}
    assert "Region\nRevenue\nGrowth\nNorth\n120" in plain["b.pdf"].text  # one cell a line without tables
    lines = tables["b.pdf"].page_text(1).splitlines()
    assert lines == ["Revenue by region for 2019.", "| Region | Revenue | Growth |", "| --- | --- | --- |",
                     "| North | 120 | 5% |", "| South | 80 | 7% |", "Totals are unaudited."]
    assert tables["a.pdf"].page_text(2) == "Second page of a."  # offsets built from the final pages
    assert tables["b.pdf"].extraction == "tables" and plain["b.pdf"].extraction == ""
    assert Corpus.of(tables.values()).fingerprint != Corpus.of(plain.values()).fingerprint
    assert len(list((tmp_path / "cache").glob("*-tables-*.json"))) == 2  # a second read extracts nothing
    # A pipeline with extract_tables on, given the plain corpus, extracts again (through the cache).
    index = Index(tmp_path / "store", Corpus.of(plain.values()), RagConfig(extract_tables=True, **BM25))
    assert "| North | 120 | 5% |" in index.corpus.by_id["b.pdf"].text
    assert all(chunk.text == index.corpus.by_id[chunk.doc_id].text[chunk.char_start:chunk.char_end]
               for chunk in index.chunks)


def test_title_heading_context_prefixes_indexed_text_only(tmp_path):
    body = "The company held more cash at year end than the year before, thanks to stronger sales. " * 12
    write_headed_pdf(tmp_path / "docs" / "acme_2019_report.pdf",
                     [("Liquidity and Capital Resources", body), ("Risk Factors", body)], title="Acme Annual Report")
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    document = corpus.documents[0]
    assert document.title == "Acme Annual Report"
    assert [heading for _, heading in document.headings] == ["Liquidity and Capital Resources", "Risk Factors"]
    index = Index(tmp_path / "store", corpus, RagConfig(chunk_context="title_heading", **BM25))
    texts = dict(zip((chunk.id for chunk in index.chunks), index.indexed_texts()))
    risk_chunk = next(chunk for chunk in index.chunks if chunk.page_start == 2 and "Risk" not in chunk.text)
    assert texts[risk_chunk.id] == ("Acme Annual Report | acme 2019 report\nRisk Factors\n\n" + risk_chunk.text)
    assert risk_chunk.text == document.text[risk_chunk.char_start:risk_chunk.char_end]
    title_only = Index(tmp_path / "store", corpus, RagConfig(chunk_context="title", **BM25))
    assert title_only.indexed_texts()[0].startswith("Acme Annual Report | acme 2019 report\n\n")
    keys = {one.retriever("bm25").cache_key(one.chunk_set)
            for one in (index, title_only, Index(tmp_path / "store", corpus, RagConfig(**BM25)))}
    assert len(keys) == 3
    # The title words now find the chunk by BM25; without context they are nowhere in the text.
    hits = Pipeline(RagConfig(chunk_context="title", **BM25), corpus, tmp_path / "store").retrieve("acme")
    assert hits.hits and Pipeline(RagConfig(**BM25), corpus, tmp_path / "store").retrieve("acme").hits == []


def _two_companies(folder):
    write_pdf(folder / "acme_2019_10k.pdf", ["Acme revenue grew to 120 million dollars in 2019 on widget sales. "
                                             "Widget revenue widget revenue."])
    write_pdf(folder / "bolt_2018_10k.pdf", ["Bolt revenue was 80 million dollars in 2018."])
    write_pdf(folder / "bolt_2019_10k.pdf", ["Bolt sold gadgets; revenue reached 95 million dollars in 2019."])
    (folder / "metadata.jsonl").write_text(
        json.dumps({"doc_id": "acme_2019_10k.pdf", "company": "Acme", "year": 2019}) + "\n"
        + json.dumps({"doc_id": "bolt_2018_10k.pdf", "company": "Bolt", "year": 2018}) + "\n"
        + json.dumps({"doc_id": "bolt_2019_10k.pdf", "company": "Bolt", "year": 2019}) + "\n")


def test_sidecar_metadata_and_filters_exclude_the_best_document_before_ranking(tmp_path):
    _two_companies(tmp_path / "docs")
    result = read_documents(tmp_path / "docs")
    assert sorted(doc.doc_id for doc in result.documents) == ["acme_2019_10k.pdf", "bolt_2018_10k.pdf", "bolt_2019_10k.pdf"]
    assert not result.skipped  # metadata.jsonl is not a document
    corpus = Corpus.of(result.documents)
    assert corpus.by_id["bolt_2018_10k.pdf"].meta == {"company": "Bolt", "year": "2018"}
    pipeline = Pipeline(RagConfig(**BM25), corpus, tmp_path / "store")
    assert pipeline.retrieve("widget revenue").hits[0].chunk.doc_id == "acme_2019_10k.pdf"
    [saved] = (tmp_path / "store" / "chunks").glob("*/bm25-*/metadata.json")
    assert json.loads(saved.read_text())["bolt_2018_10k.pdf"]["company"] == "Bolt"
    kept = pipeline.retrieve("widget revenue", where={"company": "Bolt"})
    # Filtered before ranking: Bolt's chunks rank although Acme's would come first.
    assert {hit.chunk.doc_id for hit in kept.hits} == {"bolt_2018_10k.pdf", "bolt_2019_10k.pdf"}
    assert [hit.chunk.doc_id for hit in pipeline.retrieve("revenue", where=parse_where(["company=Bolt", "year=2019"])).hits] == ["bolt_2019_10k.pdf"]
    assert {hit.chunk.doc_id for hit in pipeline.retrieve("revenue", where={"year": ["2018", 2019], "company": "Bolt"}).hits} == {"bolt_2018_10k.pdf", "bolt_2019_10k.pdf"}
    with pytest.raises(FilterError, match="unknown metadata key 'sector'.*company"):
        pipeline.retrieve("revenue", where={"sector": "tech"})
    with pytest.raises(FilterError, match="no document matches the filter company=Zed.*Acme, Bolt"):
        pipeline.retrieve("revenue", where={"company": "Zed"})


def test_metadata_pattern_and_golden_filter(tmp_path):
    _two_companies(tmp_path / "docs")
    (tmp_path / "docs" / "metadata.jsonl").unlink()
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    config = RagConfig(metadata_pattern=r"(?P<company>[a-z]+)_(?P<year>\d{4})", **BM25)
    pipeline = Pipeline(config, corpus, tmp_path / "store")
    assert pipeline.corpus.by_id["bolt_2018_10k.pdf"].meta == {"company": "bolt", "year": "2018"}
    assert pipeline.corpus.fingerprint != corpus.fingerprint
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q1", "query": "widget revenue", "filter": {"company": "bolt", "year": 2019},
                                  "evidence": [{"source": "bolt_2019_10k.pdf", "page": 1}]}) + "\n")
    queries = load_golden(golden, doc_ids=corpus.by_id)
    assert queries[0].filter == (("company", ("bolt",)), ("year", ("2019",)))
    report = evaluate_config(config, corpus, queries, tmp_path / "store")
    assert [hit.chunk.doc_id for hit in report.retrievals["q1"].hits] == ["bolt_2019_10k.pdf"]
    assert report.metrics["page/recall@5"] == 1.0
    with pytest.raises(ConfigError, match="metadata_pattern has no named group"):
        RagConfig(metadata_pattern=r"\d{4}")


def test_routing_picks_the_named_document_then_retrieves_inside_it(tmp_path):
    _two_companies(tmp_path / "docs")
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    pipeline = Pipeline(RagConfig(route_docs=1, **BM25), corpus, tmp_path / "store")
    # Without routing, "widget revenue" wins; the question names Bolt and FY2018 (split: "FY 2018").
    retrieval = pipeline.retrieve("What was Bolt's FY2018 widget revenue?")
    assert [item.id for item in retrieval.routed] == ["bolt_2018_10k.pdf"]
    assert {hit.chunk.doc_id for hit in retrieval.hits} == {"bolt_2018_10k.pdf"}
    assert "route" in retrieval.latency_ms
    assert split_letters_digits("FY2018 Q3") == "FY 2018 Q 3"
    # Routing runs within a filter.
    within = pipeline.retrieve("What was Bolt's FY2018 revenue?", where={"year": "2019"})
    assert [item.id for item in within.routed] == ["bolt_2019_10k.pdf"]
    # A question naming no document (no word of any title or metadata value) is not routed by
    # default: every document is searched. route_when always routes it by the cards.
    unnamed = pipeline.retrieve("How much widget revenue?")
    assert unnamed.routed == [] and unnamed.hits[0].chunk.doc_id == "acme_2019_10k.pdf"
    always = Pipeline(RagConfig(route_docs=1, route_when="always", **BM25), corpus, tmp_path / "store")
    assert len(always.retrieve("How much widget revenue?").routed) == 1
    with pytest.raises(ConfigError, match="route_when must be one of named, always"):
        RagConfig(route_when="sometimes")


def test_cli_where_and_explain_show_filter_and_routing(tmp_path):
    _two_companies(tmp_path / "docs")
    store = tmp_path / "store"
    flags = ("--mode", "bm25", "--rerank-depth", "0", "--chunk-size", "40", "--overlap", "5")
    assert run_cli("ingest", "--input", str(tmp_path / "docs"), *flags, store=store).returncode == 0
    done = run_cli("query", "widget revenue", "--no-llm", "--explain", "--where", "company=Bolt", "--route-docs", "1",
                   "--route-when", "always", *flags, store=store)
    assert done.returncode == 0, done.stderr
    assert "filter: company=Bolt" in done.stdout and "routed to: #1 bolt_" in done.stdout
    assert "acme_2019_10k.pdf" not in done.stdout.split("routed to")[0]
    unnamed = run_cli("query", "widget revenue", "--no-llm", "--explain", "--route-docs", "1", *flags, store=store)
    assert unnamed.returncode == 0, unnamed.stderr
    assert "routing: not applied, the question names no document" in unnamed.stdout and "routed to" not in unnamed.stdout
    bad = run_cli("query", "revenue", "--no-llm", "--where", "sector=tech", *flags, store=store)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "unknown metadata key 'sector'" in bad.stderr
    none = run_cli("query", "revenue", "--no-llm", "--where", "company=Zed", *flags, store=store)
    assert none.returncode == 2 and "no document matches" in none.stderr


def test_ingest_with_tables_stores_them_and_sidecar_metadata_reaches_the_store(tmp_path):
    write_table_pdf(tmp_path / "docs" / "t.pdf", "Costs.", ["Item", "Cost"], [["Rent", "10"], ["Power", "4"]], "End.")
    (tmp_path / "docs" / "metadata.jsonl").write_text(json.dumps({"doc_id": "t.pdf", "kind": "costs"}) + "\n")
    store = tmp_path / "store"
    ingest_directory(tmp_path / "docs", store, RagConfig(extract_tables=True, **BM25))
    from rag_core.ingest.corpus import store_corpus

    stored = store_corpus(store).documents[0]
    assert "| Rent | 10 |" in stored.text and stored.meta == {"kind": "costs"} and stored.extraction == "tables"


@pytest.mark.slow
def test_explore_notebook_shows_filter_routing_and_indexed_text(tmp_path):
    from test_notebooks import _execute, _recorded

    _two_companies(tmp_path / "docs")
    executed = _execute("01-explore.ipynb", tmp_path / "out.ipynb", input_dir=str(tmp_path / "docs"),
                        store=str(tmp_path / "store"), query="What was Bolt's FY2019 widget revenue?",
                        where={"year": "2019"}, mode="bm25", rerank_depth=0, chunk_size=40, overlap=5, k=2,
                        route_docs=1, chunk_context="title")
    summary = _recorded(executed)
    assert summary["routed"] == ["bolt_2019_10k.pdf"] and summary["filter"] == "year=2019"
    assert {hit["source"] for hit in summary["final"]} == {"bolt_2019_10k.pdf"}
    text = "".join(output.get("text", "") for cell in executed.cells for output in cell.get("outputs", []))
    assert "bolt 2019 10k\n\nBolt sold gadgets" in text  # the indexed text: title prefix, then the passage


@pytest.mark.slow
def test_hybrid_filter_and_routing_restrict_the_vector_store_too(tmp_path, monkeypatch):
    """Dense search with the packaged MiniLM: the filter reaches ChromaDB (doc_id any of), and the
    document metadata is stored with each chunk."""
    _two_companies(tmp_path / "docs")
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    pipeline = Pipeline(RagConfig(mode="hybrid", rerank_depth=0, chunk_size=40, overlap=5, chunk_context="title"),
                        corpus, tmp_path / "store")
    unfiltered = pipeline.retrieve("widget revenue")
    assert "acme_2019_10k.pdf" in {hit.chunk.doc_id for hit in unfiltered.stages["dense"]}
    kept = pipeline.retrieve("widget revenue", where={"company": "Bolt"})
    assert kept.stages["dense"] and {hit.chunk.doc_id for hit in kept.stages["dense"]} <= {"bolt_2018_10k.pdf", "bolt_2019_10k.pdf"}
    stored = pipeline.index.vector_store._collection(pipeline.index.retriever("dense").collection).get(include=["metadatas"])
    assert {(meta["doc_id"], meta["company"], meta["year"]) for meta in stored["metadatas"]} == {
        ("acme_2019_10k.pdf", "Acme", "2019"), ("bolt_2018_10k.pdf", "Bolt", "2018"), ("bolt_2019_10k.pdf", "Bolt", "2019")}
    routing = Pipeline(RagConfig(mode="hybrid", rerank_depth=0, chunk_size=40, overlap=5, route_docs=1), corpus,
                       tmp_path / "store")
    embedder, embedded = routing.index.embedder, []
    embed_query = embedder.embed_query
    monkeypatch.setattr(embedder, "embed_query", lambda query: embedded.append(query) or embed_query(query))
    routed = routing.retrieve("What was Bolt's FY2018 revenue?")
    assert embedded == ["What was Bolt's FY2018 revenue?"]  # once, for the cards and the chunks
    assert [item.id for item in routed.routed] == ["bolt_2018_10k.pdf"]
    assert {hit.chunk.doc_id for hit in routed.stages["dense"]} == {"bolt_2018_10k.pdf"}


def test_eval_with_tables_scores_evidence_copied_from_the_plain_text(tmp_path):
    write_table_pdf(tmp_path / "docs" / "t.pdf", "Revenue by region for 2019.", ["Region", "Revenue"],
                    [["North", "120"], ["South", "80"]], "Totals are unaudited.")
    write_pdf(tmp_path / "docs" / "other.pdf", ["Nothing about regions here.", "Second page, South 80 again."])
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    golden = tmp_path / "golden.jsonl"  # evidence text as the plain extraction gives it: one cell a line
    golden.write_text(json.dumps({"id": "q1", "query": "South region revenue",
                                  "evidence": [{"source": "t.pdf", "page": 1, "text": "South\n80"}]}) + "\n")
    queries = load_golden(golden, doc_ids=corpus.by_id)
    report = evaluate_config(RagConfig(extract_tables=True, **BM25), corpus, queries, tmp_path / "store")
    assert report.qrels["page"]["q1"] == {"t.pdf#p1": 1}
    assert report.retrievals["q1"].hits[0].chunk.text.count("| South | 80 |") == 1
    assert report.metrics["page/recall@5"] == 1.0 and report.params["extract_tables"] == "True"


def test_cli_eval_where_filters_every_query_without_its_own(tmp_path):
    _two_companies(tmp_path / "docs")
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q1", "query": "widget revenue", "evidence": [{"source": "bolt_2019_10k.pdf"}]})
                      + "\n" + json.dumps({"id": "q2", "query": "widget revenue", "filter": {"company": "Acme"},
                                           "evidence": [{"source": "acme_2019_10k.pdf"}]}) + "\n")
    done = run_cli("eval", "--input", str(tmp_path / "docs"), "--golden", str(golden), "--where", "year=2019",
                   "--where", "company=Bolt", "--no-mlflow", "--json", "--mode", "bm25", "--rerank-depth", "0",
                   "--chunk-size", "40", "--overlap", "5", store=tmp_path / "store")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["params"]["filter"] == "company=Bolt and year=2019"
    tops = {row["query_id"]: row["top_sources"] for row in result["per_query"]}
    assert tops == {"q1": "bolt_2019_10k.pdf p1", "q2": "acme_2019_10k.pdf p1"}  # q2 keeps its own filter
    assert result["metrics"]["doc/recall@5"] == 1.0
