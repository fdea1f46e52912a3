"""The workbench layer: sweeps over a grid of settings, each point a papermill execution of the
evaluation notebook in a warm kernel, logged to MLflow.

Modules: ``sweep_file`` (reading and checking a sweep file), ``kernels`` (warm Jupyter kernels for
papermill), ``points`` (one point: child run, notebook, outcome), ``sweep`` (running them all).
"""

from rag_core.workbench.points import PointOutcome, read_recorded_result
from rag_core.workbench.sweep import SweepResult, run_sweep
from rag_core.workbench.sweep_file import SweepPoint, SweepSpec, load_sweep

__all__ = ["load_sweep", "run_sweep", "read_recorded_result", "SweepSpec", "SweepPoint", "SweepResult", "PointOutcome"]
