"""The feedback loop on the sample corpus: a question logged as a trace (query --trace), labels added with
MLflow's Python API, `feedback export` writing golden-set lines that evaluation reads, and `gate`.
The export's rules in detail are tests/unit/test_feedback.py; the gate's statistics tests/unit/test_gate.py;
a label added through the MLflow UI is tests/test_ui_check.py's."""

from __future__ import annotations

import json
import time

import mlflow
import pytest
from mlflow.entities import AssessmentSource
from mlflow.tracking import MlflowClient
from sweep_fixtures import tracking_uri  # noqa: F401 - fixture

from conftest import ROOT
from rag_core.cli import main as cli_main
from rag_core.config import RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.judge_labels import load_labels
from rag_core.service import answer_query
from rag_core.workbench.execution.evaluation import load_eval_inputs
from rag_core.workbench.tracking.query_traces import log_answered_query, query_id_of
from rag_core.workbench.tracking.traces import QUERY_ID_TAG
from rag_core.workbench.tracking.tracker import secret_scrubber

QUESTION = "What does error code QS-4021 mean?"
CONFIG = RagConfig(rerank_depth=0)  # the shared sample store's chunking; no stand-in re-ranker
ROOT_FILES = (str(ROOT / "experiments" / "default.yaml"), str(ROOT / "experiments" / "chunk-1024-truncated.yaml"))


@pytest.fixture
def python_api(tracking_uri):  # noqa: F811
    """mlflow.log_feedback & co. write to `tracking_uri` for the test, then to what they wrote to before."""
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    yield tracking_uri
    mlflow.set_tracking_uri(before)


