"""Is a fine-tuned model's gain real? A paired comparison of two systems over the same queries.

Per-query values (nDCG@10, say) of a baseline and a candidate on the same queries give the mean
difference with its percentile-bootstrap 95% interval (``rag_core.workbench.statistics.intervals``: queries drawn
with replacement), a two-sided paired t-test (``scipy.stats.ttest_rel``) and the paired bootstrap's
one-sided p-value, the share of resamples whose mean difference is <= 0 (Sakai, "Evaluating evaluation
metrics based on the bootstrap", SIGIR 2006).
Left out: corrections for several comparisons (each gain is tested once, against its own baseline).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from rag_core.workbench.statistics.intervals import bootstrap_interval

RESAMPLES = 10_000


@dataclass(frozen=True)
class PairedComparison:
    queries: int
    baseline: float  # mean over the queries
    candidate: float
    difference: float  # candidate - baseline
    low: float  # bootstrap 95% interval of the mean difference
    high: float
    p_ttest: float  # two-sided paired t-test
    p_bootstrap: float  # one-sided: share of resampled mean differences <= 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (f"{self.baseline:.4f} -> {self.candidate:.4f} ({self.difference:+.4f} [{self.low:+.4f}, "
                f"{self.high:+.4f}], paired t-test p={self.p_ttest:.3g}, bootstrap p={self.p_bootstrap:.3g}, "
                f"{self.queries} queries)")


def paired_comparison(baseline: Mapping[str, float], candidate: Mapping[str, float], *, resamples: int = RESAMPLES,
                      seed: int = 0) -> PairedComparison:
    """Compare per-query values (query id -> value); both must score the same queries."""
    from scipy.stats import ttest_rel

    if set(baseline) != set(candidate):
        raise ValueError(f"paired comparison needs the same queries on both sides "
                         f"({len(set(baseline) ^ set(candidate))} differ)")
    if len(baseline) < 2:
        raise ValueError("paired comparison needs at least 2 queries")
    ids = sorted(baseline)
    base = np.array([baseline[q] for q in ids], dtype=float)
    cand = np.array([candidate[q] for q in ids], dtype=float)
    differences = cand - base
    interval = bootstrap_interval(differences, resamples=resamples, seed=seed)
    draws = differences[np.random.default_rng(seed).integers(0, len(ids), (resamples, len(ids)))].mean(axis=1)
    if np.ptp(differences) == 0:  # no variance: the t statistic is undefined; the difference is certain or nil
        p_ttest = 1.0 if differences[0] == 0 else 0.0
    else:
        p_ttest = float(ttest_rel(cand, base).pvalue)
    return PairedComparison(len(ids), float(base.mean()), float(cand.mean()), float(differences.mean()),
                            interval.low, interval.high, p_ttest, float(np.mean(draws <= 0)))
