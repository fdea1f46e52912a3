"""Labelled traces -> golden-set lines (rag_core.evaluate.feedback), against hand-written expectations:
what is added, what is skipped and why (duplicates, conflicts, unlocatable evidence, a label on a
passage the trace does not hold), and the judge labels of rejected answers."""

from __future__ import annotations

import json

import pytest

from rag_core.evaluate.feedback import (BAD_LABEL, CONFLICT, DUPLICATE, NO_RELEVANT, NOT_FOUND, NOT_IN_TRACE,
                                        UNKNOWN_DOCUMENT, Label, LabelledTrace, TracePassage, export_feedback)
from rag_core.evaluate.golden import load_golden
from rag_core.evaluate.judge_labels import load_labels
from rag_core.records import Document

PAGE_1 = "Rate limits. Each key may send 600 requests per minute. Bursts above that are refused."
PAGE_2 = "Retries. A refused request carries a Retry-After header; wait that many seconds."
DOCUMENTS = {"api.pdf": Document.from_pages("api.pdf", [PAGE_1, PAGE_2], "hash")}
RATE = TracePassage("c1", "api.pdf", 1, 1, "Each key may send 600 requests per minute.", rank=1, given_to_answer=True)
RETRY = TracePassage("c2", "api.pdf", 2, 2, "A refused request carries a Retry-After header", rank=2,
                     given_to_answer=True)
ALICE, BOB = "alice", "bob"


def label(name: str, value, who: str = ALICE, at_ms: int = 1_700_000_000_000, **metadata) -> Label:
    return Label(name, value, metadata, who, at_ms)


def relevant(source: str = "api.pdf", page=1, value=True, who: str = ALICE, **extra) -> Label:
    return label("passage_relevant", value, who, source=source, page=page, **extra)


def trace(trace_id: str, *labels: Label, query: str = "What is the rate limit?", answer: str = "600 a minute.",
          passages=(RATE, RETRY), at_ms: int = 0) -> LabelledTrace:
    return LabelledTrace(trace_id, query, answer, tuple(passages), tuple(labels), at_ms)


def export(*traces: LabelledTrace, **kwargs):
    return export_feedback(traces, DOCUMENTS, experiment="queries", **kwargs)


def reasons(result) -> dict[str, str]:
    return {item.trace_id: item.reason for item in result.skipped}


def test_an_accepted_answer_with_a_relevant_passage_becomes_this_line():
    result = export(trace("tr-00aa", label("answer_accepted", True), relevant(page=1)))
    assert result.golden == [{
        "id": "fb-00aa", "query": "What is the rate limit?", "answer": "600 a minute.",
        "evidence": [{"source": "api.pdf", "page": 1, "text": "Each key may send 600 requests per minute."}],
        "provenance": {"trace_id": "tr-00aa", "experiment": "queries", "labelled_by": ["alice"],
                       "labelled_at": "2023-11-14T22:13:20+00:00"},
    }]
    assert (result.skipped, result.unlabelled, result.judge_labels) == ([], 0, [])


def test_the_expected_response_is_the_answer_and_a_rejected_answer_gives_none():
    with_expected = export(trace("tr-1", label("answer_accepted", False), label("expected_response", " 600/min "),
                                 relevant()))
    assert with_expected.golden[0]["answer"] == "600/min"
    rejected = export(trace("tr-2", label("answer_accepted", False), relevant()))
    assert "answer" not in rejected.golden[0]
    unjudged = export(trace("tr-3", relevant()))  # only a passage label: no answer either
    assert "answer" not in unjudged.golden[0]


def test_the_evidence_page_is_where_the_text_is_found_and_passages_keep_rank_order():
    # the passage claims pages 1-2 (a chunk across the break); its text starts on page 2
    spanning = TracePassage("c3", "api.pdf", 1, 2, PAGE_2[:40], rank=1)
    result = export(trace("tr-1", relevant(page=2), relevant(page=1, passage_id="c3"),
                          passages=(spanning, RATE)))
    [line] = result.golden
    # both labels name c3 (page 2 is held by c3 only; page 1 pinned by passage_id): one evidence
    assert line["evidence"] == [{"source": "api.pdf", "page": 2, "text": PAGE_2[:40]}]


