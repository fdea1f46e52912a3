"""Search spaces in sweep files: range axes, budgets, halving rungs, and spaces that cannot run (one-line
errors). Values are checked against hand-computed lists."""

from __future__ import annotations

import random

import pytest
import yaml
from conftest import run_cli

from rag_core.config import ConfigError
from rag_core.paths import SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE
from rag_core.workbench.plans.space import (Budget, Halving, RangeAxis, SearchSpace, parse_budget, parse_range)
from rag_core.workbench.plans.sweep_file import load_sweep


def write_sweep(folder, **content):
    data = {"name": "space", "input": str(SAMPLE_DOCUMENTS_DIR), "golden": str(SAMPLE_GOLDEN_FILE),
            "base": {"mode": "bm25", "rerank_depth": 0}, **content}
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- ranges -------------------------------------------------------------------------------------------
def test_a_stepped_range_lists_its_values_and_an_integer_range_every_integer():
    assert parse_range("chunk_size", {"low": 128, "high": 384, "step": 64}, "f").values() == (128, 192, 256, 320, 384)
    assert parse_range("bm25_b", {"low": 0.1, "high": 0.5, "step": 0.2}, "f").values() == (0.1, 0.3, 0.5)
    # a high bound between steps: the last value below it
    assert parse_range("bm25_k1", {"low": 0.5, "high": 1.6, "step": 0.5}, "f").values() == (0.5, 1.0, 1.5)
    assert parse_range("route_docs", {"low": 0, "high": 3}, "f").values() == (0, 1, 2, 3)
    continuous = parse_range("bm25_k1", {"low": 0.1, "high": 2.0, "log": True}, "f")
    assert not continuous.finite and continuous.size is None and continuous.log


@pytest.mark.parametrize("spec, message", [
    ({"low": 2.0, "high": 1.0}, "low must be below high"),
    ({"low": 0.0, "high": 1.0, "log": True}, "log range needs low > 0"),
    ({"low": 0.1, "high": 1.0, "step": 0.1, "log": True}, "takes no step"),
    ({"low": 0.1, "high": 1.0, "step": -1}, "step must be > 0"),
    ({"low": "a", "high": 1.0}, "low must be a finite number"),
    ({"low": 0.1, "high": 1.0, "by": 2}, "unknown key 'by'"),
])
def test_bad_ranges_are_errors_naming_the_axis(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_range("bm25_b", spec, "f.yaml")


def test_a_range_needs_a_numeric_setting_and_integer_bounds_for_an_integer_one():
    with pytest.raises(ConfigError, match="mode is str"):
        parse_range("mode", {"low": 1, "high": 2}, "f")
    with pytest.raises(ConfigError, match="integer setting"):
        parse_range("chunk_size", {"low": 100.5, "high": 200}, "f")


def test_sampling_stays_inside_the_space():
    space = SearchSpace({"mode": ("bm25", "hybrid")}, {
        "bm25_k1": RangeAxis("bm25_k1", 0.2, 2.0, False, log=True),
        "route_docs": RangeAxis("route_docs", 0, 2, True)}, ({"chunk_size": 256}, {"chunk_size": 512}))
    assert space.size is None  # a continuous axis
    rng = random.Random(1)
    for _ in range(200):
        changes = space.sample(rng)
        assert changes["chunk_size"] in (256, 512) and changes["mode"] in ("bm25", "hybrid")
        assert 0.2 <= changes["bm25_k1"] <= 2.0 and changes["route_docs"] in (0, 1, 2)


# --- budgets and rungs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    (40, Budget(points=40)), ("40 points", Budget(points=40)), ("600 s", Budget(seconds=600)),
    ("10 min", Budget(seconds=600)), ("2h", Budget(seconds=7200)), ({"seconds": 90}, Budget(seconds=90)),
    ({"points": 12, "seconds": 300}, Budget(points=12, seconds=300)),
])
def test_budgets_in_points_or_seconds(value, expected):
    assert parse_budget(value, "f") == expected


@pytest.mark.parametrize("value", [0, -3, "forever", "10 parsecs", {"minutes": 3}, True, {"points": "x"}, [40]])
def test_bad_budgets_are_errors(value):
    with pytest.raises(ConfigError, match="budget"):
        parse_budget(value, "f")


