"""Reading and checking the golden set (rag_core.evaluate.golden)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from rag_core.evaluate.golden import Evidence, GoldenQuery, GoldenSetError, load_golden

DOC_IDS = ["api-reference.pdf", "guides/runbook.pdf", "guides/faq.md"]


@pytest.fixture
def write_golden(tmp_path: Path):
    """Write lines (dicts become JSON, strings are written as they are) to golden.jsonl."""

    def write(*lines: dict | str) -> Path:
        path = tmp_path / "golden.jsonl"
        path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
        return path

    return write


def test_full_format_is_read_with_optional_fields(write_golden):
    path = write_golden(
        {
            "id": "q07",
            "query": "What is the default API rate limit?",
            "answer": "600 requests per minute",
            "evidence": [{"source": "api-reference.pdf", "page": 3, "text": "Each key may send 600 requests"}],
        },
        {"id": "q08", "query": "Who is on call?", "evidence": [{"source": "guides/runbook.pdf"}]},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the full format must not warn
        queries = load_golden(path, DOC_IDS)
    assert queries == [
        GoldenQuery(
            "q07",
            "What is the default API rate limit?",
            "600 requests per minute",
            (Evidence("api-reference.pdf", 3, "Each key may send 600 requests"),),
        ),
        GoldenQuery("q08", "Who is on call?", None, (Evidence("guides/runbook.pdf", None, None),)),
    ]


def test_missing_ids_default_to_the_line_number(write_golden):
    # Line 1 has an id, line 2 is blank, line 3 has none -> "q3".
    path = write_golden(
        {"id": "a", "query": "x", "evidence": [{"source": "guides/faq.md"}]},
        "",
        {"query": "y", "evidence": [{"source": "guides/faq.md", "page": 1}]},
    )
    assert [query.id for query in load_golden(path)] == ["a", "q3"]


def test_simple_format_warns_that_it_is_tied_to_one_chunking(write_golden):
    path = write_golden({"query": "rate limit?", "relevant_ids": ["c1", "c2", "c1"]})
    with pytest.warns(UserWarning, match="tied to one chunking"):
        (query,) = load_golden(path)
    assert query == GoldenQuery("q1", "rate limit?", None, (), ("c1", "c2"))


def test_without_doc_ids_any_source_is_accepted(write_golden):
    path = write_golden({"id": "q1", "query": "x", "evidence": [{"source": "elsewhere.pdf"}]})
    assert load_golden(path)[0].evidence[0].source == "elsewhere.pdf"


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ('{"id": "q2", "query": "x", ', "malformed JSON"),
        ({"id": "q2", "evidence": [{"source": "guides/faq.md"}]}, "missing 'query'"),
        ({"id": "q2", "query": "x"}, "missing 'evidence'"),
        ({"id": "q2", "query": "x", "evidence": []}, "non-empty list"),
        ({"id": "q2", "query": "x", "evidence": [{"page": 2}]}, "without 'source'"),
        ({"id": "q2", "query": "x", "evidence": [{"source": "guides/faq.md", "page": 0}]}, "page number >= 1"),
        ({"id": "q2", "query": "x", "evidence": [{"source": "guides/faq.md", "pages": 2}]}, "unknown key 'pages'"),
        ({"id": "q2", "query": "x", "evidence": [{"source": "guides/faq.md", "text": " "}]}, "non-empty string"),
    ],
)
def test_errors_name_file_line_and_query(write_golden, bad_line, message):
    good = {"id": "q1", "query": "ok", "evidence": [{"source": "guides/faq.md"}]}
    path = write_golden(good, bad_line)
    with pytest.raises(GoldenSetError, match=message) as caught:
        load_golden(path, DOC_IDS)
    text = str(caught.value)
    assert f"{path}:2" in text
    if message != "malformed JSON":  # the id cannot be read from broken JSON
        assert "query q2" in text


def test_duplicate_query_id_names_both_lines(write_golden):
    line = {"id": "q1", "query": "x", "evidence": [{"source": "guides/faq.md"}]}
    path = write_golden(line, line)
    with pytest.raises(GoldenSetError, match=r"golden\.jsonl:2 \(query q1\): duplicate query id, first used on line 1"):
        load_golden(path)


def test_unknown_source_lists_known_documents_and_suggests_one(write_golden):
    path = write_golden({"id": "q5", "query": "x", "evidence": [{"source": "runbook.pdf"}]})
    with pytest.raises(GoldenSetError) as caught:
        load_golden(path, DOC_IDS)
    text = str(caught.value)
    assert f"{path}:1 (query q5)" in text
    assert "'runbook.pdf' is not in the corpus" in text
    assert "did you mean 'guides/runbook.pdf'" in text
    assert "'api-reference.pdf'" in text and "'guides/faq.md'" in text


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_text("\n  \n")
    with pytest.raises(GoldenSetError, match="empty"):
        load_golden(path)


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(GoldenSetError, match="not found"):
        load_golden(tmp_path / "nope.jsonl")


def test_a_golden_file_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "golden.jsonl"
    record = {"id": "q1", "query": "Who is on call?", "evidence": [{"source": "guides/runbook.pdf"}]}
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(record).encode() + b"\n")  # as Notepad saves UTF-8
    [query] = load_golden(path, DOC_IDS)
    assert (query.id, query.line) == ("q1", f"{path}:1")
