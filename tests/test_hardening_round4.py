"""Issue 45: labels, traces, the gate and written files treated as untrusted and shared.

Each case used to lose or damage what a user wrote, print a traceback, or pass a gate it should fail:
one file given as both golden set and judge labels, two exports or two traced questions at once (real
processes), a trace into a deleted experiment, a label holding a lone surrogate, an ``--out`` that
is a folder or under a file, a question that is not UTF-8, a SQLite tracking URI naming a folder, and
gate metrics that are not metrics or where lower is better. The helpers they share are
``rag_core.writes``'s, tested at the end. (``finetune --out`` over a folder is another issue's.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import mlflow
import pytest
from mlflow.entities import AssessmentSource, ViewType
from mlflow.tracking import MlflowClient
from sweep_fixtures import sqlite_uri, tracking_uri  # noqa: F401 - fixture
from test_feedback_loop import python_api  # noqa: F401 - fixture: mlflow.log_feedback & co. write to tracking_uri

from conftest import ROOT, run_cli
from rag_core.cli import main as cli_main
from rag_core.config import RagConfig
from rag_core.errors import BadInput
from rag_core.evaluate.golden import load_golden
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE
from rag_core.service import answer_query, ingest_directory
from rag_core.workbench.tracking.query_traces import log_answered_query
from rag_core.writes import check_output_file, lock_beside, valid_text, write_atomic

BM25 = RagConfig(mode="bm25", rerank_depth=0)
FLAGS = ["--mode", "bm25", "--rerank-depth", "0"]
QUESTIONS = ("What does error code QS-4021 mean?", "What is the default API rate limit?")
ALICE = AssessmentSource(source_type="HUMAN", source_id="alice")


@pytest.fixture(scope="module")
def bm25_store(tmp_path_factory):
    """The sample corpus in a BM25-only store (no model to load)."""
    store = tmp_path_factory.mktemp("bm25-store")
    ingest_directory(SAMPLE_DOCUMENTS_DIR, store, BM25)
    return store


def labelled_traces(store, uri: str, expected: dict[str, str] | None = None) -> list[str]:
    """Each of QUESTIONS traced and labelled: its best passage relevant, and an expected response
    (`expected`: question -> the text to label, else a plain one). The trace ids."""
    ids = []
    for question in QUESTIONS:
        result = answer_query(question, store, BM25, use_llm=False)
        logged = log_answered_query(result, BM25, started_ns=time.time_ns(), tracking_uri=uri)
        chunk = result.retrieval.hits[0].chunk
        mlflow.log_feedback(trace_id=logged.trace_id, name="passage_relevant", value=True, source=ALICE,
                            metadata={"source": chunk.doc_id, "page": chunk.page_start})
        mlflow.log_expectation(trace_id=logged.trace_id, name="expected_response", source=ALICE,
                               value=(expected or {}).get(question, f"The answer to {question}"))
        mlflow.log_feedback(trace_id=logged.trace_id, name="answer_accepted", value=False, source=ALICE)
        ids.append(logged.trace_id)
    return ids


def export(store, *args: str) -> list[str]:
    return ["feedback", "export", "--experiment", "queries", "--store", str(store), *args]


def existing_golden(path) -> bytes:
    """A one-line golden set a user wrote (the sample set's first line), as bytes."""
    first = SAMPLE_GOLDEN_FILE.read_text(encoding="utf-8").splitlines()[0] + "\n"
    path.write_text(first, encoding="utf-8")
    return path.read_bytes()


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("error: ") and "Traceback" not in "\n".join(err), err
    return err[-1]


# --- case 2: one file for both outputs ----------------------------------------------------------------
def test_one_file_as_golden_set_and_judge_labels_is_refused_before_anything_is_written(
        bm25_store, python_api, tmp_path, capsys):
    labelled_traces(bm25_store, python_api)
    golden = tmp_path / "G.jsonl"
    before = existing_golden(golden)
    (tmp_path / "sub").mkdir()
    for judge in (golden, tmp_path / "sub" / ".." / "G.jsonl"):
        assert cli_main(export(bm25_store, "--out", str(golden), "--judge-labels", str(judge))) == 2
        assert "name the same file" in one_error(capsys)
    (tmp_path / "link.jsonl").symlink_to(golden)
    assert cli_main(export(bm25_store, "--out", str(tmp_path / "link.jsonl"), "--judge-labels", str(golden))) == 2
    assert "name the same file" in one_error(capsys)
    assert golden.read_bytes() == before
    assert len(load_golden(golden)) == 1


# --- case 3: two exports at once ------------------------------------------------------------------------
@pytest.mark.slow  # two rag-pipeline processes (MLflow imported in each)
def test_two_exports_at_once_into_one_golden_set_write_each_line_once(bm25_store, python_api, tmp_path):
    ids = labelled_traces(bm25_store, python_api)
    golden, judge = tmp_path / "golden.jsonl", tmp_path / "judge.jsonl"
    before = existing_golden(golden)
    command = [sys.executable, "-m", "rag_core.cli",
               *export(bm25_store, "--out", str(golden), "--judge-labels", str(judge), "--json")]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                  env={**os.environ, "MLFLOW_TRACKING_URI": python_api}) for _ in range(2)]
    outputs = [process.communicate(timeout=600) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [err[-600:] for _, err in outputs]
    added = sorted(json.loads(out)["added"] for out, _ in outputs)
    assert added == [0, len(ids)]  # the second saw the first's lines: duplicates, skipped
    assert golden.read_bytes().startswith(before)
    queries = load_golden(golden)  # eval's own reader: refuses a repeated query id
    assert len(queries) == 1 + len(ids) and len({query.id for query in queries}) == len(queries)
    judge_ids = [json.loads(line)["id"] for line in judge.read_text().splitlines()]
    assert len(judge_ids) == len(ids) == len(set(judge_ids))


# --- case 4: two traced questions at once on a fresh tracking store --------------------------------------
@pytest.mark.slow  # two rag-pipeline processes, twice
def test_two_traced_questions_at_once_on_a_fresh_store_both_answer_and_both_are_traced(bm25_store, tmp_path):
    for attempt in range(2):  # the race lost 6 of 6 times: two fresh stores make a pass by luck unlikely
        folder = tmp_path / f"mlruns-{attempt}"
        folder.mkdir()
        uri = sqlite_uri(folder)
        command = [sys.executable, "-m", "rag_core.cli", "query", "--trace", "--no-llm", "--json",
                   "--store", str(bm25_store), *FLAGS]
        processes = [subprocess.Popen([*command, question], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=ROOT, env={**os.environ, "MLFLOW_TRACKING_URI": uri})
                     for question in QUESTIONS]
        outputs = [process.communicate(timeout=600) for process in processes]
        assert [process.returncode for process in processes] == [0, 0], [err[-600:] for _, err in outputs]
        answers = [json.loads(out) for out, _ in outputs]
        assert all(answer["answer"] and answer["trace"]["tracking_uri"] == uri for answer in answers)
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("queries").experiment_id
        logged = {trace.info.trace_id for trace in client.search_traces(locations=[experiment])}
        assert logged == {answer["trace"]["trace_id"] for answer in answers}
        again = run_cli("query", "--trace", "--no-llm", QUESTIONS[0], *FLAGS, store=bm25_store,
                        env={"MLFLOW_TRACKING_URI": uri})
        assert again.returncode == 0, again.stderr[-600:]  # the store stays usable


# --- case 5: a deleted experiment ------------------------------------------------------------------------
def test_a_trace_into_a_deleted_experiment_is_refused_before_the_question_is_answered(
        bm25_store, tracking_uri, capsys):  # noqa: F811
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("binned")
    client.delete_experiment(experiment)
    code = cli_main(["query", QUESTIONS[0], "--trace", "--experiment", "binned", "--no-llm", *FLAGS,
                     "--store", str(bm25_store)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", captured
    error = captured.err.strip().splitlines()[-1]
    assert error.startswith("error: ") and "'binned'" in error and "deleted" in error and "restore" in error
    code = cli_main(["eval", "--golden", str(SAMPLE_GOLDEN_FILE), "--experiment", "binned", *FLAGS,
                     "--store", str(bm25_store)])
    assert code == 2 and "'binned' was deleted" in one_error(capsys)  # before evaluating: no run, no table
    assert client.get_experiment(experiment).lifecycle_stage == "deleted"
    assert list(client.search_traces(locations=[experiment])) == []
    assert client.search_runs([experiment], run_view_type=ViewType.ALL) == []


# --- case 6: a label that is not valid Unicode ---------------------------------------------------------
def test_a_label_with_a_lone_surrogate_is_skipped_and_the_other_traces_exported(bm25_store, python_api,
                                                                               tmp_path, capsys):
    broken = "At 5 am \ud800 the nightly job runs"
    first, second = labelled_traces(bm25_store, python_api, expected={QUESTIONS[0]: broken})
    golden, judge = tmp_path / "golden.jsonl", tmp_path / "judge.jsonl"
    before = existing_golden(golden)
    assert cli_main(export(bm25_store, "--out", str(golden), "--judge-labels", str(judge), "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"] == 1 and report["added_ids"] == ["fb-" + second.removeprefix("tr-")[:16]]
    [skipped] = report["skipped"]
    assert skipped["trace_id"] == first and "not valid Unicode" in skipped["reason"]
    text = golden.read_bytes()
    assert text.startswith(before) and len(load_golden(golden)) == 2
    assert [json.loads(line)["provenance"]["trace_id"] for line in judge.read_text().splitlines()] == [second]


# --- case 7: --out that cannot be a file ------------------------------------------------------------------
def test_export_into_a_folder_or_under_a_file_is_bad_input(bm25_store, tracking_uri, tmp_path, capsys):  # noqa: F811
    folder, a_file = tmp_path / "folder", tmp_path / "a_file"
    folder.mkdir()
    a_file.write_text("the user's notes\n")
    assert cli_main(export(bm25_store, "--out", str(folder))) == 2
    assert "is a folder" in one_error(capsys)
    assert cli_main(export(bm25_store, "--out", str(a_file / "golden.jsonl"))) == 2
    assert f"{a_file} is a file, not a folder" in one_error(capsys)
    assert cli_main(export(bm25_store, "--out", str(tmp_path / "g.jsonl"), "--judge-labels", str(folder))) == 2
    assert "--judge-labels" in one_error(capsys)
    assert list(folder.iterdir()) == [] and a_file.read_text() == "the user's notes\n"
    assert not (tmp_path / "g.jsonl").exists()


def test_make_golden_and_eval_outputs_that_cannot_be_files_are_refused_first(bm25_store, tmp_path, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "mine.txt").write_text("kept")
    code = cli_main(["make-golden", "--input", str(SAMPLE_DOCUMENTS_DIR), "--out", str(folder), "--force"])
    assert code == 2 and "is a folder" in one_error(capsys)  # before any LLM request (no key is set)
    code = cli_main(["eval", "--golden", str(SAMPLE_GOLDEN_FILE), "--store", str(bm25_store), "--no-mlflow",
                     *FLAGS, "--per-query", str(folder)])
    assert code == 2 and "--per-query" in one_error(capsys)
    for out in (folder, folder / "mine.txt" / "g.jsonl"):  # before MLflow is asked for the dataset
        assert cli_main(["golden", "export", "mlflow:none-such", "--out", str(out)]) == 2
        assert "--out" in one_error(capsys)
    assert [path.name for path in folder.iterdir()] == ["mine.txt"]


def test_sweep_output_that_is_a_file_is_refused_before_any_point(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("the user's notes\n")
    for output in (notes, notes / "runs"):
        code = cli_main(["sweep", str(ROOT / "experiments" / "grid.yaml"), "--output", str(output), "--dry-run",
                         "--store", str(tmp_path / "store")])
        assert code == 2 and "--output" in one_error(capsys)
    assert notes.read_text() == "the user's notes\n"


# --- case 8: a question that is not UTF-8 ----------------------------------------------------------------
def test_a_question_in_latin_1_bytes_is_answered_and_traced(bm25_store, tracking_uri):  # noqa: F811
    command = [sys.executable.encode(), b"-m", b"rag_core.cli", b"query", b"--trace", b"--no-llm", b"--json",
               b"--store", str(bm25_store).encode(), *(flag.encode() for flag in FLAGS), b"caf\xe9 \xff QS-4021"]
    done = subprocess.run(command, capture_output=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "MLFLOW_TRACKING_URI": tracking_uri})
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-600:]
    answer = json.loads(done.stdout)
    assert answer["answer"] and answer["passages"]
    trace = MlflowClient(tracking_uri).get_trace(answer["trace"]["trace_id"])
    root = next(span for span in trace.data.spans if span.parent_id is None)
    assert root.inputs["query"] == "caf\ufffd \ufffd QS-4021"


# --- case 9: a SQLite URI that names a folder ----------------------------------------------------------
def test_a_sqlite_uri_naming_a_folder_fails_at_once_and_suggests_what_query_accepts(bm25_store, tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    done = run_cli("query", "--trace", "--no-llm", QUESTIONS[0], *FLAGS, store=bm25_store,
                   env={"MLFLOW_TRACKING_URI": f"sqlite:///{folder}", "MLFLOW_SQLALCHEMYSTORE_MAX_RETRIES": "0"})
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-600:]
    assert last.startswith("error: ") and f"{folder} is a folder" in last
    assert "--no-mlflow" not in last and "--trace" in last
    assert list(folder.iterdir()) == []


# --- case 10: the gate's metrics ---------------------------------------------------------------------------
@pytest.mark.parametrize("column", ["query", "top_sources", "outcome", "first_relevant_final", "page/nonsense"])
def test_gate_refuses_a_column_that_is_not_a_metric_and_lists_the_metrics(bm25_store, tmp_path, column, capsys):
    config = tmp_path / "same.yaml"
    config.write_text("mode: bm25\nrerank_depth: 0\n")
    code = cli_main(["gate", "--golden", str(SAMPLE_GOLDEN_FILE), "--baseline", str(config), "--candidate",
                     str(config), "--store", str(bm25_store), "--metric", column])
    error = one_error(capsys)
    assert code == 2 and repr(column) in error and "page/ndcg@10" in error and "latency/total_ms" in error


def test_gate_fails_a_candidate_fifty_times_slower_on_a_latency_metric():
    from rag_core.workbench.statistics.gate import gate_values, metric_direction

    queries = [f"q{i}" for i in range(8)]
    fast = {"latency/total_ms": {q: 0.3 + 0.01 * i for i, q in enumerate(queries)}}
    slow = {"latency/total_ms": {q: 16.0 + 0.2 * i for i, q in enumerate(queries)}}
    assert gate_values(fast, slow).failed  # 50 times slower: worse
    assert not gate_values(slow, fast).failed  # 50 times faster: better
    gate = gate_values(fast, slow).metrics[0]
    assert gate.difference.estimate == pytest.approx(sum(16.0 + 0.2 * i - 0.3 - 0.01 * i for i in range(8)) / 8)
    assert gate.higher_is_better is False
    assert {name: metric_direction(name) for name in ("page/ndcg@10", "latency/bm25_ms", "context/words",
                                                      "judge/faithfulness", "evidence/iou@400")} == {
        "page/ndcg@10": True, "latency/bm25_ms": False, "context/words": False, "judge/faithfulness": True,
        "evidence/iou@400": True}


# --- the shared helpers (rag_core.writes) ------------------------------------------------------------------
def test_write_atomic_leaves_the_old_file_when_the_text_is_not_valid_unicode(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_text("the user's line\n")
    path.chmod(0o640)
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "new \ud800 line\n")
    assert path.read_text() == "the user's line\n" and [p.name for p in tmp_path.iterdir()] == ["golden.jsonl"]
    write_atomic(path, "replaced\n")
    assert path.read_text() == "replaced\n" and path.stat().st_mode & 0o777 == 0o640
    assert valid_text("caf\udce9 \ud800!") == "caf\ufffd \ufffd!"


def test_check_output_file_and_the_sidecar_lock(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match="is a folder"):
        check_output_file(tmp_path, "--out")
    with pytest.raises(BadInput, match="is a file, not a folder"):
        check_output_file(tmp_path / "f" / "deeper" / "g.jsonl", "--out")
    with pytest.raises(BadInput, match="--out and --judge-labels name the same file"):
        check_output_file(tmp_path / "g.jsonl", "--out", ("--judge-labels", tmp_path / "." / "g.jsonl"))
    assert check_output_file(tmp_path / "new" / "g.jsonl", "--out", ("--judge-labels", None)) == \
        tmp_path / "new" / "g.jsonl"
    with lock_beside(tmp_path / "g.jsonl", tmp_path / "g.jsonl"):  # one file twice: locked once, no deadlock
        assert (tmp_path / ".g.jsonl.lock").exists()
