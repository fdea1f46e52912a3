"""Paired tests without ranx (rag_core.workbench.statistics.paired_tests): the same means, p-values and win/tie/loss
as ranx.compare's Student's t on random rankings, a hand-checked case, and the report's text."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from rag_core.workbench.statistics.paired_tests import paired_report, per_query_values

METRICS = ["ndcg@10", "recall@5", "mrr"]


def random_rankings(seed: int = 5, queries: int = 40, runs: int = 3):
    rng = random.Random(seed)
    items = [f"d{i}" for i in range(30)]
    qrels = {f"q{n}": {item: 1 for item in rng.sample(items, rng.randint(1, 6))} for n in range(queries)}
    rankings = {f"{r + 1}: run {r}": {qid: {item: 1.0 / rank for rank, item in enumerate(rng.sample(items, 12), 1)}
                                      for qid in qrels if rng.random() > 0.05}  # a few queries with nothing retrieved
                for r in range(runs)}
    return qrels, rankings


def test_the_report_equals_ranx_compare_student():
    from ranx import Qrels, Run, compare

    qrels, rankings = random_rankings()
    ours = paired_report(qrels, rankings, METRICS).to_dict()
    padded = {name: {qid: ranking.get(qid) or {"__nothing_retrieved__": 0.0} for qid in qrels}
              for name, ranking in rankings.items()}
    theirs = compare(Qrels(qrels), [Run(ranking, name=name) for name, ranking in padded.items()], METRICS,
                     stat_test="student", max_p=0.05).to_dict()
    assert ours["model_names"] == theirs["model_names"] and ours["metrics"] == theirs["metrics"]
    for name in rankings:
        assert ours[name]["scores"] == pytest.approx(theirs[name]["scores"])
        assert ours[name]["win_tie_loss"] == theirs[name]["win_tie_loss"]
        for other, p_values in theirs[name]["comparisons"].items():
            assert ours[name]["comparisons"][other] == pytest.approx(p_values)


def test_a_hand_checked_pair():
    # q1: a finds the relevant item at rank 1, b at rank 2; q2: both at 1; q3: a at 2, b misses it
    qrels = {"q1": {"x": 1}, "q2": {"y": 1}, "q3": {"z": 1}}
    rankings = {"a": {"q1": {"x": 1.0, "o": 0.5}, "q2": {"y": 1.0}, "q3": {"o": 1.0, "z": 0.5}},
                "b": {"q1": {"o": 1.0, "x": 0.5}, "q2": {"y": 0.9, "o": 0.1}, "q3": {"o": 1.0}}}
    values = per_query_values(qrels, rankings["a"], ["mrr"])["mrr"]
    assert list(values) == [1.0, 1.0, 0.5]
    report = paired_report(qrels, rankings, ["mrr"])
    assert report.scores["a"]["mrr"] == pytest.approx(2.5 / 3) and report.scores["b"]["mrr"] == pytest.approx(1.5 / 3)
    # differences 0.5, 0, 0.5: mean 1/3, sd sqrt(1/12), t = (1/3) / (sqrt(1/12) / sqrt(3)) = 2, 2 degrees of freedom
    assert report.p_values["a", "b"]["mrr"] == pytest.approx(2 * stats.t.sf(2.0, 2))
    assert report.p_values["a", "b"]["mrr"] == report.p_values["b", "a"]["mrr"]
    assert report.win_tie_loss["a", "b"]["mrr"] == {"W": 2, "T": 1, "L": 0}
    assert report.win_tie_loss["b", "a"]["mrr"] == {"W": 0, "T": 1, "L": 2}


def test_identical_values_give_p_one_and_the_text_names_every_run():
    qrels, rankings = random_rankings(runs=1)
    [name] = rankings
    report = paired_report(qrels, {name: rankings[name], "2: the same": rankings[name]}, METRICS)
    assert all(report.p_values[name, "2: the same"][metric] == 1.0 for metric in METRICS)  # ranx: NaN
    text = str(report)
    assert name in text and "2: the same" in text and f"over {len(qrels)} queries" in text
    assert not math.isnan(report.scores[name]["ndcg@10"])
