"""Searches: the Optuna driver that chooses which configurations to evaluate, and learned fusion weights.

Modules: ``driver`` (the Optuna driver: TPE, halving; it evaluates trials through a ``TrialEvaluator``),
``fusion_tuning`` (fusion weights learned on tuning queries). The space searched is
``rag_core.workbench.plans.space``; running the trials as child runs is
``rag_core.workbench.execution.search_run``; the search's table is ``rag_core.workbench.reports.search_report``.
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "SearchDriver": "driver", "SearchHistory": "driver", "tune_fusion": "fusion_tuning",
})
