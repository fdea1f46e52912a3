"""Sweeps end to end: the smoke sweep into a temporary tracking store (a parent run, one child run per
point with params, metrics and artifacts, each chunking embedded once), restarts that skip finished
points, a failing point that does not stop the others, and sweep files that are checked."""

from __future__ import annotations

import json
import os

import nbformat
import pytest
import yaml
from conftest import run_cli
from mlflow.tracking import MlflowClient
from sweep_fixtures import (embeddings_in_cache, evaluation_notebook_with, kernel_pids, quality_metrics,  # noqa: F401
                            smoke_sweep, tiny_corpus, tracking_uri)

from rag_core.config import ConfigError
from rag_core.evaluate.metrics import DEFAULT_PRIMARY_METRIC
from rag_core.workbench import load_sweep, read_recorded_result, run_sweep
from rag_core.workbench.tracking.mlflow_names import mlflow_metric_name

pytestmark = pytest.mark.slow


def _write_sweep(folder, **content) -> object:
    path = folder / f"{content.get('name', 'sweep')}.yaml"
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    return path


class PapermillCounter:
    """Counts notebook executions while still running them."""

    def __init__(self, monkeypatch):
        import papermill

        self.calls: list[str] = []
        real = papermill.execute_notebook

        def counting(input_path, output_path, *args, **kwargs):
            self.calls.append(str(output_path))
            return real(input_path, output_path, *args, **kwargs)

        monkeypatch.setattr(papermill, "execute_notebook", counting)


# --- the smoke sweep ----------------------------------------------------------------------------
def test_smoke_sweep_logs_a_parent_run_and_one_child_per_point(smoke_sweep, tmp_path):  # noqa: F811
    result, client = smoke_sweep.result, MlflowClient(smoke_sweep.tracking_uri)
    parent = client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED" and parent.info.run_name == "smoke"
    assert parent.data.tags["rag.kind"] == "sweep" and parent.data.tags["rag.sweep_hash"] == smoke_sweep.spec.hash
    assert parent.data.params["grid.chunk_size"] == json.dumps(["256", "512"])

    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    expected = {(256, 3), (256, 5), (512, 3), (512, 5)}
    assert len(children) == 4 and {run.info.status for run in children} == {"FINISHED"}
    assert {(int(run.data.params["chunk_size"]), int(run.data.params["k"])) for run in children} == expected
    assert len({run.data.tags["rag.point_hash"] for run in children}) == 4
    for run in children:
        params, metrics = run.data.params, run.data.metrics
        assert params["mode"] == "hybrid" and params["rerank_depth"] == "0" and "embed_model_used" in params
        assert params["queries"] == "4"
        assert all(0.0 <= metrics[f"{level}/{name}"] <= 1.0 for level in ("chunk", "page", "doc")
                   for name in ("recall_at_5", "ndcg_at_10", "hit_rate_at_5", "mrr"))
        assert metrics["timing/notebook_seconds"] > 0
        artifacts = {item.path for item in client.list_artifacts(run.info.run_id)}
        assert {"per_query.csv", "plots", "ranx", "notebook"} <= artifacts
        [notebook] = client.list_artifacts(run.info.run_id, "notebook")
        executed = nbformat.read(client.download_artifacts(run.info.run_id, notebook.path, str(tmp_path)), 4)
        recorded = read_recorded_result_from(executed)
        assert recorded["run_id"] == run.info.run_id
        assert recorded["metrics"]["page/ndcg@10"] == pytest.approx(metrics["page/ndcg_at_10"])
        assert (smoke_sweep.output / notebook.path.split("/")[-1]).exists()

    # the printed table is best first, read back from MLflow
    table = result.table
    assert list(table["rank"]) == [1, 2, 3, 4]
    primary = result.primary_metric  # smoke.yaml names none: the default, its golden set quoting the evidence
    assert primary == DEFAULT_PRIMARY_METRIC
    best = max(run.data.metrics[mlflow_metric_name(primary)] for run in children)  # points may tie: compare values
    assert table.iloc[0][primary] == pytest.approx(best)
    assert set(table["run_id"]) == {run.info.run_id for run in children}
    assert list(table[primary]) == sorted(table[primary], reverse=True)


