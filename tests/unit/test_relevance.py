"""Evidence -> relevant chunks, pages and documents (rag_core.evaluate.relevance)."""

from __future__ import annotations

import json
import time

import pytest

from rag_core.evaluate.golden import Evidence, GoldenQuery, GoldenSetError, load_golden
from rag_core.records import Chunk, Document
from rag_core.evaluate.relevance import EvidenceNotFound, build_qrels, collapse_ranking, locate_evidence

PAGES = [
    # page 1
    "Retrieval-augmented generation combines search with a language model. "
    "The retriever finds passages for the generator.",
    # page 2
    "Rate limits protect the service. Each key may send 600 requests per minute. "
    "Bursts above the limit are rejected with status 429.",
    # page 3
    "The Statement of Cash Flows shows how money moves. "
    "Operating, investing and financing activities are reported separately.",
]
SENTENCES = [  # (page, sentence): the chunks of chunking "S", one per sentence
    (1, "Retrieval-augmented generation combines search with a language model."),
    (1, "The retriever finds passages for the generator."),
    (2, "Rate limits protect the service."),
    (2, "Each key may send 600 requests per minute."),
    (2, "Bursts above the limit are rejected with status 429."),
    (3, "The Statement of Cash Flows shows how money moves."),
    (3, "Operating, investing and financing activities are reported separately."),
]


@pytest.fixture
def report() -> Document:
    return Document.from_pages("report.pdf", PAGES, "hash-report")


@pytest.fixture
def other() -> Document:
    return Document.from_pages("other.pdf", ["Nothing relevant here.", "Nor here."], "hash-other")


def chunk(document: Document, chunk_id: str, start_text: str, end_text: str) -> Chunk:
    """The chunk from the first occurrence of `start_text` to the end of `end_text` after it."""
    start = document.text.index(start_text)
    end = document.text.index(end_text, start) + len(end_text)
    return Chunk(
        chunk_id, document.doc_id, document.text[start:end], start, end, document.page_at(start),
        document.page_at(end - 1),
    )


@pytest.fixture
def sentence_chunks(report) -> list[Chunk]:
    """Chunking S: s1..s7, one per sentence (s1, s2 on page 1; s3-s5 page 2; s6, s7 page 3)."""
    return [chunk(report, f"s{i}", sentence, sentence) for i, (_, sentence) in enumerate(SENTENCES, start=1)]


@pytest.fixture
def window_chunks(report) -> list[Chunk]:
    """Chunking W: 4 chunks cut mid-sentence, one of them across the page 2/3 break.

    w1 = page 1 whole                                  (page 1)
    w2 = "Rate limits ... Each key may send"            (page 2)
    w3 = "600 requests per minute. Bursts ... 429."     (page 2)
    w4 = "status 429." ... through the end of page 3     (pages 2-3; overlaps w3 on "status 429.")
    """
    return [
        chunk(report, "w1", "Retrieval-augmented", "generator."),
        chunk(report, "w2", "Rate limits", "Each key may send"),
        chunk(report, "w3", "600 requests", "status 429."),
        chunk(report, "w4", "status 429.", "reported separately."),
    ]


def query(query_id: str, *evidence: Evidence) -> GoldenQuery:
    return GoldenQuery(query_id, "question?", None, evidence)


# --- locate_evidence -----------------------------------------------------------------------------
# min_similarity=1.0 accepts exact matches only: these must not need the fuzzy fallback.
def test_exact_match_ignores_case_and_whitespace(report):
    start, end = locate_evidence(report, "each KEY may\n  send 600\trequests", min_similarity=1.0)
    assert report.text[start:end] == "Each key may send 600 requests"


def test_line_break_hyphenation_is_ignored_both_ways():
    hyphenated = Document.from_pages("h.pdf", ["Dense retrie-\nval and sparse retrieval differ."], "h")
    start, end = locate_evidence(hyphenated, "dense retrieval", min_similarity=1.0)
    assert hyphenated.text[start:end] == "Dense retrie-\nval"

    plain = Document.from_pages("p.pdf", ["Dense retrieval and sparse retrieval differ."], "p")
    start, end = locate_evidence(plain, "Dense retrie-\n  val and", min_similarity=1.0)
    assert plain.text[start:end] == "Dense retrieval and"


def test_a_hyphen_that_is_not_a_line_break_is_kept():
    document = Document.from_pages("k.pdf", ["A state-of-the-art retriever."], "k")
    with pytest.raises(EvidenceNotFound):
        locate_evidence(document, "stateoftheart", min_similarity=1.0)


def test_cash_flow_s_finds_cash_flows(report):
    start, end = locate_evidence(report, "Cash Flow s")
    assert report.text[start:end] == "Cash Flows"


