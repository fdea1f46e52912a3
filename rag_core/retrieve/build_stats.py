"""What building one index did (``BuildStats``): the chunking's counts, which ``Index`` measures, and
each retriever's, which its ``build`` returns (``Retriever.build -> BuildStats | None``) and the index
adds up (``add``), so sweeps can show that no chunking was embedded twice. Logged as ``index/<field>``.

It sits below both ``rag_core.retrieve.index`` and the retrievers (``retrievers.base``), which share it.
Left out: query-time costs (each stage's record carries its own latency).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass
class BuildStats:
    chunks: int = 0
    children: int = 0  # child chunks searched (parent-child retrieval, child_size > 0)
    chunk_seconds: float = 0.0
    chunkings_built: int = 0  # 1 when this call chunked the corpus, 0 when chunks were reused
    embedded: int = 0  # chunks embedded by the model (cache misses)
    embed_cache_hits: int = 0
    embed_seconds: float = 0.0
    truncated: int = 0  # chunks longer than the embedding model reads
    max_seq_length: int = 0
    windows: int = 0  # vectors the dense index holds (a unit longer than the model's window has several)
    unread_share: float = 0.0  # share of the indexed text dense search never reads (dense_pooling first)
    bm25_seconds: float = 0.0
    upsert_seconds: float = 0.0  # writing the vectors into the vector store
    upserted: int = 0  # chunks written to the vector store (those it lacked)
    pages: int = 0  # page units a page retriever indexes (page_bm25, page_dense); 0: none configured
    page_seconds: float = 0.0  # building (or loading) the page retrievers' indexes, embedding included
    page_embedded: int = 0  # page windows embedded by the model (cache misses)
    page_windows: int = 0  # vectors page_dense holds (a page longer than the model's window has several)

    PAGE_FIELDS = ("pages", "page_seconds", "page_embedded", "page_windows")  # reported only with page units
    LARGEST = ("max_seq_length", "pages", "page_windows")  # sizes: `add` keeps the largest; counts and times add up

    def add(self, other: BuildStats) -> BuildStats:
        """`other` (what one build did) added into these statistics; returns them."""
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            setattr(self, item.name, max(mine, theirs) if item.name in self.LARGEST else mine + theirs)
        return self

    def as_metrics(self) -> dict[str, float]:
        metrics = {f"index/{name}": float(value) for name, value in asdict(self).items()
                   if self.pages or name not in self.PAGE_FIELDS}
        if self.chunks:
            metrics["index/truncated_share"] = self.truncated / self.chunks
        if self.embed_seconds > 0 and self.embedded:
            metrics["index/embed_chunks_per_s"] = self.embedded / self.embed_seconds
        return metrics


__all__ = ["BuildStats"]
