"""Winners that hold up: which points are indistinguishable from the best, and the rule that chooses one.

Every point of a sweep is evaluated on the same queries, so a point is compared with the best (the
highest mean of the primary metric) query by query: ``d_q = best_q - point_q`` over the queries both
have a value for. The test is Student's paired t-test, two-sided: ``t = mean(d) / (sd(d) / sqrt(n))``
with n - 1 degrees of freedom (``scipy.stats.ttest_rel`` is its reference in the tests). Why this
test: on IR runs, Urbano, Lima & Hanjalic ("Statistical Significance Testing in Information Retrieval:
An Empirical Analysis of Type I, Type II and Type III Errors", SIGIR 2019) found the t-test's type I
error closest to the nominal level, with power at least that of the permutation, bootstrap, Wilcoxon
and sign tests, and Smucker, Allan & Carterette (CIKM 2007) found t, permutation and bootstrap tests
agreeing; it needs no resampling seed. Two-sided, because the best was picked after looking at the
scores. With one test per other point (m of them), the p-values are adjusted with Holm's step-down
method (Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statistics 1979):
sorted ascending, ``p_(i) * (m - i + 1)``, made non-decreasing, capped at 1; it controls the
family-wise error rate like Bonferroni and rejects at least as often. A point whose adjusted p-value
is above ``alpha`` (0.05) is **indistinguishable from the best**. Identical values on every query
give p = 1; a constant non-zero difference, p = 0; fewer than 2 paired queries, p = 1 (no evidence).

Selection rules (``select:`` in a sweep file, chosen by name):

- ``max``: the best point (ties: the first in table order).
- ``one_se``: the one-standard-error rule (Breiman et al., "Classification and Regression Trees",
  1984; Hastie, Tibshirani & Friedman, "The Elements of Statistical Learning", 7.10). Eligible: the
  points whose mean is within one standard error of the best's, where the standard error is the
  *paired* one, of the mean difference to the best: ``mean(d) <= sd(d) / sqrt(n)`` (a paired t of at
  most 1). Paired, not the best's own standard error: per-query scores vary mostly with the query's
  difficulty, which every point shares and which cancels in ``d``; the best's own SE would make most
  points of a sweep eligible. Among the eligible points the cheapest is chosen, in this order:
  1. the lowest ``latency/total_p50_ms`` (the median over queries of the retrieval stages' summed
     latency), where latencies within ``LATENCY_TOLERANCE`` (x 1.25) of the lowest count as equal (a
     shared machine measures the same work that far apart);
  2. the fewest swept settings changed from RagConfig's defaults (the simplest);
  3. the highest mean; 4. table order.
  A point with no latency counts as the slowest. Every eligible point is also indistinguishable from
  the best (t <= 1 gives p >= 0.31 before adjustment).

Left out: Bayesian or bootstrap model-confidence sets; tests of metrics other than the primary one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
from scipy.special import stdtr

from rag_core.config import ConfigError

if TYPE_CHECKING:
    import pandas as pd

ALPHA = 0.05
LATENCY_TOLERANCE = 1.25  # latencies within this factor of the cheapest eligible one count as equally cheap
LATENCY_COLUMN = "latency/total_p50_ms"
# the verdict of each point against the best, as the comparison table's "vs best" column shows it
BEST, WITHIN_ONE_SE, SAME, WORSE, BETTER = "best", "within 1 SE", "same", "worse", "better"


@dataclass(frozen=True)
class PairedTest:
    """The paired t-test of the best point against another, over the queries both have values for."""
    queries: int
    mean_difference: float  # best minus this point
    standard_error: float  # of the mean difference: sd(d) / sqrt(n), ddof 1 (NaN below 2 queries)
    t: float
    p: float  # two-sided, not adjusted


@dataclass(frozen=True)
class Cost:
    """What the one-SE rule prefers among equally good points: faster, then closer to the defaults."""
    latency_ms: float  # latency/total_p50_ms; NaN when the run has none
    settings_changed: int  # swept settings whose value differs from RagConfig's defaults


@dataclass(frozen=True)
class Selection:
    rule: str
    best: str  # the run with the highest mean
    chosen: str  # the run the rule chose
    means: dict[str, float]  # run id -> mean of the primary metric over the queries compared
    tests: dict[str, PairedTest]  # run id -> its test against the best (every run but the best)
    p_holm: dict[str, float]  # run id -> Holm-adjusted p-value against the best
    eligible: tuple[str, ...]  # within one SE of the best (the best included), in table order
    alpha: float = ALPHA

    def verdict(self, run_id: str) -> str:
        """best | within 1 SE | same | worse | better (than the best: a run that could not be chosen)."""
        if run_id == self.best:
            return BEST
        if run_id in self.eligible:
            return WITHIN_ONE_SE
        if self.p_holm[run_id] > self.alpha:
            return SAME
        return WORSE if self.tests[run_id].mean_difference > 0 else BETTER

    def indistinguishable(self) -> list[str]:
        """The best and every run not significantly different from it (Holm-adjusted), best first."""
        return [self.best, *(run_id for run_id, p in self.p_holm.items() if p > self.alpha)]

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "best": self.best, "chosen": self.chosen, "alpha": self.alpha,
                "indistinguishable": self.indistinguishable(), "eligible": list(self.eligible),
                "p_holm": self.p_holm}


def paired_t_test(best: Sequence[float], other: Sequence[float]) -> PairedTest:
    """Student's paired t-test of `best` - `other` (pairs with a NaN on either side left out), two-sided."""
    differences = np.asarray(best, dtype=float) - np.asarray(other, dtype=float)
    differences = differences[~np.isnan(differences)]
    n = differences.size
    mean = float(differences.mean()) if n else 0.0
    if n < 2:
        return PairedTest(n, mean, math.nan, math.nan, 1.0)
    standard_error = float(differences.std(ddof=1)) / math.sqrt(n)
    if standard_error == 0.0:  # the same difference on every query: none (p 1) or a certain one (p 0)
        return PairedTest(n, mean, 0.0, 0.0 if mean == 0 else math.copysign(math.inf, mean), 1.0 if mean == 0 else 0.0)
    t = mean / standard_error
    return PairedTest(n, mean, standard_error, t, float(2 * stdtr(n - 1, -abs(t))))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for step, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - step) * p_values[index]))
        adjusted[index] = running
    return adjusted


