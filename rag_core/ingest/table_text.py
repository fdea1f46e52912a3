"""Table rows as text that can be matched (the ``table_text`` setting): each row of a table found on a
page written as one line with its table's caption, its row label and every value with its column header::

    Segment results (in millions) | Americas | 2019: $1,234 | 2018: (1,100)

- Caption: a short text line just above the table (at most ``CAPTION_MAX_WORDS`` words, within
  ``CAPTION_GAP`` points of its top), else the nearest heading above it (``pdf_extract``'s headings).
- Column headers: PyMuPDF's header row (its ``ColN`` placeholders left blank), joined column-wise with
  the rows right below it that have no row label and no amount in them (``Year ended`` / ``2019``
  ``2018``: years count as words there), so two-row headers give ``Year ended 2019``.
- Values: cells without a letter or a digit are joined to their neighbour, as financial tables set
  them in columns of their own: ``$`` | ``1,234`` -> ``$1,234`` (under the header of either),
  ``(1,100`` | ``)`` -> ``(1,100)``; empty cells are left out; a row with a label and no value (a
  section line) gives no line.
- Where: each line is anchored at the offset of its row in the page text (its first cell found there,
  words matched across line breaks), else at its table's first row; ``rag_core.retrieve.context``
  appends the lines anchored inside a chunk to the chunk's *indexed* text. The text shown, cited and
  given to the LLM is unchanged.

Left out: tables across pages (each page's part is a table, the header only on the first), nested
headers wider than one column, a table's unit line applied to its cells.
"""

from __future__ import annotations

import re
from typing import Sequence

CAPTION_MAX_WORDS = 25
CAPTION_GAP = 30.0  # points between the bottom of a caption line and the top of its table
_YEAR = re.compile(r"(?:fy\s?)?(?:19|20)\d\d", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_SPACES = re.compile(r"\s+")
_OPENERS = "$\u20ac\u00a3\u00a5("


def _words_only(cell: str) -> bool:
    """A header cell: no digit, or a year (``2019``, ``FY2019``) or a date's words."""
    return not _DIGIT.search(cell) or all(_YEAR.fullmatch(word.strip(",.")) or not _DIGIT.search(word)
                                           for word in cell.split())


def split_header(header: Sequence[str], rows: Sequence[Sequence[str]]) -> tuple[list[str], list[list[str]]]:
    """(the column headers, the body rows): `header` joined with the leading rows that have no label
    and only words or years; rows equal to the header dropped."""
    names = [cell.strip() for cell in header]
    body = [list(row) for row in rows]
    if body and [cell.strip() for cell in body[0]] == names:
        body = body[1:]
    while body and not body[0][0].strip() and any(cell.strip() for cell in body[0][1:]) and all(
            _words_only(cell) for cell in body[0][1:]):
        names = [" ".join(part for part in (name, cell.strip()) if part) for name, cell in zip(names, body[0])]
        body = body[1:]
    return names, body


def _values(names: Sequence[str], row: Sequence[str]) -> list[tuple[str, str]]:
    """(header, value) of the row's cells after its label, symbol-only cells joined to a neighbour."""
    pairs: list[tuple[str, str]] = []
    prefix, prefix_header = "", ""
    for name, cell in zip(names[1:], row[1:]):
        cell = cell.strip()
        if not cell:
            continue
        if not any(ch.isalnum() for ch in cell):
            if cell[0] in _OPENERS or not pairs:
                prefix, prefix_header = prefix + cell, prefix_header or name
            else:
                pairs[-1] = (pairs[-1][0], pairs[-1][1] + cell)
            continue
        pairs.append((name or prefix_header, prefix + cell))
        prefix, prefix_header = "", ""
    return pairs


def row_lines(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> list[tuple[int, str]]:
    """(row index in `rows`, line) for each row with a value: ``caption | label | header: value | ...``."""
    names, body = split_header(header, rows)
    names = list(names) + [""] * max(0, max((len(row) for row in body), default=0) - len(names))
    first = len(rows) - len(body)
    lines = []
    for number, row in enumerate(body, start=first):
        values = _values(names, row)
        if not values:
            continue
        label = row[0].strip() if row else ""
        parts = [caption] if caption else []
        parts += [label] if label else []
        parts += [f"{name}: {value}" if name else value for name, value in values]
        lines.append((number, " | ".join(parts)))
    return lines


def locate_rows(page_text: str, rows: Sequence[Sequence[str]], lines: Sequence[tuple[int, str]],
                start: int = 0) -> list[tuple[int, str]]:
    """(offset in `page_text`, line) of each row line: where the row's first non-empty cell is found
    (after the previous row's), else the previous row's offset (the first row's: `start`)."""
    located = []
    cursor = anchor = start
    for number, line in lines:
        cell = next((cell for cell in rows[number] if cell.strip()), "")
        words = cell.split()
        found = re.compile(r"\s+".join(map(re.escape, words))).search(page_text, cursor) if words else None
        if found is not None:
            anchor, cursor = found.start(), found.end()
        located.append((anchor, line))
    return located


def clean_cell(value: object) -> str:
    """One cell on one line: no dot leaders, no ``**``, single spaces, ``|`` as ``/``."""
    if value is None:
        return ""
    text = re.sub(r"(?:\s*\.){3,}\s*", " ", str(value).replace("**", ""))
    return _SPACES.sub(" ", text).strip().replace("|", "/")