def read_recorded_result_from(notebook) -> dict:
    return next(output["data"]["application/json"] for cell in notebook.cells for output in cell.get("outputs", [])
                if "application/json" in output.get("data", {}))


def test_each_distinct_chunking_is_embedded_once(smoke_sweep):  # noqa: F811
    result, client = smoke_sweep.result, MlflowClient(smoke_sweep.tracking_uri)
    work = client.get_run(result.parent_run_id).data.metrics
    children = [outcome.metrics for outcome in result.outcomes]
    chunks_per_chunking = {int(metrics["index/chunks"]) for metrics in children}  # 256 and 512 words differ
    assert work["sweep/points"] == 4 and work["sweep/distinct_chunkings"] == 2 == len(chunks_per_chunking)
    assert work["sweep/dense_indexes_built"] == 2
    # what is embedded is each chunking's vectors: a chunk longer than the model's window is several windows
    vectors = {int(metrics["index/chunks"]): int(metrics["index/windows"]) for metrics in children}
    assert all(windows >= chunks for chunks, windows in vectors.items())
    assert work["sweep/chunks_embedded"] + work["sweep/embed_cache_hits"] == sum(vectors.values())
    # with 2 workers the chunkings are embedded before the points run: no point embeds anything
    assert all(metrics["index/embedded"] == 0 for metrics in children)
    # the store's embedding cache holds each distinct chunk text once
    assert embeddings_in_cache(smoke_sweep.store) == work["sweep/chunks_embedded"]


def test_restarting_a_finished_sweep_executes_nothing(smoke_sweep, monkeypatch):  # noqa: F811
    counter = PapermillCounter(monkeypatch)
    again = run_sweep(smoke_sweep.spec, smoke_sweep.store, workers=2, output_dir=smoke_sweep.output,
                      tracking_uri=smoke_sweep.tracking_uri, echo=lambda line: None)
    assert counter.calls == []
    assert again.parent_run_id == smoke_sweep.result.parent_run_id and again.resumed
    assert {outcome.status for outcome in again.outcomes} == {"SKIPPED"}
    assert len(again.table) == 4


def test_points_that_differ_in_k_reuse_their_candidates(smoke_sweep):  # noqa: F811
    work = MlflowClient(smoke_sweep.tracking_uri).get_run(smoke_sweep.result.parent_run_id).data.metrics
    # 2 chunkings x 4 queries computed once each; the second k of each chunking reuses them (same worker)
    assert (work["sweep/candidates_computed"], work["sweep/candidates_reused"]) == (8, 8)


