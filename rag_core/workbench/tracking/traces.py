"""MLflow traces of an evaluation: one trace per evaluated query, linked to the evaluation's run, so the
UI's Traces view (the experiment's Traces tab, or the run's) shows any query's passages stage by stage.

Traces are built after the evaluation from what it recorded (each query's ``Retrieval``, its row of
the per-query table and, with ``--judge``, its answer), never while queries run: tracing adds nothing
to the latencies being measured. They are written in batches (``log_spans``: one database
transaction for up to ``TRACES_PER_BATCH`` traces) and linked to the run with ``link_traces_to_run``;
MLflow's span-by-span exporter cost about 100 ms a trace on a SQLite store, this about 10 ms.

One trace (span name, MLflow span type):
    query (CHAIN)            inputs: question and query id; outputs: outcome, top sources, answer;
                             attributes: the query's row (first relevant rank per stage, metrics)
      dense (RETRIEVER)      a span per retriever of mode, named after it (dense, bm25, a plugin's):
      bm25 (RETRIEVER)       its ranked list as documents
      fusion (RETRIEVER)     the fused list (several retrievers)
      rerank (RERANKER)      the re-ranked head (when re-ranking ran)
      generate (LLM)         the answer, its model and token usage (only when answers were generated)
A document has the fields of ``mlflow.entities.Document``: id = chunk id, page_content = the
passage's first ``PASSAGE_CHARS`` characters, metadata = doc_uri (the document), page_start,
page_end, rank, score. Each span lasts what the pipeline measured for its stage; stages are laid back
to back from the moment the query's retrieval began, and generation follows retrieval (in an
evaluation answers are generated after all retrievals: a trace shows one query as a user waits for it).
Each trace has the tag ``rag.query_id``. Secrets: when any API key is known to the process (set in the
environment or given to a client), every string of a trace goes through ``rag_core.api_keys.redact``.
``write_traces`` writes built traces; ``rag-pipeline query --trace`` uses it for one query's trace
(``rag_core.workbench.tracking.query_traces``). Left out: spans for the LLM judge's calls (its scores are
attributes of the query span).
"""

from __future__ import annotations

import json
import math
import secrets
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from rag_core.workbench.tracking.tracker import secret_scrubber

if TYPE_CHECKING:
    from rag_core.evaluate.evaluator import EvalReport
    from rag_core.records import Hit
    from rag_core.retrieve.pipeline import Retrieval

PASSAGE_CHARS = 300  # passage text kept in a trace: enough to recognise it, small enough for thousands
TRACES_PER_BATCH = 50
QUERY_ID_TAG = "rag.query_id"
# after the retrievers' spans (one per retriever, named after it): span name -> (stage, latency_ms keys, MLflow span type)
STAGE_SPANS = {
    "fusion": ("fused", ("fusion",), "RETRIEVER"),
    "rerank": ("rerank", ("rerank",), "RERANKER"),
}
ROW_TEXT = ("query", "answer", "answer_error")  # row columns the query and generate spans show as text
CHAT_USAGE = "mlflow.chat.tokenUsage"  # MLflow's span attribute for token counts (summed per trace)
TRACE_TAG_PREFIX = "mlflow.traceTag."  # a root-span attribute that the store turns into a trace tag

Scrub = Callable[[Any], Any]  # rag_core.workbench.tracking.tracker.secret_scrubber


def log_query_traces(report: "EvalReport", *, run_id: str, experiment_id: str, tracking_uri: str) -> list[str]:
    """One trace per query of `report`, in experiment `experiment_id`, linked to `run_id`; the trace ids."""
    scrub = secret_scrubber()
    traces = [query_trace(row, report.retrievals[row["query_id"]],
                          report.started_ns.get(row["query_id"], time.time_ns()), scrub)
              for row in report.per_query]
    return write_traces(traces, experiment_id=experiment_id, tracking_uri=tracking_uri, run_id=run_id)


def write_traces(traces: Sequence["TraceBuilder"], *, experiment_id: str, tracking_uri: str,
                 run_id: str | None = None) -> list[str]:
    """Write built traces to experiment `experiment_id` in batches, linked to `run_id` when given; the trace ids."""
    from mlflow.entities import Span
    from mlflow.tracing.client import TracingClient
    from mlflow.tracking import MlflowClient

    tracing, client = TracingClient(tracking_uri), MlflowClient(tracking_uri)
    for start in range(0, len(traces), TRACES_PER_BATCH):
        batch = traces[start:start + TRACES_PER_BATCH]
        tracing.log_spans(experiment_id, [Span.from_dict(span) for trace in batch for span in trace.spans])
        if run_id is not None:
            client.link_traces_to_run([trace.trace_id for trace in batch], run_id)  # at most 100 a call
    return [trace.trace_id for trace in traces]


