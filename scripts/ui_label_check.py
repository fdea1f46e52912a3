"""Browser check of labelling in the MLflow UI (the feedback loop, docs/feedback.md; the slow test
``tests/test_ui_label.py`` runs it).

1. A question about the sample corpus is answered (BM25, extractive) and logged as a trace the way
   ``rag-pipeline query --trace`` logs it, into a temporary SQLite store; two labels are added with
   MLflow's Python API (``passage_relevant`` on the first passage, ``expected_response``).
2. ``mlflow server`` serves the store; headless Chromium, driven through the DevTools protocol
   (``websocket-client``), opens the experiment's Traces view, clicks the question's trace, and adds
   the third label as a person does: Assess -> Add feedback -> Human feedback, name
   ``answer_accepted``, Boolean True, Create; then a fourth, ``passage_relevant`` True on another
   passage, named in the form's Rationale (``error-codes.pdf p1``: the form has no metadata). Both
   must then be in the store.
3. A screenshot of the trace view holding the labels is saved (``--screenshot``), and
   ``feedback export`` must turn the trace into a golden-set line.
Exit 0: the UI label was stored and exported; 1: something failed (what the page showed is
printed); 2: no Chromium or websocket-client.
Usage: python scripts/ui_label_check.py [--json] [--keep DIR] [--screenshot PNG]
Left out: the UI's span-level labels (a passage is named by source and page, not by span).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from ui_check import CHROMIUM_FLAGS, Missing, chromium, server  # noqa: E402

from rag_core.retrieve.vector_stores.chroma_process import free_port  # noqa: E402

QUESTION = "What does error code QS-4021 mean?"
EXPECTED = "The billing account is suspended because an invoice is more than 14 days overdue."
UI_LABEL = "answer_accepted"
STEP_SECONDS = 120  # the longest wait for one step of the page (a loaded machine renders slowly)


# --- a trace with two labels from the Python API -------------------------------------------------
def traced_answer(folder: Path) -> tuple[Any, Any, Path, str]:
    """(answer, logged trace, store, tracking URI): QUESTION answered on the sample corpus (BM25, no
    re-ranking) and traced in experiment ``queries`` of a SQLite store in `folder`."""
    from rag_core.config import RagConfig
    from rag_core.paths import SAMPLE_DOCUMENTS_DIR
    from rag_core.service import answer_query, ingest_directory
    from rag_core.workbench.tracking.query_traces import log_answered_query

    config, store, uri = RagConfig(mode="bm25", rerank_depth=0), folder / "store", f"sqlite:///{folder / 'mlflow.db'}"
    ingest_directory(SAMPLE_DOCUMENTS_DIR, store, config)
    started = time.time_ns()
    result = answer_query(QUESTION, store, config, use_llm=False)
    return result, log_answered_query(result, config, started_ns=started, tracking_uri=uri), store, uri


def labelled_trace(folder: Path) -> dict[str, Any]:
    import mlflow
    from mlflow.entities import AssessmentSource

    result, logged, store, uri = traced_answer(folder)
    first = result.retrieval.hits[0].chunk
    other = next(hit.chunk for hit in result.retrieval.hits if hit.chunk.doc_id != first.doc_id)
    mlflow.set_tracking_uri(uri)
    person = AssessmentSource(source_type="HUMAN", source_id="reviewer")
    mlflow.log_feedback(trace_id=logged.trace_id, name="passage_relevant", value=True, source=person,
                        metadata={"source": first.doc_id, "page": first.page_start})
    mlflow.log_expectation(trace_id=logged.trace_id, name="expected_response", value=EXPECTED, source=person)
    return {"uri": uri, "store": str(store), "trace_id": logged.trace_id, "experiment_id": logged.experiment_id,
            "passage": {"source": first.doc_id, "page": first.page_start},
            "ui_passage": {"source": other.doc_id, "page": other.page_start}}


# --- Chromium through the DevTools protocol ------------------------------------------------------
class Browser:
    """One headless Chromium page, driven with DevTools protocol calls (real mouse and key events)."""

    def __init__(self, profile: Path) -> None:
        try:
            import websocket
        except ImportError:
            raise Missing("websocket-client not installed: pip install websocket-client") from None
        self.port = free_port()
        self.process = subprocess.Popen([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                         f"--remote-debugging-port={self.port}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline, target = time.monotonic() + STEP_SECONDS, None
        while target is None:
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json", timeout=2) as response:
                    target = next((t for t in json.load(response) if t["type"] == "page"), None)
            if target is None:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Chromium's DevTools endpoint did not come up")
                time.sleep(0.3)
        self.socket = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=STEP_SECONDS,
                                                  suppress_origin=True)
        self.calls = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.calls += 1
        self.socket.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def js(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait_for(self, expression: str, what: str, seconds: float = STEP_SECONDS) -> Any:
        deadline = time.monotonic() + seconds
        while not (value := self.js(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never showed {what}")
            time.sleep(0.5)
        return value

    def click(self, text: str, selector: str = "button") -> None:
        """Click the last visible `selector` element whose text (its first line: "Assess" with a count below)
        is `text`, as a mouse does."""
        x, y = self.wait_for(
            f"(() => {{ const found = Array.from(document.querySelectorAll({json.dumps(selector)})).filter(e => "
            f"e.innerText && e.innerText.trim().split('\\n')[0].trim() === {json.dumps(text)} && "
            "e.offsetParent !== null); "
            "if (!found.length) "
            "return null; const r = found[found.length - 1].getBoundingClientRect(); return [r.x + r.width / 2, "
            "r.y + r.height / 2]; })()", f"{selector} {text!r}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_into(self, selector: str, text: str) -> None:
        self.wait_for(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return false; "
                      "e.focus(); return true; })()", selector)
        self.call("Input.insertText", text=text)

    def text(self) -> str:
        return self.js("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.socket.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=20)


def label_in_ui(browser: Browser, base: str, trace: dict[str, Any]) -> None:
    """Open the question's trace in the Traces view and add answer_accepted = True as a person does."""
    browser.call("Page.navigate", url=f"{base}/#/experiments/{trace['experiment_id']}/traces")
    leaf = (f"Array.from(document.querySelectorAll('*')).filter(e => e.children.length === 0 && "
            f"e.textContent.includes({json.dumps(QUESTION)}) && e.offsetParent !== null)")
    browser.wait_for(f"{leaf}.length > 0", "the question in the traces table")
    browser.js(f"{leaf}[0].click()")  # the row's cell opens the trace (a mouse event there may land on a hint)
    browser.click("Assess")
    add_human_feedback(browser, UI_LABEL)
    browser.wait_for("!Array.from(document.querySelectorAll('button')).some(b => b.innerText.trim() === 'Create' "
                     "&& b.offsetParent !== null)", "the first label saved")
    # the panel re-renders once the save comes back (MLflow 3.18 counts it: "Feedback (2)"), closing a form opened
    # before; a version that shows no count leaves it to add_human_feedback's retries
    with contextlib.suppress(TimeoutError):
        browser.wait_for("/Feedback\\s*\\(2\\)/.test(document.body.innerText)", "the label counted", seconds=20)
    # a passage label: the form has no metadata, so its rationale names the passage ("error-codes.pdf p1")
    passage = trace["ui_passage"]
    add_human_feedback(browser, "passage_relevant", rationale=f"{passage['source']} p{passage['page']}")


