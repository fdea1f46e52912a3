"""Searches: the Optuna driver against a table of made-up results (fast: budgets, halving's rungs and
promotions, infeasible trials, limits, resuming), then real searches on the sample corpus (BM25 only, a
few queries): tpe and halving end to end with MLflow child runs, a resumed search after Ctrl-C, a budget
in seconds, and --dry-run."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import nbformat
import optuna
import papermill
import pytest
import yaml
from conftest import run_cli
from mlflow.tracking import MlflowClient
from sweep_fixtures import evaluation_notebook_with, kernel_pids, tracking_uri  # noqa: F401

from rag_core.evaluate.metrics import DEFAULT_PRIMARY_METRIC
from rag_core.paths import NOTEBOOKS_DIR, SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE
from rag_core.workbench.plans.space import Budget, Halving, RangeAxis, SearchSettings, SearchSpace
from rag_core.workbench.reports.search_report import read_search
from rag_core.workbench.search.driver import (FEASIBLE, RECORD_ATTR, SearchDriver, TrialScore, open_study, query_order)

QUERIES = [f"q{number:02d}" for number in range(20)]


class TableEvaluator:
    """Made-up results: a smooth function of the settings, plus a per-query term so that a subset's mean
    differs from the whole's; one second per query evaluated. Records every call."""

    def __init__(self, embed_for: set[int] = frozenset()):
        self.calls: list[tuple[dict, tuple[str, ...]]] = []
        self.embed_for = embed_for  # chunk sizes whose dense index is "not in the store"

    def value(self, config, query_ids) -> float:
        base = 1 - abs(config.bm25_k1 - 1.2) / 3 - abs(config.bm25_b - 0.6) - 0.1 * (config.mode == "bm25")
        return base + sum(int(q[1:]) for q in query_ids) / (100 * len(query_ids))

    def evaluate(self, point) -> TrialScore:
        self.calls.append((dict(point.changes), point.query_ids))
        return TrialScore(self.value(point.config, point.query_ids), float(len(point.query_ids)))

    def embedding_needed(self, config):
        return f"chunk_size={config.chunk_size}" if config.chunk_size in self.embed_for and config.mode != "bm25" else None

    def cold_estimate(self, config):
        return 1000.0

    def unavailable(self, config):
        return None

    def build(self, config):
        return 0.0


SPACE = SearchSpace({"mode": ("bm25", "hybrid")}, {"bm25_k1": RangeAxis("bm25_k1", 0.4, 2.0, False, 0.4),
                                                   "bm25_b": RangeAxis("bm25_b", 0.2, 1.0, False, 0.2)})


def drive(settings, evaluator, *, storage=None, space=SPACE, base=None, workers=1):
    study = open_study(storage, "test", settings, settings.halving.eta ** 2)
    driver = SearchDriver(study, space, base or {"rerank_depth": 0}, settings, evaluator, QUERIES, metric="m",
                          workers=workers, echo=lambda line: None, storage=storage or "", study_name="test")
    return driver, driver.run()


# --- the driver ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_tpe_spends_its_points_on_distinct_configurations_of_every_tuning_query(workers):
    evaluator = TableEvaluator()
    _, history = drive(SearchSettings("tpe", Budget(points=12)), evaluator, workers=workers)
    assert len(evaluator.calls) == 12 and history.spent_points == 12
    assert all(query_ids == tuple(QUERIES) for _, query_ids in evaluator.calls)
    assert len({json.dumps(changes, sort_keys=True) for changes, _ in evaluator.calls}) == 12
    best = max(history.trials, key=lambda t: t.value if t.value is not None else -1)
    assert history.best.value == best.value == max(evaluator.value(_config(c), QUERIES) for c, _ in evaluator.calls)
    assert all(t.optimizer_seconds > 0 for t in history.trials)


def _config(changes):
    from rag_core.config import load_config

    return load_config(None, {"rerank_depth": 0, **changes})


