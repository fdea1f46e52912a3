"""A sweep file's metrics read the registry: ``table_metrics`` (the printed table's columns) and ``primary_metric``
are checked with a clear error naming the valid ones (did you mean), answer metrics need ``answers: true``, the
judge's are refused; the printed table shows the chosen columns with their intervals while they fit."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml

from rag_core.config import ConfigError
from rag_core.workbench.plans.sweep_file import DEFAULT_TABLE_METRICS, load_sweep
from rag_core.workbench.reports.compact_table import compact_table


def sweep_file(tmp_path, **keys) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "input": str(tmp_path), "golden": str(tmp_path / "g.jsonl"),
                                    "primary_metric": "page/ndcg@10", "grid": {"k": [3, 5]}, **keys}))
    return str(path)


def test_the_default_prints_what_it_printed_before(tmp_path):
    assert load_sweep(sweep_file(tmp_path)).table_metrics == DEFAULT_TABLE_METRICS == ("latency/total_p50_ms",)


def test_table_metrics_are_read_and_checked(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, table_metrics=["page/recall@5", "evidence/iou@512", "dense/page/mrr"]))
    assert spec.table_metrics == ("page/recall@5", "evidence/iou@512", "dense/page/mrr")
    with pytest.raises(ConfigError, match=r"unknown table_metrics 'page/recal@5'; valid metrics: .*page/recall@5.*"
                                          r"did you mean 'page/recall@5'"):
        load_sweep(sweep_file(tmp_path, table_metrics=["page/recal@5"]))
    with pytest.raises(ConfigError, match=r"table_metrics 'page/recall@20': 20 is not in metrics_k \(5, 10\)"):
        load_sweep(sweep_file(tmp_path, table_metrics=["page/recall@20"]))
    with pytest.raises(ConfigError, match="table_metrics must be a list of metric names"):
        load_sweep(sweep_file(tmp_path, table_metrics={"page/recall@5": 1}))


def test_answer_metrics_need_answers_and_the_judge_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"primary_metric 'answer/token_f1' is measured on answers: add answers: true"):
        load_sweep(sweep_file(tmp_path, primary_metric="answer/token_f1"))
    spec = load_sweep(sweep_file(tmp_path, primary_metric="answer/token_f1", table_metrics=["citation/recall"],
                                 base={"answers": True}))
    assert (spec.primary_metric, spec.table_metrics) == ("answer/token_f1", ("citation/recall",))
    with pytest.raises(ConfigError, match="needs the LLM judge, which sweeps do not run"):
        load_sweep(sweep_file(tmp_path, table_metrics=["judge/faithfulness"], base={"answers": True}))
    with pytest.raises(ConfigError, match="has no value per query"):
        load_sweep(sweep_file(tmp_path, primary_metric="answer/llm_share", base={"answers": True}))
    with pytest.raises(ConfigError, match=r"unknown primary_metric 'page/ndgc@10'.*did you mean 'page/ndcg@10'"):
        load_sweep(sweep_file(tmp_path, primary_metric="page/ndgc@10"))


def table(**columns) -> pd.DataFrame:
    rows = {"rank": [1, 2], "role": ["winner", ""], "vs best": ["best", "same"], "p vs best": [float("nan"), 0.4],
            "k": [3, 5], "page/ndcg@10": [0.71, 0.65], "page/ndcg@10 ci_low": [0.6, 0.5],
            "page/ndcg@10 ci_high": [0.8, 0.75], **columns, "status": ["FINISHED"] * 2, "run_id": ["a", "b"]}
    return pd.DataFrame(rows)


def test_the_printed_table_shows_the_chosen_columns_with_intervals_while_they_fit():
    data = table(**{"answer/token_f1": [0.4, 0.35], "answer/token_f1 ci_low": [0.3, 0.25],
                    "answer/token_f1 ci_high": [0.5, 0.45], "latency/total_p50_ms": [12.345, 3.2]})
    text = compact_table(data, "page/ndcg@10", None, ["answer/token_f1", "latency/total_p50_ms"])
    header, first, second = text.splitlines()
    assert header.split()[-3:] == ["answer/token_f1", "p50", "ms"]
    assert re.split(r"\s{2,}", first.strip())[-2:] == ["0.400 [0.300, 0.500]", "12.3"]
    assert re.split(r"\s{2,}", second.strip())[-2:] == ["0.350 [0.250, 0.450]", "3.20"]
    narrow = compact_table(data, "page/ndcg@10", None, ["answer/token_f1", "latency/total_p50_ms"], width=60)
    assert "[0.300" not in narrow and "0.400" in narrow  # its interval goes first
    assert compact_table(data, "page/ndcg@10", None, ["context/recall"]).splitlines()[0].split()[-1] == "page/ndcg@10"


def test_the_answer_view_of_a_comparison_table():
    from rag_core.workbench.reports.answer_text import answer_view

    data = table(**{"answer/token_f1": [0.4, 0.35], "answer/token_f1 ci_low": [0.3, 0.25],
                    "answer/token_f1 ci_high": [0.5, 0.45], "citation/recall": [0.5, 0.25],
                    "oracle/answer/token_f1": [0.6, 0.6], "latency/total_p50_ms": [12.0, 3.0]})
    view = answer_view(data, ["k"])
    assert list(view.columns) == ["rank", "role", "vs best", "k", "answer/token_f1", "citation/recall"]
    assert list(view["answer/token_f1"]) == ["0.400 [0.300, 0.500]", "0.350 [0.250, 0.450]"]
    assert answer_view(table(), ["k"]) is None  # no run scored answers
