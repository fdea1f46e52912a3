"""The soak benchmark, short: 4 query processes for 15 s while an ingest adds documents
(benchmarks/soak.py; `python benchmarks/soak.py` runs the 60 s, 8-process version)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_queries_during_ingests_all_answer_from_a_consistent_store(tmp_path):
    output = tmp_path / "soak.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--seconds", "15", "--processes", "4",
         "--hybrid", "1", "--output", str(output)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    soak = json.loads(output.read_text())
    assert soak["errors"] == 0, soak["error_samples"]
    assert soak["ingest_rounds"] >= 1 and soak["documents_added"] >= 2  # the ingest really ran meanwhile
    assert soak["by_mode"]["bm25"]["queries"] > 0 and soak["by_mode"]["hybrid"]["queries"] > 0
    assert soak["final_store_equals_serial"], soak["differences"]
    assert soak["final_documents"] == 10 + soak["documents_added"] - soak["documents_removed"]
    assert result.returncode == 0
