"""The ``sentences`` chunker: whole sentences packed, in text order, into chunks of at most ``chunk_size``
words (tokens with ``chunk_unit: tokens``); a chunk ends before the sentence that would not fit, so no
sentence is cut. Sentences are those of ``rag_core.ingest.sentence_split`` (a full stop before white
space, not after a common abbreviation, or a blank line; a heading line stays with the sentence after it).

- A sentence longer than ``chunk_size`` on its own is split as ``recursive`` splits a text
  (``split_span``: at line breaks, then between words, ``overlap`` repeated between its pieces), into
  chunks of its own: the only cut sentences.
- Overlap: each chunk after the first starts with the last whole sentences of the chunk before it that
  hold at most ``overlap`` units together (none when its last sentence alone holds more; never all of
  them, so chunks advance), and only when they fit with the next sentence; none into or out of a split
  sentence.
  Overlap is in whole sentences, so it repeats at most ``overlap`` units and often fewer.
- Sizes add up sentence by sentence (for tokens, each sentence's count).

Reads ``chunk_size``, ``overlap``, ``chunk_unit`` and ``per_page``; costs one pass of the sentence splitter
and a count per sentence, no embedding. ``pack_sentences`` is also how ``semantic`` cuts a segment that is
longer than its maximum.
Left out: sentence models (no new model), merging a short last chunk into the one before.
"""

from __future__ import annotations

from typing import Sequence

from rag_core.ingest.chunkers.base import Chunker, Count, Span, count_words, page_regions, span_chunk
from rag_core.ingest.chunkers.recursive import split_span
from rag_core.ingest.sentence_split import split_sentences
from rag_core.records import Chunk, Document

__all__ = ["SentencesChunker", "pack_sentences", "sentence_spans"]


def sentence_spans(text: str, region: Span) -> list[Span]:
    """The sentences of ``text[region]`` as (start, end) spans of `text`."""
    start, end = region
    return [(start + begin, start + stop) for begin, stop in split_sentences(text[start:end])]


def pack_sentences(text: str, sentences: Sequence[Span], chunk_size: int, overlap: int = 0,
                   count: Count = count_words) -> list[Span]:
    """Chunks of whole `sentences` (spans of `text`, in order) of at most `chunk_size` units of `count`,
    each after the first repeating the last whole sentences of the one before holding at most `overlap`
    units; a sentence longer than `chunk_size` is split by ``split_span`` into chunks of its own."""
    sizes = [count(text[start:end]) for start, end in sentences]
    chunks: list[Span] = []
    current: list[int] = []  # indices of the sentences of the chunk being filled
    for index, size in enumerate(sizes):
        if size > chunk_size:  # too long alone: split as recursive would, no overlap around it
            if current:
                chunks.append((sentences[current[0]][0], sentences[current[-1]][1]))
            chunks.extend(split_span(text, sentences[index], chunk_size, overlap, count))
            current = []
            continue
        if current and sum(sizes[i] for i in current) + size > chunk_size:
            chunks.append((sentences[current[0]][0], sentences[current[-1]][1]))
            carried = _carried(current, sizes, overlap)
            current = carried if sum(sizes[i] for i in carried) + size <= chunk_size else []
        current.append(index)
    if current:
        chunks.append((sentences[current[0]][0], sentences[current[-1]][1]))
    return chunks


def _carried(chunk: list[int], sizes: Sequence[int], overlap: int) -> list[int]:
    """The last sentences of `chunk` (never all) holding at most `overlap` units together."""
    carried: list[int] = []
    total = 0
    for index in reversed(chunk[1:]):
        if total + sizes[index] > overlap:
            break
        carried.insert(0, index)
        total += sizes[index]
    return carried


class SentencesChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        config, text = self.config, document.text
        return [span_chunk(document, start, end)
                for region in page_regions(document, config.per_page)
                for start, end in pack_sentences(text, sentence_spans(text, region), config.chunk_size,
                                                 config.overlap, self.count)]