def within_one_se(test: PairedTest) -> bool:
    """The one-SE rule's eligibility: the mean difference to the best is at most its paired standard error."""
    if test.queries < 2:
        return test.mean_difference <= 0
    return test.mean_difference <= test.standard_error


def cheapest(run_ids: Sequence[str], costs: Mapping[str, Cost], means: Mapping[str, float]) -> str:
    """The first of `run_ids` (table order) by the one-SE rule's order: latency (within the tolerance),
    settings changed from the defaults, higher mean."""
    latency = {run_id: costs[run_id].latency_ms if run_id in costs and math.isfinite(costs[run_id].latency_ms)
               else math.inf for run_id in run_ids}
    lowest = min(latency.values())
    fast = [run_id for run_id in run_ids if latency[run_id] <= lowest * LATENCY_TOLERANCE or latency[run_id] == lowest]
    return min(fast, key=lambda run_id: (costs[run_id].settings_changed if run_id in costs else math.inf,
                                         -means[run_id], run_ids.index(run_id)))


def _first_best(candidates: Sequence[str], means: Mapping[str, float]) -> str:
    return max(candidates, key=lambda run_id: (means[run_id], -candidates.index(run_id)))


SELECTION_RULES = {  # name -> (best, eligible run ids in table order, costs, means) -> the chosen run id
    "max": lambda best, eligible, costs, means: best,
    "one_se": lambda best, eligible, costs, means: cheapest(eligible, costs, means),
}


def check_select(rule: Any, where: str) -> str:
    """The ``select`` key of a sweep file, checked; ``max`` when left out."""
    if rule is None:
        return "max"
    if not isinstance(rule, str) or rule not in SELECTION_RULES:
        raise ConfigError(f"{where}: select must be one of {', '.join(SELECTION_RULES)}, got {rule!r}")
    return str(rule)


def select(scores: "pd.DataFrame", rule: str = "max", costs: Mapping[str, Cost] | None = None, *,
           candidates: Sequence[str] | None = None, alpha: float = ALPHA) -> Selection:
    """Choose among the columns of `scores` (query id -> one column per run id, in table order; NaN
    where a run has no value; a run with no value at all is left out). Only `candidates` (default: every
    run) can be best or chosen; every other run is still tested against the best and counts in Holm's m."""
    if rule not in SELECTION_RULES:
        raise ValueError(f"unknown selection rule {rule!r}; valid rules: {', '.join(SELECTION_RULES)}")
    means = {str(run_id): float(scores[run_id].mean()) for run_id in scores.columns}
    means = {run_id: mean for run_id, mean in means.items() if math.isfinite(mean)}  # a run without values: left out
    run_ids = list(means)
    candidates = [run_id for run_id in run_ids if candidates is None or run_id in candidates]
    if not candidates:
        raise ValueError("no candidate run with values to select from")
    best = _first_best(candidates, means)
    tests = {run_id: paired_t_test(scores[best].to_numpy(), scores[run_id].to_numpy())
             for run_id in run_ids if run_id != best}
    p_holm = dict(zip(tests, holm([test.p for test in tests.values()])))
    eligible = tuple(run_id for run_id in candidates if run_id == best or within_one_se(tests[run_id]))
    chosen = SELECTION_RULES[rule](best, list(eligible), costs or {}, means)
    return Selection(rule, best, chosen, means, tests, p_holm, eligible, alpha)
