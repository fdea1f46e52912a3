"""One asked question as an MLflow trace: what ``rag-pipeline query --trace`` (or the ``trace_queries``
setting) logs, so that a person can label it (``rag_core.workbench.tracking.labels``) and ``feedback export``
can turn it into a golden-set line.

The trace has the spans of an evaluated query's trace (``rag_core.workbench.tracking.traces.query_trace``:
a RETRIEVER span per retriever, fusion, re-ranking, generation with the model and token usage), with
two differences: each passage keeps its whole text (one trace, not thousands: the export takes the
evidence text from it), and the query span's attributes hold the answer's mode and the settings
used instead of a golden set's metrics. The trace's ``rag.query_id`` tag is ``q-`` and the first 12
hex digits of the SHA-256 of the question. It goes to the configured tracking store
(``MLFLOW_TRACKING_URI`` or ``mlruns/``) in experiment ``queries`` unless another is named.
``trace_target`` checks that store and experiment before the question is answered (``query --trace``
calls it first: a store that cannot be used, or a deleted experiment, fails before any output); the
trace is written under the SQLite store's lock (``Tracker.store_lock``), so two traced questions at once
on a new store both land. A question that is not valid Unicode (bytes that are not UTF-8 in argv, which
Python keeps as lone surrogates) is stored with U+FFFD in their place, its query id computed from that.
Left out: linking the trace to a run (a question is not an evaluation), traces of failed queries.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rag_core.workbench.tracking.traces import query_trace, write_traces
from rag_core.workbench.tracking.tracker import Tracker, secret_scrubber, tracking_errors
from rag_core.writes import valid_text

if TYPE_CHECKING:
    from rag_core.config import RagConfig
    from rag_core.service import QueryResult

DEFAULT_EXPERIMENT = "queries"
OFF_SWITCH = "run without --trace (and without the trace_queries setting)"  # query has no --no-mlflow


@dataclass(frozen=True)
class LoggedTrace:
    trace_id: str
    experiment: str
    experiment_id: str
    tracking_uri: str

    def as_json(self) -> dict[str, str]:
        return {"trace_id": self.trace_id, "experiment": self.experiment, "experiment_id": self.experiment_id,
                "tracking_uri": self.tracking_uri}


@dataclass(frozen=True)
class TraceTarget:
    """Where a question's trace goes: a checked store and an experiment that exists and is not deleted."""
    tracker: Tracker
    experiment: str
    experiment_id: str


def query_id_of(question: str) -> str:
    return "q-" + hashlib.sha256(valid_text(question).encode("utf-8")).hexdigest()[:12]


def trace_target(experiment: str = DEFAULT_EXPERIMENT, tracking_uri: str | None = None) -> TraceTarget:
    """The store and experiment of a trace, checked (the experiment created when missing): ``RunFailure``
    when the store cannot be used, ``BadInput`` for a deleted experiment."""
    tracker = Tracker.at(tracking_uri, off_switch=OFF_SWITCH)
    tracker.check()
    with tracking_errors(tracker.uri, tracker.off_switch), tracker.store_lock():
        return TraceTarget(tracker, experiment, tracker.experiment_id(experiment))


def answered_query_row(result: "QueryResult", config: "RagConfig", answer_ms: float) -> dict[str, Any]:
    """The query span's values (the per-query row of an evaluation, for one answered question)."""
    answer, hits = result.answer, result.retrieval.hits
    row: dict[str, Any] = {
        "query_id": query_id_of(result.retrieval.query), "query": result.retrieval.query,
        "outcome": str(answer.mode), "answer": answer.text, "answer_mode": str(answer.mode), "answer_ms": answer_ms,
        "top_sources": " | ".join(dict.fromkeys(f"{hit.chunk.doc_id} p{hit.chunk.page_start}" for hit in hits)),
        "settings": config.as_params(),
    }
    if answer.usage is not None:
        row.update(answer_model=answer.model, answer_input_tokens=answer.usage["input_tokens"],
                   answer_output_tokens=answer.usage["output_tokens"])
    return row


def log_answered_query(result: "QueryResult", config: "RagConfig", *, started_ns: int,
                       experiment: str = DEFAULT_EXPERIMENT, tracking_uri: str | None = None,
                       target: TraceTarget | None = None) -> LoggedTrace:
    """Log `result` (a question asked at `started_ns`, answered now) as one trace in `experiment`
    (`target`: where ``trace_target`` found it, checked before the question was answered)."""
    target = target or trace_target(experiment, tracking_uri)
    tracker = target.tracker
    result = replace(result, retrieval=replace(result.retrieval, query=valid_text(result.retrieval.query)))
    retrieval_ms = sum(result.retrieval.latency_ms.values())
    answer_ms = max(0.0, (time.time_ns() - started_ns) / 1e6 - retrieval_ms)
    trace = query_trace(answered_query_row(result, config, answer_ms), result.retrieval, started_ns,
                        secret_scrubber(), passage_chars=None)
    with tracking_errors(tracker.uri, tracker.off_switch), tracker.store_lock():
        [trace_id] = write_traces([trace], experiment_id=target.experiment_id, tracking_uri=tracker.uri)
    return LoggedTrace(trace_id, target.experiment, target.experiment_id, tracker.uri)
