"""`rag-pipeline feedback queue` (rag_core.workbench.tracking.review_queue): MLflow label schemas and a review
queue of an experiment's traced questions, made twice without duplicates; answers given the way the queue's
form gives them (a multi-select of "passage N") exported like assessments; a choice the trace does not hold
skipped with its reason. The choice rules themselves: tests/unit-level tests at the bottom."""

from __future__ import annotations

import json
import time

import mlflow
import pytest
from mlflow.entities import AssessmentSource
from mlflow.genai.label_schemas import list_label_schemas
from mlflow.genai.review_queues import list_review_queue_items, list_review_queues
from sweep_fixtures import tracking_uri  # noqa: F401 - fixture

from rag_core.cli import main as cli_main
from rag_core.config import RagConfig
from rag_core.evaluate.feedback import Label, LabelledTrace, TracePassage
from rag_core.evaluate.queue_labels import choice_labels, passage_choices, select_traces
from rag_core.service import answer_query
from rag_core.workbench.tracking.query_traces import log_answered_query
from rag_core.workbench.tracking.tracker import global_tracking_uri

CONFIG = RagConfig(rerank_depth=0)
QUESTIONS = ("What does error code QS-4021 mean?", "What is the default API rate limit?")
NAMES = ["answer_accepted", "expected_response", "passage_relevant"]


def ask(store, uri: str, question: str):
    started = time.time_ns()
    result = answer_query(question, store, CONFIG, use_llm=False)
    return result, log_answered_query(result, CONFIG, started_ns=started, tracking_uri=uri)


def queue(capsys, *args: str) -> tuple[int, dict]:
    code = cli_main(["feedback", "queue", "--experiment", "queries", "--json", *args])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else {"err": captured.err})


