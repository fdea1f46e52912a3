"""A document's sections from its headings, each with its path ("Guide > Limits > Rate limit"): what the
``structure`` chunker cuts at and what ``chunk_context: title_section_path`` prefixes a chunk with.

- ``.md`` and ``.txt`` documents (any document that is not a PDF): Markdown ATX headings, lines of one to
  six ``#`` then a space and the title (closing ``#`` dropped); lines inside fenced code blocks (```` ``` ````,
  ``~~~``) are not headings. A heading's level is its number of ``#``: a section's path is the titles of
  the nearest headings of each lower level above it, then its own.
- PDFs: the headings the ingester read (``Document.headings``: lines in a larger font than the page's
  body text, short bold lines, outline entries; ``rag_core.ingest.pdf_extract``). They carry no level
  (the extraction cache keeps offsets and text only), so every PDF heading is of level 1 and a PDF
  section's path is its heading alone: a flat path, not a guessed hierarchy.

A section runs from its heading's line to the next heading of any level (a heading followed at once by a
sub-heading is a section holding only its heading line); text before the first heading is a section
with an empty path.
Left out: Setext headings (a line underlined with ``===``), HTML headings, heading levels for PDFs.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from rag_core.records import Document

__all__ = ["PATH_SEPARATOR", "Section", "document_headings", "document_sections", "markdown_headings", "section_at"]

PATH_SEPARATOR = " > "
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass(frozen=True)
class Section:
    start: int  # offset in the document's text of its heading's line (0 for the text before any heading)
    end: int  # where the next section starts (the text's length for the last)
    path: tuple[str, ...]  # the titles from the top level down to its own; () before the first heading

    @property
    def title(self) -> str:
        """The path as one line: ``Guide > Limits > Rate limit``."""
        return PATH_SEPARATOR.join(self.path)


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """(offset of the line, level, title) of each Markdown heading of `text`, outside fenced code."""
    found, offset, fenced = [], 0, None
    for line in text.splitlines(keepends=True):
        fence = _FENCE.match(line)
        if fence and (fenced is None or fence.group(1) == fenced):
            fenced = fence.group(1) if fenced is None else None
        elif fenced is None and (heading := _HEADING.match(line.rstrip("\r\n"))):
            found.append((offset, len(heading.group(1)), heading.group(2).strip()))
        offset += len(line)
    return found


def document_headings(document: Document) -> list[tuple[int, int, str]]:
    """(offset, level, title) of the headings of `document`: a PDF's, each of level 1, or Markdown's."""
    if document.doc_id.lower().endswith(".pdf"):
        return [(offset, 1, title) for offset, title in sorted(document.headings)]
    return markdown_headings(document.text)


def document_sections(document: Document) -> list[Section]:
    """The sections of `document` in text order, covering its whole text."""
    headings = document_headings(document)
    sections = [Section(0, headings[0][0] if headings else len(document.text), ())]
    stack: list[tuple[int, str]] = []  # (level, title) of the headings above the current one
    for number, (offset, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = headings[number + 1][0] if number + 1 < len(headings) else len(document.text)
        sections.append(Section(offset, end, tuple(name for _, name in stack)))
    return [section for section in sections if section.end > section.start]


def section_at(sections: list[Section], offset: int) -> Section:
    """The section (of ``document_sections``) that holds the character at `offset` (an empty one for no text)."""
    if not sections:
        return Section(0, 0, ())
    return sections[max(0, bisect.bisect_right([section.start for section in sections], offset) - 1)]
