"""Issue 53: golden sets in MLflow keep every line under concurrency and kill -9, names read back as written,
and untrusted text never breaks an export.

Each case lost lines or printed a traceback on the commit before: three ``golden import --append`` at once
(real processes, on a SQLite store and through a tracking server), an import killed with SIGKILL once its
dataset exists, dataset names that were accepted but could not be read back, a golden line holding a lone
surrogate, ``feedback queue`` on a deleted experiment; and ``gate --json`` did not say which version it read.
The tracking-server writers' check (no file lock reaches them) is also tested in-process, deterministically.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from servers import mlflow_server
from sweep_fixtures import tracking_uri  # noqa: F401 - fixture
from test_hardening_round4 import BM25, FLAGS, QUESTIONS, bm25_store, one_error  # noqa: F401 - bm25_store: fixture

from conftest import ROOT
from rag_core.cli import main as cli_main
from rag_core.errors import RunFailure
from rag_core.evaluate.golden_records import DatasetRef, dataset_record
from rag_core.paths import SAMPLE_GOLDEN_FILE
from rag_core.service import answer_query
from rag_core.workbench.tracking import golden_datasets
from rag_core.workbench.tracking.golden_datasets import VERSION_TAG, listing, read_lines, resolve, write_version
from rag_core.workbench.tracking.query_traces import log_answered_query
from rag_core.workbench.tracking.tracker import Tracker, global_tracking_uri

RULE = "golden dataset name is"


def golden_lines(prefix: str, count: int) -> list[dict]:
    return [{"id": f"{prefix}-{number}", "query": f"{prefix} question number {number}?",
             "evidence": [{"source": "api-reference.pdf", "page": 1}]} for number in range(count)]


def write_golden(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def rag(*args: str) -> list[str]:
    return [sys.executable, "-m", "rag_core.cli", *args]


def golden_json(capsys, *args: str) -> tuple[int, dict]:
    code = cli_main(["golden", *args, "--json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else {"err": captured.err})


def exported_ids(capsys, ref: str, out: Path) -> list[str]:
    code, report = golden_json(capsys, "export", ref, "--out", str(out))
    assert code == 0, report
    return [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]


def appends_at_once(tmp_path: Path, uri: str) -> tuple[list[dict], str]:
    """Version 1 of 1,000 lines, then three `golden import --append` of 20 new lines each started at once
    (real processes); their JSON reports, and what they printed on stderr."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    first = subprocess.run(rag("golden", "import", str(write_golden(tmp_path / "v1.jsonl", golden_lines("v1", 1000))),
                               "--name", "N"), capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-600:]
    files = [write_golden(tmp_path / f"{part}.jsonl", golden_lines(part, 20)) for part in "ABC"]
    running = [subprocess.Popen(rag("golden", "import", str(path), "--name", "N", "--append", "--json"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
               for path in files]
    outputs = [process.communicate(timeout=600) for process in running]
    assert [process.returncode for process in running] == [0, 0, 0], [err[-600:] for _, err in outputs]
    return [json.loads(out) for out, _ in outputs], "".join(err for _, err in outputs)


def datasets_named(database: str, name: str) -> int:
    """Rows of the SQLite store's dataset table named `name` (0 while the writer holds the database)."""
    db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0.05)
    try:
        return db.execute("SELECT count(*) FROM evaluation_datasets WHERE name = ?", (name,)).fetchone()[0]
    except sqlite3.OperationalError:  # locked for a moment, or not made yet
        return 0
    finally:
        db.close()


def assert_every_line_kept(reports: list[dict], newest: list[str]) -> None:
    assert sorted(report["version"] for report in reports) == [2, 3, 4]  # distinct numbers
    assert sorted(report["lines"] for report in reports) == [1020, 1040, 1060]  # each built on the one before
    assert [report["added"] for report in reports] == [20, 20, 20]
    sizes = {"v1": 1000, "A": 20, "B": 20, "C": 20}
    expected = {line["id"] for part, size in sizes.items() for line in golden_lines(part, size)}
    assert len(newest) == len(set(newest)) == 1060 and set(newest) == expected
    assert newest[:1000] == [f"v1-{number}" for number in range(1000)]  # version 1's lines first, in order


# --- case 1: appends at once ---------------------------------------------------------------------------
@pytest.mark.slow  # four rag-pipeline processes
def test_three_appends_at_once_on_a_sqlite_store_make_three_versions_that_keep_every_line(
        tracking_uri, tmp_path, capsys):  # noqa: F811
    reports, notes = appends_at_once(tmp_path, tracking_uri)
    assert "writing again" not in notes  # the lock made them take turns: none was overtaken
    code, listed = golden_json(capsys, "versions", "N")
    assert [item["lines"] for item in listed["versions"]] == [1000, 1020, 1040, 1060] and listed["unfinished"] == []
    assert_every_line_kept(reports, exported_ids(capsys, "mlflow:N", tmp_path / "newest.jsonl"))
    assert (Path(tracking_uri.removeprefix("sqlite:///")).parent / ".mlflow.db.golden.lock").exists()  # what serialised


@pytest.mark.slow  # an MLflow server and four rag-pipeline processes
def test_three_appends_at_once_through_a_tracking_server_keep_every_line(tmp_path, capsys, monkeypatch):
    """No file lock reaches a server's other writers: each write checks, before and after taking its number,
    that it builds on the newest version and holds its number alone (else it writes again on top)."""
    (tmp_path / "server").mkdir()
    with mlflow_server(f"sqlite:///{tmp_path / 'server' / 'mlflow.db'}", tmp_path / "server") as base:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", base)
        reports, _ = appends_at_once(tmp_path, base)
        assert_every_line_kept(reports, exported_ids(capsys, "mlflow:N", tmp_path / "newest.jsonl"))


@pytest.fixture
def unlocked(tracking_uri, monkeypatch):  # noqa: F811
    """The SQLite store without its lock, as a tracking server's writers are; no waits between attempts."""
    monkeypatch.setattr(Tracker, "store_lock", lambda self, purpose="": nullcontext())
    monkeypatch.setattr(golden_datasets.time, "sleep", lambda seconds: None)
    return tracking_uri


def test_an_append_that_another_writer_overtakes_writes_again_on_top_of_the_new_version(unlocked, monkeypatch):
    write_version("N", golden_lines("v1", 3), origin="first")
    publish, interleaved = golden_datasets._publish, []

    def overtaken(*args, **kwargs):  # another writer publishes version 2 while this append writes
        if not interleaved:
            interleaved.append(None)
            interleaved[0] = write_version("N", golden_lines("other", 2), origin="other", append=True)
        return publish(*args, **kwargs)

    monkeypatch.setattr(golden_datasets, "_publish", overtaken)
    written = write_version("N", golden_lines("mine", 2), origin="mine", append=True)
    assert (interleaved[0].version.version, written.version.version, written.added) == (2, 3, 2)
    ids = [line["id"] for line in read_lines(resolve(DatasetRef("N", None), unlocked), unlocked)]
    assert ids == ["v1-0", "v1-1", "v1-2", "other-0", "other-1", "mine-0", "mine-1"]
    assert [version.lines for version in listing("N").versions] == [3, 5, 7] and not listing("N").unfinished
    names = [dataset.name for dataset in MlflowClient(unlocked).search_datasets(filter_string="name = 'N'")]
    assert len(names) == 3  # the overtaken attempt's dataset was deleted


def test_a_write_that_finds_its_number_taken_deletes_its_dataset_and_takes_the_next(unlocked, monkeypatch):
    write_version("N", golden_lines("v1", 2), origin="first")
    client = MlflowClient(unlocked)
    set_tags, rivals = MlflowClient.set_dataset_tags, []

    def rival_first(self, dataset_id, tags):  # a rival takes the same number just before this write does
        if VERSION_TAG in tags and len(rivals) < budget:
            with global_tracking_uri(unlocked):
                rival = client.create_dataset("N", tags={"rag.golden.lines": "1"})
                rival.merge_records([dataset_record(golden_lines("rival", 1)[0], 0)])
            set_tags(self, rival.dataset_id, dict(tags))
            rivals.append(rival.dataset_id)
        return set_tags(self, dataset_id, tags)

    monkeypatch.setattr(MlflowClient, "set_dataset_tags", rival_first)
    budget = 1
    written = write_version("N", golden_lines("mine", 1), origin="mine")
    found = listing("N").versions
    assert [(v.version, v.dataset_id) for v in found] == [(1, found[0].dataset_id), (2, rivals[0]),
                                                          (3, written.version.dataset_id)]

    budget = 1 + golden_datasets.PUBLISH_ATTEMPTS  # a rival every time: no version is claimed
    with pytest.raises(RunFailure, match="nothing was written"):
        write_version("N", golden_lines("late", 1), origin="late")
    assert [v.origin for v in listing("N").versions] == ["first", "", "mine", *[""] * golden_datasets.PUBLISH_ATTEMPTS]
    assert not listing("N").unfinished  # each lost attempt deleted its own dataset


# --- case 2: kill -9 during an import ------------------------------------------------------------------
@pytest.mark.slow  # three rag-pipeline processes, one killed
def test_an_import_killed_once_its_dataset_exists_is_no_version_and_appends_build_on_the_last_complete(
        tracking_uri, tmp_path, capsys):  # noqa: F811
    version_1 = write_golden(tmp_path / "v1.jsonl", golden_lines("v1", 1000))
    assert golden_json(capsys, "import", str(version_1), "--name", "N")[0] == 0
    database = tracking_uri.removeprefix("sqlite:///")
    big = write_golden(tmp_path / "big.jsonl", golden_lines("big", 3000))
    process = subprocess.Popen(rag("golden", "import", str(big), "--name", "N"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=ROOT, env=os.environ.copy())
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if datasets_named(database, "N") > 1:
            process.send_signal(signal.SIGKILL)  # its dataset row exists: the write has begun
            break
        time.sleep(0.01)
    assert process.wait(timeout=60) == -signal.SIGKILL, "the import ended before it could be killed"

    code, listed = golden_json(capsys, "versions", "N")
    assert code == 0 and [item["version"] for item in listed["versions"]] == [1]  # nothing looks complete
    [unfinished] = listed["unfinished"]
    assert unfinished["lines"] == 3000 and unfinished["origin"] == f"import {big}"
    assert cli_main(["golden", "versions", "N"]) == 0
    assert "unfinished, no version" in capsys.readouterr().out

    code, refused = golden_json(capsys, "export", "mlflow:N@2", "--out", str(tmp_path / "two.jsonl"))
    assert code == 2 and "has no version 2; versions: 1" in refused["err"] and "unfinished" in refused["err"]
    assert not (tmp_path / "two.jsonl").exists()
    assert exported_ids(capsys, "mlflow:N", tmp_path / "newest.jsonl") == [f"v1-{n}" for n in range(1000)]

    two = write_golden(tmp_path / "two-more.jsonl", golden_lines("late", 2))
    code, appended = golden_json(capsys, "import", str(two), "--name", "N", "--append")
    assert (code, appended["version"], appended["lines"], appended["added"]) == (0, 2, 1002, 2)
    ids = exported_ids(capsys, "mlflow:N@2", tmp_path / "after.jsonl")
    assert ids == [f"v1-{n}" for n in range(1000)] + ["late-0", "late-1"]


def test_a_version_holding_fewer_records_than_written_is_refused_by_name(tracking_uri, tmp_path, capsys):  # noqa: F811
    """What an import killed before this fix left: a numbered dataset without its records."""
    with global_tracking_uri(tracking_uri):
        MlflowClient(tracking_uri).create_dataset("old", tags={VERSION_TAG: "1", "rag.golden.lines": "3000"})
    code, refused = golden_json(capsys, "export", "mlflow:old", "--out", str(tmp_path / "old.jsonl"))
    assert code == 2 and "mlflow:old@1 holds 0 of the 3000 lines" in refused["err"]
    assert not (tmp_path / "old.jsonl").exists()


# --- case 3: names that read back --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["o'brien", "a@b", " pad ", "pad ", 'say "hi"', "a:b", "a/b", "x" * 101])
def test_a_name_no_reader_could_read_back_is_refused_at_import(name, tracking_uri, tmp_path, capsys):  # noqa: F811
    golden = write_golden(tmp_path / "g.jsonl", golden_lines("g", 4))
    assert cli_main(["golden", "import", str(golden), "--name", name]) == 2
    assert RULE in one_error(capsys)
    assert MlflowClient(tracking_uri).search_datasets() == []  # nothing was written


@pytest.mark.parametrize("spec", ["mlflow:a@b", "mlflow:a@b@1", "mlflow:o'brien", "mlflow: pad ", "mlflow: pad @1"])
def test_every_reader_names_the_same_rule(spec, tracking_uri, tmp_path, capsys):  # noqa: F811
    assert cli_main(["golden", "export", spec, "--out", str(tmp_path / "x.jsonl")]) == 2
    assert RULE in one_error(capsys)


@pytest.mark.parametrize("name", ["o'brien", "a@b", " pad "])
def test_golden_versions_names_the_rule(name, tracking_uri, capsys):  # noqa: F811
    assert cli_main(["golden", "versions", name]) == 2
    assert RULE in one_error(capsys)


def test_a_name_with_spaces_dots_dashes_and_accents_reads_back_from_the_spec_printed(
        tracking_uri, tmp_path, capsys):  # noqa: F811
    golden = write_golden(tmp_path / "g.jsonl", golden_lines("g", 4))
    for _ in range(2):
        code, report = golden_json(capsys, "import", str(golden), "--name", "café set.v1-2_x")
        assert code == 0
    assert report["ref"] == "mlflow:café set.v1-2_x@2"
    out = tmp_path / "back.jsonl"
    assert golden_json(capsys, "export", report["ref"], "--out", str(out))[0] == 0
    assert out.read_bytes() == golden.read_bytes()
    assert [item["version"] for item in golden_json(capsys, "versions", "café set.v1-2_x")[1]["versions"]] == [1, 2]


def test_feedback_export_refuses_a_dataset_name_before_writing_anything(
        bm25_store, tracking_uri, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "golden.jsonl"
    code = cli_main(["feedback", "export", "--experiment", "queries", "--store", str(bm25_store), "--out", str(out),
                     "--to-dataset", "o'brien"])
    assert code == 2 and RULE in one_error(capsys) and not out.exists()


# --- case 4: a lone surrogate ----------------------------------------------------------------------------
def surrogate_file(path: Path) -> Path:
    """The sample set's first line, then a line whose query holds the JSON escape of a lone surrogate."""
    first = SAMPLE_GOLDEN_FILE.read_text(encoding="utf-8").splitlines()[0]
    broken = json.dumps({"id": "bad", "query": "lone \ud800 surrogate?", "evidence": [{"source": "x.pdf"}]})
    assert "\\ud800" in broken  # ASCII in the file: the file itself is valid UTF-8
    path.write_text(first + "\n" + broken + "\n", encoding="utf-8")
    return path


def test_a_line_with_a_lone_surrogate_is_refused_at_import_with_its_line(tracking_uri, tmp_path, capsys):  # noqa: F811
    golden = surrogate_file(tmp_path / "g.jsonl")
    assert cli_main(["golden", "import", str(golden), "--name", "N"]) == 2
    error = one_error(capsys)
    assert f"{golden}:2 (query bad)" in error and "'query' is not valid Unicode text" in error
    assert MlflowClient(tracking_uri).search_datasets() == []


def test_a_stored_lone_surrogate_fails_export_and_eval_in_one_line(bm25_store, tracking_uri, tmp_path,  # noqa: F811
                                                                  capsys):
    """A version stored before imports refused such lines (written here as that import wrote it)."""
    lines = [json.loads(line) for line in surrogate_file(tmp_path / "g.jsonl").read_text().splitlines()]
    with global_tracking_uri(tracking_uri):
        dataset = MlflowClient(tracking_uri).create_dataset("N", tags={VERSION_TAG: "1", "rag.golden.lines": "2"})
        dataset.merge_records([dataset_record(line, position) for position, line in enumerate(lines)])
    out = tmp_path / "out.jsonl"
    assert cli_main(["golden", "export", "mlflow:N", "--out", str(out)]) == 2
    error = one_error(capsys)
    assert "mlflow:N@1:2" in error and "not valid Unicode" in error and not out.exists()
    for golden in ("mlflow:N@1", str(tmp_path / "g.jsonl")):  # with MLflow logging on
        assert cli_main(["eval", "--golden", golden, "--store", str(bm25_store), *FLAGS]) == 2
        error = one_error(capsys)
        assert ":2 (query bad)" in error and "not valid Unicode" in error
    assert MlflowClient(tracking_uri).search_runs([e.experiment_id for e in MlflowClient(tracking_uri)
                                                  .search_experiments()]) == []  # refused before any run


# --- case 5: feedback queue on a deleted experiment --------------------------------------------------------
def test_feedback_queue_on_a_deleted_experiment_names_it_and_the_restore_command(bm25_store, tracking_uri,  # noqa: F811
                                                                                capsys):
    result = answer_query(QUESTIONS[0], bm25_store, BM25, use_llm=False)
    logged = log_answered_query(result, BM25, started_ns=time.time_ns(), experiment="binned", tracking_uri=tracking_uri)
    MlflowClient(tracking_uri).delete_experiment(logged.experiment_id)
    code = cli_main(["feedback", "queue", "--experiment", "binned", "--store", str(bm25_store)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", captured
    error = captured.err.strip().splitlines()[-1]
    assert error.startswith("error: ") and "'binned' was deleted" in error
    assert f"mlflow experiments restore --experiment-id {logged.experiment_id}" in error
    assert "--no-mlflow" not in error


# --- also: the gate says which version it read --------------------------------------------------------------
def test_gate_json_records_the_golden_version_it_evaluated(bm25_store, tracking_uri, tmp_path, capsys):  # noqa: F811
    for _ in range(2):
        assert golden_json(capsys, "import", str(SAMPLE_GOLDEN_FILE), "--name", "golden")[0] == 0
    config = tmp_path / "bm25.yaml"
    config.write_text("mode: bm25\nrerank_depth: 0\n")
    newest = resolve(DatasetRef("golden", None))
    common = ["--baseline", str(config), "--candidate", str(config), "--store", str(bm25_store), "--json"]
    assert newest.version == 2
    assert cli_main(["gate", "--golden", "mlflow:golden", *common]) == 0  # the newest, pinned
    used = json.loads(capsys.readouterr().out)["golden"]
    assert (used["source"], used["name"], used["version"], used["dataset_id"], used["queries"]) == (
        "mlflow:golden@2", "golden", 2, newest.dataset_id, 36)
    assert cli_main(["gate", "--golden", str(SAMPLE_GOLDEN_FILE), *common]) == 0
    used = json.loads(capsys.readouterr().out)["golden"]
    assert used["source"] == str(SAMPLE_GOLDEN_FILE.resolve()) and "version" not in used and used["queries"] == 36
    assert cli_main(["gate", "--golden", "mlflow:golden@1", *common[:-1]]) == 0
    assert "on mlflow:golden@1: 36 queries" in capsys.readouterr().out
