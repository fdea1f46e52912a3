"""The honest winner (rag_core.workbench.statistics.honest, sweep_report.compare_sweep): chosen on the tuning queries
only, reported on the held-out ones next to the default configuration; the extra default point."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from sweep_fixtures import tiny_corpus  # noqa: F401 - fixture

from rag_core.workbench import load_sweep
from rag_core.workbench.plans.holdout_plan import default_config, extra_default_point
from rag_core.workbench.reports.sweep_report import SplitWithDefaultRun, compare_sweep
from rag_core.workbench.statistics.holdout import split_queries
from rag_core.workbench.statistics.honest import holdout_report
from rag_core.workbench.statistics.intervals import bootstrap_interval

IDS = [f"q{i}" for i in range(10)]
SPLIT = split_queries(IDS, 0.4, seed=3)
METRIC = "page/ndcg@10"


def _per_query(tuning: float, held_out: float) -> pd.DataFrame:
    """Every tuning query scores `tuning`, every held-out query `held_out` (slightly spread)."""
    values = [(tuning if q in SPLIT.tuning else held_out) + 0.01 * (i % 3) for i, q in enumerate(IDS)]
    return pd.DataFrame({"query_id": IDS, METRIC: values})


def _runs(per_query: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """As load_runs gives them after the sweep logged each part's mean."""
    return pd.DataFrame([{"run_id": run_id, "run_name": f"chunk_size={size}", "status": "FINISHED", "chunk_size": size,
                          METRIC: table[METRIC].mean(),
                          **{f"{part}/{METRIC}": table.set_index("query_id").loc[list(SPLIT.ids(part)), METRIC].mean()
                             for part in ("tune", "holdout")}}
                         for (run_id, table), size in zip(per_query.items(), (256, 1024, 512))])


@pytest.fixture
def three_runs():
    # "tuned" is best on the tuning queries; "lucky" is best on the held-out ones and on all queries together;
    # "default" is the default configuration
    per_query = {"tuned": _per_query(0.8, 0.3), "lucky": _per_query(0.6, 0.9), "default": _per_query(0.5, 0.5)}
    return _runs(per_query), per_query


def test_the_winner_is_chosen_on_the_tuning_queries_only(three_runs):
    runs, per_query = three_runs
    assert runs.set_index("run_id")[METRIC].idxmax() == "lucky" == runs.set_index("run_id")[f"holdout/{METRIC}"].idxmax()
    report = holdout_report(runs, per_query, SPLIT, METRIC, "default", "grid point")
    assert report.winner.run_id == "tuned"
    tuned = per_query["tuned"].set_index("query_id")[METRIC]
    assert report.winner.tune.estimate == pytest.approx(tuned[list(SPLIT.tuning)].mean())
    assert report.winner.holdout.estimate == pytest.approx(tuned[list(SPLIT.held_out)].mean())
    assert report.optimism == pytest.approx(tuned[list(SPLIT.tuning)].mean() - tuned[list(SPLIT.held_out)].mean())
    assert report.optimism > 0.4  # chosen on the tuning queries, it does much worse on the others
    assert report.default.run_id == "default" and report.default_status == "grid point"
    differences = tuned[list(SPLIT.held_out)] - per_query["default"].set_index("query_id")[METRIC][list(SPLIT.held_out)]
    assert report.gain == bootstrap_interval(differences.to_numpy())
    metrics = report.metrics()
    assert metrics[f"winner/holdout/{METRIC}"] == report.winner.holdout.estimate
    assert metrics[f"default/holdout_ci_low/{METRIC}"] == report.default.holdout.low
    assert metrics[f"winner/optimism/{METRIC}"] == report.optimism
    assert report.tags()["rag.winner_run_id"] == "tuned"


def test_an_extra_default_point_is_reported_but_never_the_winner(three_runs):
    _, per_query = three_runs
    per_query["default"] = _per_query(0.95, 0.2)  # best on the tuning queries, but not a grid point
    runs = _runs(per_query)
    holdout = SplitWithDefaultRun(SPLIT, "default", "extra point")
    table, report = compare_sweep(runs, per_query, METRIC, ["chunk_size"], ["doc/mrr"], holdout)
    assert report.winner.run_id == "tuned" and report.default.run_id == "default"
    assert list(table["run_id"]) == ["default", "tuned", "lucky"]  # ranked by the tuning score
    assert list(table["role"]) == ["default (extra point)", "winner", ""]
    assert list(table.columns[:8]) == ["rank", "role", "vs best", "p vs best", "chunk_size", f"tune/{METRIC}",
                                       f"tune/{METRIC} ci_low", f"tune/{METRIC} ci_high"]
    # on the tuning queries the default is 0.15 above "tuned" on every query, "lucky" 0.2 below: certain (p 0)
    assert list(table["vs best"]) == ["better", "best", "worse"] and list(table["p vs best"].fillna(-1)) == pytest.approx([0, -1, 0], abs=1e-12)
    assert f"holdout/{METRIC} ci_high" in table and f"{METRIC} ci_low" in table


