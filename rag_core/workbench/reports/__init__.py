"""What the workbench shows: results as text, plots, tables of sweeps, runs compared, the explore helpers.

Modules: ``text`` (every result as text, for the CLI and the notebooks), ``plots`` (every plot),
``compact_table`` (a sweep's table in 120 columns), ``sweep_report`` (a sweep's table and holdout report),
``search_report`` (a search's table and history), ``compare`` (runs read back from MLflow and compared),
``explore`` (the exploration notebook's helpers).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "format_eval_report": "text", "format_sweep": "text", "show": "text", "compact_table": "compact_table",
    "compare_sweep": "sweep_report", "read_sweep_holdout": "sweep_report", "comparison_table": "compare",
    "load_runs": "compare", "read_search": "search_report", "search_table": "search_report",
})