def test_unlabelled_traces_are_counted_not_skipped():
    result = export(trace("tr-1"), trace("tr-2", relevant()))
    assert (result.unlabelled, len(result.golden), result.skipped) == (1, 1, [])


def test_duplicates_of_the_golden_set_and_within_the_export_are_skipped():
    result = export(trace("tr-old", relevant(), at_ms=1), trace("tr-new", relevant(), at_ms=2,
                                                                  query="what is  the RATE limit?"),
                    trace("tr-known", relevant(), query="Who is on call?"),
                    existing_queries=["who is on call?"])
    assert [line["id"] for line in result.golden] == ["fb-old"]
    assert reasons(result) == {"tr-new": f"{DUPLICATE}: the same question is in trace tr-old, exported above",
                               "tr-known": f"{DUPLICATE}: the same question is in the golden set"}


@pytest.mark.parametrize("labels, expected", [
    ((label("answer_accepted", True), label("answer_accepted", False, BOB), relevant()),
     f"{CONFLICT}: answer_accepted true (alice) and false (bob)"),
    ((label("expected_response", "600"), label("expected_response", "700", BOB), relevant()),
     f"{CONFLICT}: two expected_response values, '600' (alice) and '700' (bob)"),
    ((relevant(), relevant(value=False, who=BOB)),
     f"{CONFLICT}: passage_relevant true (alice) and false (bob) for api.pdf p1"),
])
def test_conflicting_labels_skip_the_trace(labels, expected):
    result = export(trace("tr-1", *labels))
    assert result.golden == [] and reasons(result) == {"tr-1": expected}


def test_agreeing_labels_of_two_people_are_not_a_conflict():
    result = export(trace("tr-1", label("answer_accepted", True), label("answer_accepted", "TRUE", BOB),
                          relevant(), relevant(page="1", who=BOB)))
    assert result.skipped == [] and result.golden[0]["provenance"]["labelled_by"] == ["alice", "bob"]


def test_a_label_on_a_passage_the_trace_does_not_hold_skips_it():
    result = export(trace("tr-1", relevant(page=3), relevant(page=1)),
                    trace("tr-2", relevant(source="other.pdf", page=1), query="q2"),
                    trace("tr-3", relevant(page=1, passage_id="c9"), query="q3"))
    assert reasons(result) == {"tr-1": f"{NOT_IN_TRACE}: no passage of 'api.pdf' holds page 3",
                               "tr-2": f"{NOT_IN_TRACE}: no passage of 'other.pdf' holds page 1",
                               "tr-3": f"{NOT_IN_TRACE}: no passage of 'api.pdf' holds page 1 with id 'c9'"}


def test_evidence_that_cannot_be_located_is_never_written():
    invented = TracePassage("c1", "api.pdf", 1, 1, "Quarterly revenue rose by twelve percent in the north.", 1)
    unknown_doc = TracePassage("c5", "gone.pdf", 1, 1, "Each key may send 600 requests per minute.", 1)
    result = export(trace("tr-1", relevant(), passages=(invented,)),
                    trace("tr-2", relevant(source="gone.pdf"), passages=(unknown_doc,), query="q2"))
    assert result.golden == []
    assert reasons(result)["tr-1"].startswith(f"{NOT_FOUND}: evidence text not found in 'api.pdf'")
    assert reasons(result)["tr-2"] == f"{UNKNOWN_DOCUMENT}: 'gone.pdf' is not among the store's documents"