def run_export(capsys, *args: str) -> tuple[int, dict]:
    code = cli_main(["feedback", "export", "--experiment", "queries", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_a_traced_question_labelled_with_the_python_api_becomes_a_golden_line(sample_store, python_api, tmp_path,
                                                                              capsys):
    started = time.time_ns()
    result = answer_query(QUESTION, sample_store, CONFIG, use_llm=False)
    logged = log_answered_query(result, CONFIG, started_ns=started, tracking_uri=python_api)

    trace = MlflowClient(python_api).get_trace(logged.trace_id)
    spans = {span.name: span for span in trace.data.spans}
    assert trace.info.tags[QUERY_ID_TAG] == query_id_of(QUESTION) and logged.experiment == "queries"
    assert spans["query"].inputs["query"] == QUESTION and spans["query"].outputs["answer"] == result.answer.text
    assert spans["generate"].inputs["passages"] == [hit.chunk.id for hit in result.retrieval.hits]
    final = spans["fusion"].outputs  # hybrid without re-ranking: the fused list is final, each passage whole
    scrub = secret_scrubber()  # key-shaped text is masked once a test of this process has set a key
    assert [d["page_content"] for d in final] == [scrub(hit.chunk.text) for hit in result.retrieval.stages["fused"]]

    # two labels through the Python API: a relevant passage (named by source and page), the right answer
    labelled = result.retrieval.hits[0].chunk
    alice = AssessmentSource(source_type="HUMAN", source_id="alice")
    mlflow.log_feedback(trace_id=logged.trace_id, name="passage_relevant", value=True, source=alice,
                        metadata={"source": labelled.doc_id, "page": labelled.page_start})
    mlflow.log_expectation(trace_id=logged.trace_id, name="expected_response", source=alice,
                           value="The billing account is suspended because an invoice is overdue.")
    out, judge = tmp_path / "grown.jsonl", tmp_path / "judge.jsonl"
    code, report = run_export(capsys, "--out", str(out), "--judge-labels", str(judge), "--store", str(sample_store))
    assert (code, report["added"], report["skipped"], report["traces"]) == (0, 1, [], 1)
    [line] = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["query"] == QUESTION
    assert line["answer"] == "The billing account is suspended because an invoice is overdue."
    [evidence] = line["evidence"]
    assert (evidence["source"], evidence["text"]) == (labelled.doc_id, scrub(labelled.text))
    assert labelled.page_start <= evidence["page"] <= labelled.page_end
    assert line["provenance"]["trace_id"] == logged.trace_id and line["provenance"]["labelled_by"] == ["alice"]
    assert report["judge_labels"]["added"] == 0  # no answer_accepted label: nothing for the judge

    # evaluation reads the grown set, and the labelled passage is found at rank 1 again
    inputs = load_eval_inputs(golden=out, store_dir=sample_store)
    [row] = evaluate_config(CONFIG, inputs.corpus, inputs.queries, sample_store).per_query
    assert row["chunk/mrr"] == 1.0

    # the answer rejected later, by someone else: a judge label; the question is not added twice
    mlflow.log_feedback(trace_id=logged.trace_id, name="answer_accepted", value=False,
                        source=AssessmentSource(source_type="HUMAN", source_id="bob"))
    code, again = run_export(capsys, "--out", str(out), "--judge-labels", str(judge), "--store", str(sample_store))
    assert (code, again["added"]) == (0, 0)
    assert [item["reason"] for item in again["skipped"]] == ["duplicate query: the same question is in the golden set"]
    [judged] = load_labels(judge)
    assert (judged.answer, judged.human) == (result.answer.text, {"answer_correctness": 1})
    assert len(out.read_text().splitlines()) == 1


def test_export_of_a_missing_experiment_is_bad_input(sample_store, tracking_uri, tmp_path, capsys):  # noqa: F811
    code = cli_main(["feedback", "export", "--experiment", "nobody asked", "--out", str(tmp_path / "g.jsonl"),
                     "--store", str(sample_store)])
    assert code == 2 and "no MLflow experiment 'nobody asked'" in capsys.readouterr().err


def test_gate_fails_truncated_1024_word_chunks_and_passes_the_default_against_itself(
        copy_of_sample_store, sample_golden_file, capsys):
    common = ["--golden", str(sample_golden_file), "--store", str(copy_of_sample_store), "--rerank-depth", "0",
              "--json"]
    code = cli_main(["gate", "--baseline", ROOT_FILES[0], "--candidate", ROOT_FILES[1], *common])
    printed = capsys.readouterr()
    worse = json.loads(printed.out)  # progress goes to stderr, never into the JSON
    assert printed.err.index("Evaluating the baseline") < printed.err.index("Evaluating the candidate")
    [gate] = worse["metrics"]
    assert (code, worse["failed"], gate["metric"]) == (1, True, "page/ndcg@10")
    assert gate["p"] < 0.05 and gate["difference"]["estimate"] < 0 < gate["baseline"]["estimate"]
    assert gate["baseline"]["low"] < gate["baseline"]["estimate"] < gate["baseline"]["high"]
    code = cli_main(["gate", "--baseline", ROOT_FILES[0], "--candidate", ROOT_FILES[0], *common,
                     "--metric", "page/ndcg@10", "--metric", "chunk/recall@5"])
    same = json.loads(capsys.readouterr().out)
    assert (code, same["failed"], [gate["p_holm"] for gate in same["metrics"]]) == (0, False, [1.0, 1.0])


def test_query_trace_flag_and_setting_log_to_the_named_experiment(sample_store, tracking_uri, tmp_path,  # noqa: F811
                                                                  capsys):
    ask = ["query", QUESTION, "--no-llm", "--rerank-depth", "0", "--json", "--store", str(sample_store)]
    assert cli_main([*ask, "--trace", "--experiment", "review"]) == 0
    flagged = json.loads(capsys.readouterr().out)["trace"]
    config = tmp_path / "trace.yaml"
    config.write_text("trace_queries: true\n")
    assert cli_main([*ask, "--config", str(config)]) == 0
    by_setting = json.loads(capsys.readouterr().out)["trace"]
    assert cli_main(ask) == 0
    assert "trace" not in json.loads(capsys.readouterr().out)  # neither: no trace
    assert (flagged["experiment"], by_setting["experiment"], flagged["tracking_uri"]) == ("review", "queries",
                                                                                          tracking_uri)
    client = MlflowClient(tracking_uri)
    for logged, name in ((flagged, "review"), (by_setting, "queries")):
        experiment = client.get_experiment_by_name(name).experiment_id
        [trace] = client.search_traces(locations=[experiment])
        assert trace.info.trace_id == logged["trace_id"] and trace.info.tags[QUERY_ID_TAG] == query_id_of(QUESTION)
