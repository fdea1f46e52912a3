"""The browser check (``scripts/ui_check.py``, also ``make ui-check``): Debian's headless Chromium
loads the MLflow UI over a store holding one evaluated run and finds the run in the runs view (with the
workbench's columns) and a query among the run's traces; then JupyterLab, started as root the way
``make lab`` starts it, opens notebooks/01-explore.ipynb and shows its title."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


def test_the_mlflow_ui_and_jupyterlab_show_what_a_user_looks_for(tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("Chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)")
    completed = subprocess.run([sys.executable, str(ROOT / "scripts" / "ui_check.py"), "--json", "--keep", str(tmp_path)],
                               capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert completed.returncode != 2, completed.stderr[-2000:]  # JupyterLab is in the test extra
    result = json.loads(completed.stdout)
    mlflow, lab = result["mlflow"], result["jupyterlab"]
    assert mlflow["run_found"], mlflow.get("runs_page")
    assert mlflow["trace_found"], mlflow.get("traces_page")
    assert lab["found"], lab.get("page")
    assert lab["title"] == "Explore a corpus and one query"  # the notebook's first heading
    assert mlflow["run_name"].startswith("bm25 chunk_size=") and "viewStateShareKey=" in mlflow["runs_url"]
    assert completed.returncode == 0
    # the servers were stopped: nothing left listening on their ports
    for url in (mlflow["runs_url"], lab["url"]):
        port = int(url.split(":")[2].split("/")[0])
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
