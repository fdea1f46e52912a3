"""Running evaluations, grids and searches: one evaluation, one point, the executors that run the points.

Modules: ``evaluation`` (one evaluation, as the notebook and ``eval`` run it), ``evaluation_log`` (what
its MLflow run holds), ``gate_run`` (the gate's two evaluations), ``kernels`` (warm Jupyter kernels for
papermill), ``points`` (one point: child run, notebook, outcome), ``executors`` (the executor contract:
local warm kernels or a Ray cluster), ``ray_executor`` (the Ray side), ``sweep`` (a grid, start to
finish; a search it hands to ``search_run``), ``search_run`` (a search's trials as child runs),
``sweep_runs`` (the sweep's parent run). The plans they run and the records they return are
``rag_core.workbench.plans``; each run ends with its report (``rag_core.workbench.reports``).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "evaluate_and_log": "evaluation", "load_eval_inputs": "evaluation",
    "config_from_parameters": "evaluation", "log_evaluation": "evaluation_log", "run_gate": "gate_run",
    "WarmKernel": "kernels", "read_recorded_result": "points", "PointExecutor": "executors",
    "open_executor": "executors", "run_sweep": "sweep", "run_search": "search_run",
})
