"""Reading JSON Lines files (golden sets, BEIR corpora and queries, metadata sidecars, judge labels).

``read_jsonl`` yields one JSON object per non-blank line, with its line number and ``"file:line"``
for messages; a line that is not a JSON object raises the caller's own error type, naming the file
and the line. A UTF-8 byte order mark at the start of the file is ignored.
Left out: other encodings than UTF-8, JSON arrays, writing (each writer formats its own records).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


def read_jsonl(path: Path, error: type[Exception]) -> Iterator[tuple[int, str, dict]]:
    """(line number, "file:line", record) for each non-blank line; a line that is not a JSON object
    raises `error` naming the file and line."""
    with path.open(encoding="utf-8-sig") as lines:  # a BOM, as some editors write, is not part of line 1
        for line_number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{where}: malformed JSON ({exc.msg}, column {exc.colno})") from None
            if not isinstance(record, dict):
                raise error(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield line_number, where, record
