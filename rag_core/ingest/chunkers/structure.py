"""The ``structure`` chunker: chunks from the document's sections (``rag_core.ingest.sections``: Markdown
headings of ``.md`` and ``.txt`` files; for PDFs the headings the ingester read from font size and weight
and the outline, each of one level).

Each section (a heading's line and the text up to the next heading of any level; the text before the
first heading is one too) is cut by size as ``recursive`` cuts a text (``split_span``: paragraphs,
lines, sentences, words, merged up to ``chunk_size`` with ``overlap`` repeated inside the section). The
rule: a chunk never holds text of two sections, so a section smaller than ``chunk_size`` is one chunk,
however small (a heading followed at once by a sub-heading is a chunk of its heading line alone), and
no overlap crosses a heading. With ``per_page`` a section is also cut at each page.
Each chunk's section path ("Guide > Limits > Rate limit") is what ``chunk_context: title_section_path``
prefixes its indexed text with (``rag_core.retrieve.context``), for this chunker or any other.
Reads ``chunk_size``, ``overlap``, ``chunk_unit`` and ``per_page``; costs a pass over the lines (Markdown)
and recursive's splitting, no embedding.
Left out: merging small sections into their parent (never across a section, on purpose), headings of
formats other than Markdown ATX and the PDF headings the ingester reads.
"""

from __future__ import annotations

from rag_core.ingest.chunkers.base import Chunker, page_regions, span_chunk
from rag_core.ingest.chunkers.recursive import split_span
from rag_core.ingest.sections import document_sections
from rag_core.records import Chunk, Document

__all__ = ["StructureChunker"]


class StructureChunker(Chunker):
    def chunk(self, document: Document) -> list[Chunk]:
        config, text = self.config, document.text
        sections = document_sections(document)
        chunks = []
        for first, last in page_regions(document, config.per_page):
            for section in sections:
                start, end = max(section.start, first), min(section.end, last)
                if start < end:
                    chunks += [span_chunk(document, a, b)
                               for a, b in split_span(text, (start, end), config.chunk_size, config.overlap, self.count)]
        return chunks
