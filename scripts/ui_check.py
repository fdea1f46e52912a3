"""Browser check of the two web UIs a user opens, in Debian's headless Chromium (``make ui-check``; the
slow test ``tests/test_ui_check.py`` runs it too).

1. MLflow: the sample corpus is evaluated (bm25, a few queries, tracing on) into a temporary store;
   ``mlflow server`` serves it on 127.0.0.1 (free port). Chromium loads the experiment's runs view (the
   URL ``rag_core.workbench.tracking.experiment_view.runs_view_url`` gives) and must find the run's name and the
   view's columns; then the run's Traces tab, where it must find the first query's text.
2. JupyterLab, started as ``make lab`` starts it (``--allow-root`` when root), with a token and
   ``--no-browser`` on a free port: Chromium opens ``notebooks/01-explore.ipynb`` and must find the
   notebook's title (its first markdown heading).
The pages are React apps: Chromium renders them with ``--dump-dom`` and a virtual-time budget, retried
with a longer budget while the text is missing. Servers are always stopped.
Exit 0: everything found; 1: something missing (what the page showed is printed); 2: no Chromium
or no JupyterLab (installing them: ``apt-get install chromium``, ``pip install -e ".[test]"``).
Usage: python scripts/ui_check.py [--json] [--skip-lab] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_core.retrieve.vector_stores.chroma_process import free_port  # noqa: E402

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=2400,1200")
BUDGETS_MS = (20_000, 60_000, 120_000)  # virtual time per try: pages on a loaded machine render slowly
STARTUP_SECONDS = 180
EXPLORE_NOTEBOOK = ROOT / "notebooks" / "01-explore.ipynb"


class Missing(RuntimeError):
    """A program the check needs is not installed (exit 2)."""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise Missing("Chromium not found: install Debian's headless browser with `apt-get install -y chromium`")
    return found


def page_text(url: str, profile: Path, budget_ms: int) -> str:
    """The text of `url` once Chromium has rendered it (scripts and styles dropped, spaces collapsed)."""
    completed = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                               capture_output=True, text=True, timeout=budget_ms / 1000 + 120)
    dom = re.sub(r"<script.*?</script>|<style.*?</style>", " ", completed.stdout, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def find_in_page(url: str, needles: list[str], profile: Path) -> tuple[bool, str]:
    """(all `needles` found in the rendered page, its text): tries longer budgets while any is missing."""
    text = ""
    for budget in BUDGETS_MS:
        text = page_text(url, profile, budget)
        if all(" ".join(needle.split()) in text for needle in needles):
            return True, text
    return False, text


@contextlib.contextmanager
def server(command: list[str], ready_url: str, log_path: Path, env: dict[str, str] | None = None) -> Iterator[None]:
    """Run `command` in its own process group until `ready_url` answers 200; always stopped."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **(env or {})}, cwd=log_path.parent)
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while not _answers(ready_url):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{command[0]} did not come up: {log_path.read_text()[-2000:]}")
                time.sleep(0.5)
            yield
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


# --- MLflow --------------------------------------------------------------------------------------
def evaluated_store(folder: Path, queries: int = 3) -> dict[str, str]:
    """One evaluation of the sample corpus logged into `folder`/mlflow.db: its run and first query."""
    from rag_core.config import RagConfig
    from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE
    from rag_core.workbench.execution.evaluation import evaluate_and_log, load_eval_inputs
    from rag_core.workbench.tracking.tracker import TrackingTarget

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    inputs = load_eval_inputs(input_dir=SAMPLE_DOCUMENTS_DIR, golden=SAMPLE_GOLDEN_FILE, max_queries=queries)
    evaluation = evaluate_and_log(RagConfig(mode="bm25", rerank_depth=0), inputs, folder / "store",
                                  tracking=TrackingTarget(uri=uri))
    from mlflow.tracking import MlflowClient

    run = MlflowClient(uri).get_run(evaluation.run_id)
    return {"uri": uri, "experiment_id": run.info.experiment_id, "run_id": run.info.run_id,
            "run_name": run.info.run_name, "query": inputs.queries[0].query}