def test_text_from_another_extractor_is_aligned_fuzzily(report):
    # OCR-style errors ("FIows", "rnoney"), a ligature and curly quotes: no exact match exists.
    evidence = "The Statement of Cash FIows shows how rnoney moves. Operating, investing and ﬁnancing"
    start, end = locate_evidence(report, evidence)
    assert report.text[start:end] == (
        "The Statement of Cash Flows shows how money moves. Operating, investing and financing"
    )
    assert report.page_at(start) == 3


def test_ligatures_and_typographic_quotes_match_exactly():
    document = Document.from_pages("q.pdf", ['The "fine" print\u2014read it.'], "q")
    start, end = locate_evidence(document, "the \u201cﬁne\u201d print-read", min_similarity=1.0)
    assert document.text[start:end] == 'The "fine" print\u2014read'


def test_page_hint_picks_the_occurrence_on_that_page():
    repeated = Document.from_pages("r.pdf", ["Keep keys secret.", "Unrelated.", "Keep keys secret."], "r")
    assert repeated.page_at(locate_evidence(repeated, "keep keys secret")[0]) == 1
    assert repeated.page_at(locate_evidence(repeated, "keep keys secret", page=3)[0]) == 3


def test_evidence_below_the_threshold_is_not_found(report):
    with pytest.raises(EvidenceNotFound, match=r"report\.pdf.*quantum chromodynamics"):
        locate_evidence(report, "quantum chromodynamics of gluon fields")
    # An extraction error is accepted at 0.8 but not when near-identity is demanded.
    assert locate_evidence(report, "Each kev may send 600 requests")
    with pytest.raises(EvidenceNotFound):
        locate_evidence(report, "Each kev may send 600 requests", min_similarity=0.99)


def test_locating_is_fast_on_twenty_pages():
    words = "liquidity covenant revenue segment forecast hedging accrual depreciation".split()
    pages = [" ".join(f"{words[(page + i) % len(words)]}{page}x{i}" for i in range(400)) for page in range(20)]
    document = Document.from_pages("long.pdf", pages, "long")  # ~20 x 5,000 characters
    started = time.perf_counter()
    for page in range(1, 21):
        passage = document.page_text(page)[1000:1400]
        damaged = passage[:100] + "XY" + passage[102:300] + "Z" + passage[301:]
        assert document.page_at(locate_evidence(document, damaged, page=page)[0]) == page
        assert document.page_at(locate_evidence(document, damaged)[0]) == page
    assert time.perf_counter() - started < 1.0  # 40 fuzzy look-ups; a few ms each at most


# --- build_qrels ---------------------------------------------------------------------------------
def test_span_overlap_gives_different_chunks_for_two_chunkings(report, sentence_chunks, window_chunks):
    documents = {"report.pdf": report}
    queries = [
        # "Each key may send 600 requests": sentence s4; split between w2 and w3 in chunking W.
        query("rate", Evidence("report.pdf", 2, "Each key may send 600 requests")),
        # Crosses the page 2/3 break: s5 and s6; w3 (ends with "status 429."), w4 (starts there).
        query("cross", Evidence("report.pdf", None, "rejected with status 429. The Statement of Cash")),
    ]
    by_sentence = build_qrels(queries, documents, sentence_chunks)
    by_window = build_qrels(queries, documents, window_chunks)

    assert by_sentence["chunk"] == {"rate": {"s4": 1}, "cross": {"s5": 1, "s6": 1}}
    assert by_window["chunk"] == {"rate": {"w2": 1, "w3": 1}, "cross": {"w3": 1, "w4": 1}}
    # Pages and documents do not depend on the chunking.
    expected_pages = {"rate": {"report.pdf#p2": 1}, "cross": {"report.pdf#p2": 1, "report.pdf#p3": 1}}
    assert by_sentence["page"] == by_window["page"] == expected_pages
    assert by_sentence["doc"] == by_window["doc"] == {"rate": {"report.pdf": 1}, "cross": {"report.pdf": 1}}


def test_a_chunk_that_only_touches_the_evidence_is_not_relevant(report):
    # Three chunks cut with no gap: [0, S) "before", [S, S+8) "Each key", [S+8, end) "after".
    start = report.text.index("Each key")
    cuts = [("before", 0, start), ("span", start, start + 8), ("after", start + 8, len(report.text))]
    chunks = [
        Chunk(chunk_id, "report.pdf", report.text[a:b], a, b, report.page_at(a), report.page_at(b - 1))
        for chunk_id, a, b in cuts
    ]
    qrels = build_qrels([query("q", Evidence("report.pdf", None, "each key"))], {"report.pdf": report}, chunks)
    assert qrels["chunk"]["q"] == {"span": 1}


