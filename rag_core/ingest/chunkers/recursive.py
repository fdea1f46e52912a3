"""The ``recursive`` chunker: the text is split with the coarsest separator that works (paragraph, then
line, then sentence, then word) until every piece fits in ``chunk_size`` words; neighbouring pieces are
then merged back into chunks of at most ``chunk_size`` words, each new chunk repeating up to ``overlap``
words from the end of the previous one (from a sentence start where possible). Chunking runs over the
whole document, so a chunk may cross pages; ``per_page=True`` chunks inside each page instead.

Every chunk is an exact span of ``Document.text``: ``text == document.text[char_start:char_end]``.
``chunk_unit`` says what sizes count: ``words`` (whitespace-separated) or ``tokens`` of the embedding
model's tokenizer (special tokens not counted; the index passes the model's counter to ``make_chunker``).
``split_span`` is the same splitting inside one span (child chunks, a section of ``structure``, a sentence
longer than the size in ``sentences``).
Left out: separators of other scripts (CJK full stops), code-aware splitting.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from rag_core.ingest.chunkers.base import WORD, Chunker, Count, Span, count_words, page_regions
from rag_core.records import Chunk, Document

__all__ = ["SEPARATORS", "RecursiveChunker", "chunk_corpus", "chunk_document", "split_span"]

# Coarse to fine. Each pattern matches the separator itself; pieces keep no separator text at their ends.
SEPARATORS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n\s*\n"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"(?<=[.!?])\s+"),  # sentence
    re.compile(r"\s+"),  # word
)


def chunk_document(document: Document, chunk_size: int, overlap: int, per_page: bool = False,
                   count: Count = count_words) -> list[Chunk]:
    """Split one document into chunks of at most `chunk_size` words, or units of `count` (a single
    word longer than that stays whole)."""
    if overlap >= chunk_size:
        raise ValueError("overlap must be smaller than chunk_size")
    text = document.text
    chunks = []
    for region in page_regions(document, per_page):
        pieces = _split(text, region, chunk_size, level=0, count=count)
        for start, end in _merge(text, pieces, chunk_size, overlap, count):
            chunk_text = text[start:end]
            chunks.append(
                Chunk(
                    id=Chunk.make_id(document.doc_id, start, end, chunk_text),
                    doc_id=document.doc_id,
                    text=chunk_text,
                    char_start=start,
                    char_end=end,
                    page_start=document.page_at(start),
                    page_end=document.page_at(end - 1),
                )
            )
    return chunks


def split_span(text: str, region: Span, chunk_size: int, overlap: int = 0, count: Count = count_words) -> list[Span]:
    """(start, end) spans of at most `chunk_size` words (units of `count`) inside `region` of `text`,
    split and merged as ``chunk_document`` does (used for the child chunks inside a parent chunk)."""
    return _merge(text, _split(text, region, chunk_size, level=0, count=count), chunk_size, overlap, count)


def chunk_corpus(documents: Iterable[Document], chunk_size: int, overlap: int, per_page: bool = False) -> list[Chunk]:
    return [
        chunk
        for document in documents
        for chunk in chunk_document(document, chunk_size, overlap, per_page)
    ]


def _strip(text: str, span: Span) -> Span | None:
    """Trim whitespace off a span; None when nothing is left."""
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _split(text: str, span: Span, chunk_size: int, level: int, count: Count = count_words) -> list[Span]:
    """Pieces of `span`, each of at most `chunk_size` words, split at the coarsest separator possible."""
    stripped = _strip(text, span)
    if stripped is None:
        return []
    start, end = stripped
    if count(text[start:end]) <= chunk_size or level == len(SEPARATORS):
        return [stripped]
    pieces: list[Span] = []
    cursor = start
    for match in SEPARATORS[level].finditer(text, start, end):
        pieces.extend(_split(text, (cursor, match.start()), chunk_size, level + 1, count))
        cursor = match.end()
    pieces.extend(_split(text, (cursor, end), chunk_size, level + 1, count))
    return pieces


def _merge(text: str, pieces: Sequence[Span], chunk_size: int, overlap: int, count: Count = count_words) -> list[Span]:
    """Greedily join consecutive pieces into chunks of at most `chunk_size` words. Each chunk after
    the first starts with the last `overlap` words (or fewer) of the previous one, cut at a sentence
    start where one is close enough, so overlap works even when the pieces are whole paragraphs."""
    sizes = [count(text[start:end]) for start, end in pieces]
    chunks: list[Span] = []
    carry: tuple[int, int] | None = None  # (start offset, words) repeated from the previous chunk
    index = 0  # next piece to place
    while index < len(pieces):
        start, words = carry if carry and carry[1] + sizes[index] <= chunk_size else (pieces[index][0], 0)
        words += sizes[index]
        while index + 1 < len(pieces) and words + sizes[index + 1] <= chunk_size:
            index += 1
            words += sizes[index]
        end = pieces[index][1]
        chunks.append((start, end))
        index += 1
        carry = _tail(text, start, end, overlap, count) if overlap and index < len(pieces) else None
    return chunks


def _tail(text: str, start: int, end: int, overlap: int, count: Count = count_words) -> tuple[int, int]:
    """(offset, size) of the last at most `overlap` words (units of `count`) of text[start:end],
    beginning at the first sentence start among them if there is one; never the whole span, so chunks
    always advance."""
    words = [match.start() for match in WORD.finditer(text, start, end)]
    first = max(1, len(words) - overlap)
    if count is not count_words:  # the fewest last words that hold at most `overlap` units
        first = len(words)
        while first > 1 and count(text[words[first - 1]:end]) <= overlap:
            first -= 1
        first = min(first, len(words) - 1)  # a last word longer than `overlap` is repeated whole
    for index in range(first, len(words)):
        before = text[start:words[index]].rstrip()
        if before.endswith((".", "!", "?")) or "\n" in text[words[index - 1]:words[index]]:
            first = index
            break
    return words[first], (len(words) - first) if count is count_words else count(text[words[first]:end])


class RecursiveChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        return chunk_document(document, self.config.chunk_size, self.config.overlap, self.config.per_page, self.count)