def check_mlflow(folder: Path) -> dict:
    from rag_core.evaluate.metrics import DEFAULT_PRIMARY_METRIC
    from rag_core.workbench.tracking.experiment_view import runs_view_url
    from rag_core.workbench.tracking.tracker import mlflow_metric_name

    logged = evaluated_store(folder)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    mlflow = Path(sys.executable).with_name("mlflow")
    command = [str(mlflow), "server", "--backend-store-uri", logged["uri"], "--host", "127.0.0.1", "--port", str(port),
               "--workers", "1"]
    with server(command, f"{base}/health", folder / "mlflow-server.log"):
        runs_url = runs_view_url(base, logged["experiment_id"])
        # the run, and the shared view applied: sorted by the primary metric, a Parameters column group
        view = [f"Sort: {mlflow_metric_name(DEFAULT_PRIMARY_METRIC)}", "Parameters"]
        run_found, runs_text = find_in_page(runs_url, [logged["run_name"], *view], folder / "chrome-runs")
        traces_url = (f"{base}/#/experiments/{logged['experiment_id']}/runs/{logged['run_id']}/traces"
                      "?workflowType=machine_learning")
        trace_found, traces_text = find_in_page(traces_url, [logged["query"]], folder / "chrome-traces")
    return {"runs_url": runs_url, "run_name": logged["run_name"], "run_found": run_found,
            "traces_url": traces_url, "query": logged["query"], "trace_found": trace_found,
            **({} if run_found else {"runs_page": runs_text[:1500]}),
            **({} if trace_found else {"traces_page": traces_text[:1500]})}


# --- JupyterLab ----------------------------------------------------------------------------------
def notebook_title(path: Path) -> str:
    """The first markdown heading of a notebook, without its ``#``."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    raise ValueError(f"{path} has no markdown heading")


def lab_command(port: int, token: str) -> list[str]:
    """JupyterLab as ``make lab`` starts it, plus a fixed port and token, and no browser."""
    jupyter = Path(sys.executable).with_name("jupyter")
    if not jupyter.exists() or subprocess.run([str(jupyter), "lab", "--version"], capture_output=True).returncode:
        raise Missing('JupyterLab not installed: pip install -e ".[test]" (or ".[notebook]")')
    root = ["--allow-root"] if os.geteuid() == 0 else []  # jupyter refuses root without it (the Makefile does the same)
    return [str(jupyter), "lab", str(ROOT / "notebooks"), *root, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT / 'notebooks'}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def check_lab(folder: Path) -> dict:
    port, token = free_port(), secrets.token_hex(16)
    env = {name: str(folder / "jupyter" / part) for name, part in
           (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"))}
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(folder / "jupyter" / "workspaces")
    base = f"http://127.0.0.1:{port}"
    title = notebook_title(EXPLORE_NOTEBOOK)
    with server(lab_command(port, token), f"{base}/api/status?token={token}", folder / "jupyterlab.log", env):
        url = f"{base}/lab/tree/{EXPLORE_NOTEBOOK.name}?token={token}"
        found, text = find_in_page(url, [title], folder / "chrome-lab")
    return {"url": url.replace(token, "<token>"), "title": title, "found": found,
            **({} if found else {"page": text[:1500]})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--skip-lab", action="store_true", help="check the MLflow UI only")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (kept: store, server logs) instead of a temporary folder")
    args = parser.parse_args()
    try:
        chromium()
        with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="rag-ui-check-")) as temp:
            folder = Path(temp)
            folder.mkdir(parents=True, exist_ok=True)
            result = {"mlflow": check_mlflow(folder)}
            if not args.skip_lab:
                result["jupyterlab"] = check_lab(folder)
    except Missing as exc:
        print(f"ui-check: {exc}", file=sys.stderr)
        return 2
    ok = (result["mlflow"]["run_found"] and result["mlflow"]["trace_found"]
          and result.get("jupyterlab", {}).get("found", True))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        mlflow = result["mlflow"]
        print(f"MLflow runs view: run {mlflow['run_name']!r} {'found' if mlflow['run_found'] else 'NOT FOUND'} "
              f"({mlflow['runs_url']})")
        print(f"MLflow traces of the run: query {mlflow['query']!r} {'found' if mlflow['trace_found'] else 'NOT FOUND'}")
        if "jupyterlab" in result:
            lab = result["jupyterlab"]
            print(f"JupyterLab: {EXPLORE_NOTEBOOK.name} title {lab['title']!r} {'found' if lab['found'] else 'NOT FOUND'}")
        for section in result.values():
            for key in ("runs_page", "traces_page", "page"):
                if key in section:
                    print(f"--- what {key} showed:\n{section[key]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
