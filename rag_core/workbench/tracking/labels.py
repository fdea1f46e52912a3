"""Labelled traces read back from MLflow: an experiment's traces as ``rag_core.evaluate.feedback.LabelledTrace``.

A trace of ``query --trace`` or of an evaluation (``rag_core.workbench.tracking.traces``) gives: the question
(the root span's ``query`` input), the answer (its ``answer`` output), the final ranking (the
``rerank`` span's documents, else ``fusion``'s, else the one retriever's) with each passage's source,
pages and text, and which passages went to the answer (the ``generate`` span's inputs). Its labels are
its MLflow assessments named as ``rag_core.evaluate.feedback.LABEL_NAMES``, except those that another
assessment overrides (``valid`` false): the UI's edit of a label keeps only the new value. A review
queue's ``passage_relevant`` answer (chosen passages) becomes one label per passage
(``rag_core.evaluate.queue_labels``).
Left out: traces logged by other applications (without these spans they have no passages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from rag_core.errors import BadInput
from rag_core.evaluate.feedback import LABEL_NAMES, Label, LabelledTrace, TracePassage
from rag_core.evaluate.queue_labels import choice_labels
from rag_core.workbench.tracking.tracker import Tracker, tracking_errors

if TYPE_CHECKING:
    from mlflow.entities import Trace

FINAL_RANKING = ("rerank", "fusion")  # span names, most final first; else the one RETRIEVER span
PAGE_SIZE = 200


def labelled_traces(experiment: str, tracking_uri: str | None = None) -> list[LabelledTrace]:
    """Every trace of `experiment` as a ``LabelledTrace`` (those without labels too: the export counts them)."""
    tracker = Tracker.at(tracking_uri, off_switch="")  # feedback export has no --no-mlflow to suggest
    tracker.check()
    with tracking_errors(tracker.uri, tracker.off_switch):
        found = tracker.client.get_experiment_by_name(experiment)
        if found is None:
            raise BadInput(f"no MLflow experiment {experiment!r} at {tracker.uri} (query --trace --experiment NAME "
                           "logs questions there)")
        return [read_trace(trace) for trace in _traces(tracker, found.experiment_id)]


def _traces(tracker: Tracker, experiment_id: str) -> Iterator["Trace"]:
    token = None
    while True:
        page = tracker.client.search_traces(locations=[experiment_id], max_results=PAGE_SIZE, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def read_trace(trace: "Trace") -> LabelledTrace:
    spans = trace.data.spans
    root = next((span for span in spans if span.parent_id is None), None)
    inputs = (root.inputs if root is not None else None) or {}
    outputs = (root.outputs if root is not None else None) or {}
    query = str(inputs.get("query", "")) if isinstance(inputs, dict) else str(inputs)
    answer = outputs.get("answer") if isinstance(outputs, dict) else None
    by_name = {span.name: span for span in spans}
    final = next((by_name[name] for name in FINAL_RANKING if name in by_name), None)
    if final is None:
        final = next((span for span in spans if str(span.span_type) == "RETRIEVER"), None)
    generate = by_name.get("generate")
    given = set((generate.inputs or {}).get("passages") or ()) if generate is not None else set()
    passages = tuple(_passage(document, rank, given) for rank, document in
                     enumerate(_documents(final), start=1))
    labels = tuple(label for assessment in trace.info.assessments or ()
                   if assessment.name in LABEL_NAMES and assessment.valid is not False
                   for label in choice_labels(Label(
                       assessment.name, _value(assessment), dict(assessment.metadata or {}),
                       getattr(assessment.source, "source_id", "") or "", int(assessment.create_time_ms or 0),
                       getattr(assessment, "rationale", None) or "")))
    return LabelledTrace(trace.info.trace_id, query, answer if isinstance(answer, str) else None, passages, labels,
                         int(trace.info.request_time or 0))


def _documents(span: Any) -> list[dict[str, Any]]:
    outputs = span.outputs if span is not None else None
    return [document for document in outputs or () if isinstance(document, dict)]


def _passage(document: dict[str, Any], rank: int, given: set[str]) -> TracePassage:
    metadata = document.get("metadata") or {}
    page_start = int(metadata.get("page_start") or 1)
    return TracePassage(str(document.get("id")), str(metadata.get("doc_uri", "")), page_start,
                        int(metadata.get("page_end") or page_start), str(document.get("page_content", "")), rank,
                        str(document.get("id")) in given)


def _value(assessment: Any) -> Any:
    """A feedback's or an expectation's value."""
    if getattr(assessment, "feedback", None) is not None:
        return assessment.feedback.value
    if getattr(assessment, "expectation", None) is not None:
        return assessment.expectation.value
    return getattr(assessment, "value", None)