class TraceBuilder:
    """The spans of one trace as MLflow's span dictionaries (``Span.from_dict``), built by hand."""

    def __init__(self) -> None:
        self._otel_trace_id = secrets.randbits(128)
        self.trace_id = f"tr-{self._otel_trace_id:032x}"
        self.spans: list[dict[str, Any]] = []

    def add(self, name: str, span_type: str, start_ns: int, end_ns: int, *, inputs: Any, outputs: Any,
            attributes: Mapping[str, Any], parent: int | None = None, span_id: int | None = None) -> int:
        span_id = span_id or secrets.randbits(64) or 1
        values = {"mlflow.traceRequestId": self.trace_id, "mlflow.spanType": span_type,
                  "mlflow.spanInputs": inputs, "mlflow.spanOutputs": outputs, **attributes}
        self.spans.append({
            "trace_id": _base64(self._otel_trace_id, 16), "span_id": _base64(span_id, 8),
            "parent_span_id": _base64(parent, 8) if parent else None, "name": name,
            "start_time_unix_nano": start_ns, "end_time_unix_nano": end_ns, "events": [],
            "status": {"code": "STATUS_CODE_OK", "message": ""},
            "attributes": {key: json.dumps(value, ensure_ascii=False) for key, value in values.items()},
        })
        return span_id


def query_trace(row: Mapping[str, Any], retrieval: "Retrieval", started_ns: int, scrub: Scrub, *,
                passage_chars: int | None = PASSAGE_CHARS) -> TraceBuilder:
    """The trace of one evaluated query (see the module docstring for its spans); `passage_chars` None
    keeps each passage's whole text (one query's trace, ``rag_core.workbench.tracking.query_traces``)."""
    trace = TraceBuilder()
    root = secrets.randbits(64) or 1
    clock = started_ns
    spans = {name: (name, retrieval.stage_latency.get(name, (name,)), "RETRIEVER") for name in retrieval.retrievers}
    for name, (stage, latency_keys, span_type) in {**spans, **STAGE_SPANS}.items():
        if stage not in retrieval.stages or (stage == "fused" and "fusion" not in retrieval.latency_ms):
            continue  # outside hybrid mode "fused" is the single retriever's list
        ms = {key: retrieval.latency_ms[key] for key in latency_keys if key in retrieval.latency_ms}
        end = clock + int(sum(ms.values()) * 1e6)
        trace.add(name, span_type, clock, end, inputs=scrub({"query": retrieval.query}),
                  outputs=scrub(documents(retrieval.stages[stage], passage_chars)), parent=root,
                  attributes={**{f"{key}_ms": value for key, value in ms.items()},
                              "candidates_reused": bool(retrieval.work.get("candidates_reused"))})
        clock = end
    if row.get("answer_mode") is not None:
        clock = _generation_span(trace, root, row, retrieval, clock, scrub)
    query_id = str(row["query_id"])
    trace.add("query", "CHAIN", started_ns, clock, span_id=root,
              inputs=scrub({"query": retrieval.query, "query_id": query_id}),
              outputs=scrub({"outcome": row.get("outcome"), "top_sources": row.get("top_sources"),
                             **({"answer": row["answer"]} if "answer" in row else {})}),
              attributes={**scrub({key: _json_safe(value) for key, value in row.items() if key not in ROW_TEXT}),
                          TRACE_TAG_PREFIX + QUERY_ID_TAG: query_id})
    return trace


def _generation_span(trace: TraceBuilder, root: int, row: Mapping[str, Any], retrieval: "Retrieval",
                     clock: int, scrub: Scrub) -> int:
    """The answer's span (LLM), with the model's token usage when it answered; returns its end time."""
    attributes: dict[str, Any] = {"answer_mode": row["answer_mode"]}
    if row.get("answer_input_tokens") is not None:
        tokens_in, tokens_out = int(row["answer_input_tokens"]), int(row["answer_output_tokens"])
        attributes.update({"model": row.get("answer_model"), CHAT_USAGE: {
            "input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}})
    end = clock + int(float(row.get("answer_ms") or 0.0) * 1e6)
    trace.add("generate", "LLM", clock, end, parent=root, attributes=scrub(attributes),
              inputs=scrub({"query": retrieval.query, "passages": [hit.chunk.id for hit in retrieval.hits]}),
              outputs=scrub({"answer": row.get("answer", ""), "error": row.get("answer_error")}))
    return end


def documents(hits: Sequence["Hit"], passage_chars: int | None = PASSAGE_CHARS) -> list[dict[str, Any]]:
    """A stage's ranked list as MLflow retriever documents (the fields of ``mlflow.entities.Document``)."""
    return [{"id": hit.chunk.id, "page_content": hit.chunk.text[:passage_chars],
             "metadata": {"doc_uri": hit.chunk.doc_id, "page_start": hit.chunk.page_start,
                          "page_end": hit.chunk.page_end, "rank": rank, "score": _json_safe(float(hit.score))}}
            for rank, hit in enumerate(hits, start=1)]


def _json_safe(value: Any) -> Any:
    """A per-query table value as plain JSON: numpy scalars as Python numbers, NaN and infinity as
    null (the UI's JSON.parse rejects them). Documents are built plain already."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _base64(number: int, size: int) -> str:
    import base64

    return base64.b64encode(number.to_bytes(size, "big")).decode()