def test_a_default_without_a_score_is_said_so(three_runs):
    runs, per_query = three_runs
    report = holdout_report(runs, per_query, SPLIT, METRIC, None, "unavailable: cross-encoder cannot be loaded")
    assert report.default is None and report.gain is None
    assert "unavailable" in report.default_status and not any(name.startswith("default/") for name in report.metrics())


def test_the_default_is_an_extra_point_only_when_the_grid_lacks_it(tmp_path, tiny_corpus):  # noqa: F811
    def spec(grid, **extra):
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({"name": "s", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden),
                                        "base": {"mode": "bm25", "rerank_depth": 0}, "grid": grid, **extra}))
        return load_sweep(path)

    inside = spec({"chunk_size": [256, 512]}, holdout=0.5)
    assert extra_default_point(inside, inside.points()[0]) is None  # 512 is the default chunk size
    outside = spec({"chunk_size": [128, 256], "k": [3]}, holdout=0.5)
    extra = extra_default_point(outside, outside.points()[0])
    assert extra.number == 0 and extra.changes == {"chunk_size": 512, "k": 5}
    assert extra.config == default_config(outside) and extra.config.mode == "bm25"  # defaults + base
    assert extra_default_point(spec({"chunk_size": [128]}), spec({"chunk_size": [128]}).points()[0]) is None  # no holdout


def test_one_se_chooses_the_cheaper_point_within_one_se_on_the_tuning_queries(three_runs):
    _, per_query = three_runs
    tuned = per_query["tuned"].set_index("query_id")[METRIC]
    close = tuned.copy()
    first, second = SPLIT.tuning[:2]
    close[first] -= 0.03  # on the tuning queries d = [.03, -.01, 0, 0, 0, 0]: mean .0033 <= paired SE .0056
    close[second] += 0.01
    close[list(SPLIT.held_out)] = 0.1  # and poor on the held-out queries, which the choice never sees
    per_query = {"tuned": per_query["tuned"], "close": close.reset_index(), "default": per_query["default"]}
    runs = _runs(per_query).assign(**{"latency/total_p50_ms": [40.0, 10.0, 30.0]})
    by_max = holdout_report(runs, per_query, SPLIT, METRIC, "default", "grid point")
    report = holdout_report(runs, per_query, SPLIT, METRIC, "default", "grid point", select_rule="one_se")
    assert by_max.winner.run_id == "tuned" and report.selection.best == "tuned"
    assert report.winner.run_id == "close" and report.selection.eligible == ("tuned", "close")
    assert report.winner.holdout.estimate == pytest.approx(0.1)
    assert report.tags()["rag.select"] == "one_se" and report.as_dict()["selection"]["chosen"] == "close"


def test_without_holdout_the_rule_chooses_on_all_queries_and_the_table_says_so(three_runs):
    _, per_query = three_runs
    lucky = per_query["lucky"].set_index("query_id")[METRIC]
    close = lucky.copy()
    close[IDS[0]] -= 0.02  # d = [.02, -.01, 0, ...] over all 10 queries: within one paired SE of "lucky"
    close[IDS[1]] += 0.01
    per_query = {"lucky": per_query["lucky"], "close": close.reset_index(), "default": per_query["default"]}
    runs = _runs(per_query).assign(**{"latency/total_p50_ms": [40.0, 10.0, 30.0]})
    table, report = compare_sweep(runs, per_query, METRIC, ["chunk_size"], [], select_rule="one_se")
    assert report is None and list(table["run_id"]) == ["lucky", "close", "default"]
    assert list(table["role"]) == ["", "winner", ""] and list(table["vs best"]) == ["best", "within 1 SE", "worse"]
    table, _ = compare_sweep(runs, per_query, METRIC, ["chunk_size"], [])
    assert list(table["role"]) == ["winner", "", ""]
