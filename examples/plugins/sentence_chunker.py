"""A chunker of one's own: whole sentences, packed up to ``chunk_size`` words, as a plugin (the built-in
``sentences`` chunker does this too, with its own overlap rule: this file is the example of a plugin).

Nothing in rag_core names this file; a config or sweep file lists it (``plugins: [sentence_chunker.py]``)
and ``chunker: sentence_runs`` picks it. Each chunk is a run of whole sentences of at most ``chunk_size``
words (a longer sentence is a chunk of its own); the next chunk starts ``sentence_overlap`` sentences
before the previous one ended. ``per_page`` keeps chunks inside pages. ``overlap`` (in words) is not
used. Chunks are exact spans of the document text (``span_chunk``), so evidence is located in them as
in any chunk, and the chunking's key includes ``chunker`` and ``sentence_overlap``.
Left out: abbreviations ("e.g.") are sentence ends here.
"""

from __future__ import annotations

import re

from rag_core.components import Setting
from rag_core.ingest.chunkers import CHUNKERS, Chunker, span_chunk
from rag_core.records import Chunk, Document

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")  # after . ! ? and at blank lines


@CHUNKERS.register(
    "sentence_runs",
    help="whole sentences packed up to chunk_size words, sentence_overlap sentences repeated: an example plugin",
    settings=[Setting("sentence_overlap", int, 1, "sentence_runs chunker: sentences repeated from the previous chunk",
                      minimum=0, maximum=5, stage="chunking")],
)
class SentenceChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        regions = ([(start, start + len(document.page_text(page))) for page, start in enumerate(document.page_starts, 1)]
                   if self.config.per_page else [(0, len(document.text))])
        return [span_chunk(document, start, end) for region in regions for start, end in self._spans(document.text, region)]

    def _spans(self, text: str, region: tuple[int, int]) -> list[tuple[int, int]]:
        sentences = [(start, end) for start, end in _sentences(text, *region)]
        words = [len(text[start:end].split()) for start, end in sentences]
        spans, first = [], 0
        while first < len(sentences):
            last, total = first, words[first]
            while last + 1 < len(sentences) and total + words[last + 1] <= self.config.chunk_size:
                last += 1
                total += words[last]
            spans.append((sentences[first][0], sentences[last][1]))
            if last + 1 >= len(sentences):
                break
            first = max(first + 1, last + 1 - self.config.sentence_overlap)
        return spans


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each sentence in text[start:end], without surrounding whitespace."""
    found, cursor = [], start
    for match in [*SENTENCE_END.finditer(text, start, end), None]:
        stop = match.start() if match else end
        piece = text[cursor:stop]
        if piece.strip():
            left = cursor + len(piece) - len(piece.lstrip())
            found.append((left, left + len(piece.strip())))
        if match:
            cursor = match.end()
    return found
