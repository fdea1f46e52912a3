"""Browser check of labelling through a review queue in the MLflow UI (``rag-pipeline feedback queue``,
docs/feedback.md; the slow test ``tests/test_ui_queue.py`` runs it).

1. A question about the sample corpus is answered (BM25, extractive) and logged as a trace the way
   ``rag-pipeline query --trace`` logs it, into a temporary SQLite store, and ``build_review_queue`` (what
   ``feedback queue`` runs) makes the label schemas and the ``rag-review`` queue holding it.
2. ``mlflow server`` serves the store; headless Chromium (``ui_label_check.Browser``) opens the address
   ``feedback queue`` prints, clicks the queue, Start review, and answers as a person does: chooses
   ``passage 1`` for passage_relevant, types the expected response, clicks Accepted, Submit. The three
   answers must then be assessments on the trace.
3. A screenshot of the filled form is saved (``--screenshot``), and ``feedback export`` must turn the
   trace into a golden-set line whose evidence is the trace's first passage.
Exit 0: the answers were stored and exported; 1: something failed (what the page showed is printed);
2: no Chromium or websocket-client.
Usage: python scripts/ui_queue_check.py [--json] [--keep DIR] [--screenshot PNG]
Left out: several reviewers (the queue's status per reviewer), the queue's "Default" user queue.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from ui_check import server  # noqa: E402
from ui_label_check import STEP_SECONDS, Browser, browser_check_main, export, traced_answer  # noqa: E402

from rag_core.retrieve.vector_stores.chroma_process import free_port  # noqa: E402

EXPECTED = "The billing account is suspended because an invoice is more than 14 days overdue."
CHOICE = "passage 1"
ANSWER_BOX = "textarea[data-component-id='mlflow.experiment-review-queue.focused-review.question.text']"


def queued_trace(folder: Path) -> dict[str, Any]:
    """A traced question in experiment ``queries`` and the review queue that holds it."""
    from rag_core.workbench.tracking.review_queue import build_review_queue

    result, logged, store, uri = traced_answer(folder)
    queue = build_review_queue("queries", tracking_uri=uri)
    first = result.retrieval.hits[0].chunk  # BM25 alone, no re-ranking: the trace's first passage
    return {"uri": uri, "store": str(store), "trace_id": logged.trace_id, "queue": queue.as_json(),
            "first_passage": {"source": first.doc_id, "page": first.page_start, "text": first.text}}


def answer_in_ui(browser: Browser, base: str, trace: dict[str, Any]) -> None:
    """Open the queue where ``feedback queue`` says, start the review and answer its three questions."""
    browser.call("Page.navigate", url=f"{base}/{trace['queue']['ui_path']}")
    queue = ("Array.from(document.querySelectorAll('*')).filter(e => e.children.length === 0 && "
             "e.textContent.trim() === 'rag-review' && e.offsetParent !== null)")
    browser.wait_for(f"{queue}.length > 0", "the rag-review queue")
    browser.js(f"{queue}[0].click()")
    browser.click("Start review")
    browser.click("Select one or more")  # passage_relevant's choices
    browser.click(CHOICE, "[role=option]")
    browser.call("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    browser.call("Input.dispatchKeyEvent", type="keyUp", key="Escape", code="Escape", windowsVirtualKeyCode=27)
    browser.type_into(ANSWER_BOX, EXPECTED)
    browser.click("Accepted", "label")  # the pass/fail buttons are a radio group
    browser.wait_for("Array.from(document.querySelectorAll('button')).some(b => b.innerText.trim() === 'Submit' "
                     "&& !b.disabled && b.offsetParent !== null)", "Submit enabled")


def stored_answers(uri: str, trace_id: str) -> dict[str, Any]:
    """The queue's three answers as the store holds them (waits for them)."""
    from mlflow.tracking import MlflowClient

    deadline, found = time.monotonic() + STEP_SECONDS, {}
    while time.monotonic() < deadline and len(found) < 3:
        found = {a.name: {"value": a.value, "kind": "expectation" if a.expectation is not None else "feedback",
                          "source_type": str(a.source.source_type), "source_id": a.source.source_id}
                 for a in MlflowClient(uri).get_trace(trace_id).info.assessments
                 if a.name in ("answer_accepted", "expected_response", "passage_relevant")}
        time.sleep(1)
    return found


def check(folder: Path, screenshot: Path | None) -> dict[str, Any]:
    trace = queued_trace(folder)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", trace["uri"],
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    result: dict[str, Any] = {"trace_id": trace["trace_id"], "base": base, "queue": trace["queue"],
                              "first_passage": trace["first_passage"]}
    with server(command, f"{base}/health", folder / "mlflow-server.log"):
        browser = Browser(folder / "chrome-queue")
        try:
            browser.call("Page.enable")
            browser.call("Emulation.setDeviceMetricsOverride", width=1600, height=900, deviceScaleFactor=1,
                         mobile=False)
            try:
                answer_in_ui(browser, base, trace)
                if screenshot is not None:
                    browser.js("Array.from(document.querySelectorAll('button')).filter(b => /close/i.test("
                               "b.getAttribute('aria-label') || '') && b.getBoundingClientRect().x > 1200)"
                               ".forEach(b => b.click())")  # the MLflow Assistant's panel, right of the form
                    time.sleep(1.0)
                    browser.screenshot(screenshot)
                    result["screenshot"] = str(screenshot)
                browser.click("Submit")
            except (TimeoutError, RuntimeError) as exc:
                result.update(error=str(exc), page=browser.text()[:2000])
            result["answers"] = stored_answers(trace["uri"], trace["trace_id"]) if "error" not in result else {}
        finally:
            browser.close()
    if len(result["answers"]) == 3:
        result["export"] = export(folder, trace)
    return result


def main() -> int:
    return browser_check_main(check, name="ui-queue-check", description=__doc__.splitlines()[0],
                              screenshot_help="save the queue's filled form here",
                              summary=lambda result: f"answers given in the review queue: "
                                                     f"{result.get('answers') or 'NOT STORED'}")


if __name__ == "__main__":
    sys.exit(main())