def test_halving_scores_nested_query_subsets_and_promotes_the_top_third():
    evaluator = TableEvaluator()
    settings = SearchSettings("halving", Budget(points=8), halving=Halving(eta=3, min_queries=3))
    driver, history = drive(settings, evaluator)
    rungs = Halving(3, 3).rungs(len(QUERIES))
    assert driver.rungs == rungs == (3, 7, 20)
    order = query_order(QUERIES, 0)
    for size, subset in zip(rungs, driver.subsets):  # the first n of one seeded order, in golden order
        assert set(subset) == set(order[:size]) and list(subset) == sorted(subset)
    # ASHA's rule (Li et al. 2020): at each rung a trial goes on when it is among the best floor(n / eta) of the
    # n values reported there so far (the very first trials: when it is the best)
    reported: dict[int, list[float]] = {0: [], 1: []}
    for trial in history.trials:
        if trial.status == "repeat":  # evaluated on every query before: told at once, never reported to the pruner
            continue
        for rung, (queries, value, *_) in enumerate(trial.evaluations[:2]):
            assert queries == rungs[rung] and math.isclose(value, evaluator.value(_config(trial.changes), driver.subsets[rung]))
            reported[rung].append(value)
            competing = sorted(reported[rung], reverse=True)
            keep = max(len(competing) // 3, 1)
            promoted = value >= competing[keep - 1]
            went_on = len(trial.evaluations) > rung + 1
            assert went_on == promoted or trial.reason.startswith("stopped before the next rung"), (trial.number, rung)
    pruned = [t for t in history.trials if t.status == "pruned"]
    assert pruned and all(t.queries < 20 for t in pruned)
    # the budget counts queries: a rung of 3 of 20 queries costs 0.15 points
    spent = sum(q / 20 for _, query_ids in evaluator.calls for q in [len(query_ids)])
    assert math.isclose(history.spent_points, spent) and spent <= 8 + 1e-9


def test_hyperband_runs_through_the_same_rungs():
    evaluator = TableEvaluator()
    settings = SearchSettings("halving", Budget(points=6), halving=Halving(eta=3, min_queries=3, pruner="hyperband"))
    _, history = drive(settings, evaluator)
    assert {len(query_ids) for _, query_ids in evaluator.calls} <= {3, 7, 20}
    assert history.best is not None and history.spent_points <= 6 + 1e-9


def test_invalid_configurations_are_told_infeasible_and_never_run():
    evaluator = TableEvaluator()
    space = SearchSpace({"chunk_size": (64, 512)}, {"overlap": RangeAxis("overlap", 0, 128, True, 64)})
    driver, history = drive(SearchSettings("tpe", Budget(points=4)), evaluator, space=space)
    invalid = [t for t in history.trials if t.status == "invalid"]
    assert invalid and all(t.changes["overlap"] >= t.changes["chunk_size"] for t in invalid)
    assert all(c["overlap"] < c["chunk_size"] for c, _ in evaluator.calls)
    frozen = {trial.number: trial for trial in driver.study.trials}
    assert all(frozen[t.number].constraints == {FEASIBLE: 1.0} for t in invalid)


def test_max_new_chunkings_keeps_the_search_on_embedded_chunkings():
    evaluator = TableEvaluator(embed_for={512})
    space = SearchSpace({"chunk_size": (256, 512), "mode": ("dense", "hybrid")}, {})
    settings = SearchSettings("tpe", Budget(points=4), max_new_chunkings=0)
    _, history = drive(settings, evaluator, space=space, base={"rerank_depth": 0, "overlap": 32})
    assert {c["chunk_size"] for c, _ in evaluator.calls} == {256}
    over = [t for t in history.trials if t.status == "over_limit"]
    assert over and all(t.changes["chunk_size"] == 512 and "max_new_chunkings 0" in t.reason for t in over)


def test_a_new_chunking_that_does_not_fit_the_seconds_left_is_not_started():
    evaluator = TableEvaluator(embed_for={512})  # embedding 512 would take 1000 s
    space = SearchSpace({"chunk_size": (256, 512), "mode": ("dense", "hybrid")}, {})
    _, history = drive(SearchSettings("tpe", Budget(seconds=200)), evaluator, space=space,
                       base={"rerank_depth": 0, "overlap": 32})
    assert evaluator.calls and {c["chunk_size"] for c, _ in evaluator.calls} == {256}
    assert any(t.status == "over_limit" and "does not fit" in t.reason for t in history.trials)


def test_a_budget_in_seconds_stops_within_one_evaluation():
    evaluator = TableEvaluator()  # 20 s per full evaluation
    _, history = drive(SearchSettings("tpe", Budget(seconds=90)), evaluator)
    charged = sum(t.charged for t in history.trials)
    assert math.isclose(history.spent_seconds, charged, rel_tol=1e-6)
    assert 90 <= history.spent_seconds < 90 + 20 + 5 and len(evaluator.calls) == 5


def test_a_small_space_is_searched_once_and_then_the_search_stops():
    evaluator = TableEvaluator()
    space = SearchSpace({"mode": ("bm25", "hybrid")}, {})
    _, history = drive(SearchSettings("tpe", Budget(points=10)), evaluator, space=space)
    assert len(evaluator.calls) == 2 and "evaluated before" in history.stopped
    assert {t.status for t in history.trials} == {"complete", "repeat"}


def test_parallel_trials_never_evaluate_one_configuration_twice():
    class Slow(TableEvaluator):
        def evaluate(self, point):
            time.sleep(0.2)  # long enough that the sampler proposes a configuration still being evaluated
            return super().evaluate(point)

    space = SearchSpace({"mode": ("bm25", "hybrid")}, {})
    for seed in range(6):  # two workers start two trials at once: random draws repeat a configuration often
        evaluator = Slow()
        _, history = drive(SearchSettings("tpe", Budget(points=2), seed=seed), evaluator, space=space, workers=2)
        assert len(evaluator.calls) == len({json.dumps(c, sort_keys=True) for c, _ in evaluator.calls}), seed


def test_a_resumed_search_continues_the_study_and_never_repeats_an_evaluation(tmp_path):
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    evaluator = TableEvaluator()
    _, first = drive(SearchSettings("tpe", Budget(points=3)), evaluator, storage=storage)
    # a session killed outright leaves a trial RUNNING in the storage: the next one marks it failed
    left_running = optuna.load_study(study_name="test", storage=storage).ask().number
    _, second = drive(SearchSettings("tpe", Budget(points=7)), evaluator, storage=storage)
    assert len(evaluator.calls) == 7 and second.spent_points == 7
    assert len({json.dumps(c, sort_keys=True) for c, _ in evaluator.calls}) == 7
    numbers = [t.number for t in second.trials]
    assert numbers[:3] == [t.number for t in first.trials] and left_running not in numbers
    reloaded = optuna.load_study(study_name="test", storage=storage)
    assert reloaded.trials[left_running].state.name == "FAIL" and len(reloaded.trials) == len(second.trials) + 1
    assert all(RECORD_ATTR in t.user_attrs for t in reloaded.trials if t.number != left_running)


# --- real searches on the sample corpus -----------------------------------------------------------------------
def write_search(folder, **content):
    data = {"name": "search", "input": str(SAMPLE_DOCUMENTS_DIR), "golden": str(SAMPLE_GOLDEN_FILE), "max_queries": 6,
            "base": {"mode": "bm25", "rerank_depth": 0, "tracing": False},
            "grid": {"bm25_k1": {"low": 0.4, "high": 2.0, "step": 0.4}, "bm25_b": [0.3, 0.75]}, **content}
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.slow
def test_tpe_logs_each_trial_as_a_child_run_and_resumes_after_ctrl_c(tmp_path, tracking_uri):  # noqa: F811
    from rag_core.workbench import load_sweep, run_sweep

    # a first session, interrupted (SIGINT, as Ctrl-C) while its second trial's notebook runs
    notebook = evaluation_notebook_with("import time, os\nif os.path.exists(os.environ['STALL']):\n    time.sleep(120)",
                                        tmp_path / "stall.ipynb")
    stall = tmp_path / "stall-now"
    path = write_search(tmp_path, strategy="tpe", budget=3)
    script = (f"from pathlib import Path\nimport os\nfrom rag_core.workbench import load_sweep, run_sweep\n"
              f"def echo(line):\n    print(line, flush=True)\n"
              f"    if line.startswith('[trial 0]'):\n        Path(os.environ['STALL']).touch()\n"
              f"run_sweep(load_sweep({str(path)!r}), {str(tmp_path / 'store')!r}, tracking_uri={tracking_uri!r}, "
              f"notebook=Path({str(notebook)!r}), echo=echo)\n")
    client = MlflowClient(tracking_uri)
    client.search_experiments()
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "STALL": str(stall)},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and process.poll() is None and not (stall.exists() and _running(client)):
            time.sleep(0.5)
        time.sleep(2)
        assert process.poll() is None, process.communicate()[1][-3000:]
        os.kill(process.pid, signal.SIGINT)
        process.wait(timeout=240)
    finally:
        process.kill()
    [parent] = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.`rag.kind` = 'sweep'")
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert parent.info.status == "KILLED" and sorted(r.info.status for r in children) == ["FINISHED", "KILLED"]
    finished = next(r for r in children if r.info.status == "FINISHED")
    assert finished.data.params["fidelity_queries"] == "6" and finished.data.tags["rag.search_trial"] == "0"

    # the same command again: the same parent run and study; the finished trial is not run again
    stall.unlink()
    lines: list[str] = []
    os.environ["STALL"] = str(stall)
    result = run_sweep(load_sweep(path), tmp_path / "store", tracking_uri=tracking_uri, notebook=notebook, echo=lines.append)
    assert result.parent_run_id == parent.info.run_id and result.resumed
    assert "resuming (2 trials" in " ".join(" ".join(lines).split()), lines[:3]  # its line wraps at 120 columns
    history = result.search
    assert history.spent_points == 3 and history.trials[1].status == "failed" and history.trials[1].reason == "interrupted"
    runs = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}' "
                              "and attributes.status = 'FINISHED'")
    assert len(runs) == 3 and len({r.data.tags["rag.point_hash"] for r in runs}) == 3  # nothing evaluated twice
    assert all(r.data.metrics["search/cost_seconds"] > 0 for r in runs)
    assert result.table["trial"].notna().all() and result.table["role"].tolist().count("winner") == 1
    assert client.get_run(result.parent_run_id).data.metrics["search/points_spent"] == 3