def test_evidence_without_text_or_page(report, other, sentence_chunks, window_chunks):
    documents = {"report.pdf": report, "other.pdf": other}
    other_chunk = chunk(other, "o1", "Nothing", "Nor here.")
    queries = [query("page2", Evidence("report.pdf", 2)), query("whole", Evidence("other.pdf"))]

    qrels = build_qrels(queries, documents, [*window_chunks, other_chunk])
    assert qrels["chunk"]["page2"] == {"w2": 1, "w3": 1, "w4": 1}  # w4 spans pages 2-3
    assert qrels["page"]["page2"] == {"report.pdf#p2": 1}
    assert qrels["chunk"]["whole"] == {"o1": 1}
    assert qrels["page"]["whole"] == {"other.pdf#p1": 1, "other.pdf#p2": 1}
    assert qrels["doc"] == {"page2": {"report.pdf": 1}, "whole": {"other.pdf": 1}}

    qrels = build_qrels(queries, documents, sentence_chunks)
    assert qrels["chunk"]["page2"] == {"s3": 1, "s4": 1, "s5": 1}
    assert qrels["chunk"]["whole"] == {}  # other.pdf has no chunks in this list: still listed, empty


def test_evidence_not_found_names_query_and_document(report, sentence_chunks):
    queries = [query("q42", Evidence("report.pdf", 2, "the moon is made of green cheese"))]
    with pytest.raises(EvidenceNotFound, match=r"query q42: .*'report\.pdf'"):
        build_qrels(queries, {"report.pdf": report}, sentence_chunks)


def test_unknown_source_and_page_out_of_range_are_errors(report, sentence_chunks):
    with pytest.raises(GoldenSetError, match=r"query q1: .*'missing\.pdf'"):
        build_qrels([query("q1", Evidence("missing.pdf"))], {"report.pdf": report}, sentence_chunks)
    with pytest.raises(GoldenSetError, match=r"query q2: evidence page 9 is outside 'report\.pdf' \(3 pages\)"):
        build_qrels([query("q2", Evidence("report.pdf", 9))], {"report.pdf": report}, sentence_chunks)
    with pytest.raises(GoldenSetError, match=r"page 4 is outside 'report\.pdf'"):
        locate_evidence(report, "Each key", page=4)


def test_simple_format_gives_chunks_and_derives_pages_and_documents(report, window_chunks):
    simple = GoldenQuery("q1", "?", None, (), ("w4", "w1"))
    qrels = build_qrels([simple], {"report.pdf": report}, window_chunks)
    assert qrels["chunk"]["q1"] == {"w4": 1, "w1": 1}
    assert qrels["page"]["q1"] == {"report.pdf#p2": 1, "report.pdf#p3": 1, "report.pdf#p1": 1}
    assert qrels["doc"]["q1"] == {"report.pdf": 1}

    stale = GoldenQuery("q2", "?", None, (), ("s4",))
    with pytest.raises(GoldenSetError, match=r"query q2: relevant_ids 's4' are not chunks of this chunking"):
        build_qrels([stale], {"report.pdf": report}, window_chunks)


# --- collapse_ranking ----------------------------------------------------------------------------
def test_collapse_ranking_first_occurrence_wins(report, other, window_chunks):
    w1, w2, w3, w4 = window_chunks
    o1 = chunk(other, "o1", "Nothing", "Nor here.")  # pages 1-2 of other.pdf
    ranked = [w3, o1, w4, w1, w2]
    assert collapse_ranking(ranked, "chunk") == ["w3", "o1", "w4", "w1", "w2"]
    assert collapse_ranking(ranked, "page") == [
        "report.pdf#p2", "other.pdf#p1", "other.pdf#p2", "report.pdf#p3", "report.pdf#p1",
    ]
    assert collapse_ranking(ranked, "doc") == ["report.pdf", "other.pdf"]
    assert collapse_ranking([], "page") == []
    with pytest.raises(ValueError, match="valid levels: chunk, page, doc"):
        collapse_ranking(ranked, "section")


@pytest.mark.parametrize("evidence, error", [
    ({"source": "report.pdf", "page": 9}, "evidence page 9 is outside 'report.pdf'"),
    ({"source": "report.pdf", "page": 2, "text": "the moon is made of green cheese"}, "evidence text not found"),
])
def test_evidence_errors_name_the_golden_file_and_line(tmp_path, report, sentence_chunks, evidence, error):
    path = tmp_path / "golden.jsonl"
    lines = [{"id": "q1", "query": "fine?", "evidence": [{"source": "report.pdf"}]},
             {"id": "q2", "query": "broken?", "evidence": [evidence]}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(GoldenSetError) as caught:
        build_qrels(load_golden(path), {"report.pdf": report}, sentence_chunks)
    assert str(caught.value).startswith(f"{path}:2 (query q2): ") and error in str(caught.value)
