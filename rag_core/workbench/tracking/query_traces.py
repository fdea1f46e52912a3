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
Left out: linking the trace to a run (a question is not an evaluation), traces of failed queries.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag_core.workbench.tracking.traces import query_trace, write_traces
from rag_core.workbench.tracking.tracker import Tracker, secret_scrubber, tracking_errors

if TYPE_CHECKING:
    from rag_core.config import RagConfig
    from rag_core.service import QueryResult

DEFAULT_EXPERIMENT = "queries"


@dataclass(frozen=True)
class LoggedTrace:
    trace_id: str
    experiment: str
    experiment_id: str
    tracking_uri: str

    def as_json(self) -> dict[str, str]:
        return {"trace_id": self.trace_id, "experiment": self.experiment, "experiment_id": self.experiment_id,
                "tracking_uri": self.tracking_uri}


def query_id_of(question: str) -> str:
    return "q-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:12]


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
                       experiment: str = DEFAULT_EXPERIMENT, tracking_uri: str | None = None) -> LoggedTrace:
    """Log `result` (a question asked at `started_ns`, answered now) as one trace in `experiment`."""
    tracker = Tracker.at(tracking_uri)
    tracker.check()
    retrieval_ms = sum(result.retrieval.latency_ms.values())
    answer_ms = max(0.0, (time.time_ns() - started_ns) / 1e6 - retrieval_ms)
    trace = query_trace(answered_query_row(result, config, answer_ms), result.retrieval, started_ns,
                        secret_scrubber(), passage_chars=None)
    with tracking_errors(tracker.uri):
        experiment_id = tracker.experiment_id(experiment)
        [trace_id] = write_traces([trace], experiment_id=experiment_id, tracking_uri=tracker.uri)
    return LoggedTrace(trace_id, experiment, experiment_id, tracker.uri)
