"""Extracting one PDF: page texts (optionally with tables as Markdown rows), its title and its headings.

- Text: PyMuPDF's plain text per page, ligatures expanded and line-end hyphenation joined.
- Tables (``tables=True``): ``page.find_tables()`` finds them; each table replaces the text blocks it
  covers with one Markdown row per table row (``| header | header |`` first, then ``|---|``), cells
  on one line, dot leaders dropped. Blocks are kept in PyMuPDF's order and a table goes where its
  first block was, so page texts stay in reading order and page numbers stay right (the caller
  builds the document's offsets from these final page texts).
- Table rows (``rows=True``, the ``table_text`` setting): each table row as a line with its caption,
  label and column headers (``rag_core.ingest.table_text``), anchored at its offset in the page text;
  the page texts are those of the same extraction without ``rows`` (the shown text does not change).
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
from rag_core.ingest.table_text import CAPTION_GAP, CAPTION_MAX_WORDS, clean_cell, locate_rows, row_lines

_SPACES = re.compile(r"\s+")
HEADING_MAX_WORDS = 14
HEADING_SIZE_RATIO = 1.15  # a line this much larger than the body text is a heading


@dataclass(frozen=True)
class ExtractedPdf:
    pages: tuple[str, ...]
    title: str
    headings: tuple[tuple[int, int, str], ...]  # (page, offset in that page's text, heading)
    tables: int  # tables written as Markdown (0 without ``tables``)
    table_rows: tuple[tuple[int, int, str], ...] = ()  # (page, offset in that page's text, row line), with ``rows``


def readable_name(doc_id: str) -> str:
    """A title from a file name: no folder, no suffix, separators as spaces."""
    stem = Path(doc_id).stem
    return _SPACES.sub(" ", re.sub(r"[_\-.]+", " ", stem)).strip() or stem


def read_pdf(data: bytes, doc_id: str, tables: bool = False, rows: bool = False) -> ExtractedPdf:
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
            return extract_pdf(pdf, doc_id, tables, rows)
        except Exception as exc:
            raise IngestError(f"corrupt PDF: text extraction failed ({exc})") from None


def extract_pdf(pdf, name: str, tables: bool = False, rows: bool = False) -> ExtractedPdf:
    """Pages, title, headings (and with `rows` table row lines) of an open ``pymupdf.Document`` (`name`:
    its file name, for the title)."""
    import pymupdf

    flags = (pymupdf.TEXTFLAGS_TEXT | pymupdf.TEXT_DEHYPHENATE) & ~pymupdf.TEXT_PRESERVE_LIGATURES
    pages: list[str] = []
    headings: list[tuple[int, int, str]] = []
    table_rows: list[tuple[int, int, str]] = []
    n_tables = 0
    outline: dict[int, list[str]] = {}
    for _level, title, page_number in pdf.get_toc(simple=True):
        if page_number >= 1 and title.strip():
            outline.setdefault(page_number, []).append(_SPACES.sub(" ", title).strip())
    for number, page in enumerate(pdf, start=1):
        textpage = page.get_textpage(flags=flags)  # laid out once for the text, the blocks and the fonts
        found = _find_tables(page) if tables or rows else []
        blocks = page.get_text("blocks", textpage=textpage) if found else []
        words = page.get_text("words", textpage=textpage) if found else []
        read = [_read_table(words, table) for table in found]  # (header, rows) of each table
        if tables:
            text, starts = _page_with_tables(page, textpage, found, blocks, read)
            n_tables += len(found)
        else:
            text = page.get_text("text", textpage=textpage).strip()
        pages.append(text)
        candidates = _font_headings(page, textpage) + outline.get(number, [])
        headings += [(number, offset, heading) for offset, heading in _locate(text, candidates)]
        for position, table in enumerate(found if rows else ()):
            start = starts[position] if tables else _table_start(blocks, text, table)
            caption = _caption(blocks, table) or _heading_before(headings, number, start)
            header, cells = read[position]
            lines = row_lines(header, cells, caption)
            table_rows += [(number, offset, line) for offset, line in locate_rows(text, cells, lines, start)]
    meta_title = _SPACES.sub(" ", (pdf.metadata or {}).get("title") or "").strip()
    return ExtractedPdf(tuple(pages), meta_title or readable_name(name), tuple(headings), n_tables, tuple(table_rows))


def _find_tables(page) -> list:
    """The page's tables of at least two rows and two columns (PyMuPDF ``find_tables``)."""
    return [table for table in page.find_tables().tables if table.row_count >= 2 and table.col_count >= 2]


