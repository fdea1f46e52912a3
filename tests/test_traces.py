"""MLflow-native results of an evaluation: one trace per query linked to its run (a span per stage, the
stage's ranked documents, generation with token usage), the golden set as the run's dataset input,
and the experiment's tags that make the UI open on the runs table with the workbench's columns."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient
from sweep_fixtures import files_containing, smoke_sweep, tiny_corpus, tracking_uri  # noqa: F401 - fixtures

from conftest import STAND_IN_RERANKER
from llm_fixtures import PLANTED_KEY, anthropic_env, clean_llm_env, llm_server  # noqa: F401 - fixtures
from llm_server import reply
from rag_core.config import RagConfig
from rag_core.evaluate.evaluator import golden_fingerprint
from rag_core.workbench.execution.evaluation import evaluate_and_log, load_eval_inputs
from rag_core.workbench.tracking.experiment_view import (EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, VIEW_KEY, VIEW_TAG,
                                                runs_view_url)
from rag_core.workbench.tracking.traces import PASSAGE_CHARS, QUERY_ID_TAG, query_trace
from rag_core.workbench.tracking.tracker import Tracker, TrackingTarget

BM25 = RagConfig(mode="bm25", rerank_depth=0, chunk_size=40, overlap=8, k=3)


@pytest.fixture
def tiny_inputs(tiny_corpus):  # noqa: F811
    return load_eval_inputs(input_dir=tiny_corpus.documents, golden=tiny_corpus.golden)


def run_traces(uri: str, evaluation) -> list:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(evaluation.experiment).experiment_id
    return list(client.search_traces(locations=[experiment], run_id=evaluation.run_id, max_results=500))


def spans_by_name(trace) -> dict:
    spans = {span.name: span for span in trace.data.spans}
    assert len(spans) == len(trace.data.spans)  # one span per stage
    return spans


def document_ids(span) -> list[str]:
    return [document["id"] for document in span.outputs]


def test_every_query_is_a_trace_of_its_run_with_the_stage_ranking(tiny_inputs, tmp_path, tracking_uri):  # noqa: F811
    evaluation = evaluate_and_log(BM25, tiny_inputs, tmp_path / "store", tracking=TrackingTarget(uri=tracking_uri))
    report = evaluation.report
    traces = run_traces(tracking_uri, evaluation)

    by_query = {trace.info.tags[QUERY_ID_TAG]: trace for trace in traces}
    assert sorted(by_query) == sorted(query.id for query in tiny_inputs.queries) and len(traces) == len(by_query)
    for query in tiny_inputs.queries:
        trace = by_query[query.id]
        spans = spans_by_name(trace)
        assert set(spans) == {"query", "bm25"}
        assert (spans["query"].span_type, spans["bm25"].span_type) == ("CHAIN", "RETRIEVER")
        assert spans["bm25"].parent_id == spans["query"].span_id and spans["query"].parent_id is None
        assert spans["query"].inputs == {"query": query.query, "query_id": query.id}
        retrieval = report.retrievals[query.id]
        documents = spans["bm25"].outputs
        assert document_ids(spans["bm25"]) == [hit.chunk.id for hit in retrieval.stages["bm25"]]
        assert [document["metadata"]["score"] for document in documents] == pytest.approx(
            [hit.score for hit in retrieval.stages["bm25"]])
        assert [(d["metadata"]["doc_uri"], d["metadata"]["page_start"]) for d in documents] == [
            (hit.chunk.doc_id, hit.chunk.page_start) for hit in retrieval.stages["bm25"]]
        assert all(d["page_content"] == hit.chunk.text[:PASSAGE_CHARS]
                   for d, hit in zip(documents, retrieval.stages["bm25"]))
        # without re-ranking the bm25 list is the run's ranking: the one its ranx run.json scores
        depth = len(report.ranked[query.id])
        assert document_ids(spans["bm25"])[:depth] == [chunk.id for chunk in report.ranked[query.id]]
        row = next(row for row in report.per_query if row["query_id"] == query.id)
        assert spans["query"].outputs["outcome"] == row["outcome"]
        assert spans["query"].attributes["page/ndcg@10"] == pytest.approx(row["page/ndcg@10"])
        # the span lasts what the pipeline measured for the stage (ns rounding)
        measured_ns = retrieval.latency_ms["bm25"] * 1e6
        assert spans["bm25"].end_time_ns - spans["bm25"].start_time_ns == pytest.approx(measured_ns, abs=2)
        assert spans["query"].start_time_ns == report.started_ns[query.id]
    assert MlflowClient(tracking_uri).get_run(evaluation.run_id).data.metrics["timing/tracing_seconds"] > 0


def test_tracing_off_logs_no_trace(tiny_inputs, tmp_path, tracking_uri):  # noqa: F811
    evaluation = evaluate_and_log(BM25.replace(tracing=False), tiny_inputs, tmp_path / "store",
                                  tracking=TrackingTarget(uri=tracking_uri))
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(evaluation.experiment).experiment_id
    assert list(client.search_traces(locations=[experiment])) == []
    assert client.get_run(evaluation.run_id).data.params["tracing"] == "False"
    assert "timing/tracing_seconds" not in client.get_run(evaluation.run_id).data.metrics


def test_the_golden_set_is_the_runs_dataset_input(tiny_inputs, tiny_corpus, tmp_path, tracking_uri):  # noqa: F811
    evaluation = evaluate_and_log(BM25.replace(tracing=False), tiny_inputs, tmp_path / "store",
                                  tracking=TrackingTarget(uri=tracking_uri))
    [logged] = MlflowClient(tracking_uri).get_run(evaluation.run_id).inputs.dataset_inputs
    assert logged.dataset.name == tiny_corpus.golden.stem
    assert logged.dataset.digest == golden_fingerprint(tiny_inputs.queries)
    assert json.loads(logged.dataset.source)["uri"] == str(tiny_corpus.golden.resolve())
    assert json.loads(logged.dataset.profile)["num_rows"] == len(tiny_inputs.queries)
    columns = [column["name"] for column in json.loads(logged.dataset.schema)["mlflow_colspec"]]
    assert columns[:3] == ["query_id", "query", "answer"]
    assert {(tag.key, tag.value) for tag in logged.tags} == {("mlflow.data.context", "evaluation")}


def test_the_experiment_opens_on_its_runs_with_the_workbench_columns(tracking_uri):  # noqa: F811
    tracker = Tracker(tracking_uri)
    tags = tracker.client.get_experiment(tracker.experiment_id("new one")).tags
    assert tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"
    view = json.loads(tags[VIEW_TAG])
    assert view["selectedColumns"] == ["metrics.`evidence/recall_at_1024`", "params.`mode`", "params.`chunk_size`",
                                       "params.`overlap`", "params.`k`", "params.`rerank_depth`", "attributes.`Dataset`"]
    assert (view["orderByKey"], view["orderByAsc"]) == ("metrics.`evidence/recall_at_1024`", False)
    assert runs_view_url("http://127.0.0.1:5000/", "7") == (
        f"http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}")

    # an experiment created elsewhere gets the tags it lacks; a kind chosen in the UI is kept
    chosen = tracker.client.create_experiment("made in the UI", tags={EXPERIMENT_KIND_TAG: "genai_development"})
    assert tracker.experiment_id("made in the UI") == chosen
    tags = tracker.client.get_experiment(chosen).tags
    assert tags[EXPERIMENT_KIND_TAG] == "genai_development" and VIEW_TAG in tags


def test_an_api_key_in_any_text_of_a_trace_is_replaced(tiny_inputs, tmp_path, monkeypatch):
    from rag_core.evaluate.evaluator import evaluate_config
    from rag_core.workbench.tracking.tracker import secret_scrubber

    report = evaluate_config(BM25, tiny_inputs.corpus, tiny_inputs.queries, tmp_path / "store")
    row = {**report.per_query[0], "answer_mode": "llm", "answer": f"the key is {PLANTED_KEY}", "answer_ms": 3.0}
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    trace = query_trace(row, report.retrievals[row["query_id"]], report.started_ns[row["query_id"]], secret_scrubber())
    text = json.dumps(trace.spans)
    assert PLANTED_KEY not in text and "the key is ***" in text


@pytest.mark.slow
def test_a_hybrid_re_ranked_trace_has_a_span_per_stage(tiny_inputs, tmp_path, tracking_uri):  # noqa: F811
    config = RagConfig(mode="hybrid", rerank_depth=4, chunk_size=40, overlap=8, k=3, rerank_model=STAND_IN_RERANKER)
    evaluation = evaluate_and_log(config, tiny_inputs, tmp_path / "store", tracking=TrackingTarget(uri=tracking_uri))
    report = evaluation.report
    traces = run_traces(tracking_uri, evaluation)
    assert len(traces) == len(tiny_inputs.queries)
    kinds = {"query": "CHAIN", "dense": "RETRIEVER", "bm25": "RETRIEVER", "fusion": "RETRIEVER", "rerank": "RERANKER"}
    for trace in traces:
        spans = spans_by_name(trace)
        assert {name: span.span_type for name, span in spans.items()} == kinds
        query_id = trace.info.tags[QUERY_ID_TAG]
        retrieval = report.retrievals[query_id]
        for name, stage in (("dense", "dense"), ("bm25", "bm25"), ("fusion", "fused"), ("rerank", "rerank")):
            assert document_ids(spans[name]) == [hit.chunk.id for hit in retrieval.stages[stage]]
        # the final ranking: the re-ranked head, then the fused tail
        reranked = document_ids(spans["rerank"])
        ranking = reranked + [i for i in document_ids(spans["fusion"]) if i not in reranked]
        assert ranking[:len(report.ranked[query_id])] == [chunk.id for chunk in report.ranked[query_id]]
        # stages back to back, inside the query span
        order = [spans[name] for name in ("dense", "bm25", "fusion", "rerank")]
        assert all(a.end_time_ns == b.start_time_ns for a, b in zip(order, order[1:]))
        assert order[0].start_time_ns == spans["query"].start_time_ns and order[-1].end_time_ns == spans["query"].end_time_ns


@pytest.mark.slow
def test_generation_is_an_llm_span_with_its_token_usage(tiny_inputs, tmp_path, tracking_uri, anthropic_env):  # noqa: F811
    judge = lambda score: reply(json.dumps({"score": score, "reason": "ok"}))  # noqa: E731
    anthropic_env.script(reply("An answer. [Source: a.pdf, page 1]", input_tokens=120, output_tokens=30),
                         judge(4), judge(5), judge(3), judge(2))
    inputs = type(tiny_inputs)(tiny_inputs.corpus, tiny_inputs.queries[:1], 0.0, "tiny", "golden")
    evaluation = evaluate_and_log(BM25, inputs, tmp_path / "store", tracking=TrackingTarget(uri=tracking_uri), judge=True)
    [trace] = run_traces(tracking_uri, evaluation)
    spans = spans_by_name(trace)
    assert set(spans) == {"query", "bm25", "generate"} and spans["generate"].span_type == "LLM"
    usage = spans["generate"].attributes["mlflow.chat.tokenUsage"]
    assert usage == {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    assert trace.info.token_usage["total_tokens"] == 150  # MLflow sums it for the trace
    assert spans["generate"].outputs["answer"] == "An answer. [Source: a.pdf, page 1]"
    assert spans["generate"].start_time_ns == spans["bm25"].end_time_ns
    assert files_containing(tmp_path / "mlruns", PLANTED_KEY) == []


@pytest.mark.slow
def test_every_sweep_point_has_the_golden_input_and_its_traces(smoke_sweep):  # noqa: F811
    result, client = smoke_sweep.result, MlflowClient(smoke_sweep.tracking_uri)
    experiment = client.get_experiment_by_name(result.experiment)
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    queries = int(client.get_run(result.outcomes[0].run_id).data.params["queries"])
    for outcome in result.outcomes:
        [logged] = client.get_run(outcome.run_id).inputs.dataset_inputs
        assert logged.dataset.name == "golden" and json.loads(logged.dataset.profile)["num_rows"] == queries
        traces = list(client.search_traces(locations=[experiment.experiment_id], run_id=outcome.run_id))
        assert len(traces) == queries
        assert {span.name for span in traces[0].data.spans} == {"query", "dense", "bm25", "fusion"}
