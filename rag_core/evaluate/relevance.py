"""From golden evidence to relevant items, derived again for every chunking (SPEC section 5).

Three steps:
1. ``locate_evidence``: find an evidence passage in its document's text. First an exact match after
   normalisation (case folded, Unicode NFKC, curly quotes and dashes made plain, all whitespace and
   line-break hyphenation removed, so "retrie-\\nval" == "retrieval" and "Cash Flow s" == "Cash Flows"),
   then fuzzy alignment with rapidfuzz, for text copied from a PDF viewer or another extractor.
2. ``build_qrels``: relevant items at three levels, ``level -> query_id -> item_id -> 1``:
   - chunk: from an evidence source, and its character span overlaps the located passage
     (evidence without text: its page range contains the evidence page; without page either: any
     chunk of the source);
   - page (``"doc#pN"``): the pages the located passage covers (or the evidence page; for evidence
     naming only a document, every page of it);
   - doc: the evidence sources.
3. ``collapse_ranking``: ranked chunks -> ranked chunk ids, pages or documents, first occurrence wins.

Relevance is binary (1). Computing metrics from these is ``rag_core.evaluate.metrics``.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from array import array
import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from rapidfuzz import fuzz

from rag_core.evaluate.golden import Evidence, GoldenQuery, GoldenSetError, known_documents_hint
from rag_core.evaluate.page_credit import flatten, page_groups, page_item_id
from rag_core.records import Chunk, Document

LEVELS = ("chunk", "page", "doc")

QrelsByLevel = dict[str, dict[str, dict[str, int]]]  # level -> query_id -> item_id -> relevance (1)

# Characters that extractors render differently; mapped before case folding.
_PLAIN_CHARS = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
    "\u00ad": "",  # soft hyphen
}
# A hyphen that splits a word across lines: letter, '-', spaces, a line break, spaces, letter.
_LINE_BREAK_HYPHEN = re.compile(r"(?<=[^\W\d_])-[^\S\n]*\n\s*(?=[^\W\d_])")


class EvidenceNotFound(GoldenSetError):
    """An evidence passage cannot be aligned with its document well enough."""


# --- 1. locating evidence ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Normalised:
    text: str  # normalised characters, no whitespace
    offsets: array  # of int64; offsets[i] = index in the original text of normalised char i


def _normalise(text: str) -> _Normalised:
    dropped = {match.start() for match in _LINE_BREAK_HYPHEN.finditer(text)}  # hyphen offsets
    chars: list[str] = []
    offsets = array("q")
    for index, char in enumerate(text):
        if index in dropped or char.isspace():
            continue
        if char.isascii():
            folded = char.lower()
        elif char in _PLAIN_CHARS:
            folded = _PLAIN_CHARS[char]
        else:
            folded = unicodedata.normalize("NFKC", char).casefold()  # "ﬁ" -> "fi"
        for out in folded:
            if not out.isspace():
                chars.append(out)
                offsets.append(index)
    return _Normalised("".join(chars), offsets)


def normalised(text: str) -> str:
    """`text` as evidence is matched: case folded, NFKC, plain quotes and dashes, no white space and no
    line-break hyphens (``"Cash Flow s"`` and ``"cash flows"`` give the same)."""
    return _normalise(text).text


@functools.lru_cache(maxsize=64)
def _normalised_document(document: Document) -> _Normalised:
    return _normalise(document.text)


def normalised_span(document: Document, start: int, end: int) -> str:
    """``normalised(document.text[start:end])`` from the document's normalisation, made once and cached: a
    look-up on a page costs a slice, not a pass over the page. (A line-break hyphen at either edge of the span is
    dropped here as in the whole document.)"""
    whole = _normalised_document(document)
    return whole.text[bisect.bisect_left(whole.offsets, start):bisect.bisect_left(whole.offsets, end)]


def locate_evidence(
    document: Document, text: str, min_similarity: float = 0.8, *, page: int | None = None
) -> tuple[int, int]:
    """(start, end) of `text` in `document.text`; `page` (1-based) is a hint that narrows the search.

    Exact match after normalisation first (with `page`, the occurrence nearest that page), then
    rapidfuzz ``partial_ratio_alignment``: on the page and its neighbours when a page is given,
    then on the whole document. A best alignment below `min_similarity` (0..1) raises
    ``EvidenceNotFound``. Results are cached in-process.

    Speed: the document is normalised once (~15 ms for 20 pages, cached); a look-up then takes well
    under a millisecond, fuzzy ones included (rapidfuzz aligns a 400-character passage against 60,000
    characters in ~0.4 ms), so the whole document is searched in one piece rather than in windows.
    """
    return _locate_cached(document, text, min_similarity, page)


@functools.lru_cache(maxsize=4096)
def _locate_cached(document: Document, text: str, min_similarity: float, page: int | None) -> tuple[int, int]:
    if page is not None and not 1 <= page <= document.n_pages:
        raise GoldenSetError(f"page {page} is outside {document.doc_id!r} ({document.n_pages} pages)")
    needle = _normalise(text).text
    if not needle:
        raise EvidenceNotFound(f"evidence for {document.doc_id!r} has no text to look for")
    haystack = _normalised_document(document)

    starts = _all_occurrences(haystack.text, needle)
    if starts:
        start = min(starts, key=lambda s: abs(document.page_at(haystack.offsets[s]) - page)) if page else starts[0]
        return _original_span(haystack, start, start + len(needle))

    # Fuzzy: the hinted page with a page either side (a passage may cross a page break), then all.
    regions = [(0, len(haystack.text))]
    if page is not None and document.n_pages > 1:
        first = document.page_starts[max(page - 2, 0)]
        last = document.page_starts[page + 1] if page + 1 < document.n_pages else len(document.text)
        lo, hi = bisect.bisect_left(haystack.offsets, first), bisect.bisect_left(haystack.offsets, last)
        regions.insert(0, (lo, hi))
    best = (0.0, 0, 0)  # (score 0..100, start, end) in normalised offsets
    for lo, hi in dict.fromkeys(regions):  # each region once
        best = max(best, _align(needle, haystack.text, lo, hi), key=lambda found: found[0])
        if best[0] >= 100 * min_similarity:
            return _original_span(haystack, best[1], best[2])

    snippet = text if len(text) <= 80 else text[:77] + "..."
    raise EvidenceNotFound(
        f"evidence text not found in {document.doc_id!r}"
        f"{f' (page {page} hint)' if page else ''}: {snippet!r}; best alignment "
        f"{best[0] / 100:.0%} < min_similarity {min_similarity:.0%}"
    )


def _all_occurrences(haystack: str, needle: str) -> list[int]:
    found, start = [], haystack.find(needle)
    while start != -1:
        found.append(start)
        start = haystack.find(needle, start + 1)
    return found


def _align(needle: str, haystack: str, lo: int, hi: int) -> tuple[float, int, int]:
    """Best (score, start, end) of `needle` inside ``haystack[lo:hi]``, offsets into `haystack`."""
    region = haystack[lo:hi]
    if not region:
        return (0.0, lo, lo)
    if len(needle) > len(region):  # the passage is longer than the region: compare it whole
        return (fuzz.ratio(needle, region), lo, hi)
    alignment = fuzz.partial_ratio_alignment(needle, region)
    start, end = _refine_span(needle, haystack, lo + alignment.dest_start, lo + alignment.dest_end)
    return (alignment.score, start, end)


def _refine_span(needle: str, haystack: str, start: int, end: int) -> tuple[int, int]:
    """Move the ends of an aligned window (always ``len(needle)`` long) to where the passage really
    starts and ends: "rnoney" for "money" makes the window one character too long."""
    slack = min(20, max(3, len(needle) // 10))

    def best(candidates: range, span: Callable[[int], tuple[int, int]], current: int) -> int:
        # highest ratio; on a tie the candidate nearest the current end
        return max(candidates, key=lambda c: (fuzz.ratio(needle, haystack[slice(*span(c))]), -abs(c - current)))

    start = best(range(max(0, start - slack), min(end, start + slack + 1)), lambda s: (s, end), start)
    end = best(range(max(start + 1, end - slack), min(len(haystack), end + slack) + 1), lambda e: (start, e), end)
    return start, end


def _original_span(normalised: _Normalised, start: int, end: int) -> tuple[int, int]:
    return normalised.offsets[start], normalised.offsets[end - 1] + 1


# --- 2. relevant items per level -----------------------------------------------------------------
def build_qrels(
    queries: Iterable[GoldenQuery], documents: Mapping[str, Document], chunks: Sequence[Chunk]
) -> QrelsByLevel:
    """Relevant chunks, pages and documents of every query (all appear at every level, maybe empty)."""
    chunks_of: dict[str, list[Chunk]] = {}  # doc_id -> its chunks
    for chunk in chunks:
        chunks_of.setdefault(chunk.doc_id, []).append(chunk)
    chunk_by_id = {chunk.id: chunk for chunk in chunks}

    qrels: QrelsByLevel = {level: {} for level in LEVELS}
    for query in queries:
        relevant_chunks: dict[str, None] = {}  # ordered sets of item ids
        relevant_pages: dict[str, None] = {}
        relevant_docs: dict[str, None] = {}
        for evidence in query.evidence:
            document = documents.get(evidence.source)
            if document is None:
                raise GoldenSetError(
                    f"{query.label}: evidence source {evidence.source!r} is not a document of the corpus; "
                    + known_documents_hint(evidence.source, documents.keys())
                )
            found_chunks, pages = _evidence_items(query.label, evidence, document, chunks_of.get(document.doc_id, []))
            relevant_chunks.update(dict.fromkeys(found_chunks))
            relevant_pages.update(dict.fromkeys(page_item_id(document.doc_id, page) for page in pages))
            relevant_docs[document.doc_id] = None

        if query.relevant_ids:  # simple format: chunk ids given, pages and documents follow from them
            unknown = [chunk_id for chunk_id in query.relevant_ids if chunk_id not in chunk_by_id]
            if unknown:
                raise GoldenSetError(
                    f"{query.label}: relevant_ids {', '.join(map(repr, unknown[:3]))} are not chunks of "
                    "this chunking (relevant_ids are tied to the chunking they were written for)"
                )
            given = [chunk_by_id[chunk_id] for chunk_id in query.relevant_ids]
            relevant_chunks.update(dict.fromkeys(collapse_ranking(given, "chunk")))
            relevant_pages.update(dict.fromkeys(collapse_ranking(given, "page")))
            relevant_docs.update(dict.fromkeys(collapse_ranking(given, "doc")))

        qrels["chunk"][query.id] = dict.fromkeys(relevant_chunks, 1)
        qrels["page"][query.id] = dict.fromkeys(relevant_pages, 1)
        qrels["doc"][query.id] = dict.fromkeys(relevant_docs, 1)
    return qrels


def _evidence_items(
    where: str, evidence: Evidence, document: Document, doc_chunks: list[Chunk]
) -> tuple[list[str], range]:
    """(relevant chunk ids, relevant pages) of one piece of evidence; errors start with `where`."""
    if evidence.page is not None and not 1 <= evidence.page <= document.n_pages:
        raise GoldenSetError(
            f"{where}: evidence page {evidence.page} is outside {document.doc_id!r} "
            f"({document.n_pages} pages)"
        )
    if evidence.text is not None:
        try:
            start, end = locate_evidence(document, evidence.text, page=evidence.page)
        except EvidenceNotFound as exc:
            raise EvidenceNotFound(f"{where}: {exc}") from exc
        hits = [c.id for c in doc_chunks if c.char_start < end and c.char_end > start]
        return hits, range(document.page_at(start), document.page_at(end - 1) + 1)
    if evidence.page is not None:
        hits = [c.id for c in doc_chunks if c.page_start <= evidence.page <= c.page_end]
        return hits, range(evidence.page, evidence.page + 1)
    return [c.id for c in doc_chunks], range(1, document.n_pages + 1)


# --- 3. rankings at each level -------------------------------------------------------------------
def collapse_ranking(chunks_ranked: Sequence[Chunk], level: str) -> list[str]:
    """Ranked chunks -> ranked item ids at `level`; an item keeps the rank of its first occurrence.

    At page level a chunk that crosses pages contributes each of its pages, in page order (the
    ``page_order`` credit; page metrics use ``rag_core.evaluate.page_credit.page_groups``).
    """
    if level == "chunk":
        items: Iterable[str] = (chunk.id for chunk in chunks_ranked)
    elif level == "page":
        items = flatten(page_groups(chunks_ranked, "page_order"))
    elif level == "doc":
        items = (chunk.doc_id for chunk in chunks_ranked)
    else:
        raise ValueError(f"unknown level {level!r}; valid levels: {', '.join(LEVELS)}")
    return list(dict.fromkeys(items))


def evidence_as_pages(queries: Sequence[GoldenQuery], documents: Mapping[str, Document]) -> list[GoldenQuery]:
    """`queries` with each evidence text replaced by the pages it spans in `documents`, for scoring a
    corpus extracted another way (tables as Markdown rows): the text is located where it was copied
    from, and the page numbers hold in both extractions. Page and document relevance are unchanged;
    chunk relevance becomes the chunks on those pages."""
    converted = []
    for query in queries:
        evidence: list[Evidence] = []
        for item in query.evidence:
            document = documents.get(item.source)
            if item.text is None or document is None:
                evidence.append(item)
                continue
            try:
                start, end = locate_evidence(document, item.text, page=item.page)
            except EvidenceNotFound as exc:
                raise EvidenceNotFound(f"{query.label}: {exc}") from exc
            evidence += [Evidence(item.source, page) for page in range(document.page_at(start), document.page_at(end - 1) + 1)]
        converted.append(dataclasses.replace(query, evidence=tuple(evidence)))
    return converted
