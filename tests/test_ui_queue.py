"""A question labelled through a review queue in the MLflow UI (``scripts/ui_queue_check.py``): headless
Chromium opens the address ``feedback queue`` prints, starts the review of the ``rag-review`` queue and
answers its three questions as a person does (``passage 1`` chosen for passage_relevant, the expected
response typed, Accepted, Submit); the answers are assessments on the trace and ``feedback export`` turns
the trace into a golden-set line whose evidence is the trace's first passage."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow
EXPECTED = "The billing account is suspended because an invoice is more than 14 days overdue."


def test_a_question_answered_in_the_review_queue_is_stored_and_exported(tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("Chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)")
    screenshot = tmp_path / "review-queue.png"
    completed = subprocess.run([sys.executable, str(ROOT / "scripts" / "ui_queue_check.py"), "--json", "--keep",
                                str(tmp_path / "work"), "--screenshot", str(screenshot)],
                               capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert completed.returncode != 2, completed.stderr[-2000:]
    result = json.loads(completed.stdout)
    by_the_ui = {"source_type": "HUMAN", "source_id": "default"}  # the UI's user without a login
    assert result["answers"] == {
        "passage_relevant": {"value": ["passage 1"], "kind": "feedback", **by_the_ui},
        "expected_response": {"value": EXPECTED, "kind": "expectation", **by_the_ui},
        "answer_accepted": {"value": True, "kind": "feedback", **by_the_ui},
    }, result.get("page")
    export = result["export"]
    assert export["returncode"] == 0 and export["report"]["added"] == 1 and export["report"]["skipped"] == [], export
    [line] = export["lines"]
    first = result["first_passage"]
    assert (line["query"], line["answer"]) == ("What does error code QS-4021 mean?", EXPECTED)
    assert [(e["source"], e["text"]) for e in line["evidence"]] == [(first["source"], first["text"])]
    assert line["provenance"]["trace_id"] == result["trace_id"] and line["provenance"]["labelled_by"] == ["default"]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert completed.returncode == 0