def test_a_budget_never_lets_points_be_exceeded_and_stops_once_seconds_are_spent():
    budget = Budget(points=4, seconds=100)
    assert budget.allows(4.0, 99.9) and not budget.allows(4.01, 0) and not budget.allows(1, 100)


@pytest.mark.parametrize("queries, eta, min_queries, rungs", [
    (25, 3, 5, (9, 25)),  # 25/3 -> 9; 9/3 = 3 < 5
    (20, 3, 3, (3, 7, 20)),  # 20/3 -> 7, 7/3 -> 3
    (8, 2, 2, (2, 4, 8)),
    (4, 3, 5, (4,)),  # too few queries for a second rung
])
def test_halving_rungs_divide_the_queries_by_eta(queries, eta, min_queries, rungs):
    assert Halving(eta, min_queries).rungs(queries) == rungs


# --- sweep files with a strategy ------------------------------------------------------------------------
def test_a_search_file_keeps_ranges_and_a_grid_file_expands_them(tmp_path):
    grid = {"bm25_k1": {"low": 0.5, "high": 1.5, "step": 0.5}, "bm25_b": [0.3, 0.75]}
    search = load_sweep(write_sweep(tmp_path, name="s", strategy="tpe", budget=5, grid=grid))
    assert search.search.strategy == "tpe" and search.search.budget == Budget(points=5)
    assert list(search.ranges) == ["bm25_k1"] and search.grid == {"bm25_b": (0.3, 0.75)}
    assert search.space.size == 6 and search.axes == ["bm25_b", "bm25_k1"]
    plain = load_sweep(write_sweep(tmp_path, name="g", grid=grid))
    assert plain.search.strategy == "grid" and plain.grid["bm25_k1"] == (0.5, 1.0, 1.5)
    assert len(plain.points()[0]) == 6


def test_the_budget_is_not_part_of_a_searchs_identity(tmp_path):
    grid = {"bm25_k1": {"low": 0.5, "high": 1.5, "step": 0.5}}
    first = load_sweep(write_sweep(tmp_path, strategy="tpe", budget=5, grid=grid))
    larger = load_sweep(write_sweep(tmp_path, strategy="tpe", budget={"seconds": 900}, grid=grid))
    other_space = load_sweep(write_sweep(tmp_path, strategy="tpe", budget=5, grid={"bm25_k1": [0.5, 1.0]}))
    other_seed = load_sweep(write_sweep(tmp_path, strategy="tpe", budget=5, search_seed=3, grid=grid))
    assert first.hash == larger.hash
    assert len({first.hash, other_space.hash, other_seed.hash}) == 3


@pytest.mark.parametrize("content, message", [
    ({"strategy": "bayes", "budget": 3, "grid": {"k": [3]}}, "strategy must be one of grid, tpe, halving"),
    ({"strategy": "tpe", "grid": {"k": [3]}}, "strategy tpe needs a budget"),
    ({"budget": 3, "grid": {"k": [3]}}, "budget applies to strategy tpe or halving"),
    ({"strategy": "tpe", "budget": 3, "halving": {"eta": 3}, "grid": {"k": [3]}}, "halving applies to strategy halving"),
    ({"strategy": "halving", "budget": 3, "halving": {"eta": 1}, "grid": {"k": [3]}}, "halving.eta must be an integer >= 2"),
    ({"strategy": "tpe", "budget": 3, "grid": {"mode": ["bm25", "bm52"]}}, "grid.mode value 'bm52' makes no valid"),
    ({"strategy": "tpe", "budget": 3, "grid": {"bm25_b": {"low": 0.5, "high": 1.5}}}, "bm25_b value 1.5 makes no valid"),
    ({"grid": {"bm25_k1": {"low": 0.1, "high": 2.0, "log": True}}}, "a grid needs a step"),
    ({"strategy": "tpe", "budget": 3, "max_new_chunkings": -1, "grid": {"k": [3]}}, "max_new_chunkings must be an integer"),
])
def test_spaces_that_cannot_run_are_errors(tmp_path, content, message):
    with pytest.raises(ConfigError, match=message):
        load_sweep(write_sweep(tmp_path, **content))


def test_an_invalid_space_is_one_line_on_stderr_and_exit_2(tmp_path):
    path = write_sweep(tmp_path, strategy="tpe", budget="forever", grid={"k": [3]})
    result = run_cli("sweep", str(path), "--dry-run", store=tmp_path / "store")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "budget" in lines[0] and "Traceback" not in result.stderr