# --- warm kernels -------------------------------------------------------------------------------
def test_a_point_in_a_warm_kernel_gives_the_metrics_of_the_point_alone(tiny_corpus, tmp_path, tracking_uri,  # noqa: F811
                                                                       monkeypatch):
    data = {"input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden)}
    base = {"mode": "hybrid", "rerank_depth": 0, "overlap": 0}
    # The sweep never moves this process to another directory: worker threads would race on it (papermill
    # only "changes" to the current one around its file reads and writes).
    changed_to = []
    monkeypatch.setattr(os, "chdir", lambda path: changed_to.append(str(path)))
    warm = run_sweep(load_sweep(_write_sweep(tmp_path, name="warm", **data, base=base,
                                             grid={"chunk_size": [20, 30], "k": [1, 3]})),
                     tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None)
    alone = run_sweep(load_sweep(_write_sweep(tmp_path, name="alone", **data, base=base,
                                              grid={"chunk_size": [30], "k": [3]})),
                      tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None)
    assert warm.work["sweep/kernels_started"] == 1 and len(warm.executed) == 4  # one kernel ran every point
    [last] = [o for o in warm.outcomes if o.point.changes == {"chunk_size": 30, "k": 3}]
    [single] = alone.outcomes
    assert quality_metrics(single.metrics) and quality_metrics(last.metrics) == quality_metrics(single.metrics)
    assert last.metrics["retrieval/candidates_reused"] == 3 and single.metrics["retrieval/candidates_reused"] == 0
    assert set(changed_to) <= {os.getcwd()}


def test_a_point_whose_kernel_dies_fails_and_the_next_point_gets_a_new_kernel(tiny_corpus, tmp_path,  # noqa: F811
                                                                               tracking_uri):  # noqa: F811
    notebook = evaluation_notebook_with(
        "import os, signal\nif config_from_parameters(globals()).k == 2:\n    os.kill(os.getpid(), signal.SIGKILL)",
        tmp_path / "dies.ipynb")
    spec = load_sweep(_write_sweep(tmp_path, name="dies", input=str(tiny_corpus.documents),
                                   golden=str(tiny_corpus.golden), base={"mode": "bm25", "rerank_depth": 0},
                                   grid={"k": [2, 3]}))
    result = run_sweep(spec, tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None, notebook=notebook)
    by_k = {outcome.point.changes["k"]: outcome for outcome in result.outcomes}
    assert by_k[2].status == "FAILED" and "DeadKernelError" in by_k[2].error
    assert by_k[3].status == "FINISHED" and result.work["sweep/kernels_started"] == 2
    assert MlflowClient(tracking_uri).get_run(by_k[2].run_id).info.status == "FAILED"


def test_a_kernel_started_ahead_has_imported_what_points_import_and_runs_in_its_folder(tmp_path):
    import subprocess
    import sys

    from rag_core.workbench.execution.evaluation import PRELOAD
    from rag_core.workbench.execution.kernels import WarmKernel

    probe = "import os, sys\nfrom rag_core.workbench.execution.evaluation import PRELOAD\n" \
            "print([module for module in PRELOAD if module not in sys.modules], os.getcwd())"
    # without the warm-up, importing the notebook's module leaves them to be imported by the first run
    plain = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert plain.startswith("[") and "mlflow.tracking" in plain
    notebook = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe)]), notebook)
    kernel = WarmKernel()
    kernel.start(tmp_path)
    try:
        kernel.execute(notebook, tmp_path / "out.ipynb", {}, cwd=tmp_path)
    finally:
        kernel.shutdown()
    [cell] = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert cell.outputs[0]["text"].strip() == f"[] {tmp_path}" and PRELOAD
    assert kernel.started == 1  # the kernel started ahead ran the notebook: no second one


def test_one_client_serves_every_notebook_of_a_kernel_and_each_gets_its_own_outputs(tmp_path):
    import papermill

    from rag_core.workbench.execution.kernels import WarmKernel

    counting = tmp_path / "count.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "calls = globals().get('calls', 0) + 1\nprint('call', calls)")]), counting)
    failing = tmp_path / "fail.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('before'); 1 / 0")]), failing)
    kernel, clients, printed = WarmKernel(), [], []
    try:
        for number, notebook in enumerate([counting, counting, failing, counting]):
            output = tmp_path / f"out-{number}.ipynb"
            try:
                kernel.execute(notebook, output, {}, cwd=tmp_path)
            except papermill.PapermillExecutionError:
                assert notebook == failing
            clients.append(kernel.client)
            printed.append(nbformat.read(output, as_version=4).cells[-1].outputs[0]["text"].strip())
    finally:
        kernel.shutdown()
    assert printed == ["call 1", "call 2", "before", "call 3"]  # one kernel; no output strayed to another notebook
    assert clients[0] is not None and all(client is clients[0] for client in clients)
    assert kernel.started == 1 and kernel.client is None  # shut down with its kernel


def test_a_sweep_whose_set_up_fails_leaves_no_kernel_running(tmp_path, tracking_uri):  # noqa: F811
    (tmp_path / "empty").mkdir()
    spec = load_sweep(_write_sweep(tmp_path, name="empty", input=str(tmp_path / "empty"),
                                   golden=str(tmp_path / "none.jsonl"), grid={"k": [1, 2]}))
    before = kernel_pids()
    with pytest.raises(Exception, match="no documents could be read"):  # after the kernel was started
        run_sweep(spec, tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None)
    assert kernel_pids() - before == set()


