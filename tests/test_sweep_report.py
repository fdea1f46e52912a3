"""Sweeps that hold out queries, end to end: the smoke sweep with ``holdout`` reports the winner's tuning and
held-out scores with bootstrap intervals (terminal, parent run, table), and a grid without the default
configuration evaluates it as an extra point, through the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from conftest import run_cli
from mlflow.tracking import MlflowClient
from sweep_fixtures import smoke_sweep, sqlite_uri, tiny_corpus  # noqa: F401 - fixtures

from rag_core.evaluate.metrics import DEFAULT_PRIMARY_METRIC
from rag_core.paths import EXPERIMENTS_DIR
from rag_core.workbench import load_sweep, run_sweep
from rag_core.workbench.reports.sweep_report import read_sweep_holdout
from rag_core.workbench.reports.text import format_sweep
from rag_core.workbench.tracking.mlflow_names import mlflow_metric_name

pytestmark = pytest.mark.slow
METRIC = DEFAULT_PRIMARY_METRIC  # smoke.yaml names none, and its golden set quotes the evidence
LOGGED = mlflow_metric_name(METRIC)  # as MLflow stores it


def _per_query(client: MlflowClient, run_id: str, folder) -> pd.DataFrame:
    return pd.read_csv(client.download_artifacts(run_id, "per_query.csv", str(folder)), dtype={"query_id": str})


def test_the_smoke_sweep_with_holdout_reports_tuned_and_held_out_scores(smoke_sweep, tmp_path):  # noqa: F811
    data = yaml.safe_load((EXPERIMENTS_DIR / "smoke.yaml").read_text())
    data.update(name="smoke-holdout", holdout=0.5, holdout_seed=3, input=str(smoke_sweep.spec.input_dir),
                golden=str(smoke_sweep.spec.golden))
    (tmp_path / "smoke-holdout.yaml").write_text(yaml.safe_dump(data))
    uri = sqlite_uri(tmp_path)
    lines: list[str] = []
    result = run_sweep(load_sweep(tmp_path / "smoke-holdout.yaml"), smoke_sweep.store, workers=2,
                       output_dir=tmp_path / "notebooks", tracking_uri=uri, echo=lines.append)
    client = MlflowClient(uri)
    assert any("Holding out 2 of 4 queries" in line for line in lines)

    # the split is on the parent run
    parent = client.get_run(result.parent_run_id)
    held_out = parent.data.tags["rag.holdout_query_ids"].split(",")
    assert parent.data.params["holdout"] == "0.5" and parent.data.params["holdout_seed"] == "3"
    assert len(held_out) == 2 and parent.data.metrics["holdout/tuning_queries"] == 2
    assert read_sweep_holdout(result.experiment, result.parent_run_id, uri).split.held_out == tuple(held_out)

    # every point: the same all-query metrics as the plain smoke sweep, plus the mean over each part
    plain = {tuple(sorted(o.point.changes.items())): o.metrics for o in smoke_sweep.result.outcomes}
    tuning_scores = {}
    for outcome in result.outcomes:
        assert outcome.status == "FINISHED"
        metrics = client.get_run(outcome.run_id).data.metrics
        assert metrics[LOGGED] == pytest.approx(plain[tuple(sorted(outcome.point.changes.items()))][METRIC])
        per_query = _per_query(client, outcome.run_id, tmp_path / outcome.run_id).set_index("query_id")
        tuning = [query_id for query_id in per_query.index if query_id not in held_out]
        assert metrics[f"tune/{LOGGED}"] == pytest.approx(per_query.loc[tuning, METRIC].mean())
        assert metrics[f"holdout/{LOGGED}"] == pytest.approx(per_query.loc[held_out, METRIC].mean())
        tuning_scores[outcome.run_id] = metrics[f"tune/{LOGGED}"]

    # the winner is the best on the tuning queries; the default (chunk_size 512, k 5) is a grid point
    report = result.holdout
    assert tuning_scores[report.winner.run_id] == max(tuning_scores.values())
    [default] = [o for o in result.outcomes if o.point.changes == {"chunk_size": 512, "k": 5}]
    assert report.default.run_id == default.run_id and report.default_status == "grid point"
    winner = client.get_run(report.winner.run_id).data.metrics
    assert parent.data.metrics[f"winner/holdout/{LOGGED}"] == pytest.approx(winner[f"holdout/{LOGGED}"])
    assert parent.data.metrics[f"winner/optimism/{LOGGED}"] == pytest.approx(
        winner[f"tune/{LOGGED}"] - winner[f"holdout/{LOGGED}"])
    assert parent.data.tags["rag.default_run_id"] == default.run_id
    assert parent.data.tags["rag.select"] == "max" and report.selection.chosen == report.selection.best == report.winner.run_id
    assert parent.data.metrics["select/indistinguishable_points"] == len(report.selection.indistinguishable())

    # the table: ranked by the tuning score, every metric with an interval that contains it
    table = result.table
    assert list(table[f"tune/{METRIC}"]) == sorted(table[f"tune/{METRIC}"], reverse=True)
    assert table["role"].iloc[0] in ("winner", "winner, default")
    for metric in (f"tune/{METRIC}", f"holdout/{METRIC}", METRIC, "page/recall@5", "doc/mrr", "latency/total_p50_ms"):
        assert ((table[f"{metric} ci_low"] <= table[metric] + 1e-12) & (table[metric] <= table[f"{metric} ci_high"] + 1e-12)).all()
    printed = format_sweep(result)
    assert "optimism" in printed and f"held-out {report.winner.holdout}" in printed and "] " in printed
    assert str(report.default.holdout) in printed

    # notebooks/03-compare.ipynb shows the same report and tests the winner against the default
    executed = _execute_compare_notebook(tmp_path / "compare.ipynb", experiment=result.experiment,
                                         parent_run_id=result.parent_run_id, tracking_uri=uri)
    recorded = next(output["data"]["application/json"] for cell in executed.cells for output in cell.get("outputs", [])
                    if "application/json" in output.get("data", {}))
    assert recorded["holdout"]["winner"]["run_id"] == report.winner.run_id
    assert recorded["holdout"]["optimism"] == pytest.approx(report.optimism)
    assert (recorded["best_run_id"], recorded["baseline_run_id"]) == (report.winner.run_id, report.default.run_id)
    shown = "".join(output.get("text", "") + output.get("data", {}).get("text/html", "")
                    for cell in executed.cells for output in cell.get("outputs", []))
    assert "optimism" in shown and str(report.winner.tune) in shown


def _execute_compare_notebook(output, **parameters):
    import nbformat
    import papermill

    from rag_core.paths import NOTEBOOKS_DIR

    papermill.execute_notebook(str(NOTEBOOKS_DIR / "03-compare.ipynb"), str(output), parameters=parameters,
                               progress_bar=False, cwd=str(NOTEBOOKS_DIR), kernel_name="python3")
    return nbformat.read(str(output), as_version=4)


def test_a_grid_without_the_default_runs_it_as_an_extra_point(tiny_corpus, tmp_path):  # noqa: F811
    sweep_file = tmp_path / "extra.yaml"
    sweep_file.write_text(yaml.safe_dump({
        "name": "extra", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden), "holdout": 0.34,
        "select": "one_se",
        "base": {"mode": "bm25", "rerank_depth": 0, "overlap": 0}, "grid": {"chunk_size": [20, 30]}}))
    completed = run_cli("sweep", str(sweep_file), "--json", "--output", str(tmp_path / "notebooks"),
                        store=tmp_path / "store", env={"MLFLOW_TRACKING_URI": sqlite_uri(tmp_path)})
    assert completed.returncode == 0, completed.stderr
    output = json.loads(completed.stdout)
    holdout = output["holdout"]
    assert holdout["default_status"] == "extra point" and len(holdout["held_out_query_ids"]) == 1
    assert holdout["tuning_queries"] == 2
    points = {point["label"]: point for point in output["points"]}
    assert set(points) == {"chunk_size=20", "chunk_size=30", "chunk_size=512"}  # the default: chunk_size 512
    assert holdout["default"]["run_id"] == points["chunk_size=512"]["run_id"] != holdout["winner"]["run_id"]
    roles = {row["run_id"]: row["role"] for row in output["table"]}
    assert roles[points["chunk_size=512"]["run_id"]] == "default (extra point)"
    assert holdout["optimism"] == pytest.approx(holdout["winner"]["tune"]["estimate"] - holdout["winner"]["holdout"]["estimate"])
    assert "Holding out 1 of 3 queries" in completed.stderr
    selection = holdout["selection"]  # one_se: the winner is among the points within one SE of the best
    assert selection["rule"] == "one_se" and selection["chosen"] == holdout["winner"]["run_id"] in selection["eligible"]


def test_the_table_holds_the_files_table_metrics_then_every_metric_logged():
    from rag_core.workbench.reports.sweep_report import table_columns

    logged = ["page/recall@5", "page/ndcg@10", "bm25/page/recall@5", "dense/page/ndcg@10", "dense/page/recall@5",
              "dense/doc/mrr", "mine/page/recall@5", "index/chunks", "latency/total_p50_ms", "answer/token_f1"]
    assert table_columns(logged, "page/ndcg@10", ["answer/token_f1"]) == [
        "answer/token_f1", "page/recall@5", "latency/total_p50_ms",  # the file's first, the primary left out
        "bm25/page/recall@5", "dense/page/recall@5", "dense/page/ndcg@10", "dense/doc/mrr", "mine/page/recall@5"]
    assert table_columns(["page/recall@5", "run_id"], "page/recall@5") == []
    assert table_columns(["tune/page/recall@5", "holdout/page/recall@5", "page/mrr"], "page/recall@5") == ["page/mrr"]
