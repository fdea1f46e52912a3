"""The chunkers' import path of before (``rag_core.ingest.chunkers`` is the package now): plugins written
against ``from rag_core.ingest.chunking import CHUNKERS, Chunker, span_chunk`` keep working.
Left out: anything of its own.
"""

from __future__ import annotations

from rag_core.ingest.chunkers import (CHUNK_UNITS, CHUNKERS, DEFAULT_CHUNKER, Chunker, Count, Span, chunker_key,
                                      count_words, make_chunker, span_chunk)
from rag_core.ingest.chunkers.recursive import SEPARATORS, RecursiveChunker, chunk_corpus, chunk_document, split_span

__all__ = ["CHUNKERS", "CHUNK_UNITS", "DEFAULT_CHUNKER", "SEPARATORS", "Chunker", "Count", "RecursiveChunker", "Span",
           "chunk_corpus", "chunk_document", "chunker_key", "count_words", "make_chunker", "span_chunk", "split_span"]