def _running(client) -> list:
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return client.search_runs(experiments, "tags.`rag.kind` = 'sweep-point' and attributes.status = 'RUNNING'") if experiments else []


@pytest.mark.slow
def test_halving_with_a_holdout_scores_the_winner_on_queries_no_trial_saw(tmp_path, tracking_uri):  # noqa: F811
    from rag_core.workbench import load_sweep, run_sweep

    path = write_search(tmp_path, strategy="halving", budget=2.5, holdout=0.3, max_queries=10,
                        halving={"eta": 2, "min_queries": 2})
    kernels_before = kernel_pids()
    result = run_sweep(load_sweep(path), tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None)
    assert kernel_pids() - kernels_before == set()  # the final runs' kernel too is shut down
    history, report = result.search, result.holdout
    held_out = set(report.split.held_out)
    assert history.rungs == (2, 4, 7) and len(held_out) == 3
    client = MlflowClient(tracking_uri)
    children = client.search_runs([client.get_experiment_by_name(result.experiment).experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{result.parent_run_id}'")
    trial_runs = [r for r in children if "rag.search_trial" in r.data.tags]
    final = {r.data.tags["rag.search_role"]: r for r in children if "rag.search_role" in r.data.tags}
    assert {int(r.data.params["fidelity_queries"]) for r in trial_runs} <= {2, 4, 7}
    for run in trial_runs:  # no trial saw a held-out query
        assert not held_out & set(_query_ids(client, run, tmp_path))
    assert set(final) == {"winner", "default"} and set(_query_ids(client, final["winner"], tmp_path)) >= held_out
    assert report.winner.run_id == final["winner"].info.run_id
    assert math.isclose(report.winner.tune.estimate, history.best.value)  # the same tuning queries, scored again
    assert result.table.loc[result.table["role"] == "winner", "trial"].item() == history.best.number
    assert history.spent_points <= 2.5 + 1e-9

    # 03-compare reads the search back: its trials, and the progress and importance plots
    view = read_search(result.experiment, result.parent_run_id, tracking_uri)
    assert view.strategy == "halving" and list(view.trials["number"]) == [t.number for t in history.trials]
    assert view.trials["spent_seconds"].is_monotonic_increasing
    assert view.trials["best_so_far"].dropna().is_monotonic_increasing
    assert view.trials["best_so_far"].max() == pytest.approx(history.best.value)
    executed = tmp_path / "compare.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS_DIR / "03-compare.ipynb"), str(executed), progress_bar=False,
                               cwd=str(NOTEBOOKS_DIR), kernel_name="python3",
                               parameters={"experiment": result.experiment, "tracking_uri": tracking_uri})
    outputs = [output for cell in nbformat.read(str(executed), as_version=4).cells for output in cell.get("outputs", [])]
    assert sum("image/png" in output.get("data", {}) for output in outputs) == 3  # + the search's two panels


def _query_ids(client, run, folder) -> list[str]:
    import pandas as pd

    destination = folder / run.info.run_id
    destination.mkdir(exist_ok=True)
    return list(pd.read_csv(client.download_artifacts(run.info.run_id, "per_query.csv", str(destination)),
                            dtype={"query_id": str})["query_id"])


@pytest.mark.slow
def test_a_budget_in_seconds_and_the_dry_run_estimate_from_measured_throughputs(tmp_path, tracking_uri):  # noqa: F811
    from rag_core.workbench import load_sweep, run_sweep
    from rag_core.workbench.plans.cost import load_throughputs

    path = write_search(tmp_path, strategy="tpe", budget={"seconds": 1})
    result = run_sweep(load_sweep(path), tmp_path / "store", tracking_uri=tracking_uri, echo=lambda line: None)
    assert len([t for t in result.search.trials if t.evaluations]) == 1  # one evaluation spends the second
    assert result.search.spent_seconds >= 1

    # the dry run: the space, nothing to embed (BM25), and the time from the throughput just measured
    throughputs = load_throughputs(tmp_path / "store")
    [observation] = throughputs.points["bm25"]
    dry = run_cli("sweep", str(write_search(tmp_path, name="dry", strategy="tpe", budget=5)), "--dry-run", "--json",
                  store=tmp_path / "store")
    assert dry.returncode == 0, dry.stderr
    estimate = json.loads(dry.stdout)
    assert estimate["space_size"] == 10 and estimate["evaluations"] == 5 and estimate["to_embed"] == []
    assert math.isclose(estimate["total_seconds"], 5 * observation[2], rel_tol=1e-6)  # one observation: 5 x its time
    text = run_cli("sweep", str(tmp_path / "dry.yaml"), "--dry-run", store=tmp_path / "store").stdout
    assert "space: 10 configurations" in text and "to embed: nothing" in text and "estimated time:" in text


@pytest.mark.slow
def test_the_cli_runs_a_search_and_prints_the_winner_with_its_held_out_score(tmp_path):
    """`rag-pipeline sweep FILE` as a user runs it: the search's summary, and the winner's held-out score,
    recomputed here from the winner run's per-query scores on the queries no trial scored."""
    import re

    import pandas as pd

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_search(tmp_path, strategy="tpe", budget=2, holdout=0.3, max_queries=10)
    completed = run_cli("sweep", str(path), "--output", str(tmp_path / "notebooks"), store=tmp_path / "store",
                        env={"MLFLOW_TRACKING_URI": uri})
    assert completed.returncode == 0, completed.stderr[-3000:]
    out = completed.stdout
    assert re.search(r"^Search \(tpe\): \d+ trials .*spent 2\.0 points", out, re.M), out
    [winner_line] = [line for line in out.splitlines() if line.startswith("  winner  ")]
    printed = float(re.search(r"held-out (-?\d+\.\d+) \[", winner_line).group(1))

    client = MlflowClient(uri)
    [parent] = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.`rag.kind` = 'sweep'")
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    [winner] = [r for r in children if r.data.tags.get("rag.search_role") == "winner"]
    trials = [r for r in children if "rag.search_trial" in r.data.tags]
    assert len(trials) == 2 and all(r.data.params["fidelity_queries"] == "7" for r in trials)

    def per_query(run):
        destination = tmp_path / run.info.run_id
        destination.mkdir(exist_ok=True)
        return pd.read_csv(client.download_artifacts(run.info.run_id, "per_query.csv", str(destination)),
                           dtype={"query_id": str}).set_index("query_id")

    seen = set().union(*(per_query(r).index for r in trials))
    scores = per_query(winner)
    held_out = [q for q in scores.index if q not in seen]
    assert len(scores) == 10 and len(held_out) == 3
    # the search file names no primary metric, and the sample golden set quotes its evidence
    assert printed == pytest.approx(scores.loc[held_out, DEFAULT_PRIMARY_METRIC].mean(), abs=5e-4)
