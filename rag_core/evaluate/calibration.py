"""How well the LLM judge agrees with a person, per axis: rank correlation, agreement, confusion.

For the pairs (human score, judge score) of one axis, both integers 1-5:
- Spearman's rho (Spearman 1904): Pearson correlation of the average ranks (ties share their mean rank);
- Kendall's tau-b (Kendall 1945): (concordant - discordant) / sqrt((n0 - ties_h) (n0 - ties_j)), which
  corrects for the many ties a 5-point scale has;
- exact agreement: share of pairs with the same score; within-one: share differing by at most 1;
- mean difference (judge - human): positive when the judge is more lenient;
- confusion: a 5x5 count table, rows the human score 1-5, columns the judge's.
Both correlations come from ``scipy.stats``; they are undefined (None) when either side is constant
or there are fewer than two pairs.
Left out: weighted kappa, confidence intervals, several human raters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

SCALE = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class AxisAgreement:
    axis: str
    n: int  # pairs compared
    spearman: float | None
    kendall: float | None
    exact: float  # 0..1
    within_one: float  # 0..1
    mean_difference: float  # judge - human
    confusion: tuple[tuple[int, ...], ...]  # confusion[human - 1][judge - 1] = count

    def metrics(self) -> dict[str, float]:
        """``<axis>/<statistic>`` values for MLflow (undefined correlations left out)."""
        values = {"n": self.n, "spearman": self.spearman, "kendall": self.kendall, "exact_agreement": self.exact,
                  "within_one_agreement": self.within_one, "mean_difference": self.mean_difference}
        return {f"{self.axis}/{name}": float(value) for name, value in values.items() if value is not None}


def agreement(axis: str, human: Sequence[int], judge: Sequence[int]) -> AxisAgreement:
    """Statistics for paired scores (same length, integers 1-5)."""
    if len(human) != len(judge) or not human:
        raise ValueError(f"{axis}: need the same, non-zero number of human and judge scores")
    if any(score not in SCALE for score in (*human, *judge)):
        raise ValueError(f"{axis}: scores must be integers from 1 to 5")
    from scipy import stats

    n = len(human)
    spearman = kendall = None
    if n >= 2 and len(set(human)) > 1 and len(set(judge)) > 1:
        spearman = float(stats.spearmanr(human, judge).statistic)
        kendall = float(stats.kendalltau(human, judge, variant="b").statistic)
    confusion = [[0] * len(SCALE) for _ in SCALE]
    for h, j in zip(human, judge):
        confusion[h - 1][j - 1] += 1
    return AxisAgreement(
        axis, n, _finite(spearman), _finite(kendall),
        exact=sum(h == j for h, j in zip(human, judge)) / n,
        within_one=sum(abs(h - j) <= 1 for h, j in zip(human, judge)) / n,
        mean_difference=sum(j - h for h, j in zip(human, judge)) / n,
        confusion=tuple(map(tuple, confusion)),
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
