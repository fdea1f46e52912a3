"""A label added through the MLflow UI (``scripts/ui_label_check.py``): headless Chromium opens a question's
trace (logged as ``query --trace`` logs it, with two labels from MLflow's Python API), adds
``answer_accepted`` = True and a ``passage_relevant`` named in its rationale through the trace view's
Assess form, and ``feedback export`` turns the trace into a golden-set line whose answer is the expected
response and whose evidence is the two passages labelled relevant (the API's and the UI's)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow
EXPECTED = "The billing account is suspended because an invoice is more than 14 days overdue."


def test_a_label_added_in_the_mlflow_ui_is_stored_and_exported(tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("Chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)")
    screenshot = tmp_path / "trace-labels.png"
    completed = subprocess.run([sys.executable, str(ROOT / "scripts" / "ui_label_check.py"), "--json", "--keep",
                                str(tmp_path / "work"), "--screenshot", str(screenshot)],
                               capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert completed.returncode != 2, completed.stderr[-2000:]
    result = json.loads(completed.stdout)
    assert result["ui_label"] == {"name": "answer_accepted", "value": True, "rationale": None,
                                  "source_type": "HUMAN", "source_id": "User"}, (result.get("error"), result.get("page"))
    ui_passage = result["ui_passage"]
    assert result["ui_passage_label"] == {"name": "passage_relevant", "value": True, "source_type": "HUMAN",
                                          "rationale": f"{ui_passage['source']} p{ui_passage['page']}",
                                          "source_id": "User"}
    export = result["export"]
    assert export["returncode"] == 0 and export["report"]["added"] == 1, export
    [line] = export["lines"]
    assert line["query"] == "What does error code QS-4021 mean?" and line["answer"] == EXPECTED
    assert [(e["source"], e["page"]) for e in line["evidence"]] == [
        (result["passage"]["source"], result["passage"]["page"]), (ui_passage["source"], ui_passage["page"])]
    assert line["provenance"]["trace_id"] == result["trace_id"]
    assert line["provenance"]["labelled_by"] == ["User", "reviewer"]  # the UI's user and the API's
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert completed.returncode == 0
    port = int(result["base"].rsplit(":", 1)[1])  # the server was stopped
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
