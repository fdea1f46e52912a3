"""The plain, typed records that pass between stages.

Shapes:
- ``Document``: one input file, its whole text and where each page starts in it.
- ``Chunk``: a span of a document's text with its page span and a deterministic id.
- ``Hit``: a chunk as ranked by a stage, with the score and rank it had at every stage it went through.
- ``Passage``: a span of one page of a document, with where in the document it lies (golden questions
  are written from passages: ``rag_core.evaluate.passage_sampling``, ``rag_core.generate.question_writer``).
- runs (for ``ranx``): ``dict[query_id, dict[item_id, float]]``.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

# Pages are joined with this separator in ``Document.text``; it is also a paragraph break for chunking.
PAGE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Document:
    doc_id: str  # path relative to the input root, POSIX style: "guides/runbook.pdf"
    text: str  # all pages joined with PAGE_SEPARATOR
    page_starts: tuple[int, ...]  # page_starts[i] = offset in `text` where page i+1 begins
    content_hash: str  # sha256 of the source file's bytes
    # What extraction found and the user said about the document (rag_core.ingest.pdf_extract, .metadata).
    title: str = ""  # PDF metadata title, else a readable form of the file name ("" for older stores)
    headings: tuple[tuple[int, str], ...] = ()  # (offset in `text`, heading), in text order
    metadata: tuple[tuple[str, str], ...] = ()  # (key, value) from a sidecar or a file-name pattern, sorted
    extraction: str = ""  # extraction settings other than the default ("tables"), part of the fingerprint
    table_rows: tuple[tuple[int, str], ...] = ()  # (offset in `text`, row line): table_text (rag_core.ingest.table_text)
    source: str = field(default="", compare=False)  # the file it was read from (absolute), to extract again

    @classmethod
    def from_pages(cls, doc_id: str, pages: list[str], content_hash: str, *,
                   page_headings: Sequence[tuple[int, int, str]] = (),
                   page_table_rows: Sequence[tuple[int, int, str]] = (), **extra: Any) -> "Document":
        """Join `pages`; `page_headings` are (1-based page, offset in that page, heading), `page_table_rows`
        (1-based page, offset in that page, row line)."""
        starts, parts, offset = [], [], 0
        for page_text in pages:
            starts.append(offset)
            parts.append(page_text)
            offset += len(page_text) + len(PAGE_SEPARATOR)
        headings = tuple((starts[page - 1] + at, heading) for page, at, heading in page_headings)
        if page_table_rows:
            extra["table_rows"] = tuple(sorted(((starts[page - 1] + at, line) for page, at, line in page_table_rows),
                                               key=lambda row: row[0]))
        return cls(doc_id, PAGE_SEPARATOR.join(parts), tuple(starts), content_hash, headings=headings, **extra)

    @property
    def meta(self) -> dict[str, str]:
        return dict(self.metadata)

    @property
    def n_pages(self) -> int:
        return len(self.page_starts)

    def page_at(self, offset: int) -> int:
        """1-based page number of the character at `offset`."""
        return max(1, bisect.bisect_right(self.page_starts, offset))

    def page_text(self, page: int) -> str:
        start = self.page_starts[page - 1]
        end = self.page_starts[page] - len(PAGE_SEPARATOR) if page < self.n_pages else len(self.text)
        return self.text[start:end]


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    text: str  # == document.text[char_start:char_end]
    char_start: int
    char_end: int
    page_start: int  # 1-based, inclusive
    page_end: int

    @staticmethod
    def make_id(doc_id: str, char_start: int, char_end: int, text: str) -> str:
        digest = hashlib.sha1(f"{doc_id}\x00{char_start}\x00{char_end}\x00{text}".encode()).hexdigest()
        return digest[:20]

    def citation(self) -> str:
        """``[Source: doc, page N]`` (or ``pages N-M`` when the chunk crosses pages)."""
        if self.page_start == self.page_end:
            return f"[Source: {self.doc_id}, page {self.page_start}]"
        return f"[Source: {self.doc_id}, pages {self.page_start}-{self.page_end}]"


class ScoredId(NamedTuple):
    """One result of a retriever or fusion: an item id and its score (higher is better)."""

    id: str
    score: float


@dataclass(frozen=True)
class StageScore:
    rank: int  # 1-based
    score: float


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float  # score at the last stage the hit went through
    stages: dict[str, StageScore] = field(default_factory=dict)  # "dense" | "bm25" | "fused" | "rerank"


@dataclass(frozen=True)
class Passage:
    doc_id: str
    page: int  # 1-based
    position: str  # "beginning" | "middle" | "end": which third of its document
    text: str  # == document.text[char_start:char_end]
    char_start: int
    char_end: int

    @property
    def has_number(self) -> bool:
        return bool(_DIGIT.search(self.text))

    @property
    def sentences(self) -> int:
        return len(_SENTENCE_END.findall(self.text))


_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_DIGIT = re.compile(r"\d")

Run = dict[str, dict[str, float]]  # query_id -> item_id -> score
