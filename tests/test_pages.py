"""Pages as retrieval units (issue 30): ``page_bm25`` and ``page_dense`` rank whole pages of a
hand-made PDF whose answer is spread over one page in two chunks, answer with the chunks on the
pages, keep their page units in a folder of their own (reused by another chunking), rank alike from
two cold builds, and are named by ``query --explain``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdf_factory import write_pdf
from rag_core.config import RagConfig
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents
from rag_core.retrieve.cache import ScoreCache
from rag_core.retrieve.embedding.embedder import Embedder
from rag_core.retrieve.index import Index
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.retrievers import Query
from rag_core.retrieve.retrievers.pages import page_units
from rag_core.service import QueryResult
from rag_core.workbench.reports.text import format_explain

FILL = "Operators log the shift handover in the plant journal and check the fire doors before leaving the hall. "
QUESTION = "How often must the zorblax coolant valve on turbine seven be recalibrated?"
PAGES = [
    # page 1: half of the question's words, repeated, in one chunk
    "Installing the zorblax valve: the zorblax valve ships in a crate with the zorblax valve manual. " + FILL * 2,
    # page 2: the answer, its two halves forty words apart: two chunks of 40 words
    "The zorblax coolant valve on turbine seven sits behind the blue service panel of the hall. " + FILL * 3 +
    "Maintenance: it must be recalibrated every ninety days by a certified technician. " + FILL,
    # page 3: the other half, and long: more than one window of the embedding model (256 tokens)
    "The pressure gauges of every turbine are recalibrated once a year. " + FILL * 25,
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    root = tmp_path_factory.mktemp("docs")
    write_pdf(root / "manual.pdf", PAGES)
    write_pdf(root / "canteen.pdf", ["The canteen serves soup on Mondays and curry on Fridays. " + FILL * 3])
    return Corpus.of(read_documents(root, workers=1).documents)


def _config(mode: str, **settings) -> RagConfig:
    return RagConfig(**{"mode": mode, "rerank_depth": 0, "chunk_size": 40, "overlap": 0, "embed_backend": "torch",
                        **settings})


def _pages_of(index: Index, name: str, depth: int = 20) -> list[tuple[int, str, float]]:
    """(page, chunk id, score) of the retriever's hits, best first."""
    retriever = index.retriever(name)
    embed = index.embedder.embed_query if name == "page_dense" else None
    found = retriever.search(Query(QUESTION, embed), depth)
    return [(index.chunk_by_id[hit.id].page_start, hit.id, round(hit.score, 6)) for hit in found.hits]


def _page_ranking(index: Index, name: str) -> list[tuple[str, float]]:
    """The page units the retriever's inner index ranks, best first, with their scores."""
    retriever = index.retriever(name)
    embed = index.embedder.embed_query if name == "page_dense" else None
    return [(hit.id, round(hit.score, 6)) for hit in retriever.inner.search(Query(QUESTION, embed), 10).hits]


def test_page_units_are_the_pages_text(corpus):
    manual = corpus.by_id["manual.pdf"]
    units = page_units([manual])
    assert [unit.id for unit in units] == ["manual.pdf#p1", "manual.pdf#p2", "manual.pdf#p3"]
    assert all(unit.text == manual.text[unit.char_start:unit.char_end] == manual.page_text(unit.page_start)
               for unit in units)


def test_page_bm25_ranks_the_page_holding_both_halves_first(tmp_path, corpus):
    index = Index(tmp_path, corpus, _config("page_bm25"))
    on_page_2 = [chunk.id for chunk in index.chunks if chunk.page_start <= 2 <= chunk.page_end]
    answer = [chunk for chunk in index.chunks if chunk.page_start == chunk.page_end == 2]
    assert len(answer) >= 2 and not any("zorblax" in c.text and "ninety" in c.text for c in index.chunks)  # split
    assert [page for page, _ in _page_ranking(index, "page_bm25")][:2] == ["manual.pdf#p2", "manual.pdf#p1"]
    hits = _pages_of(index, "page_bm25")
    first = [chunk_id for page, chunk_id, _ in hits[:len(on_page_2)]]
    assert sorted(first) == sorted(on_page_2)  # every chunk on page 2 first, with the page's score
    assert len({score for _, _, score in hits[:len(on_page_2)]}) == 1
    top = index.chunk_by_id[first[0]].text  # the page's best chunk first: most of the question's words
    assert "zorblax coolant valve on turbine seven" in " ".join(top.split())
    assert len({chunk_id for _, chunk_id, _ in hits}) == len(hits)  # a chunk that crosses pages: once
    # BM25 over chunks: page 1's chunk, which repeats 'zorblax valve', outranks both halves of page 2
    chunked = Index(tmp_path, corpus, _config("bm25"))
    best = chunked.retriever("bm25").search(Query(QUESTION), 1).hits[0]
    assert chunked.chunk_by_id[best.id].page_start == 1


