"""Recursive chunking of a document's text, with page spans and character offsets.

The text is split with the coarsest separator that works (paragraph, then line, then sentence, then
word) until every piece fits in ``chunk_size`` words; neighbouring pieces are then merged back into
chunks of at most ``chunk_size`` words, each new chunk repeating the last pieces of the previous one
up to ``overlap`` words. Chunking runs over the whole document, so a chunk may cross pages;
``per_page=True`` chunks inside each page instead.

Every chunk is an exact span of ``Document.text``: ``text == document.text[char_start:char_end]``.
Left out: token-based sizes (sizes count whitespace-separated words) and semantic splitting.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from rag_core.records import Chunk, Document

# Coarse to fine. Each pattern matches the separator itself; pieces keep no separator text at their ends.
SEPARATORS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n\s*\n"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"(?<=[.!?])\s+"),  # sentence
    re.compile(r"\s+"),  # word
)
_WORD = re.compile(r"\S+")

Span = tuple[int, int]  # (start, end) offsets into the document text


def count_words(text: str) -> int:
    return len(_WORD.findall(text))


def chunk_document(document: Document, chunk_size: int, overlap: int, per_page: bool = False) -> list[Chunk]:
    """Split one document into chunks of at most `chunk_size` words (a single word longer than that
    stays whole)."""
    if overlap >= chunk_size:
        raise ValueError("overlap must be smaller than chunk_size")
    text = document.text
    regions: list[Span]
    if per_page:
        regions = [
            (start, start + len(document.page_text(page)))
            for page, start in enumerate(document.page_starts, start=1)
        ]
    else:
        regions = [(0, len(text))]
    chunks = []
    for region in regions:
        pieces = _split(text, region, chunk_size, level=0)
        for start, end in _merge(text, pieces, chunk_size, overlap):
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


def _split(text: str, span: Span, chunk_size: int, level: int) -> list[Span]:
    """Pieces of `span`, each of at most `chunk_size` words, split at the coarsest separator possible."""
    stripped = _strip(text, span)
    if stripped is None:
        return []
    start, end = stripped
    if count_words(text[start:end]) <= chunk_size or level == len(SEPARATORS):
        return [stripped]
    pieces: list[Span] = []
    cursor = start
    for match in SEPARATORS[level].finditer(text, start, end):
        pieces.extend(_split(text, (cursor, match.start()), chunk_size, level + 1))
        cursor = match.end()
    pieces.extend(_split(text, (cursor, end), chunk_size, level + 1))
    return pieces


def _merge(text: str, pieces: Sequence[Span], chunk_size: int, overlap: int) -> list[Span]:
    """Greedily join consecutive pieces into chunks; each chunk starts with the previous chunk's last
    pieces totalling at most `overlap` words."""
    sizes = [count_words(text[start:end]) for start, end in pieces]
    chunks: list[Span] = []
    first = 0  # index of the first piece in the current chunk
    while first < len(pieces):
        last, words = first, sizes[first]
        while last + 1 < len(pieces) and words + sizes[last + 1] <= chunk_size:
            last += 1
            words += sizes[last]
        chunks.append((pieces[first][0], pieces[last][1]))
        if last + 1 >= len(pieces):
            break
        # Step back from the end while the repeated pieces fit in the overlap, but always move forward.
        next_first, repeated = last + 1, 0
        while next_first - 1 > first and repeated + sizes[next_first - 1] <= overlap:
            next_first -= 1
            repeated += sizes[next_first]
        first = next_first
    return chunks
