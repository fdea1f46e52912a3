"""Every notebook, executed by papermill with tiny parameters, and what it records; plus the shape
rules: committed without outputs, exactly one cell tagged ``parameters`` holding plain literals."""

from __future__ import annotations

import ast

import nbformat
import papermill
import pytest
from mlflow.tracking import MlflowClient
from sweep_fixtures import sqlite_uri, tiny_corpus  # noqa: F401 - fixtures

from rag_core.config import RagConfig, load_config, setting_names
from rag_core.paths import NOTEBOOKS_DIR, SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE
from rag_core.workbench.execution.evaluation import config_from_parameters, evaluate_and_log, load_eval_inputs
from rag_core.workbench.tracking.tracker import Tracker, TrackingTarget

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _execute(name: str, output, **parameters) -> nbformat.NotebookNode:
    papermill.execute_notebook(str(NOTEBOOKS_DIR / name), str(output), parameters=parameters, progress_bar=False,
                               cwd=str(NOTEBOOKS_DIR), kernel_name="python3")
    return nbformat.read(str(output), as_version=4)


def _recorded(notebook: nbformat.NotebookNode) -> dict:
    """The JSON the notebook's last code cell records."""
    last = [cell for cell in notebook.cells if cell.cell_type == "code"][-1]
    return next(output["data"]["application/json"] for output in last.outputs if "application/json" in output.get("data", {}))


def _parameters(path) -> dict:
    notebook = nbformat.read(str(path), as_version=4)
    [cell] = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    return {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(cell.source).body}