def add_human_feedback(browser: Browser, name: str, rationale: str = "", tries: int = 3) -> None:
    """Open a feedback form (Add feedback -> Human feedback) and fill it: `name`, Boolean True (the form's
    default), `rationale`; Create. A form that a re-render of the panel closed before the name's option showed
    is opened again, up to `tries` times."""
    for attempt in range(1, tries + 1):
        browser.click("Add feedback")
        browser.click("Human feedback", "[role=menuitem]")
        browser.type_into("input[placeholder='Enter a feedback name']", name)
        try:  # the typeahead's option: the name as typed
            browser.wait_for(f"Array.from(document.querySelectorAll('li')).some(e => e.offsetParent !== null && "
                             f"e.innerText.trim() === {json.dumps(name)})", f"li {name!r}", seconds=15)
            break
        except TimeoutError:
            if attempt == tries:
                raise
    browser.click(name, "li")
    if rationale:
        browser.wait_for("(() => { const create = Array.from(document.querySelectorAll('button')).find(b => "
                         "b.innerText.trim() === 'Create' && b.offsetParent !== null); let form = create; "
                         "while (form && !form.querySelector('textarea')) form = form.parentElement; "
                         "const box = form && form.querySelector('textarea'); if (!box) return false; box.focus(); "
                         "return true; })()", "the Rationale box")
        browser.call("Input.insertText", text=rationale)
    browser.click("Create")


def stored_ui_label(uri: str, trace_id: str, name: str = UI_LABEL) -> dict[str, Any] | None:
    """The label `name` the UI's user stored on the trace (waits for it)."""
    from mlflow.tracking import MlflowClient

    deadline = time.monotonic() + STEP_SECONDS
    while time.monotonic() < deadline:
        for assessment in MlflowClient(uri).get_trace(trace_id).info.assessments:
            if assessment.name == name and assessment.source.source_id != "reviewer":  # not the API's
                return {"name": assessment.name, "value": assessment.value, "rationale": assessment.rationale,
                        "source_type": str(assessment.source.source_type), "source_id": assessment.source.source_id}
        time.sleep(1)
    return None


