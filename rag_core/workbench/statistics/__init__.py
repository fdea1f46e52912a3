"""Statistics for choosing honestly: held-out queries, bootstrap intervals, paired tests, selection rules.

Modules: ``holdout`` (held-out queries), ``intervals`` (bootstrap intervals), ``paired_tests`` (each
configuration against a baseline), ``selection`` (paired tests against the best, Holm, the one-SE rule),
``honest`` (the winner chosen on tuning queries, reported on held-out ones), ``gate`` (is a candidate
configuration worse than the baseline? its two evaluations: ``execution.gate_run``), ``judge_calibration``
(the judge against human scores).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "split_queries": "holdout", "QuerySplit": "holdout", "bootstrap_interval": "intervals",
    "load_per_query": "intervals", "shown_with_intervals": "intervals", "paired_report": "paired_tests",
    "select": "selection", "paired_t_test": "selection", "holm": "selection", "WinnerReport": "honest",
    "gate_values": "gate", "calibrate_judge": "judge_calibration",
    "log_calibration": "judge_calibration",
})
