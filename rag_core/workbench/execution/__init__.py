"""Running evaluations and sweeps: the plan, one point, and the executors that run the points.

Modules: ``sweep_file`` (reading and checking a sweep file: the plan of points grids and searches share),
``evaluation`` (one evaluation, as the notebook and ``eval`` run it), ``kernels`` (warm Jupyter kernels for
papermill), ``points`` (one point: child run, notebook, outcome), ``executors`` (the executor contract:
local warm kernels or a Ray cluster), ``ray_executor`` (the Ray side), ``sweep`` (a grid, start to finish),
``sweep_runs`` (the sweep's parent run), ``sweep_result`` (what grids and searches return), ``cost``
(measured throughputs, ``--dry-run`` estimates).
"""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "load_sweep": "sweep_file", "SweepSpec": "sweep_file", "SweepPoint": "sweep_file",
    "evaluate_and_log": "evaluation", "load_eval_inputs": "evaluation", "EvalRun": "evaluation",
    "config_from_parameters": "evaluation", "WarmKernel": "kernels",
    "PointOutcome": "points", "read_recorded_result": "points", "PointExecutor": "executors",
    "open_executor": "executors", "run_sweep": "sweep", "SweepResult": "sweep_result",
    "estimate": "cost", "CostEstimate": "cost",
})
