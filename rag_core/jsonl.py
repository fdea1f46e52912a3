"""Reading JSON Lines files (golden sets, BEIR corpora and queries, metadata sidecars, judge labels).

``read_jsonl`` yields one JSON object per non-blank line, with its line number and ``"file:line"``
for messages; a line that is not a JSON object raises the caller's own error type, naming the file
and the line. A UTF-8 byte order mark at the start of the file is ignored; a file in another encoding
(UTF-16, Latin-1) and a line nested too deeply to parse (``[[[[...``) raise the caller's error too.
``not_utf8`` words the encoding message for every text file the user gives (config files too).
Left out: other encodings than UTF-8, JSON arrays, writing (each writer formats its own records).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


def not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    """``<path> is not UTF-8 text (...); save it as UTF-8``, naming UTF-16 when its byte order mark is there."""
    data = exc.object if isinstance(exc.object, bytes) else b""
    found = ("it looks like UTF-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff")
             else f"byte 0x{data[exc.start]:02x}: {exc.reason}" if exc.start < len(data) else exc.reason)
    return f"{path} is not UTF-8 text ({found}); save it as UTF-8"


def read_jsonl(path: Path, error: type[Exception]) -> Iterator[tuple[int, str, dict]]:
    """(line number, "file:line", record) for each non-blank line; a line that is not a JSON object
    raises `error` naming the file and line."""
    with path.open(encoding="utf-8-sig") as lines:  # a BOM, as some editors write, is not part of line 1
        numbered = enumerate(lines, start=1)
        while True:
            try:
                line_number, line = next(numbered)
            except StopIteration:
                return
            except UnicodeDecodeError as exc:
                raise error(not_utf8(path, exc)) from None
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{where}: malformed JSON ({exc.msg}, column {exc.colno})") from None
            except RecursionError:
                raise error(f"{where}: JSON nested too deeply to read") from None
            if not isinstance(record, dict):
                raise error(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield line_number, where, record
