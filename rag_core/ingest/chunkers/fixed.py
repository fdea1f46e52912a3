"""The ``fixed`` chunker, the reference baseline: windows of ``chunk_size`` words (or, with
``chunk_unit: tokens``, the embedding model's tokens) that start every ``chunk_size - overlap`` units,
cut wherever the count falls, with no regard for sentences, lines or paragraphs (the fixed-token
chunker of Chroma's chunking report, which cuts the token sequence the same way).

A window's span runs from the first character of its first unit to the last of its last unit, so the
text between them (spaces, line breaks, a page break) is kept exactly; the last window ends at the last
unit and may be shorter. Words are runs of non-space characters; tokens are the embedding model's
(``make_chunker`` gives the chunker the index's embedder: its tokenizer's character offsets, special
tokens left out), so a token window may start or end inside a word, as a token splitter does.
Reads ``chunk_size``, ``overlap``, ``chunk_unit`` and ``per_page``; costs one pass over the words (with
tokens: one tokenizer pass over each document's text), no embedding.
Left out: windows in characters (Chroma's report also counts tokens), a minimum size for the last window.
"""

from __future__ import annotations

from typing import Sequence

from rag_core.ingest.chunkers.base import WORD, Chunker, Span, page_regions, span_chunk
from rag_core.records import Chunk, Document

__all__ = ["FixedChunker", "fixed_windows"]


def fixed_windows(units: Sequence[Span], size: int, overlap: int) -> list[Span]:
    """(start, end) spans of windows of `size` consecutive `units` (each a (start, end) span, in text
    order), one every ``size - overlap`` units, the last ending at the last unit."""
    if not 0 <= overlap < size:
        raise ValueError("overlap must be >= 0 and smaller than chunk_size")
    windows = []
    for first in range(0, len(units), size - overlap):
        last = min(first + size, len(units)) - 1
        windows.append((units[first][0], units[last][1]))
        if last == len(units) - 1:
            break
    return windows


class FixedChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        config = self.config
        return [span_chunk(document, start, end)
                for region in page_regions(document, config.per_page)
                for start, end in fixed_windows(self._units(document.text, region), config.chunk_size, config.overlap)]

    def _units(self, text: str, region: Span) -> list[Span]:
        """The words, or with ``chunk_unit: tokens`` the model's tokens, of ``text[region]`` as spans of `text`."""
        start, end = region
        if self.config.chunk_unit != "tokens":
            return [match.span() for match in WORD.finditer(text, start, end)]
        if self.embedder is None:
            raise ValueError("the fixed chunker with chunk_unit tokens needs the embedding model (make_chunker's embedder)")
        [offsets] = self.embedder.token_offsets([text[start:end]])
        spans = [(start + a, start + b) for a, b in offsets if b > a]
        return [_stripped(text, span) for span in spans if text[span[0]:span[1]].strip()]


def _stripped(text: str, span: Span) -> Span:
    """A token's span without the white space some tokenizers include in it (SentencePiece's leading space)."""
    start, end = span
    while text[start].isspace():
        start += 1
    while text[end - 1].isspace():
        end -= 1
    return start, end
