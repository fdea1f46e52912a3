"""Plans and records: what a sweep or a search is to run, what it will cost, and what running it returns.

Modules: ``sweep_file`` (reading and checking a sweep file: the plan of points grids and searches share),
``space`` (a search's space: strategy, budget, range axes), ``holdout_plan`` (a holdout sweep's split and
its default configuration as an extra point), ``cost`` (measured throughputs, ``--dry-run`` estimates),
``results`` (the records running returns: ``EvalRun``, ``PointOutcome``, ``SweepResult``).
Below the code that runs plans (``execution``), searches them (``search``) and reports on them
(``reports``); above ``statistics``, whose rules a sweep file names (``select``, ``holdout``).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "load_sweep": "sweep_file", "SweepSpec": "sweep_file", "SweepPoint": "sweep_file",
    "SearchSpace": "space", "SearchSettings": "space", "parse_search": "space",
    "plan_holdout": "holdout_plan", "default_config": "holdout_plan", "estimate": "cost", "CostEstimate": "cost",
    "EvalRun": "results", "PointOutcome": "results", "SweepResult": "results",
})
