"""Citation precision, recall and quote support against hand-computed values: a cited page range under each
page-credit rule, a quote on the page it cites, one on another page, and a page that does not exist."""

from __future__ import annotations

import pytest

from rag_core.evaluate.citation_metrics import (citation_metrics, citation_precision, citation_recall, pointer,
                                                quote_support, quotes, unique_citations)
from rag_core.generate.answer import EXTRACTIVE_LABEL
from rag_core.records import Chunk, Document, Hit

PAGES = [f"Page {n} says nothing much." for n in range(1, 11)]
PAGES[2] = "A short tail of page three."  # page 3
PAGES[3] = "Each key may send 600 requests per minute, and bursts above this limit receive HTTP 429 at once."
PAGES[8] = "Keys are rotated every ninety days."  # page 9
DOC = Document.from_pages("api.pdf", PAGES, "hash")
DOCUMENTS = {"api.pdf": DOC}
EVIDENCE = ["api.pdf#p4", "api.pdf#p9"]


def passage(first: int, last: int) -> Hit:
    start, end = DOC.page_starts[first - 1], DOC.page_starts[last] - 1  # up to the end of page `last`
    return Hit(Chunk("c", "api.pdf", DOC.text[start:end], start, end, first, last), 1.0)


GIVEN = [passage(3, 4)]  # holds 27 characters of page 3 and 96 of page 4: most of it on page 4
ANSWER = "Keys send 600 a minute [Source: api.pdf, pages 3-4]. Rotation is quarterly [Source: api.pdf, page 7]."


@pytest.mark.parametrize("credit, precision, recall", [
    # tied: pages 3-4 point to 4 with chance 1/2, page 7 to nothing -> precision (1/2 + 0) / 2; recall: page 4
    # cited with chance 1/2, page 9 never -> (1/2 + 0) / 2
    ("tied", 0.25, 0.25),
    ("page_order", 0.0, 0.0),  # 3-4 points to its first page, 3: no evidence there
    ("majority", 0.5, 0.5),  # 3-4 points to page 4, where most of its passage's text is
])
def test_a_cited_range_under_each_page_credit_rule(credit, precision, recall):
    pointers = [pointer(citation, credit, GIVEN, DOCUMENTS) for citation in unique_citations(ANSWER)]
    assert citation_precision(pointers, EVIDENCE) == pytest.approx(precision)
    assert citation_recall(pointers, EVIDENCE) == pytest.approx(recall)


def test_a_range_whose_passage_was_not_given_points_to_its_first_page_under_majority():
    [citation] = unique_citations("x [Source: api.pdf, pages 3-4]")
    assert pointer(citation, "majority", [], DOCUMENTS) == {("api.pdf", 3): 1.0}


def test_a_page_cited_twice_counts_once_and_no_citation_has_no_precision():
    twice = "A [Source: api.pdf, page 4]. B [Source: api.pdf, page 4]. C [Source: api.pdf, page 5]."
    pointers = [pointer(citation, "tied") for citation in unique_citations(twice)]
    assert citation_precision(pointers, EVIDENCE) == pytest.approx(1 / 2)  # pages 4 and 5: one holds evidence
    assert citation_precision([], EVIDENCE) is None
    assert citation_recall([], EVIDENCE) == 0.0 and citation_recall(pointers, []) is None


def extractive(*blocks: str) -> str:
    return "\n\n".join([EXTRACTIVE_LABEL.format(reason="no LLM configured"), *blocks])


def test_quotes_on_the_page_they_cite_and_on_another_page():
    on_page = "Each key may send 600 requests per minute, and bursts above this limit receive HTTP 429 at once. " \
              "[Source: api.pdf, page 4]"
    elsewhere = "Keys are rotated every ninety days. [Source: api.pdf, page 2]"  # the text is on page 9
    assert quote_support(extractive(on_page), True, DOCUMENTS) == 1.0
    assert quote_support(extractive(elsewhere), True, DOCUMENTS) == 0.0
    assert quote_support(extractive(on_page, elsewhere), True, DOCUMENTS) == 0.5
    # case and white space do not matter; a range covering the page supports it; a cut run's "..." is dropped
    assert quote_support(extractive("EACH KEY   may send 600 ... [Source: api.pdf, pages 3-4]"), True, DOCUMENTS) == 1.0


def test_a_page_or_document_that_does_not_exist_supports_nothing_and_raises_nothing():
    assert quote_support(extractive("Keys are rotated every ninety days. [Source: api.pdf, page 11]"), True,
                         DOCUMENTS) == 0.0
    assert quote_support(extractive("Keys are rotated every ninety days. [Source: gone.pdf, page 9]"), True,
                         DOCUMENTS) == 0.0
    metrics = citation_metrics("It is [Source: api.pdf, page 99].", False, EVIDENCE, "tied", [], DOCUMENTS)
    assert metrics == {"citation/precision": 0.0, "citation/recall": 0.0, "citation/quote_support": None}


def test_quotes_in_a_generated_answer_are_the_spans_between_double_quotes():
    answer = ('The docs say "bursts above this limit receive HTTP 429" [Source: api.pdf, page 4]. They add '
              '"rotated every ninety days" [Source: api.pdf, page 4]. A "short" word is no quote [Source: api.pdf, '
              'page 4]. "Uncited quotes are not counted either."')
    found = quotes(answer, False)
    assert [quote for quote, _ in found] == ["bursts above this limit receive HTTP 429", "rotated every ninety days"]
    assert quote_support(answer, False, DOCUMENTS) == 0.5  # the second is on page 9, not 4
    assert quote_support("No quote here [Source: api.pdf, page 4].", False, DOCUMENTS) is None


def test_a_span_of_the_documents_normalisation_is_the_span_normalised():
    from rag_core.evaluate.relevance import normalised, normalised_span

    hyphenated = Document.from_pages("h.pdf", ["Retrie-\nval  of  \u201cQuoted\u201d TEXT.", "Next page\u2014here."], "h")
    for document in (DOC, hyphenated):
        bounds = [*document.page_starts, len(document.text)]
        for first in range(len(bounds) - 1):
            for last in range(first + 1, len(bounds)):
                start, end = bounds[first], bounds[last]
                assert normalised_span(document, start, end) == normalised(document.text[start:end])
