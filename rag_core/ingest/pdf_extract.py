"""Extracting one PDF: page texts (optionally with tables as Markdown rows), its title and its headings.

- Text: PyMuPDF's plain text per page, ligatures expanded and line-end hyphenation joined.
- Tables (``tables=True``): ``page.find_tables()`` finds them; each table replaces the text blocks it
  covers with one Markdown row per table row (``| header | header |`` first, then ``|---|``), cells
  on one line, dot leaders dropped. Blocks are kept in PyMuPDF's order and a table goes where its
  first block was, so page texts stay in reading order and page numbers stay right (the caller
  builds the document's offsets from these final page texts).
- Title: the PDF metadata title when it has one, else a readable form of the file name
  (``acme_2019-annual_report.pdf`` -> ``acme 2019 annual report``).
- Headings: lines set in a larger font than the page's body text, or short bold lines, found with
  ``get_text("dict")``, plus the PDF outline (table of contents) entries; each located in the page
  text, as (offset in the page text, heading).

Left out: OCR, tables that span pages (each page's part is a table of its own), multi-level
heading hierarchy (the nearest heading above a passage is what ``chunk_context`` uses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rag_core.errors import IngestError

_DOT_LEADER = re.compile(r"(?:\s*\.){3,}\s*")
_SPACES = re.compile(r"\s+")
HEADING_MAX_WORDS = 14
HEADING_SIZE_RATIO = 1.15  # a line this much larger than the body text is a heading


@dataclass(frozen=True)
class ExtractedPdf:
    pages: tuple[str, ...]
    title: str
    headings: tuple[tuple[int, int, str], ...]  # (page, offset in that page's text, heading)
    tables: int  # tables written as Markdown (0 without ``tables``)


def readable_name(doc_id: str) -> str:
    """A title from a file name: no folder, no suffix, separators as spaces."""
    stem = Path(doc_id).stem
    return _SPACES.sub(" ", re.sub(r"[_\-.]+", " ", stem)).strip() or stem


def read_pdf(data: bytes, doc_id: str, tables: bool = False) -> ExtractedPdf:
    """``extract_pdf`` of the PDF file whose bytes are `data`; an ``IngestError`` saying why it cannot be read."""
    import pymupdf

    try:
        pdf = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # PyMuPDF raises its own FileDataError and friends
        raise IngestError(f"corrupt or unreadable PDF ({exc})") from None
    with pdf:
        if pdf.needs_pass:
            raise IngestError("encrypted PDF (password required)")
        try:
            return extract_pdf(pdf, doc_id, tables)
        except Exception as exc:
            raise IngestError(f"corrupt PDF: text extraction failed ({exc})") from None


def extract_pdf(pdf, name: str, tables: bool = False) -> ExtractedPdf:
    """Pages, title and headings of an open ``pymupdf.Document`` (`name`: its file name, for the title)."""
    import pymupdf

    flags = (pymupdf.TEXTFLAGS_TEXT | pymupdf.TEXT_DEHYPHENATE) & ~pymupdf.TEXT_PRESERVE_LIGATURES
    pages: list[str] = []
    headings: list[tuple[int, int, str]] = []
    n_tables = 0
    outline: dict[int, list[str]] = {}
    for _level, title, page_number in pdf.get_toc(simple=True):
        if page_number >= 1 and title.strip():
            outline.setdefault(page_number, []).append(_SPACES.sub(" ", title).strip())
    for number, page in enumerate(pdf, start=1):
        textpage = page.get_textpage(flags=flags)  # laid out once for the text, the blocks and the fonts
        if tables:
            text, found = _page_with_tables(page, textpage)
            n_tables += found
        else:
            text = page.get_text("text", textpage=textpage).strip()
        pages.append(text)
        candidates = _font_headings(page, textpage) + outline.get(number, [])
        headings += [(number, offset, heading) for offset, heading in _locate(text, candidates)]
    meta_title = _SPACES.sub(" ", (pdf.metadata or {}).get("title") or "").strip()
    return ExtractedPdf(tuple(pages), meta_title or readable_name(name), tuple(headings), n_tables)


def _page_with_tables(page, textpage) -> tuple[str, int]:
    """The page's text with each table as Markdown rows in place of its text blocks."""
    found = [table for table in page.find_tables().tables if table.row_count >= 2 and table.col_count >= 2]
    if not found:
        return page.get_text("text", textpage=textpage).strip(), 0
    rects = [tuple(table.bbox) for table in found]
    parts: list[str] = []
    placed: set[int] = set()
    for block in page.get_text("blocks", textpage=textpage):
        x0, y0, x1, y1, text = block[:5]
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        inside = next((i for i, (a, b, c, d) in enumerate(rects) if a <= cx <= c and b <= cy <= d), None)
        if inside is None:
            parts.append(text.strip())
        elif inside not in placed:
            placed.add(inside)
            parts.append(table_markdown(found[inside]))
    parts += [table_markdown(found[i]) for i in range(len(found)) if i not in placed]  # tables of lines only
    return "\n".join(part for part in parts if part), len(found)


def table_markdown(table) -> str:
    """Markdown rows: the header cells (PyMuPDF's ``ColN`` placeholders left blank), ``|---|``, the rows."""
    header = [_cell(name) if name and not re.fullmatch(r"Col\d+", str(name)) else "" for name in table.header.names]
    rows = [[_cell(cell) for cell in row] for row in table.extract()]
    if not table.header.external and rows and [cell for cell in rows[0]] == header:
        rows = rows[1:]  # the header is the table's first row
    rows = [row for row in rows if any(row)]
    line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
    return "\n".join([line(header), line(["---"] * len(header)), *map(line, rows)])


def _cell(value) -> str:
    if value is None:
        return ""
    text = _DOT_LEADER.sub(" ", str(value).replace("**", ""))
    return _SPACES.sub(" ", text).strip().replace("|", "/")


def _font_headings(page, textpage) -> list[str]:
    """Lines in a larger font than the page's body text, or short lines all in bold."""
    lines: list[tuple[str, float, bool]] = []
    sizes: dict[float, int] = {}
    for block in page.get_text("dict", textpage=textpage)["blocks"]:
        for line in block.get("lines", ()):
            spans = [span for span in line["spans"] if span["text"].strip()]
            if not spans:
                continue
            text = _SPACES.sub(" ", "".join(span["text"] for span in spans)).strip()
            size = max(round(span["size"], 1) for span in spans)
            bold = all(span["flags"] & 16 for span in spans)
            lines.append((text, size, bold))
            for span in spans:
                sizes[round(span["size"], 1)] = sizes.get(round(span["size"], 1), 0) + len(span["text"])
    if not sizes:
        return []
    body = max(sizes, key=sizes.get)
    return [text for text, size, bold in lines
            if (size >= body * HEADING_SIZE_RATIO or bold) and _looks_like_heading(text)]


def _looks_like_heading(text: str) -> bool:
    words = text.split()
    return (0 < len(words) <= HEADING_MAX_WORDS and any(ch.isalpha() for ch in text)
            and not text.endswith((".", ",", ";")) and sum(ch.isalpha() for ch in text) >= 3)


def _locate(page_text: str, candidates: list[str]) -> list[tuple[int, str]]:
    """(offset, heading) of each candidate found in the page text, in page order, each offset once."""
    found: dict[int, str] = {}
    cursor = 0
    for heading in candidates:
        offset = page_text.find(heading, cursor)
        if offset < 0:
            offset = page_text.find(heading)
        else:
            cursor = offset + len(heading)
        if offset >= 0:
            found.setdefault(offset, heading)
    return sorted(found.items())
