"""Citations scored against the golden evidence: precision and recall of the cited pages, and whether each
quote is on the page it cites. No LLM.

An answer's citations (``[Source: doc, page N]``, ``pages N-M``: ``rag_core.generate.citations``) are read
once each (a page cited twice counts once). A cited range points to one page, chosen by the run's
``page_credit`` rule (``rag_core.evaluate.page_credit``), as a passage over those pages would be credited:

- ``tied``: each of its n pages with probability 1/n (so metrics are expected values, as page metrics are);
- ``page_order``: its first page;
- ``majority``: the page holding most of the text of the passage given to the answer with that range (its
  first page when no passage given matches it).

With the evidence pages of the query (the page level of the qrels: ``rag_core.evaluate.relevance``):

- ``citation/precision``: over the answer's citations, the mean chance that the page it points to holds
  evidence (no value when the answer cites nothing);
- ``citation/recall``: over the evidence pages, the mean chance that some citation points to it
  (``1 - prod(1 - p)`` over the citations; no value for a query without evidence pages).

Example: evidence on pages 4 and 9, citations ``pages 3-4`` and ``page 7`` (its passage mostly on page 4):
tied, precision (1/2 + 0) / 2 = 0.25 and recall (1/2 + 0) / 2 = 0.25; page_order, 0 and 0; majority, 0.5
and 0.5.

``citation/quote_support``: the share of an answer's quotes that occur on a page they cite. A quote is each
passage of an extractive answer (which quotes everything: the text of each paragraph, its citations and a
trailing ``...`` removed) and, in a generated answer, each span of three or more words between double quotes
in a sentence with a citation. It is looked up in the text of the cited pages of the cited document after the
normalisation relevance uses (case folded, white space and line-break hyphens removed:
``rag_core.evaluate.relevance.normalised``). A citation naming a page or a document that does not exist
supports nothing: the quote counts as unsupported, never as an error. No value when the answer quotes nothing.
Left out: whether a paraphrase is supported (the judge's faithfulness), fuzzy matches of quotes.
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

from rag_core.doc_ids import escape_controls
from rag_core.evaluate.metric_registry import METRICS
from rag_core.evaluate.page_credit import pages_by_share
from rag_core.evaluate.relevance import normalised, normalised_span
from rag_core.generate.citations import Citation, parse_citations, split_sentences, strip_citations
from rag_core.records import Document, Hit

METRICS.declare("precision", ("citation",), "share of the answer's cited pages that hold golden evidence "
                "(cited ranges under page_credit)", best=1.0)
METRICS.declare("recall", ("citation",), "share of the golden evidence pages the answer cites (cited ranges under "
                "page_credit)", best=1.0)
METRICS.declare("quote_support", ("citation",), "share of the answer's quotes found on a page they cite "
                "(normalised text; a page that does not exist supports nothing)", best=1.0)

_QUOTED = re.compile(r"[\"\u201c]([^\"\u201c\u201d]+)[\"\u201d]")
_NUMBERED = re.compile(r"^\s*\[\d+\]\s*")
Pointer = dict[tuple[str, int], float]  # (document as printed, page) -> chance the citation points to it


def unique_citations(text: str) -> list[Citation]:
    """The answer's well-formed citations, each (document, range) once, in order."""
    return list(dict.fromkeys(parse_citations(text)))


def pointer(citation: Citation, credit: str, passages: Sequence[Hit] = (),
            documents: Mapping[str, Document] | None = None) -> Pointer:
    """Where `citation` points under the `credit` rule (see the module docstring)."""
    doc, pages = citation.doc_id.strip(), range(citation.page, citation.last_page + 1)
    if credit == "tied":
        return {(doc, page): 1 / len(pages) for page in pages}
    if credit == "majority" and len(pages) > 1:
        passage = next((hit.chunk for hit in passages if escape_controls(hit.chunk.doc_id) == doc
                        and (hit.chunk.page_start, hit.chunk.page_end) == (pages[0], pages[-1])), None)
        if passage is not None and passage.doc_id in (documents or {}):
            first = pages_by_share(passage, documents)[0]
            return {(doc, int(first.rpartition("#p")[2])): 1.0}
    if credit not in ("tied", "majority", "page_order"):
        raise ValueError(f"unknown page_credit {credit!r}; valid: tied, majority, page_order")
    return {(doc, pages[0]): 1.0}


def _evidence(relevant_pages: Sequence[str]) -> set[tuple[str, int]]:
    """Page ids (``doc#pN``) -> (document as printed, page)."""
    return {(escape_controls(doc), int(page)) for doc, _, page in (item.rpartition("#p") for item in relevant_pages)}


def citation_precision(pointers: Sequence[Pointer], relevant_pages: Sequence[str]) -> float | None:
    evidence = _evidence(relevant_pages)
    if not pointers:
        return None
    return sum(sum(chance for page, chance in where.items() if page in evidence) for where in pointers) / len(pointers)


def citation_recall(pointers: Sequence[Pointer], relevant_pages: Sequence[str]) -> float | None:
    evidence = _evidence(relevant_pages)
    if not evidence:
        return None
    return sum(1 - math.prod(1 - where.get(page, 0.0) for where in pointers) for page in evidence) / len(evidence)


def quotes(text: str, extractive: bool) -> list[tuple[str, list[Citation]]]:
    """(quote, the citations it comes with) of an answer (see the module docstring)."""
    if extractive:
        blocks = [block for block in re.split(r"\n\s*\n", text) if parse_citations(block)]
        found = [(_NUMBERED.sub("", strip_citations(block)).strip(), parse_citations(block)) for block in blocks]
    else:
        found = [(match.group(1).strip(), parse_citations(sentence)) for sentence in split_sentences(text)
                 if parse_citations(sentence) for match in _QUOTED.finditer(strip_citations(sentence))
                 if len(match.group(1).split()) >= 3]
    return [(quote.removesuffix("...").strip(), cited) for quote, cited in found if quote.removesuffix("...").strip()]


def on_cited_page(quote: str, cited: Sequence[Citation], documents: Mapping[str, Document]) -> bool:
    """Is `quote` (normalised) in the text of a page range it cites? A page or a document that does not
    exist supports nothing."""
    needle = normalised(quote)
    by_printed = {escape_controls(doc_id): document for doc_id, document in documents.items()}
    for citation in cited:
        document = by_printed.get(citation.doc_id.strip())
        if needle and document is not None and citation.last_page <= document.n_pages:
            start = document.page_starts[citation.page - 1]
            end = document.page_starts[citation.last_page] if citation.last_page < document.n_pages else len(document.text)
            if needle in normalised_span(document, start, end):
                return True
    return False


def quote_support(text: str, extractive: bool, documents: Mapping[str, Document]) -> float | None:
    found = quotes(text, extractive)
    if not found:
        return None
    return sum(on_cited_page(quote, cited, documents) for quote, cited in found) / len(found)


def citation_metrics(text: str, extractive: bool, relevant_pages: Sequence[str], credit: str,
                     passages: Sequence[Hit], documents: Mapping[str, Document]) -> dict[str, float | None]:
    """``citation/precision``, ``/recall`` and ``/quote_support`` of one answer (None: no value)."""
    pointers = [pointer(citation, credit, passages, documents) for citation in unique_citations(text)]
    return {"citation/precision": citation_precision(pointers, relevant_pages),
            "citation/recall": citation_recall(pointers, relevant_pages),
            "citation/quote_support": quote_support(text, extractive, documents)}


__all__ = ["citation_metrics", "citation_precision", "citation_recall", "on_cited_page", "pointer", "quote_support",
           "quotes", "unique_citations"]
