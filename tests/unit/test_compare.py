"""The comparison table (rag_core.workbench.reports.compare): best first, failed runs last, settings printed as written."""

from __future__ import annotations

import pandas as pd

from rag_core.workbench.reports.compare import comparison_table


def runs() -> pd.DataFrame:
    """Two finished points and one that failed before logging its params, as load_runs returns them."""
    return pd.DataFrame([
        {"run_id": "a", "status": "FINISHED", "chunk_size": 256, "overlap": 0, "bm25_b": 0.75, "mode": "bm25",
         "page/ndcg@10": 0.5, "error": None},
        {"run_id": "b", "status": "FINISHED", "chunk_size": 512, "overlap": 64, "bm25_b": 0.5, "mode": "hybrid",
         "page/ndcg@10": 0.6, "error": None},
        {"run_id": "c", "status": "FAILED", "chunk_size": None, "overlap": None, "bm25_b": None, "mode": None,
         "page/ndcg@10": None, "error": "boom"},
    ])


def test_best_first_then_failed():
    table = comparison_table(runs(), "page/ndcg@10", settings=["chunk_size", "overlap", "bm25_b", "mode"])
    assert list(table["run_id"]) == ["b", "a", "c"]
    assert list(table["rank"][:2]) == [1, 2]


def test_integer_settings_print_as_integers_next_to_a_failed_run():
    table = comparison_table(runs(), "page/ndcg@10", settings=["chunk_size", "overlap", "bm25_b", "mode"])
    printed = table.to_string(index=False, float_format=lambda value: f"{value:.3f}")  # as the sweep prints it
    first = printed.splitlines()[1].split()
    assert first[1:5] == ["512", "64", "0.500", "hybrid"]
    assert "512.000" not in printed and "256.000" not in printed
    assert list(table["chunk_size"][:2]) == [512, 256]
