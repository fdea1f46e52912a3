"""The golden set: questions with the evidence that answers them, read from a JSONL file.

One query per line, independent of any chunking (SPEC section 5)::

    {"id": "q07", "query": "What is the default API rate limit?", "answer": "600 requests per minute",
     "evidence": [{"source": "api-reference.pdf", "page": 3, "text": "Each key may send 600 requests"}]}

``evidence[].source`` is required, ``page`` (1-based) and ``text`` are optional. An optional
``"filter": {"company": "3M", "year": 2018}`` restricts that query's retrieval to the documents
whose metadata match (``rag_core.retrieve.filters``). The simple format
``{"id"?, "query", "relevant_ids": [chunk ids]}`` is accepted too, with a warning: chunk ids belong
to one chunking, so its metrics cannot be compared across chunk sizes.

Every error is a ``GoldenSetError`` that names the file, the line and the query id; each query
keeps its ``file:line`` (``GoldenQuery.label``) for the errors found later, against the documents.
A UTF-8 byte order mark at the start of the file is ignored (``rag_core.jsonl``); a line holding text that
is not valid Unicode (a lone surrogate: the JSON escape ``"\\ud800"`` alone) is an error naming its line, as
no UTF-8 file (nor an MLflow dataset's export) can hold it. This file only reads and checks the
set; turning evidence into relevant chunks, pages and documents is ``rag_core.evaluate.relevance``, and BEIR
qrels are read by ``rag_core.evaluate.beir``.
Left out: other encodings than UTF-8, JSON arrays (one object per line only).
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable

from rag_core.errors import BadInput
from rag_core.ingest.metadata import normalise
from rag_core.jsonl import read_jsonl
from rag_core.writes import not_unicode

EVIDENCE_KEYS = ("source", "page", "text")


class GoldenSetError(BadInput, ValueError):
    """The golden set (or its evidence) is malformed or does not fit the corpus."""


@dataclass(frozen=True)
class Evidence:
    source: str  # doc_id of the document holding the answer, e.g. "guides/api-reference.pdf"
    page: int | None = None  # 1-based page, or None: anywhere in the document
    text: str | None = None  # passage as copied from the document, or None: the whole page / document


@dataclass(frozen=True)
class GoldenQuery:
    id: str
    query: str
    answer: str | None
    evidence: tuple[Evidence, ...]
    relevant_ids: tuple[str, ...] = ()  # simple format only: chunk ids of one chunking
    line: str = field(default="", compare=False)  # "file:line" it was read from, for errors found later (rag_core.evaluate.relevance)
    filter: tuple[tuple[str, tuple[str, ...]], ...] = ()  # metadata filter of this query (rag_core.retrieve.filters)

    @property
    def label(self) -> str:
        """How errors name the query: ``golden.jsonl:12 (query q07)``."""
        return f"{self.line} (query {self.id})" if self.line else f"query {self.id}"

    @property
    def sources(self) -> tuple[str, ...]:
        """Evidence documents, in order, each once."""
        return tuple(dict.fromkeys(item.source for item in self.evidence))


def load_golden(path: str | Path, doc_ids: Collection[str] | None = None) -> list[GoldenQuery]:
    """Read a golden set; with `doc_ids`, every evidence source must be one of them."""
    path = Path(path)
    if not path.is_file():
        raise GoldenSetError(f"golden set not found: {path}")
    return parse_golden(read_jsonl(path, GoldenSetError), str(path), doc_ids)


def parse_golden(records: Iterable[tuple[int, str, dict]], name: str,
                 doc_ids: Collection[str] | None = None) -> list[GoldenQuery]:
    """The golden set of `records` ((line number, "name:line", line) each; an MLflow golden dataset's
    too), checked as ``load_golden`` checks a file; `name` names it in messages."""
    known_docs = set(doc_ids) if doc_ids is not None else None
    queries: list[GoldenQuery] = []
    first_line_of: dict[str, int] = {}  # query id -> line it was defined on
    simple_format_ids: list[str] = []
    for line_number, where, record in records:
        query = _parse_record(record, where, line_number, known_docs)
        if query.id in first_line_of:
            raise GoldenSetError(
                f"{name}:{line_number} (query {query.id}): duplicate query id, "
                f"first used on line {first_line_of[query.id]}"
            )
        first_line_of[query.id] = line_number
        if not query.evidence:
            simple_format_ids.append(query.id)
        queries.append(query)

    if not queries:
        raise GoldenSetError(f"{name}: the golden set is empty (expected one JSON object per line)")
    if simple_format_ids:
        warnings.warn(
            f"{name}: {len(simple_format_ids)} queries ({', '.join(simple_format_ids[:5])}"
            f"{', ...' if len(simple_format_ids) > 5 else ''}) give relevant_ids, which are tied to one "
            "chunking: their metrics are not comparable across chunk sizes. Give evidence "
            "(source, page, text) instead.",
            UserWarning,
            stacklevel=2,
        )
    return queries


def _parse_record(record: dict, line: str, line_number: int, known_docs: set[str] | None) -> GoldenQuery:
    query_id = str(record["id"]) if record.get("id") not in (None, "") else f"q{line_number}"
    where = f"{line} (query {query_id})"

    problem = not_unicode(record)  # "\ud800" in JSON: no UTF-8 file, MLflow export or logged table can hold it
    if problem:
        raise GoldenSetError(f"{where}: {problem}; write the character itself (or its \\uXXXX surrogate pair)")
    query = record.get("query")
    if not isinstance(query, str) or not query.strip():
        raise GoldenSetError(f"{where}: missing 'query' (a non-empty string)")
    answer = record.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise GoldenSetError(f"{where}: 'answer' must be a string")

    relevant_ids = _parse_relevant_ids(record.get("relevant_ids"), where)
    raw_evidence = record.get("evidence")
    if raw_evidence is None and not relevant_ids:
        raise GoldenSetError(f"{where}: missing 'evidence' (a list of {{source, page?, text?}})")
    if raw_evidence is not None and (not isinstance(raw_evidence, list) or not raw_evidence):
        raise GoldenSetError(f"{where}: 'evidence' must be a non-empty list of {{source, page?, text?}}")
    evidence = tuple(
        _parse_evidence(item, f"{where}, evidence {index + 1}", known_docs)
        for index, item in enumerate(raw_evidence or [])
    )
    return GoldenQuery(query_id, query, answer, evidence, relevant_ids, line, _parse_filter(record.get("filter"), where))


def _parse_filter(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``"filter": {"company": "3M", "year": [2018, 2019]}``: each key one value or a list of values."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
            isinstance(item, (str, int, float)) or (isinstance(item, list) and item) for item in value.values()):
        raise GoldenSetError(f"{where}: 'filter' must be an object of metadata key -> value or list of values")
    return normalise(value)


def _parse_evidence(item: Any, where: str, known_docs: set[str] | None) -> Evidence:
    if not isinstance(item, dict):
        raise GoldenSetError(f"{where}: expected an object {{source, page?, text?}}")
    unknown = [key for key in item if key not in EVIDENCE_KEYS]
    if unknown:
        raise GoldenSetError(f"{where}: unknown key {unknown[0]!r}; evidence keys are {', '.join(EVIDENCE_KEYS)}")

    source = item.get("source")
    if not isinstance(source, str) or not source.strip():
        raise GoldenSetError(f"{where}: evidence without 'source' (the document it comes from)")
    if known_docs is not None and source not in known_docs:
        hint = known_documents_hint(source, known_docs)
        raise GoldenSetError(f"{where}: source {source!r} is not in the corpus; {hint}")

    page = item.get("page")
    if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
        raise GoldenSetError(f"{where}: 'page' must be a page number >= 1, got {page!r}")

    text = item.get("text")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise GoldenSetError(
            f"{where}: 'text' must be a non-empty string; leave it out to mean the whole page or document"
        )
    return Evidence(source, page, text)


def _parse_relevant_ids(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise GoldenSetError(f"{where}: 'relevant_ids' must be a non-empty list of chunk ids")
    return tuple(dict.fromkeys(value))


def known_documents_hint(source: str, known_docs: Collection[str]) -> str:
    """`did you mean ...` plus a few known documents, for an unknown evidence source."""
    listed = sorted(known_docs)
    by_name = [doc for doc in listed if Path(doc).name == Path(source).name]
    close = by_name or difflib.get_close_matches(source, listed, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
    shown = ", ".join(repr(doc) for doc in listed[:5])
    more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
    return f"{hint}known documents: {shown}{more}" if listed else "the corpus has no documents"