def test_the_queue_is_made_twice_without_duplicates_and_its_answers_export_like_assessments(
        sample_store, tracking_uri, tmp_path, capsys):  # noqa: F811
    (result, first), (other, second) = (ask(sample_store, tracking_uri, question) for question in QUESTIONS)
    code, made = queue(capsys)
    assert code == 0 and sorted(made["created"]) == sorted([*NAMES, "queue"])
    assert sorted(made["added"]) == sorted([first.trace_id, second.trace_id]) and made["already"] == 0
    assert made["choices"] == [f"passage {rank}" for rank in range(1, len(made["choices"]) + 1)]
    assert made["ui"].endswith(f"#/experiments/{made['experiment_id']}/review-queue")
    code, again = queue(capsys)
    assert (code, again["created"], again["added"], again["already"]) == (0, [], [], 2)
    with global_tracking_uri(tracking_uri):
        names = [schema.name for schema in list_label_schemas(made["experiment_id"])]
        [only] = list_review_queues(experiment_id=made["experiment_id"])
        items = [item.item_id for item in list_review_queue_items(only.queue_id)]
    assert sorted(name for name in names if name in NAMES) == NAMES  # each once (MLflow adds its own "Feedback")
    assert sorted(items) == sorted([first.trace_id, second.trace_id]) and sorted(only.schema_ids) == sorted(
        made["schemas"].values())

    # answers as the queue's form writes them: assessments named after the schemas, a list of chosen passages
    held = len(other.retrieval.stages["fused"])  # the second trace's final ranking (hybrid, no re-ranking)
    reviewer = AssessmentSource(source_type="HUMAN", source_id="reviewer")
    with global_tracking_uri(tracking_uri):
        mlflow.log_feedback(trace_id=first.trace_id, name="answer_accepted", value=True, source=reviewer)
        mlflow.log_feedback(trace_id=first.trace_id, name="passage_relevant", value=["passage 2", "passage 1"],
                            source=reviewer)
        mlflow.log_expectation(trace_id=first.trace_id, name="expected_response", value="Suspended.", source=reviewer)
        mlflow.log_feedback(trace_id=second.trace_id, name="passage_relevant", value=[f"passage {held + 1}"],
                            source=reviewer)
    out = tmp_path / "grown.jsonl"
    code = cli_main(["feedback", "export", "--experiment", "queries", "--out", str(out), "--to-dataset", "grown",
                     "--store", str(sample_store), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["added"]) == (0, 1)
    [skipped] = report["skipped"]
    assert skipped["trace_id"] == second.trace_id
    assert skipped["reason"] == f"passage not in the trace: no passage {held + 1}, the trace holds {held}"
    [line] = [json.loads(text) for text in out.read_text().splitlines()]
    fused = result.retrieval.stages["fused"]
    assert (line["query"], line["answer"]) == (QUESTIONS[0], "Suspended.")
    assert [(e["source"], e["text"]) for e in line["evidence"]] == [(fused[0].chunk.doc_id, fused[0].chunk.text),
                                                                    (fused[1].chunk.doc_id, fused[1].chunk.text)]
    assert line["provenance"]["trace_id"] == first.trace_id and line["provenance"]["labelled_by"] == ["reviewer"]
    assert report["dataset"]["ref"] == "mlflow:grown@1" and report["dataset"]["lines"] == 1


def test_a_queue_of_an_unknown_experiment_and_a_bad_date_are_bad_input(tracking_uri, capsys):  # noqa: F811
    code, failed = queue(capsys)
    assert code == 2 and "no MLflow experiment 'queries'" in failed["err"]
    code, failed = queue(capsys, "--since", "yesterday")
    assert code == 2 and "--since 'yesterday' is not a date" in failed["err"]


def trace(trace_id: str, at_ms: int, passages: int, labels: tuple[Label, ...] = ()) -> LabelledTrace:
    held = tuple(TracePassage(f"c{rank}", "a.pdf", rank, rank, f"text {rank}", rank) for rank in range(1, passages + 1))
    return LabelledTrace(trace_id, f"question {trace_id}", "an answer", held, labels, at_ms)


def test_choices_become_one_label_per_passage_and_anything_else_stays():
    chosen = Label("passage_relevant", ["passage 3", "Passage 1"], {}, "alice", 5)
    assert [(label.value, label.metadata) for label in choice_labels(chosen)] == [(True, {"rank": 3}),
                                                                                  (True, {"rank": 1})]
    assert [label.metadata for label in choice_labels(Label("passage_relevant", "passage 2"))] == [{"rank": 2}]
    for unchanged in (Label("passage_relevant", True, {"source": "a.pdf", "page": 1}),
                      Label("passage_relevant", ["passage 1", "the second"]), Label("answer_accepted", True)):
        assert choice_labels(unchanged) == [unchanged]


def test_which_traces_a_queue_gets():
    labelled = (Label("answer_accepted", True),)
    traces = [trace("t3", 3000, 2), trace("t1", 1000, 12), trace("t2", 2000, 3, labelled), trace("t4", 4000, 1)]
    assert [t.trace_id for t in select_traces(traces)] == ["t1", "t2", "t3", "t4"]  # oldest first
    assert [t.trace_id for t in select_traces(traces, since_ms=2000, unlabelled_only=True)] == ["t3", "t4"]
    drawn = select_traces(traces, sample=2, seed=7)
    assert len(drawn) == 2 and drawn == select_traces(traces, sample=2, seed=7)  # seeded: the same draw
    assert passage_choices(traces) == [f"passage {rank}" for rank in range(1, 11)]  # MLflow's 10 at most
    assert passage_choices(traces[2:]) == ["passage 1", "passage 2", "passage 3"]


@pytest.mark.parametrize("held, chosen, reason", [(3, "passage 4", "no passage 4, the trace holds 3")])
def test_a_choice_beyond_the_trace_is_skipped_with_its_reason(held, chosen, reason):
    from rag_core.evaluate.feedback import export_feedback

    export = export_feedback([trace("t1", 1, held, (Label("passage_relevant", True, {"rank": 4}),))], {},
                             experiment="queries")
    assert [item.reason for item in export.skipped] == [f"passage not in the trace: {reason}"]