def _inside(block, rect) -> bool:
    """Whether the centre of a text block (x0, y0, x1, y1, ...) lies in `rect`."""
    cx, cy = (block[0] + block[2]) / 2, (block[1] + block[3]) / 2
    return rect[0] <= cx <= rect[2] and rect[1] <= cy <= rect[3]


def _page_with_tables(page, textpage, found: list, blocks: list, read: list) -> tuple[str, list[int]]:
    """The page's text with each table as Markdown rows in place of its text blocks, and where each
    table's Markdown starts in it (`read`: each table's header and rows, ``_read_table``)."""
    if not found:
        return page.get_text("text", textpage=textpage).strip(), []
    rects = [tuple(table.bbox) for table in found]
    parts: list[tuple[str, int | None]] = []  # (text, the table it is the Markdown of)
    placed: set[int] = set()
    for block in blocks:
        inside = next((i for i, rect in enumerate(rects) if _inside(block, rect)), None)
        if inside is None:
            parts.append((block[4].strip(), None))
        elif inside not in placed:
            placed.add(inside)
            parts.append((table_markdown(*read[inside]), inside))
    parts += [(table_markdown(*read[i]), i) for i in range(len(found)) if i not in placed]  # tables of lines only
    starts = [0] * len(found)
    offset = 0
    for text, table in (part for part in parts if part[0]):
        if table is not None:
            starts[table] = offset
        offset += len(text) + 1
    return "\n".join(text for text, _ in parts if text), starts


def _table_start(blocks: list, text: str, table) -> int:
    """Where the table's first text block is in the plain page text (0 when not found)."""
    for block in blocks:
        if _inside(block, tuple(table.bbox)) and block[4].split():
            found = re.compile(r"\s+".join(map(re.escape, block[4].split()))).search(text)
            if found:
                return found.start()
    return 0


def _caption(blocks: list, table) -> str:
    """A short line just above the table (its caption or unit line), '' when there is none."""
    x0, top, x1, _ = table.bbox
    best, best_bottom = "", None
    for block in blocks:
        text = _SPACES.sub(" ", block[4]).strip()
        if (text and block[3] <= top + 1 and top - block[3] <= CAPTION_GAP and block[2] >= x0 and block[0] <= x1
                and len(text.split()) <= CAPTION_MAX_WORDS and (best_bottom is None or block[3] > best_bottom)):
            best, best_bottom = text, block[3]
    return best


def _heading_before(headings: list[tuple[int, int, str]], page: int, offset: int) -> str:
    """The last heading found before `offset` on `page`, or on an earlier page ('' when none)."""
    before = [heading for number, at, heading in headings if number < page or (number == page and at <= offset)]
    return before[-1] if before else ""


def _read_table(words: list, table) -> tuple[list[str], list[list[str]]]:
    """(header cells, rows of cells) of a table: the page's words whose centre lies in each cell's box,
    in reading order. (``Table.extract`` puts a comma set lower than its digits on a line of its own,
    ``1234`` + newline + ``,`` for ``1,234``, and its header names lose their spaces:
    ``NameofEachExchange``.) The header is the first row, or the row PyMuPDF found above the table
    (``header.external``)."""
    boxes = [list(row.cells) for row in table.rows]
    if table.header.external:
        boxes.insert(0, list(table.header.cells))
    found: list[list[list]] = [[[] for _ in row] for row in boxes]
    for word in words:
        cx, cy = (word[0] + word[2]) / 2, (word[1] + word[3]) / 2
        for r, row in enumerate(boxes):
            cell = next((c for c, box in enumerate(row) if box and box[0] <= cx <= box[2] and box[1] <= cy <= box[3]),
                        None)
            if cell is not None:
                found[r][cell].append(word)
                break
    cells = [[clean_cell(" ".join(word[4] for word in sorted(cell, key=lambda word: word[5:8]))) for cell in row]
             for row in found]
    return cells[0], cells[1:] if table.header.external else cells


def table_markdown(header: list[str], rows: list[list[str]]) -> str:
    """Markdown rows: the header cells, ``|---|``, the rows (from ``_read_table``)."""
    if rows and rows[0] == header:
        rows = rows[1:]  # the header is the table's first row
    rows = [row for row in rows if any(row)]
    line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
    return "\n".join([line(header), line(["---"] * len(header)), *map(line, rows)])


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
