"""The sweep's table in a terminal (rag_core.workbench.reports.compact_table): the demo's grid with a holdout fits
120 columns with rank, verdict, settings, the ranking metric with its interval, held-out and latency; wider
grids and narrower terminals give up columns in the documented order, never the width; ``--wide`` keeps
every metric."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rag_core.workbench.plans.results import SweepResult
from rag_core.workbench.reports.compact_table import compact_table, swept_columns
from rag_core.workbench.reports.sweep_report import SplitWithDefaultRun, compare_sweep
from rag_core.workbench.reports.text import format_sweep
from rag_core.workbench.statistics.holdout import part_metrics, split_queries

METRIC = "page/ndcg@10"
QUERIES = [f"q{n:02d}" for n in range(36)]
DEMO_GRID = {"chunk_size": [256, 512, 1024], "overlap": [0, 64], "k": [5, 10], "rerank_depth": [0]}
WIDE_GRID = {"chunk_size": [256, 512], "chunk_overlap_words": [0, 64], "rerank_depth": [20],
             "retrieve_depth_per_retriever": [50], "bm25_tokenizer_stemming": ["porter", "none"],
             "dense_pooling": ["mean"]}  # long names, as a wide grid over plugin settings has (8 points: cheap)


def sweep(grid: dict[str, list], holdout: bool = True, seed: int = 0):
    """(runs, per-query tables, holdout) shaped as ``sweep_report.sweep_table`` builds them, one run per grid point."""
    rng = np.random.default_rng(seed)
    split = split_queries(QUERIES, 0.3, 7)
    rows, per_query = [], {}
    for number, values in enumerate(itertools.product(*grid.values())):
        run_id = f"run{number:02d}{'x' * 26}"  # as long as MLflow's
        quality = rng.uniform(0.2, 0.8)
        table = pd.DataFrame({"query_id": QUERIES, METRIC: np.clip(rng.normal(quality, 0.2, len(QUERIES)), 0, 1),
                              "page/recall@5": rng.uniform(0, 1, len(QUERIES)),
                              "doc/mrr": rng.uniform(0, 1, len(QUERIES)),
                              "latency/total_ms": rng.uniform(4, 30, len(QUERIES))})
        per_query[run_id] = table
        rows.append({"run_id": run_id, "run_name": f"point {number}", "status": "FINISHED",
                     **dict(zip(grid, values)), METRIC: table[METRIC].mean(),
                     "page/recall@5": table["page/recall@5"].mean(), "doc/mrr": table["doc/mrr"].mean(),
                     "latency/total_p50_ms": table["latency/total_ms"].median(),
                     **(part_metrics(table, split) if holdout else {})})
    runs = pd.DataFrame(rows)
    default = SplitWithDefaultRun(split, runs["run_id"].iloc[-1], "grid point") if holdout else None
    return runs, per_query, default


def demo_sweep(grid=DEMO_GRID, holdout: bool = True):
    """(the comparison table, the holdout report) of ``compare_sweep`` (made once per grid: the tests only read it)."""
    key = (repr(grid), holdout)
    if key not in SWEEPS:
        SWEEPS[key] = _compare(grid, holdout)
    return SWEEPS[key]


SWEEPS: dict = {}


def _compare(grid, holdout: bool):
    runs, per_query, default = sweep(grid, holdout)
    return compare_sweep(runs, per_query, METRIC, list(grid), ["page/recall@5", "doc/mrr", "latency/total_p50_ms"],
                         default)


def demo_table(grid=DEMO_GRID, holdout: bool = True) -> pd.DataFrame:
    return demo_sweep(grid, holdout)[0]


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_the_demo_grid_with_a_holdout_fits_120_columns_with_every_promised_column():
    table = demo_table()
    text = compact_table(table, f"tune/{METRIC}", f"holdout/{METRIC}")
    assert widest(text) <= 120
    header, *rows = text.splitlines()
    assert header.split() == ["rank", "verdict", "chunk_size", "overlap", "k", "rerank_depth", f"tune/{METRIC}",
                              f"holdout/{METRIC}", "p50", "ms"]
    assert len(rows) == len(table) == 12
    for line, (_, row) in zip(rows, table.iterrows()):
        interval = (f"{row[f'tune/{METRIC}']:.3f} [{row[f'tune/{METRIC} ci_low']:.3f}, "
                    f"{row[f'tune/{METRIC} ci_high']:.3f}]")
        held = (f"{row[f'holdout/{METRIC}']:.3f} [{row[f'holdout/{METRIC} ci_low']:.3f}, "
                f"{row[f'holdout/{METRIC} ci_high']:.3f}]")
        latency = row["latency/total_p50_ms"]
        assert line.endswith(f"{interval}  {held}  " + (f"{latency:.2f}" if latency < 10 else f"{latency:.1f}").rjust(6))
        assert line.split()[0] == str(row["rank"])
        assert f" {row['chunk_size']} " in line
    verdicts = {row["role"]: line.split()[1:3] for line, (_, row) in zip(rows, table.iterrows()) if row["role"]}
    assert verdicts["winner"] == ["winner:", "best"] and verdicts["default"][0] == "default:"
    # the table the demo printed before: every metric (~330 characters with the fused retrievers' own columns); --wide
    # asks for it, so it is not wrapped (its notes are)
    assert widest(format_sweep(result(*demo_sweep()), wide=True)) > 200


def test_the_settings_columns_are_those_between_the_selection_columns_and_the_ranking_metric():
    assert swept_columns(demo_table(), f"tune/{METRIC}") == list(DEMO_GRID)
    assert swept_columns(demo_table(holdout=False), METRIC) == list(DEMO_GRID)


@pytest.mark.parametrize("width", [120, 100, 80])
def test_wider_grids_and_narrower_terminals_still_fit(width):
    table = demo_table(WIDE_GRID)
    text = compact_table(table, f"tune/{METRIC}", f"holdout/{METRIC}", width=width)
    assert widest(text) <= width
    assert len(text.splitlines()) >= len(table) + 1
    values = " ".join(text.splitlines())
    for name in ("porter", "mean"):  # every setting's value is still there (or cut with "...", below)
        assert name in values or "..." in values


def test_what_goes_first_when_the_table_is_too_wide():
    table = demo_table()

    def fitted(width: int) -> str:
        text = compact_table(table, f"tune/{METRIC}", f"holdout/{METRIC}", width=width)
        assert widest(text) <= width
        return text

    full = fitted(120)
    assert "holdout/page/ndcg@10" in full and "chunk_size" in full and full.splitlines()[1].count("[") == 2
    no_held_interval = fitted(widest(full) - 1)  # the held-out interval goes first
    assert "held-out" in no_held_interval and "chunk_size" in no_held_interval
    assert no_held_interval.splitlines()[1].count("[") == 1  # the ranking metric keeps its interval
    two_lines = fitted(widest(no_held_interval) - 1)  # then the settings' names go over two lines
    first, second = two_lines.splitlines()[:2]
    assert "chunk" in first.split() and "rerank" in first.split() and "size" in second.split()
    assert two_lines.splitlines()[2].count("[") == 1
    no_interval = fitted(widest(two_lines) - 1)  # then the ranking metric's interval: every setting stays
    assert "[" not in no_interval and "depth" in no_interval.splitlines()[1].split()
    cut = fitted(widest(no_interval) - 1)  # at last, one settings column, cut
    assert "settings" in cut.splitlines()[0] and "chunk_size=" in cut


def test_verdicts_name_the_role_and_the_test_against_the_best():
    table = pd.DataFrame({
        "rank": [1, 2, 3, 4, None], "role": ["winner", "default (extra point)", "", "", ""],
        "vs best": ["best", "worse", "same", "within 1 SE", ""], "p vs best": [np.nan, 0.0034, 0.4, 1.0, np.nan],
        "chunk_size": [256, 512, 1024, 128, None], METRIC: [0.7, 0.5, 0.6, 0.69, np.nan],
        "status": ["FINISHED"] * 4 + ["FAILED"], "run_id": list("abcde")})
    lines = compact_table(table, METRIC).splitlines()
    verdicts = [line[6:].split("  ")[0] for line in lines[1:]]
    assert verdicts == ["winner: best", "default: worse p=0.003", "same p=0.400", "within 1 SE", "failed"]
    assert lines[-1].split() == ["failed"]  # no rank, no setting, no score
    assert "p<0.001" in compact_table(table.assign(**{"p vs best": [np.nan, 0.0004, 0.4, 1.0, np.nan]}), METRIC)


def test_format_sweep_prints_the_compact_table_and_wide_every_metric():
    table, report = demo_sweep()
    short = format_sweep(result(table, report))
    assert widest("\n".join(short.split("\n\n")[0].splitlines())) <= 120  # title, table, legend
    assert table["run_id"].iloc[0] not in short and "doc/mrr" not in short and "--wide" in short
    wide = format_sweep(result(table, report), wide=True)
    assert table["run_id"].iloc[0] in wide and "doc/mrr" in wide


def test_sweep_takes_wide():
    from rag_core.cli.sweep import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["grid.yaml", "--wide"]).wide and not parser.parse_args(["grid.yaml"]).wide


def result(table: pd.DataFrame, report=None) -> SweepResult:
    work = dict.fromkeys(("sweep/points", "sweep/distinct_chunkings", "sweep/dense_indexes_built", "sweep/chunks_embedded",
                          "sweep/embed_cache_hits", "sweep/candidates_reused", "sweep/candidates_computed",
                          "sweep/rerank_pairs_scored", "sweep/rerank_cache_hits", "sweep/wall_seconds"), 0.0)
    return SweepResult(name="grid", experiment="documents | golden", parent_run_id="p", resumed=False, outcomes=[],
                       skipped_invalid=[], unavailable=None, work=work, table=table, primary_metric=METRIC,
                       output_dir=Path("runs"), tracking_uri="sqlite:///mlflow.db", holdout=report)
