"""Contextual chunk text: what is embedded and BM25-indexed for a chunk (the ``chunk_context`` setting).

- ``none``: the chunk's own text.
- ``title``: its document's title first (the PDF metadata title, and the readable file name when that
  adds words the title lacks: ``ADBE 10K FY15 | ADOBE 2015 10K``), then a blank line, then the text.
- ``title_heading``: the title, then the nearest heading above the chunk (``Document.headings``,
  from font sizes and the PDF outline), then the text.
- ``title_section_path``: the title, then the path of the section the chunk starts in
  (``rag_core.ingest.sections``: ``Guide > Limits > Rate limit`` from the Markdown headings of a ``.md`` or
  ``.txt`` file; a PDF's headings have no level, so its path is its nearest heading alone), then the text.
  What the ``structure`` chunker's chunks are cut by, offered to any chunker.

With ``table_text`` the document carries its tables' rows as lines (``Document.table_rows``,
``rag_core.ingest.table_text``): the lines anchored inside a chunk follow its text, after a blank line,
whatever ``chunk_context`` is.

Only the indexed text changes: ``Chunk.text`` (shown, cited and given to the LLM) stays the exact
span of the document. The prefix is document text, data like the rest: it never goes into a prompt.
Left out: LLM-written chunk summaries ("contextual retrieval" with a model), heading paths of
several levels for PDFs.
"""

from __future__ import annotations

import bisect
import re
from typing import Sequence

from rag_core.ingest.corpus import Corpus
from rag_core.ingest.pdf_extract import readable_name
from rag_core.ingest.sections import Section, document_sections, section_at
from rag_core.records import Chunk, Document

CONTEXT_VERSION = 1  # part of the index keys: bump when the prefix format changes
_WORD = re.compile(r"\w+")


def document_title(document: Document) -> str:
    """The title, with the readable file name added when it has words the title lacks."""
    name = readable_name(document.doc_id)
    title = document.title or name
    title_words = {word.lower() for word in _WORD.findall(title)}
    if any(word.lower() not in title_words for word in _WORD.findall(name)):
        return f"{title} | {name}"
    return title


def nearest_heading(document: Document, offset: int) -> str:
    """The last heading that starts at or before `offset` ('' when none)."""
    starts = [start for start, _ in document.headings]
    position = bisect.bisect_right(starts, offset) - 1
    return document.headings[position][1] if position >= 0 else ""


def context_prefix(document: Document, chunk: Chunk, mode: str, sections: list[Section] | None = None) -> str:
    """What `chunk`'s indexed text starts with under `mode`; `sections` (``document_sections(document)``)
    spares ``title_section_path`` finding them again for each chunk of a document."""
    if mode == "none":
        return ""
    parts = [document_title(document)]
    if mode == "title_heading":
        heading = nearest_heading(document, chunk.char_start)
        if heading and heading not in parts[0]:
            parts.append(heading)
    elif mode == "title_section_path":
        path = section_at(document_sections(document) if sections is None else sections, chunk.char_start).title
        if path:
            parts.append(path)
    return "\n".join(parts) + "\n\n"


def table_lines(document: Document, start: int, end: int) -> list[str]:
    """The table row lines of `document` anchored in ``text[start:end]`` (``table_text``), in text order."""
    offsets = [offset for offset, _ in document.table_rows]
    first, last = bisect.bisect_left(offsets, start), bisect.bisect_left(offsets, end)
    return [line for _, line in document.table_rows[first:last]]


def indexed_texts(chunks: Sequence[Chunk], corpus: Corpus, mode: str) -> list[str]:
    """The text each chunk is embedded and BM25-indexed with."""
    documents = corpus.by_id
    if mode == "none" and not any(document.table_rows for document in corpus.documents):
        return [chunk.text for chunk in chunks]
    texts = []
    sections: dict[str, list[Section]] = {}  # doc id -> its sections (title_section_path), found once
    for chunk in chunks:
        document = documents[chunk.doc_id]
        if mode == "title_section_path" and chunk.doc_id not in sections:
            sections[chunk.doc_id] = document_sections(document)
        lines = table_lines(document, chunk.char_start, chunk.char_end) if document.table_rows else []
        texts.append(context_prefix(document, chunk, mode, sections.get(chunk.doc_id)) + chunk.text
                     + ("\n\n" + "\n".join(lines) if lines else ""))
    return texts
