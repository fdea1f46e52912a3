"""Citation parsing and checks against the passages given, with hand-counted expected values."""

from __future__ import annotations

import pytest

from llm_fixtures import make_hit
from rag_core.generate.citations import (
    Citation,
    average_citation_checks,
    check_citations,
    parse_citations,
    split_sentences,
)

HITS = [
    make_hit("api/reference.pdf", "Each key may send 600 requests per minute.", page=3),
    make_hit("guides/runbook.pdf", "Bursts receive HTTP 429.", page=7, page_end=9),
]


def test_parse_both_forms_written_by_chunk_citation():
    text = f"A {HITS[0].chunk.citation()} and B {HITS[1].chunk.citation()}."
    assert parse_citations(text) == [Citation("api/reference.pdf", 3), Citation("guides/runbook.pdf", 7, 9)]


def test_parse_tolerates_spacing_case_dashes_and_shared_brackets():
    text = "x [source:  a.pdf ,  Page 2 ] y [Source: b.pdf, pages 4\u20135] z [Source: a.pdf, page 1; b.pdf, page 4]"
    assert parse_citations(text) == [
        Citation("a.pdf", 2), Citation("b.pdf", 4, 5), Citation("a.pdf", 1), Citation("b.pdf", 4),
    ]


def test_parse_keeps_commas_in_document_names():
    assert parse_citations("[Source: reports/Q1, final.pdf, page 2]") == [Citation("reports/Q1, final.pdf", 2)]


def test_parse_skips_malformed():
    assert parse_citations("[Source: a.pdf] [Source: a.pdf, page x] [Source: a.pdf, pages 5-3]") == []


@pytest.mark.parametrize(
    ("citation", "valid"),
    [
        ("[Source: api/reference.pdf, page 3]", True),
        ("[Source: guides/runbook.pdf, page 8]", True),  # a page inside the passage's range
        ("[Source: guides/runbook.pdf, pages 7-9]", True),
        ("[Source: guides/runbook.pdf, pages 8-9]", True),  # a range inside the passage's range
        ("[Source: guides/runbook.pdf, pages 8-10]", False),  # page 10 was not given
        ("[Source: api/reference.pdf, page 4]", False),  # wrong page
        ("[Source: other.pdf, page 3]", False),  # a document not given
        ("[Source: reference.pdf, page 3]", False),  # the bare file name is not the document id
        ("[Source: api/reference.pdf]", False),  # malformed: counted, and invalid
    ],
)
def test_validity_against_given_passages(citation, valid):
    check = check_citations(f"Claim {citation}.", HITS)
    assert (check.n_citations, check.n_valid, check.all_valid) == (1, int(valid), valid)
    assert check.invalid == ([] if valid else [citation])


def test_sentence_share_with_citations_after_the_full_stop():
    answer = (
        "Each key may send 600 requests per minute. [Source: api/reference.pdf, page 3]\n"
        "Bursts receive HTTP 429 [Source: guides/runbook.pdf, page 7]. "
        "This is common practice! Is it configurable? The documents do not say."
    )
    # sentences: 600/min (cited), bursts (cited), common practice, configurable?, do not say -> 2 of 5
    check = check_citations(answer, HITS)
    assert check.n_sentences == 5
    assert check.cited_sentence_share == pytest.approx(2 / 5)
    assert (check.n_citations, check.n_valid, check.invalid) == (2, 2, [])
    assert check.valid_share == 1.0


def test_split_sentences_ignores_bullets_and_keeps_decimals():
    text = "- Version 2.5 added it [Source: a.pdf, page 1].\n-\n\n* It costs 3.50 dollars."
    assert split_sentences(text) == ["- Version 2.5 added it [Source: a.pdf, page 1].", "* It costs 3.50 dollars."]


def test_answer_without_citations():
    check = check_citations("Six hundred. No source given.", HITS)
    assert (check.n_citations, check.cited_sentence_share, check.all_valid, check.valid_share) == (0, 0.0, True, None)
    assert check_citations("", HITS).cited_sentence_share == 0.0


def test_average_citation_checks():
    # 1 of 2 citations valid, 2 of 2 sentences cited
    first = check_citations("A [Source: api/reference.pdf, page 3]. B [Source: nope.pdf, page 1].", HITS)
    second = check_citations("A [Source: api/reference.pdf, page 3]. B.", HITS)  # 1/1 valid, 1/2 cited
    uncited = check_citations("Nothing cited.", HITS)  # no valid share; 0 cited
    averages = average_citation_checks([first, second, uncited, None])
    assert averages == {
        "citation/valid_share": pytest.approx((0.5 + 1.0) / 2),
        "citation/cited_sentence_share": pytest.approx((1.0 + 0.5 + 0.0) / 3),
    }
    assert average_citation_checks([None]) == {}