# --- shape --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_committed_thin_and_without_outputs(path):
    notebook = nbformat.read(str(path), as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    assert sum("parameters" in cell.metadata.get("tags", []) for cell in notebook.cells) == 1
    assert _parameters(path)  # plain literals only: literal_eval would raise otherwise
    calls = [cell for cell in code if "parameters" not in cell.metadata.get("tags", [])]
    assert all(len(cell.source.splitlines()) <= 12 for cell in calls)  # the logic lives in rag_core


def test_notebooks_are_the_three_expected():
    assert [path.name for path in NOTEBOOKS] == ["01-explore.ipynb", "02-evaluate.ipynb", "03-compare.ipynb"]


@pytest.mark.parametrize("name", ["01-explore.ipynb", "02-evaluate.ipynb"])
def test_notebook_settings_are_one_mapping_of_overrides_not_a_copy_of_the_defaults(name):
    parameters = _parameters(NOTEBOOKS_DIR / name)
    assert parameters["settings"] == {} and parameters["plugins"] == []
    assert set(parameters) & set(setting_names()) == {"plugins"}  # no setting repeated with its default
    assert config_from_parameters(parameters) == load_config()  # the defaults come from their declarations
    overridden = config_from_parameters({**parameters, "settings": {"mode": "bm25", "chunk_size": 256}})
    assert overridden == load_config(None, {"mode": "bm25", "chunk_size": 256})
    assert config_from_parameters({**parameters, "k": 3}).k == 3  # papermill -p k 3 still works
    if name == "02-evaluate.ipynb":
        assert {"input_dir", "golden", "store", "tracking_uri", "experiment", "parent_run_id", "run_name", "run_id",
                "point_hash", "max_queries"} <= set(parameters)


# --- execution ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_evaluate_notebook_logs_and_records_one_run(tiny_corpus, tmp_path):  # noqa: F811
    uri = sqlite_uri(tmp_path)
    executed = _execute("02-evaluate.ipynb", tmp_path / "out.ipynb", input_dir=str(tiny_corpus.documents),
                        golden=str(tiny_corpus.golden), store=str(tmp_path / "store"), tracking_uri=uri,
                        experiment="tiny", mode="bm25", rerank_depth=0, chunk_size=40, overlap=8, k=2, max_queries=2)
    recorded = _recorded(executed)
    metrics = recorded["metrics"]
    assert metrics["eval/queries"] == 2
    assert all(0.0 <= metrics[f"{level}/recall@5"] <= 1.0 for level in ("chunk", "page", "doc"))
    run = MlflowClient(uri).get_run(recorded["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name.startswith("bm25 chunk_size=40")
    assert run.data.params["chunk_size"] == "40" and run.data.params["k"] == "2" and run.data.params["queries"] == "2"
    assert run.data.metrics["doc/hit_rate_at_5"] == metrics["doc/hit_rate@5"]
    assert recorded["timing"]["timing/log_seconds"] > 0
    printed = "".join(output.get("text", "") for cell in executed.cells for output in cell.get("outputs", []))
    assert "level" in printed and recorded["run_id"] in printed


@pytest.mark.slow
def test_explore_notebook_shows_every_stage(tiny_corpus, tmp_path):  # noqa: F811
    executed = _execute("01-explore.ipynb", tmp_path / "out.ipynb", input_dir=str(tiny_corpus.documents),
                        store=str(tmp_path / "store"), query="How often should a sourdough starter be fed?",
                        document="sourdough.md", chunk_size=40, overlap=8, k=2, rerank_depth=2)
    summary = _recorded(executed)
    assert summary["documents"] == 3 and summary["pages"] == 3 and summary["chunks"] > 3
    assert summary["stages"] == ["dense", "bm25", "fused", "rerank"]
    assert len(summary["final"]) == 2
    for hit in summary["final"]:  # re-ranked fused candidates, found by at least one retriever
        assert {"fused", "rerank"} <= set(hit["scores"]) and set(hit["scores"]) & {"dense", "bm25"}
    assert summary["max_seq_length"] > 0 and summary["truncated"] == 0  # 40-word chunks fit

    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert sum("image/png" in output.get("data", {}) for output in outputs) == 2  # the two histograms
    html = "".join(output.get("data", {}).get("text/html", "") for output in outputs)
    for column in ("dense rank", "bm25 score", "fused rank", "rerank score", "final rank"):
        assert column in html
    text = "".join(output.get("text", "") for output in outputs)
    assert "Feed the starter twice a day" in text  # the page shown


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """A sweep-like parent with three BM25 runs of the sample corpus (in process: fast)."""
    folder = tmp_path_factory.mktemp("compare")
    uri = sqlite_uri(folder)
    tracker = Tracker(uri)
    parent = tracker.start_run("sample", "three", tags={"rag.kind": "sweep"})
    inputs = load_eval_inputs(input_dir=SAMPLE_DOCUMENTS_DIR, golden=SAMPLE_GOLDEN_FILE, max_queries=12)
    runs = {}
    for chunk_size in (128, 256, 512):
        config = RagConfig(mode="bm25", rerank_depth=0, chunk_size=chunk_size)
        evaluation = evaluate_and_log(config, inputs, folder / "store", tracking=TrackingTarget(
            uri=uri, experiment="sample", parent_run_id=parent, tags={"rag.point_hash": f"p{chunk_size}"}))
        runs[chunk_size] = evaluation
    tracker.finish(parent)
    return uri, parent, runs


@pytest.mark.slow
def test_compare_notebook_reads_runs_back_and_tests_significance(three_runs, tmp_path):
    uri, _parent, runs = three_runs
    executed = _execute("03-compare.ipynb", tmp_path / "out.ipynb", experiment="sample", tracking_uri=uri,
                        significance_metrics=["page/ndcg@10", "page/recall@5"])
    summary = _recorded(executed)
    logged = {size: MlflowClient(uri).get_run(evaluation.run_id).data.metrics for size, evaluation in runs.items()}
    best_score = max(metrics["page/ndcg_at_10"] for metrics in logged.values())
    best_size = next(size for size in (128, 256, 512) if logged[size]["page/ndcg_at_10"] == best_score)
    assert summary["best_run_id"] == runs[best_size].run_id
    assert summary["baseline_run_id"] == runs[512].run_id  # chunk_size 512 is the default
    # ranx.compare, from the logged rankings and qrels, gives back the logged averages
    assert summary["best"]["ndcg@10"] == pytest.approx(best_score)
    assert summary["baseline"]["ndcg@10"] == pytest.approx(logged[512]["page/ndcg_at_10"])
    assert summary["baseline"]["recall@5"] == pytest.approx(logged[512]["page/recall_at_5"])
    if not summary["same_run"]:
        assert 0.0 <= summary["p_values"]["ndcg@10"] <= 1.0
        wins = summary["win_tie_loss"]["ndcg@10"]
        assert wins["W"] + wins["T"] + wins["L"] == 12
    outputs = [output for cell in executed.cells for output in cell.get("outputs", [])]
    assert sum("image/png" in output.get("data", {}) for output in outputs) == 2  # metric vs settings, quality vs latency
