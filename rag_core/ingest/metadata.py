"""Document metadata: from a sidecar ``metadata.jsonl`` in the input folder and a file-name pattern.

Sidecar: one JSON object per line, ``{"doc_id": "reports/acme-2019.pdf", "company": "ACME",
"year": 2019}`` (``id`` is accepted for ``doc_id``); every other key is metadata. Pattern (the
``metadata_pattern`` setting): a regular expression with named groups searched in each document id,
e.g. ``(?P<company>[A-Z]+)_(?P<year>\\d{4})_(?P<doc_type>\\w+)``; a group that matched gives its
value. Values are kept as text (``2019`` and ``"2019"`` are the same filter value). Every document
also has ``doc_id``, ``title`` and ``pages``, which filters can use too (``metadata_fields``).
A filter's hashable, order-free form (``normalise``) lives here too, beside ``as_text``: golden sets
(``rag_core.evaluate.golden``) and the retrieval filters (``rag_core.retrieve.filters``) both use it.
Left out: typed values (ranges, dates), nested objects (they are kept as their JSON text).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from rag_core.errors import BadInput
from rag_core.jsonl import read_jsonl
from rag_core.records import Document

SIDECAR = "metadata.jsonl"
Filter = Mapping[str, "str | Sequence[str]"]  # metadata key -> the value, or any of the values, a document must have


class MetadataError(BadInput, ValueError):
    """The sidecar or the pattern is malformed (exit code 2)."""


def read_sidecar(path: Path) -> dict[str, dict[str, str]]:
    """doc_id -> metadata; {} when there is no sidecar."""
    if not path.is_file():
        return {}
    found: dict[str, dict[str, str]] = {}
    for _, where, record in read_jsonl(path, MetadataError):
        doc_id = record.pop("doc_id", None) or record.pop("id", None)
        if not doc_id:
            raise MetadataError(f"{where}: missing 'doc_id' (the document's path below the input folder)")
        found[str(doc_id)] = {str(key): as_text(value) for key, value in record.items() if value is not None}
    return found


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def check_pattern(pattern: str) -> str | None:
    """Why `pattern` cannot be a metadata pattern, or None."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"is not a regular expression ({exc})"
    return None if compiled.groupindex else "has no named group, e.g. (?P<year>\\d{4})"


def pattern_metadata(pattern: str, doc_id: str) -> dict[str, str]:
    match = re.search(pattern, doc_id)
    return {key: value for key, value in match.groupdict().items() if value is not None} if match else {}


def attach_metadata(document: Document, extra: Mapping[str, str]) -> Document:
    """`document` with `extra` added (a key it has keeps its value); the same object when nothing is new."""
    merged = {**extra, **document.meta}
    if merged == document.meta:
        return document
    return replace(document, metadata=tuple(sorted(merged.items())))


def metadata_fields(document: Document) -> dict[str, str]:
    """Everything a filter can match: the built-in fields and the document's metadata."""
    return {"doc_id": document.doc_id, "title": document.title, "pages": str(document.n_pages), **document.meta}


def normalise(where: Filter | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A hashable, order-free form of `where` (for cache keys): ((key, (values...)), ...)."""
    if not where:
        return ()
    return tuple(sorted((str(key), tuple(sorted({as_text(v) for v in (value if isinstance(value, (list, tuple, set)) else [value])})))
                        for key, value in where.items()))
