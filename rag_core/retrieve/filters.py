"""Metadata filters: which documents a query may retrieve from, decided before any ranking.

A filter maps a metadata key to a value (equality) or a list of values (any of them); every key must
match (``{"company": "3M", "year": ["2018", "2019"]}``). Values compare as text, so ``2018`` and
``"2018"`` are the same. Keys are the documents' metadata (``rag_core.ingest.metadata``) and the
built-in ``doc_id``, ``title`` and ``pages``. A filter is resolved here to the ids of the documents it
keeps; both retrievers then rank only those: the vector store through its ``where`` (``doc_id`` any
of), BM25 by scoring only their chunks. An unknown key or a filter that keeps no document is a
``FilterError`` (exit code 2) that lists what exists.
CLI form: ``--where company=3M --where year=2018``; a key given twice means any of its values.
Left out: ranges and negation (``year >= 2018``, ``company != X``).
"""

from __future__ import annotations

from typing import Iterable

from rag_core.errors import BadInput
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.metadata import Filter, metadata_fields, normalise


class FilterError(BadInput, ValueError):
    """A filter names an unknown key or keeps no document."""


def parse_where(items: Iterable[str]) -> dict[str, list[str]]:
    """``["company=3M", "year=2018", "year=2019"]`` -> ``{"company": ["3M"], "year": ["2018", "2019"]}``."""
    parsed: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise FilterError(f"`where` {item!r}: expected KEY=VALUE, e.g. `where` year=2018")
        parsed.setdefault(key.strip(), []).append(value.strip())
    return parsed


def matching_documents(corpus: Corpus, where: Filter | None) -> list[str] | None:
    """Ids of the documents `where` keeps, in corpus order; None when there is no filter."""
    clauses = normalise(where)
    if not clauses:
        return None
    fields = {document.doc_id: metadata_fields(document) for document in corpus.documents}
    known = sorted({key for values in fields.values() for key in values})
    for key, _ in clauses:
        if key not in known:
            raise FilterError(f"unknown metadata key {key!r} in the filter; keys the documents have: {', '.join(known)}")
    kept = [doc_id for doc_id, values in fields.items() if all(values.get(key) in allowed for key, allowed in clauses)]
    if not kept:
        shown = "; ".join(f"{key}: {', '.join(sorted({v.get(key, '') for v in fields.values()})[:8])}"
                          for key, _ in clauses if key not in ("doc_id", "title"))
        raise FilterError(f"no document matches the filter {describe(where)}" + (f" (values found: {shown})" if shown else ""))
    return kept


def describe(where: Filter | None) -> str:
    return " and ".join(f"{key}={'|'.join(values)}" for key, values in normalise(where)) or "(none)"
