"""The chunker contract: ``Chunker``, the registry ``CHUNKERS`` (the ``chunker`` setting) and the helpers
every chunker shares (``span_chunk``, ``count_words``).

A chunker is registered as a class ``(name, config)`` whose ``chunk(document)`` returns the document's
chunks in text order, each an exact span of ``Document.text`` (``span_chunk`` makes one from offsets:
id, text and pages, the pages being those its characters come from). ``chunk_corpus`` checks what a
chunker returns at the contract (a breach is a ``ComponentFault`` naming it). ``make_chunker`` gives a
chunker the embedding model in use as ``embedder`` (a ``TextEmbedder``: the index's ``Embedder``, whose
embeddings are cached by model as loaded and text) and, with ``chunk_unit: tokens``, its token counter as
``count``. ``page_regions`` is where chunking runs: the whole text, or each page (``per_page``).
Left out: chunks that are not spans of the text (summaries, rewritten text).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence

from rag_core.components import Registry
from rag_core.components.faults import calling, component_fault
from rag_core.records import Chunk, Document

if TYPE_CHECKING:
    import numpy as np

    from rag_core.components.config_fields import ConfigFields

__all__ = ["CHUNKERS", "WORD", "Chunker", "Count", "Span", "TextEmbedder", "count_words", "page_regions",
           "span_chunk"]

CHUNKERS = Registry("chunker", setting="chunker", group="chunking")

WORD = re.compile(r"\S+")
Count = Callable[[str], int]  # text -> its length in the chunk unit
Span = tuple[int, int]  # (start, end) offsets into the document text


def count_words(text: str) -> int:
    return len(WORD.findall(text))


class TextEmbedder(Protocol):
    """What a chunker that embeds or counts tokens is given (``rag_core.retrieve.embedding.Embedder``)."""

    def embed_documents(self, texts: Sequence[str]) -> tuple[np.ndarray, Any]:
        """(unit vectors, one row per text; statistics), cached by model as loaded and text."""

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Each text's tokens as (start, end) character offsets, special tokens left out."""


def page_regions(document: Document, per_page: bool) -> list[Span]:
    """Where chunking runs: the whole text, or with `per_page` each page's text (a chunk never crosses one)."""
    if not per_page:
        return [(0, len(document.text))]
    return [(start, start + len(document.page_text(page))) for page, start in enumerate(document.page_starts, start=1)]


class Chunker:
    """Settings from the config (``chunk_size``, ``overlap``, ``per_page`` and its own)."""

    count: Count = staticmethod(count_words)  # chunk_unit tokens: the embedding model's counter (make_chunker)
    embedder: TextEmbedder | None = None  # the embedding model in use (make_chunker, when the index has one)

    def __init__(self, name: str, config: ConfigFields) -> None:
        self.name = name
        self.config = config

    def chunk(self, document: Document) -> list[Chunk]:
        raise NotImplementedError

    def chunk_corpus(self, documents: Iterable[Document]) -> list[Chunk]:
        """Every document's chunks, checked to be distinct, non-empty exact spans of their document's
        text; a chunker that breaks that (or raises, for a plugin) is a ``ComponentFault`` naming it."""
        chunks, seen = [], set()
        component = CHUNKERS.get(self.name)
        for document in documents:
            with calling(component, "chunk"):
                found = self.chunk(document)
            for chunk in found:
                problem = _span_problem(chunk, document, seen)
                if problem:
                    raise component_fault(component, f"chunk() returned {problem} for {document.doc_id!r} (the contract: "
                                                     "distinct non-empty spans of the text, made with span_chunk)")
                seen.add(chunk.id)
                chunks.append(chunk)
        return chunks


def _span_problem(chunk: Any, document: Document, seen: set[str]) -> str | None:
    if not isinstance(chunk, Chunk):
        return f"a {type(chunk).__name__}, not a Chunk,"
    span = f"[{chunk.char_start}:{chunk.char_end}]"
    if chunk.doc_id != document.doc_id:
        return f"a chunk of {chunk.doc_id!r}"
    if not (isinstance(chunk.char_start, int) and isinstance(chunk.char_end, int)
            and 0 <= chunk.char_start < chunk.char_end <= len(document.text)):
        return f"the span {span}, empty or outside the text's {len(document.text)} characters,"
    if chunk.text != document.text[chunk.char_start:chunk.char_end]:
        return f"a chunk whose text is not the span {span} of the document's text"
    if chunk.id in seen:
        return f"the chunk {span} (id {chunk.id!r}) twice"
    return None


def span_chunk(document: Document, start: int, end: int) -> Chunk:
    """The chunk of `document` spanning ``text[start:end]``: its id, text and pages."""
    text = document.text[start:end]
    return Chunk(Chunk.make_id(document.doc_id, start, end, text), document.doc_id, text, start, end,
                 document.page_at(start), document.page_at(end - 1))