def test_no_relevant_passage_and_bad_labels_are_skipped_with_their_reason():
    result = export(trace("tr-1", label("answer_accepted", True), relevant(value=False)),
                    trace("tr-2", label("answer_accepted", "maybe"), query="q2"),
                    trace("tr-3", label("passage_relevant", True, page=1), query="q3"),
                    trace("tr-4", label("expected_response", {"text": "x"}), query="q4"))
    got = reasons(result)
    assert got["tr-1"] == f"{NO_RELEVANT}: no passage labelled passage_relevant true"
    assert got["tr-2"] == f"{BAD_LABEL}: answer_accepted must be true or false, got 'maybe'"
    assert got["tr-3"].startswith(f"{BAD_LABEL}: passage_relevant needs metadata 'source'")
    assert got["tr-4"] == f"{BAD_LABEL}: expected_response must be text, got {{'text': 'x'}}"


def test_rejected_answers_become_judge_labels_that_calibrate_judge_reads(tmp_path):
    given_only = TracePassage("c4", "api.pdf", 2, 2, "wait that many seconds", rank=3, given_to_answer=False)
    result = export(trace("tr-bad", label("answer_accepted", False), label("expected_response", "600 per minute"),
                          relevant(), answer="6000 a minute.", passages=(RATE, given_only)),
                    trace("tr-noref", label("answer_accepted", False), relevant(), query="q2"),
                    trace("tr-good", label("answer_accepted", True), label("expected_response", "600 per minute."),
                          relevant(), query="q3"),
                    trace("tr-same", label("answer_accepted", True), label("expected_response", "600 a minute."),
                          relevant(), query="q4"),
                    existing_judge_ids=["fb-good"])
    [rejected] = result.judge_labels  # tr-good's id is in the file already; tr-same's reference is its answer
    assert rejected == {"id": "fb-bad", "query": "What is the rate limit?", "answer": "6000 a minute.",
                        "reference": "600 per minute", "human": {"answer_correctness": 1},
                        "passages": [{"source": "api.pdf", "page": 1, "text": RATE.text}],
                        "provenance": rejected["provenance"]}
    assert [(item.trace_id, item.reason) for item in result.judge_skipped] == [
        ("tr-noref", "a rejected answer needs an expected_response to be scored for answer_correctness")]
    path = tmp_path / "judge.jsonl"
    path.write_text(json.dumps(rejected) + "\n")
    [read] = load_labels(path)
    assert (read.id, read.reference, read.human, read.passages[0].doc_id) == (
        "fb-bad", "600 per minute", {"answer_correctness": 1}, "api.pdf")


def test_an_accepted_answer_with_another_expected_response_scores_five():
    result = export(trace("tr-1", label("answer_accepted", True), label("expected_response", "600 requests"),
                          relevant()))
    assert result.judge_labels[0]["human"] == {"answer_correctness": 5}


def test_exported_lines_are_a_golden_set_that_load_golden_reads(tmp_path):
    result = export(trace("tr-1", label("answer_accepted", True), relevant(), relevant(page=2)))
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in result.golden))
    [query] = load_golden(path, doc_ids=DOCUMENTS)
    assert (query.id, query.answer, [(e.source, e.page) for e in query.evidence]) == (
        "fb-1", "600 a minute.", [("api.pdf", 1), ("api.pdf", 2)])


def test_a_passage_label_from_the_ui_names_its_passage_in_the_rationale():
    ui = Label("passage_relevant", True, {}, "User", 1, rationale="the limit is in api.pdf p1")
    ui_page_word = Label("passage_relevant", True, {}, "User", 1, rationale="api.pdf, page 2")
    nameless = Label("passage_relevant", True, {}, "User", 1, rationale="this one")
    result = export(trace("tr-1", ui, ui_page_word), trace("tr-2", nameless, query="q2"))
    assert [(e["source"], e["page"], e["text"]) for e in result.golden[0]["evidence"]] == [
        ("api.pdf", 1, RATE.text), ("api.pdf", 2, RETRY.text)]
    assert reasons(result)["tr-2"].startswith(f"{BAD_LABEL}: passage_relevant needs metadata 'source'")
    # metadata, when it names the passage, wins over the rationale
    both = Label("passage_relevant", True, {"source": "api.pdf", "page": 2}, "alice", 1, rationale="api.pdf p1")
    assert export(trace("tr-3", both)).golden[0]["evidence"][0]["page"] == 2
