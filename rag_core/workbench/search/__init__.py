"""Searches: the search space, the Optuna driver, trials as child runs, their report, learned fusion weights.

Modules: ``space`` (strategy, budget, range axes), ``driver`` (the Optuna driver: TPE, halving),
``run`` (trials as child runs, the winner on held-out queries), ``report`` (its table and history),
``fusion_tuning`` (fusion weights learned on tuning queries).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "SearchSpace": "space", "SearchSettings": "space", "parse_search": "space",
    "SearchDriver": "driver", "SearchHistory": "driver", "run_search": "run",
    "read_search": "report", "search_table": "report", "tune_fusion": "fusion_tuning",
})