def test_points_whose_cross_encoder_cannot_load_are_not_run_and_said_so(tiny_corpus, tmp_path, tracking_uri,  # noqa: F811
                                                                       monkeypatch):
    missing = str(tmp_path / "no-such-cross-encoder")
    spec = load_sweep(_write_sweep(tmp_path, name="unavailable", input=str(tiny_corpus.documents),
                                   golden=str(tiny_corpus.golden),
                                   base={"mode": "bm25", "rerank_model": missing},
                                   grid={"rerank_depth": [0, 2, 4]}))
    counter = PapermillCounter(monkeypatch)
    lines: list[str] = []
    result = run_sweep(spec, tmp_path / "store", tracking_uri=tracking_uri, echo=lines.append)
    assert len(counter.calls) == 1
    statuses = {outcome.point.changes["rerank_depth"]: outcome.status for outcome in result.outcomes}
    assert statuses == {0: "FINISHED", 2: "UNAVAILABLE", 4: "UNAVAILABLE"}
    [line] = [line for line in lines if "rerank_depth > 0" in line]
    assert "2 point(s)" in line and missing in line
    parent = MlflowClient(tracking_uri).get_run(result.parent_run_id)
    assert missing in parent.data.tags["rag.points_unavailable"] and parent.info.status == "FINISHED"
    assert parent.data.metrics["sweep/points_unavailable"] == 2 and len(result.table) == 1


def test_an_interrupted_sweep_marks_the_running_point_killed_at_once(tiny_corpus, tmp_path, tracking_uri):  # noqa: F811
    import os
    import signal
    import subprocess
    import sys
    import time

    notebook = evaluation_notebook_with("import time\nif config_from_parameters(globals()).k == 2:\n    time.sleep(120)",
                                        tmp_path / "slow.ipynb")
    sweep_file = _write_sweep(tmp_path, name="interrupted", input=str(tiny_corpus.documents),
                              golden=str(tiny_corpus.golden), base={"mode": "bm25", "rerank_depth": 0}, grid={"k": [2]})
    script = (f"from pathlib import Path\nfrom rag_core.workbench import load_sweep, run_sweep\n"
              f"run_sweep(load_sweep({str(sweep_file)!r}), {str(tmp_path / 'store')!r}, tracking_uri={tracking_uri!r}, "
              f"notebook=Path({str(notebook)!r}))\n")
    client = MlflowClient(tracking_uri)
    client.search_experiments()  # creates the store's tables now, not in a race with the sweep's process
    # SIGINT as a terminal delivers it: a shell without job control starts background commands with SIGINT
    # ignored, and a child would inherit that (then Ctrl-C never reaches the sweep).
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None and not _running_points(client):
            time.sleep(0.5)
        time.sleep(2)  # the point's notebook is starting or executing
        assert process.poll() is None, process.communicate()[1][-3000:]  # still running: it did not fail
        os.kill(process.pid, signal.SIGINT)
        process.wait(timeout=240)  # generous: exit time on a loaded machine is not what is tested, the statuses are
    finally:
        process.kill()
    [child] = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.`rag.kind` = 'sweep-point'")
    [parent] = client.search_runs([child.info.experiment_id], "tags.`rag.kind` = 'sweep'")
    assert (child.info.status, parent.info.status) == ("KILLED", "KILLED")


def _running_points(client) -> list:
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return client.search_runs(experiments, "tags.`rag.kind` = 'sweep-point' and attributes.status = 'RUNNING'") if experiments else []