def test_page_units_are_kept_apart_and_reused_by_another_chunking(tmp_path, corpus):
    index = Index(tmp_path, corpus, _config("page_bm25"))
    index.build()
    assert index.stats.pages == 4 and index.stats.as_metrics()["index/pages"] == 4.0
    folders = sorted(path.name for path in (tmp_path / "chunks").iterdir() if path.name.startswith("pages-"))
    assert len(folders) == 1 and any((tmp_path / "chunks" / folders[0]).glob("bm25-*"))
    saved = next((tmp_path / "chunks" / folders[0]).glob("bm25-*")).stat()
    other = Index(tmp_path, corpus, _config("page_bm25", chunk_size=60))  # another chunking: the same pages
    other.build()
    assert other.chunking_key != index.chunking_key
    again = next((tmp_path / "chunks" / folders[0]).glob("bm25-*")).stat()
    assert (again.st_ino, again.st_mtime_ns) == (saved.st_ino, saved.st_mtime_ns)  # loaded, not rebuilt
    assert other.stats.pages == 4 and other.stats.bm25_seconds == 0.0
    assert sorted(path.name for path in (tmp_path / "chunks").iterdir() if path.name.startswith("pages-")) == folders
    assert "index/pages" not in Index(tmp_path, corpus, _config("bm25")).build().as_metrics()  # no page retriever


@pytest.mark.slow
def test_page_dense_windows_two_cold_builds_and_explain(tmp_path, corpus):
    rankings = []
    for name in ("one", "two"):  # each its own store and embedding cache: embedded twice
        embedder = Embedder(RagConfig().embed_model, cache=ScoreCache(tmp_path / name / "cache.sqlite"),
                            backend="torch")
        index = Index(tmp_path / name, corpus, _config("page_dense"), embedder=embedder)
        index.build()
        rankings.append((_page_ranking(index, "page_dense"), _pages_of(index, "page_dense")))
    assert rankings[0] == rankings[1]
    pages, hits = rankings[0]
    assert pages[0][0] == "manual.pdf#p2"  # page 2 first
    on_page_2 = {chunk.id for chunk in index.chunks if chunk.page_start <= 2 <= chunk.page_end}
    assert {chunk_id for _, chunk_id, _ in hits[:len(on_page_2)]} == on_page_2
    stats = index.stats
    assert stats.pages == 4 and stats.page_windows > stats.pages  # page 3 read as several windows, not truncated
    assert stats.embedded == 0 and stats.windows == 0  # the chunk counts are the chunk retrievers' alone
    manifests = list((tmp_path / "two" / "chunks").glob("pages-*/dense-*.json"))
    assert len(manifests) == 1 and json.loads(manifests[0].read_text())["units"] == 4

    config = _config("dense,bm25,page_bm25,page_dense", k=3)
    fused = Index(tmp_path / "two", corpus, config, embedder=index.embedder)
    result = Pipeline(config, corpus, fused.store_dir, index=fused).retrieve(QUESTION)
    assert result.hits[0].chunk.page_start <= 2 <= result.hits[0].chunk.page_end
    assert fused.stats.page_embedded == 0 and fused.stats.pages == 4  # the pages' vectors were kept
    explain = format_explain(QueryResult(result, None), config)
    header = explain.splitlines()[0]
    assert "page_bm25" in header and "page_dense" in header  # a column per retriever
    assert "page retriever page_bm25: the page each passage was found on" in explain
    assert "page retriever page_dense: the page each passage was found on" in explain
    assert "  #1: page 2 of manual.pdf (page_dense rank 1, score " in explain


def test_the_eval_report_says_how_many_page_units_and_windows():
    from types import SimpleNamespace

    from rag_core.workbench.reports.text import format_eval_report

    metrics = {"eval/queries": 2.0, "index/documents": 1.0, "index/chunks": 3.0, "index/pages": 4.0,
               "index/page_windows": 9.0, "index/page_embedded": 5.0, "index/page_seconds": 1.25}
    params = {"mode": "dense,page_dense", "rerank_depth": "0", "metrics_k": "5,10", "k": "5",
              "embed_model_used": "m"}
    shown = format_eval_report(SimpleNamespace(metrics=metrics, params=params, per_query=[]))
    assert "Page units: 4 pages, 9 dense windows (5 embedded now); built or loaded in 1.2 s" in shown
    del metrics["index/pages"]
    assert "Page units" not in format_eval_report(SimpleNamespace(metrics=metrics, params=params, per_query=[]))


def test_a_chunk_set_without_its_corpus_is_refused_by_name(tmp_path):
    from rag_core.retrieve.retrievers import ChunkSet
    from rag_core.retrieve.retrievers.pages import PageBM25Retriever

    retriever = PageBM25Retriever("page_bm25", _config("page_bm25"), None)
    with pytest.raises(ValueError, match="page_bm25 needs the documents' pages"):
        retriever.page_set(ChunkSet([], tmp_path, "key"))