def show_labels(browser: Browser) -> None:
    """Dismiss the first-visit hint and keep the trace's Assessments panel open, for the screenshot."""
    browser.js("Array.from(document.querySelectorAll('button')).filter(b => b.innerText.trim() === 'Got it')"
               ".forEach(b => b.click())")
    if not browser.js("Array.from(document.querySelectorAll('button')).some(b => b.innerText.trim() === "
                      "'Add expectation' && b.offsetParent !== null)"):
        browser.click("Assess")
    browser.wait_for("document.body.innerText.includes('expected_response') && "
                     "document.body.innerText.includes('passage_relevant')", "the labels in the Assessments panel")
    time.sleep(1.0)


def export(folder: Path, trace: dict[str, Any]) -> dict[str, Any]:
    out = folder / "grown.jsonl"
    completed = subprocess.run([sys.executable, "-m", "rag_core.cli", "feedback", "export", "--experiment", "queries",
                                "--out", str(out), "--store", trace["store"], "--json"], capture_output=True,
                               text=True, env={**os.environ, "MLFLOW_TRACKING_URI": trace["uri"]}, cwd=ROOT,
                               timeout=600)
    if completed.returncode:
        return {"returncode": completed.returncode, "stderr": completed.stderr[-2000:]}
    return {"returncode": 0, "report": json.loads(completed.stdout),
            "lines": [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []}


def check(folder: Path, screenshot: Path | None) -> dict[str, Any]:
    trace = labelled_trace(folder)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", trace["uri"],
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    result: dict[str, Any] = {"trace_id": trace["trace_id"], "base": base, "passage": trace["passage"]}
    with server(command, f"{base}/health", folder / "mlflow-server.log"):
        browser = Browser(folder / "chrome-label")
        try:
            browser.call("Page.enable")
            browser.call("Emulation.setDeviceMetricsOverride", width=1600, height=900, deviceScaleFactor=1,
                         mobile=False)
            try:
                label_in_ui(browser, base, trace)
            except (TimeoutError, RuntimeError) as exc:
                result.update(error=str(exc), page=browser.text()[:2000])
            result["ui_label"] = stored_ui_label(trace["uri"], trace["trace_id"]) if "error" not in result else None
            result["ui_passage_label"] = (stored_ui_label(trace["uri"], trace["trace_id"], "passage_relevant")
                                          if "error" not in result else None)
            result["ui_passage"] = trace["ui_passage"]
            if result["ui_label"] and screenshot is not None:
                show_labels(browser)
                browser.screenshot(screenshot)
                result["screenshot"] = str(screenshot)
        finally:
            browser.close()
    if result["ui_label"]:
        result["export"] = export(folder, trace)
    return result


def browser_check_main(check: Callable[[Path, Path | None], dict[str, Any]], *, name: str, description: str,
                       screenshot_help: str, summary: Callable[[dict[str, Any]], str]) -> int:
    """The command line of a browser check (this one, ``ui_queue_check``): `check` in a work folder, its
    result as JSON or as `summary` and the export's outcome; 0 when the export added the line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temporary folder")
    parser.add_argument("--screenshot", metavar="PNG", help=screenshot_help)
    args = parser.parse_args()
    if not shutil.which("mlflow", path=str(Path(sys.executable).parent)):
        print(f"{name}: mlflow is not installed next to this Python", file=sys.stderr)
        return 2
    try:
        chromium()
        folder_context = (contextlib.nullcontext(args.keep) if args.keep
                          else tempfile.TemporaryDirectory(prefix=f"rag-{name}-"))
        with folder_context as temp:
            folder = Path(temp)
            folder.mkdir(parents=True, exist_ok=True)
            result = check(folder, Path(args.screenshot).resolve() if args.screenshot else None)
    except Missing as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    exported = result.get("export", {}).get("report", {}).get("added") == 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(summary(result))
        print(f"feedback export: {'1 line added' if exported else result.get('export')}")
        if "page" in result:
            print(f"--- {result['error']}; the page showed:\n{result['page']}")
    return 0 if exported else 1


def main() -> int:
    return browser_check_main(check, name="ui-label-check", description=__doc__.splitlines()[0],
                              screenshot_help="save the trace view holding the labels here",
                              summary=lambda result: f"label added in the MLflow UI: "
                                                     f"{result.get('ui_label') or 'NOT STORED'}")


if __name__ == "__main__":
    sys.exit(main())