# --- failures and restarts ----------------------------------------------------------------------
def test_a_failing_point_is_a_failed_child_run_and_a_restart_reruns_unfinished_points(  # noqa: F811
        tiny_corpus, tmp_path, tracking_uri, monkeypatch):  # noqa: F811
    # dense retrieval needs an embedding model that does not exist (and no fallback): that point fails
    sweep_file = _write_sweep(
        tmp_path, name="failing", input=str(tiny_corpus.documents), golden=str(tiny_corpus.golden),
        base={"chunk_size": 40, "overlap": 8, "k": 3, "model_fallback": False, "rerank_depth": 0,
              "embed_model": str(tmp_path / "no-such-embedding-model")},
        grid={"mode": ["bm25", "dense"]},
    )
    spec = load_sweep(sweep_file)
    counter = PapermillCounter(monkeypatch)
    lines: list[str] = []
    result = run_sweep(spec, tmp_path / "store", tracking_uri=tracking_uri, echo=lines.append)
    assert len(counter.calls) == 2
    by_mode = {outcome.point.changes["mode"]: outcome for outcome in result.outcomes}
    assert by_mode["bm25"].status == "FINISHED" and by_mode["dense"].status == "FAILED"
    assert "no-such-embedding-model" in by_mode["dense"].error
    assert any("FAILED" in line and "mode=dense" in line for line in lines)

    client = MlflowClient(tracking_uri)
    failed = client.get_run(by_mode["dense"].run_id)
    assert failed.info.status == "FAILED" and "no-such-embedding-model" in failed.data.tags["rag.error"]
    [notebook] = client.list_artifacts(failed.info.run_id, "notebook")  # the partially executed notebook
    assert notebook.path.endswith(".ipynb")
    with pytest.raises(RuntimeError, match="recorded no result"):
        read_recorded_result(by_mode["dense"].notebook)
    assert client.get_run(by_mode["bm25"].run_id).info.status == "FINISHED"
    assert client.get_run(result.parent_run_id).info.status == "FAILED"
    assert list(result.table["status"]) == ["FINISHED", "FAILED"] and result.table["rank"].iloc[0] == 1

    # as if the sweep had then been killed while the first point ran again: its run is left RUNNING
    client.update_run(by_mode["bm25"].run_id, status="RUNNING")
    counter.calls.clear()
    again = run_sweep(spec, tmp_path / "store", tracking_uri=tracking_uri, echo=lines.append)
    # both unfinished points run again (the finished-point skip is checked on the smoke sweep), same parent
    assert sorted(counter.calls) == sorted(str(outcome.notebook) for outcome in result.outcomes)
    assert again.parent_run_id == result.parent_run_id and again.resumed
    assert client.get_run(by_mode["bm25"].run_id).info.status == "KILLED"
    assert {o.point.changes["mode"]: o.status for o in again.outcomes} == {"bm25": "FINISHED", "dense": "FAILED"}
    assert len(again.table) == 2  # one row per point: the killed and the earlier failed runs are superseded
    assert set(again.table["run_id"]) == {outcome.run_id for outcome in again.outcomes}


# --- sweep files --------------------------------------------------------------------------------
def test_unknown_keys_and_settings_are_errors_naming_them(tmp_path, tiny_corpus):  # noqa: F811
    data = {"name": "x", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden)}
    with pytest.raises(ConfigError, match="'grids'"):
        load_sweep(_write_sweep(tmp_path, **data, grids={"chunk_size": [64]}))
    with pytest.raises(ConfigError, match="'chunk_sizes'"):
        load_sweep(_write_sweep(tmp_path, **data, grid={"chunk_sizes": [64]}))
    with pytest.raises(ConfigError, match="'rerank'"):
        load_sweep(_write_sweep(tmp_path, **data, base={"rerank": 3}))
    with pytest.raises(ConfigError, match="primary_metric"):
        load_sweep(_write_sweep(tmp_path, **data, primary_metric="page/precision@3"))

    completed = run_cli("sweep", str(_write_sweep(tmp_path, **data, grids={"k": [3]})), "--store", str(tmp_path / "s"))
    assert completed.returncode == 2 and "'grids'" in completed.stderr


