"""Winners that hold up (rag_core.workbench.statistics.selection): the paired t-test against scipy, Holm's adjustment and
the one-standard-error rule on hand-computed values; the ``select`` key of sweep files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from sweep_fixtures import tiny_corpus  # noqa: F401 - fixture

from rag_core.config import ConfigError
from rag_core.workbench import load_sweep
from rag_core.workbench.statistics.selection import Cost, holm, paired_t_test, select

# query -> run: "A" is best (mean 0.75); hand-computed below
TABLE = pd.DataFrame({
    "A": [0.9, 0.8, 0.7, 0.6],
    "B": [0.8, 0.8, 0.7, 0.5],  # d = [.1, 0, 0, .1]: mean .05, paired SE .0289: beyond one SE
    "C": [0.9, 0.6, 0.8, 0.6],  # d = [0, .2, -.1, 0]: mean .025, paired SE .0629: within one SE
    "D": [0.5, 0.4, 0.3, 0.2],  # d = .4 on every query: certainly worse (p 0)
    "E": [0.95, 0.7, 0.7, 0.57],  # d = [-.05, .1, 0, .03]: mean .02, paired SE .0314: within one SE
}, index=["q1", "q2", "q3", "q4"])


def test_holm_on_a_hand_computed_list():
    # sorted: .005 x 4 = .02, .01 x 3 = .03, .03 x 2 = .06, .04 x 1 = .04 -> max(.06, .04) = .06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # .5 x 2 = 1 caps the next one too
    assert holm([0.2]) == [0.2] and holm([]) == []


def test_paired_t_test_hand_computed_with_two_degrees_of_freedom():
    # d = [1, 2, 3]: mean 2, sd 1, t = 2 sqrt(3); with 2 degrees of freedom the t distribution's
    # two-sided p is 1 - t / sqrt(2 + t^2) = 1 - sqrt(12 / 14)
    test = paired_t_test([2, 4, 6], [1, 2, 3])
    assert test.t == pytest.approx(2 * math.sqrt(3)) and test.standard_error == pytest.approx(1 / math.sqrt(3))
    assert test.p == pytest.approx(1 - math.sqrt(12 / 14))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_t_test_equals_scipys_ttest_rel(seed):
    rng = np.random.default_rng(seed)
    best = rng.uniform(0, 1, 30)
    other = np.clip(best - rng.normal(0.05, 0.2, 30), 0, 1)
    other[[3, 17]] = np.nan  # queries one run has no value for are left out of the pairs
    reference = stats.ttest_rel(best, other, nan_policy="omit")
    test = paired_t_test(best, other)
    assert test.queries == 28
    assert test.t == pytest.approx(reference.statistic) and test.p == pytest.approx(reference.pvalue)


def test_degenerate_pairs():
    assert paired_t_test([0.5, 0.7], [0.5, 0.7]).p == 1.0  # identical: no difference
    assert paired_t_test([0.75, 0.5], [0.5, 0.25]).p == 0.0  # the same difference on every query
    assert paired_t_test([0.6], [0.5]).p == 1.0  # one query: no evidence


def test_one_se_choice_on_a_tiny_table():
    costs = {"A": Cost(50.0, 0), "B": Cost(5.0, 0), "C": Cost(10.0, 2), "D": Cost(1.0, 0), "E": Cost(11.0, 1)}
    chosen = select(TABLE, "one_se", costs)
    assert chosen.best == "A" and chosen.eligible == ("A", "C", "E")
    # C (10 ms) and E (11 ms, within x1.25 of 10) are equally cheap; E changes fewer settings
    assert chosen.chosen == "E"
    assert select(TABLE, "one_se", {**costs, "E": Cost(13.0, 1)}).chosen == "C"  # E now slower than 12.5 ms
    assert select(TABLE, "one_se", {**costs, "C": Cost(11.0, 1)}).chosen == "E"  # same cost: the higher mean (.73 > .725)
    assert select(TABLE, "max", costs).chosen == "A"
    # the tests against the best: paired SEs as computed by hand, Holm over the 4 comparisons
    assert chosen.tests["B"].standard_error == pytest.approx(math.sqrt(0.01 / 3) / 2)
    assert chosen.tests["C"].standard_error == pytest.approx(math.sqrt(0.0475 / 3) / 2)
    assert chosen.tests["E"].standard_error == pytest.approx(math.sqrt(0.0118 / 3) / 2)
    assert chosen.tests["C"].mean_difference == pytest.approx(0.025) and chosen.means["E"] == pytest.approx(0.73)
    raw = [stats.ttest_rel(TABLE["A"], TABLE[run]).pvalue for run in "BCE"]
    assert [chosen.p_holm[run] for run in "BCE"] == pytest.approx(holm([*raw, 0.0])[:3])
    assert chosen.p_holm["D"] == pytest.approx(0.0, abs=1e-12)
    assert [chosen.verdict(run) for run in "ABCDE"] == ["best", "same", "within 1 SE", "worse", "within 1 SE"]
    assert chosen.indistinguishable() == ["A", "B", "C", "E"]


def test_runs_without_latency_count_as_slowest_and_others_only_get_tested():
    chosen = select(TABLE, "one_se", {"C": Cost(math.nan, 0), "E": Cost(30.0, 3)})
    assert chosen.chosen == "E"  # C's latency is NaN and A has no cost: both count as the slowest
    better = TABLE.assign(X=TABLE["A"] + 0.1)  # better than every candidate, but not one (an extra default point)
    chosen = select(better, "max", candidates=["A", "B", "C", "D", "E"])
    assert chosen.best == chosen.chosen == "A" and chosen.verdict("X") == "better" and len(chosen.p_holm) == 5
    empty = select(TABLE.assign(Z=math.nan), "max")  # a run without values is neither tested nor counted
    assert "Z" not in empty.tests and "Z" not in empty.means and len(empty.p_holm) == 4
    tied = pd.DataFrame({"P": [0.5, 0.7], "Q": [0.7, 0.5]})  # equal means: the first in table order
    assert select(tied, "max").best == "P" and select(tied[["Q", "P"]], "max").best == "Q"
    with pytest.raises(ValueError, match="valid rules: max, one_se"):
        select(TABLE, "median")


def test_sweep_files_take_select(tmp_path, tiny_corpus):  # noqa: F811
    def sweep(**extra):
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({"name": "s", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden),
                                        "grid": {"k": [3]}, **extra}))
        return load_sweep(path)

    assert sweep().select == "max" and sweep(select="one_se").select == "one_se"
    assert sweep(select="one_se").hash == sweep().hash  # the rule changes the report, not the points
    with pytest.raises(ConfigError, match="select must be one of max, one_se, got 'best'"):
        sweep(select="best")
    with pytest.raises(ConfigError, match="select must be one of"):
        sweep(select=["max"])  # not a name: one line, no TypeError
