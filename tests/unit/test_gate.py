"""The gate's decision (rag_core.workbench.statistics.gate): the one-sided paired t-test with a margin, against a
t statistic computed by hand and scipy's, Holm over several metrics, and the edge cases."""

from __future__ import annotations

import math

import pytest
from scipy.stats import t as student_t
from scipy.stats import ttest_rel

from rag_core.errors import BadInput
from rag_core.workbench.statistics.gate import gate_values, per_query_values, worse_p_value

BASE = {"q1": 0.50, "q2": 0.70, "q3": 0.40, "q4": 0.90, "q5": 0.60}
CAND = {"q1": 0.40, "q2": 0.55, "q3": 0.35, "q4": 0.80, "q5": 0.58}  # worse on every query


def hand_p(differences, margin):
    """Lower-tail p of Student's t for mean(d + margin) < 0, written out."""
    shifted = [d + margin for d in differences]
    n = len(shifted)
    mean = sum(shifted) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in shifted) / (n - 1))
    return student_t.cdf(mean / (sd / math.sqrt(n)), n - 1)


@pytest.mark.parametrize("margin", [0.0, 0.05, 0.2])
def test_the_p_value_is_the_lower_tail_of_the_shifted_paired_t(margin):
    differences = [CAND[q] - BASE[q] for q in BASE]
    assert worse_p_value(differences, margin) == pytest.approx(hand_p(differences, margin))
    shifted = [CAND[q] + margin for q in BASE]
    assert worse_p_value(differences, margin) == pytest.approx(
        ttest_rel(shifted, list(BASE.values()), alternative="less").pvalue)


def test_a_candidate_worse_on_every_query_fails_and_a_margin_can_excuse_it():
    failed = gate_values({"m": BASE}, {"m": CAND})
    assert failed.failed and failed.metrics[0].p < 0.05  # mean difference -0.084
    # below zero, the one-sided p is half the two-sided paired t-test's
    assert failed.metrics[0].p == pytest.approx(ttest_rel(list(CAND.values()), list(BASE.values())).pvalue / 2)
    assert failed.metrics[0].difference.estimate == pytest.approx(-0.084)
    assert failed.metrics[0].baseline.estimate == pytest.approx(0.62)
    excused = gate_values({"m": BASE}, {"m": CAND}, margin=0.2)
    assert not excused.failed and excused.metrics[0].p > 0.99


def test_the_same_values_pass_with_p_one_and_a_constant_loss_fails_with_p_zero():
    same = gate_values({"m": BASE}, {"m": dict(BASE)})
    assert (same.failed, same.metrics[0].p) == (False, 1.0)
    lower = gate_values({"m": BASE}, {"m": {q: v - 0.1 for q, v in BASE.items()}})
    assert (lower.failed, lower.metrics[0].p) == (True, 0.0)
    # a constant loss smaller than the margin passes
    assert gate_values({"m": BASE}, {"m": {q: v - 0.1 for q, v in BASE.items()}}, margin=0.15).failed is False


def test_better_candidates_pass():
    better = {q: v + 0.05 * (i % 2 + 1) for i, (q, v) in enumerate(BASE.items())}
    result = gate_values({"m": BASE}, {"m": better})
    assert not result.failed and result.metrics[0].p > 0.95


def test_holm_adjusts_the_p_values_of_several_metrics():
    noisy_base = {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.5, "q5": 0.5}
    noisy_cand = {"q1": 0.3, "q2": 0.6, "q3": 0.45, "q4": 0.4, "q5": 0.5}
    result = gate_values({"a": BASE, "b": noisy_base}, {"a": CAND, "b": noisy_cand})
    p_a, p_b = (gate.p for gate in result.metrics)
    low, high = sorted([p_a, p_b])  # Holm: the smaller x 2, the larger x 1, made non-decreasing
    expected = {low: min(1, 2 * low), high: max(min(1, 2 * low), high)}
    assert [gate.p_holm for gate in result.metrics] == pytest.approx([expected[p_a], expected[p_b]])
    assert result.failed == any(gate.p_holm < 0.05 for gate in result.metrics)


def test_different_queries_on_the_two_sides_are_refused():
    with pytest.raises(ValueError, match="different queries"):
        gate_values({"m": BASE}, {"m": {**CAND, "q6": 0.1}})


def test_per_query_values_name_unknown_metrics():
    rows = [{"query_id": 1, "page/ndcg@10": 0.5, "latency/total_ms": 3.0}, {"query_id": 2, "page/ndcg@10": 1.0,
                                                                             "latency/total_ms": 4.0}]
    assert per_query_values(rows, ["page/ndcg@10"]) == {"page/ndcg@10": {"1": 0.5, "2": 1.0}}
    with pytest.raises(BadInput, match=r"unknown metric 'page/ndcg@100'.*page/ndcg@10"):
        per_query_values(rows, ["page/ndcg@100"])