def test_points_invalid_combinations_skipped_and_chunkings_consecutive(tmp_path, tiny_corpus):  # noqa: F811
    path = _write_sweep(tmp_path, name="order", input=str(tiny_corpus.documents), golden=str(tiny_corpus.golden),
                        grid={"k": [3, 5], "chunk_size": [64, 128], "overlap": [0, 64]})
    spec = load_sweep(path)
    points, skipped = spec.points()
    assert len(points) == 6 and len(skipped) == 2  # overlap 64 with chunk_size 64, for k 3 and 5
    assert all("chunk_size=64" in message and "overlap=64" in message for message in skipped)
    chunkings = [(point.config.chunk_size, point.config.overlap) for point in points]
    assert chunkings == sorted(chunkings)  # points sharing a chunking run one after another
    assert [point.config.k for point in points[:2]] == [3, 5]

    # the sweep hash follows the resolved content, not the file's formatting; flags change the base
    reformatted = tmp_path / "reformatted.yaml"
    reformatted.write_text(json.dumps(yaml.safe_load(path.read_text())))
    assert load_sweep(reformatted).hash == spec.hash
    assert load_sweep(path, overrides={"mode": "bm25"}).hash != spec.hash
    assert {point.config.mode for point in load_sweep(path, overrides={"mode": "bm25"}).points()[0]} == {"bm25"}


def test_listed_points_are_crossed_with_the_grid_and_checked(tmp_path, tiny_corpus):  # noqa: F811
    data = {"name": "listed", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden)}
    path = _write_sweep(tmp_path, **data, base={"rerank_depth": 0}, grid={"k": [3, 5]},
                        points=[{"mode": "bm25"}, {"mode": "hybrid", "route_docs": 1}])
    spec = load_sweep(path)
    points, skipped = spec.points()
    assert not skipped
    assert sorted((p.config.mode, p.config.route_docs, p.config.k) for p in points) == [
        ("bm25", 0, 3), ("bm25", 0, 5), ("hybrid", 1, 3), ("hybrid", 1, 5)]
    assert spec.axes == ["k", "mode", "route_docs"]
    assert {p.config.rerank_depth for p in points} == {0}
    only_listed = load_sweep(_write_sweep(tmp_path, **data, points=[{"mode": "bm25"}, {"chunk_size": 128}]))
    assert [p.changes for p in sorted(only_listed.points()[0], key=lambda p: p.number)] == [
        {"mode": "bm25"}, {"chunk_size": 128}]
    with pytest.raises(ConfigError, match=r"'route_doc'.*points\[2\]"):
        load_sweep(_write_sweep(tmp_path, **data, points=[{"mode": "bm25"}, {"route_doc": 1}]))
    with pytest.raises(ConfigError, match="'points' must be a list"):
        load_sweep(_write_sweep(tmp_path, **data, points={"mode": "bm25"}))


def test_one_worker_builds_the_indexes_first_when_its_kernel_needs_no_torch(tiny_corpus, tmp_path,  # noqa: F811
                                                                              tracking_uri):  # noqa: F811
    """bf16 (the default) queries run on the store's export: the builds are made in this process, so
    the kernel embeds nothing; a torch point's kernel loads torch anyway, so its builds stay there."""
    from types import SimpleNamespace

    from rag_core.workbench.execution.sweep import queries_without_torch

    spec = load_sweep(_write_sweep(tmp_path, name="prebuilt", input=str(tiny_corpus.documents),
                                   golden=str(tiny_corpus.golden), base={"mode": "hybrid", "rerank_depth": 0, "overlap": 0},
                                   grid={"chunk_size": [20, 30]}))
    result = run_sweep(spec, tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None)
    assert [outcome.status for outcome in result.outcomes] == ["FINISHED", "FINISHED"]
    work = MlflowClient(tracking_uri).get_run(result.parent_run_id).data.metrics
    assert work["sweep/prebuild_dense_indexes_built"] == 2
    assert all(outcome.metrics["index/embedded"] == 0 for outcome in result.outcomes)
    point = lambda **config: SimpleNamespace(config=SimpleNamespace(**{"rerank_depth": 0, "embed_backend": "bf16", **config}))  # noqa: E731
    assert queries_without_torch([point(), point(embed_backend="onnx-int8")])
    assert not queries_without_torch([point(), point(embed_backend="torch")])
    assert not queries_without_torch([point(rerank_depth=10)])
