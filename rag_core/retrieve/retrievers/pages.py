"""Pages as retrieval units (issue 30): ``page_bm25`` and ``page_dense`` rank whole pages, each page's
text as the document's extraction gives it (with ``extract_tables``, tables as rows with their header
cells), so a table and its header, or an answer spread over two chunks, are read as one unit.

A page unit is a ``Chunk`` whose id is ``<doc id>#p<page>`` and whose span is the page's text; units
are indexed with the chunk context (``chunk_context``) like chunks. They do not depend on the chunking,
so they live in a folder of their own, ``<store>/chunks/pages-<key>/`` (the key: each document's id
and stored version, i.e. its bytes, extraction and metadata; and ``PAGES_VERSION``), shared by every
chunking of the corpus: the index of the inner retriever (``bm25``'s ``BM25Index``, ``dense``'s
collection and manifest) is kept there and never rebuilt while the documents are unchanged.
``page_dense`` embeds a page longer than the model's window as token windows
(``rag_core.retrieve.windows``), pooled by ``page_pooling``
(``max`` | ``mean_top2``; there is no truncation for pages).

A page hit is answered as chunks, so a page retriever fuses with the chunk retrievers (``mode:
dense,bm25,page_bm25``, RRF) and the passages shown and given to the LLM stay chunks: every chunk on
a ranked page (a chunk that crosses pages at its best page), with the page's score, the page's best
chunk first: the one holding most distinct query terms (the BM25 tokenizer's), ties in text order.
``--explain`` names the page each passage came from, its rank and score (and, dense, its best window).

Left out: page units under a metadata filter of their own, pages split at tables, a page's image.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Sequence

from rag_core.ingest.corpus import stored_version
from rag_core.records import Chunk, ScoredId
from rag_core.retrieve.build_stats import BuildStats
from rag_core.retrieve.context import indexed_texts
from rag_core.retrieve.retrievers.base import RETRIEVERS, ChunkSet, Query, Ranked, Resources, Retriever, digest_key
from rag_core.retrieve.tokenizer import get_tokenizer

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

PAGES_VERSION = 1  # part of the page units' key: bump when what a unit holds changes
INFO_PREFIX = "page_units/"  # Ranked.info key: page_units/<retriever> -> chunk id -> what page it came from


def page_id(doc_id: str, page: int) -> str:
    """A page unit's id: the page's id in page-level relevance (``doc#pN``)."""
    return f"{doc_id}#p{page}"


def page_units(documents: Sequence[Any]) -> list[Chunk]:
    """One unit per page with text, in document and page order."""
    units: list[Chunk] = []
    for document in documents:
        for page in range(1, document.n_pages + 1):
            text = document.page_text(page)
            if text.strip():
                start = document.page_starts[page - 1]
                units.append(Chunk(page_id(document.doc_id, page), document.doc_id, text, start, start + len(text),
                                   page, page))
    return units


def pages_key(documents: Sequence[Any]) -> str:
    """What the page units of `documents` depend on: each document's id and stored version (its bytes,
    extraction settings and metadata, as the corpus fingerprint hashes them)."""
    return digest_key(PAGES_VERSION, sorted((doc.doc_id, stored_version(doc)) for doc in documents))


class PageRetriever(Retriever):
    """Ranks page units with an inner chunk retriever (``inner``: the registered ``bm25`` or ``dense``
    class) built over them, and answers with the chunks on the pages it ranked."""

    inner_name = ""  # the chunk retriever run over pages

    def __init__(self, name: str, config: ConfigFields, resources: Resources) -> None:
        super().__init__(name, config, resources)
        self.inner: Retriever | None = None
        self.pages: ChunkSet | None = None
        self._chunks_of: dict[str, list[str]] = {}  # page id -> its chunks' ids, in text order
        self._terms: dict[str, frozenset[str]] = {}  # chunk id -> its distinct tokens (computed when first ranked)
        self._text: dict[str, str] = {}
        self._tokenize = get_tokenizer(config.tokenizer)

    def inner_config(self) -> Any:
        return self.config

    def page_set(self, chunks: ChunkSet) -> ChunkSet:
        """The page units of the documents `chunks` come from, as a ``ChunkSet`` in their own folder."""
        if self.pages is None:
            if chunks.corpus is None:
                raise ValueError(f"retriever {self.name} needs the documents' pages; this chunk set carries none")
            by_id = chunks.corpus.by_id
            documents = [by_id[doc_id] for doc_id in dict.fromkeys(chunks.doc_of.values())]
            units = page_units(documents)
            key = f"pages-{pages_key(documents)}"
            context = self.config.chunk_context
            self.pages = ChunkSet(units, chunks.folder.parent / key, key, chunks.context,
                                  lambda: indexed_texts(units, chunks.corpus, context), chunks.doc_metadata, chunks.corpus)
        return self.pages

    def cache_key(self, chunks: ChunkSet) -> str:
        """The inner index's key over the pages, the chunking (what pages are answered with) and the tokenizer."""
        inner = self._inner().cache_key(self.page_set(chunks))
        return f"{self.name}-{digest_key(inner, chunks.chunking_key, self.config.tokenizer, PAGES_VERSION)}"

    def index_key(self, chunks: ChunkSet) -> str:
        """The inner index over the pages, in the pages' folder (shared by every chunking)."""
        pages = self.page_set(chunks)
        return f"{pages.folder.name}/{self._inner().index_key(pages)}"

    def _inner(self) -> Retriever:
        if self.inner is None:
            self.inner = RETRIEVERS.load(self.inner_name)(self.name, self.inner_config(), self.resources)
        return self.inner

    def build(self, chunks: ChunkSet) -> BuildStats:
        """Builds (or loads) the inner index over the pages; returns the page units' own counts, apart
        from the chunk retrievers' (``pages``, ``page_seconds``, ``page_embedded``, ``page_windows``)."""
        if self._chunks_of:
            return BuildStats()
        started = time.perf_counter()
        pages = self.page_set(chunks)
        inner = self._inner()
        own = inner.build(pages) or BuildStats()
        chunks_of: dict[str, list[str]] = {}
        for chunk in sorted(chunks.chunks, key=lambda item: (item.doc_id, item.char_start, item.id)):
            for page in range(chunk.page_start, chunk.page_end + 1):
                chunks_of.setdefault(page_id(chunk.doc_id, page), []).append(chunk.id)
        self._chunks_of = chunks_of
        self._text = {chunk.id: chunk.text for chunk in chunks.chunks}
        return BuildStats(pages=len(pages.chunks), page_seconds=time.perf_counter() - started,
                          page_embedded=own.embedded, page_windows=own.windows)

    def _terms_of(self, chunk_id: str) -> frozenset[str]:
        found = self._terms.get(chunk_id)
        if found is None:
            found = self._terms[chunk_id] = frozenset(self._tokenize(self._text[chunk_id]))
        return found

    def search(self, query: Query, depth: int, allowed_doc_ids: Sequence[str] | None = None) -> Ranked:
        started = time.perf_counter()
        found = self._inner().search(query, depth, allowed_doc_ids)
        terms = frozenset(self._tokenize(query.text))
        windows = found.info.get("dense_windows", {})
        hits: list[ScoredId] = []
        explained: dict[str, str] = {}
        for rank, page in enumerate(found.hits, start=1):
            on_page = self._chunks_of.get(page.id, [])
            order = sorted(range(len(on_page)), key=lambda i: (-len(terms & self._terms_of(on_page[i])), i))
            doc_id, _, number = page.id.rpartition("#p")
            window = f", {windows[page.id]}" if page.id in windows else ""
            for position, i in enumerate(order):
                chunk_id = on_page[i]
                if chunk_id in explained:  # a chunk that crosses pages: at its best page
                    continue
                hits.append(ScoredId(chunk_id, page.score))
                explained[chunk_id] = (f"page {number} of {doc_id} ({self.name} rank {rank}, score {page.score:.4g}"
                                       f"{window}; chunk {position + 1} of {len(on_page)} on it)")
            if len(hits) >= depth:
                break
        latency = {"embed_query": found.latency_ms["embed_query"]} if "embed_query" in found.latency_ms else {}
        latency[self.name] = (time.perf_counter() - started) * 1000 - latency.get("embed_query", 0.0)
        return Ranked(hits[:depth], latency, {f"{INFO_PREFIX}{self.name}": explained})

    def models_used(self) -> dict[str, str]:
        return self._inner().models_used()

    def metrics(self) -> dict[str, float]:
        return self._inner().metrics()


class PageBM25Retriever(PageRetriever):
    """``page_bm25``: BM25 (the ``bm25`` settings) over page units."""

    inner_name = "bm25"


class PageDenseRetriever(PageRetriever):
    """``page_dense``: dense search (the ``dense`` settings) over page units, long pages as token
    windows pooled by ``page_pooling``."""

    inner_name = "dense"

    def inner_config(self) -> Any:
        return self.config.replace(dense_pooling=self.config.page_pooling)
