"""What running a plan returns: one evaluation (``EvalRun``), one sweep point (``PointOutcome``) and a whole
grid or search (``SweepResult``: its outcomes, comparison table, work and honest winner; a search adds its
history).

Records only, kept below the code that makes them (``rag_core.workbench.execution``: evaluations, points,
grids and searches) and the code that shows them (``rag_core.workbench.reports``), which both import them
from here.
Left out: running anything, terminal output (``rag_core.workbench.reports.text``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_core.workbench.plans.sweep_file import SweepPoint
from rag_core.workbench.tracking.tracker import RunStatus

if TYPE_CHECKING:
    from rag_core.evaluate.evaluator import EvalReport

RESULT_MIME = "application/json"  # how the notebook's last cell records its result for papermill readers


@dataclass(frozen=True)
class EvalRun:
    """One configuration evaluated, and where it was logged."""

    report: EvalReport
    experiment: str
    run_id: str | None  # None when not logged
    tracking_uri: str | None
    timing: dict[str, float] = field(default_factory=dict)  # read, build, evaluate, log (seconds)

    def record(self) -> dict[str, Any]:
        """What the notebook records for papermill readers (the sweep, tests)."""
        return {"run_id": self.run_id, "experiment": self.experiment, "metrics": self.report.metrics,
                "params": self.report.params, "timing": self.timing}


@dataclass(frozen=True)
class PointOutcome:
    point: SweepPoint
    status: str  # FINISHED | FAILED | SKIPPED (finished in an earlier run) | UNAVAILABLE (its model cannot load)
    run_id: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    notebook: Path | None = None


@dataclass
class SweepResult:
    name: str
    experiment: str
    parent_run_id: str
    resumed: bool  # an earlier parent run of this sweep was picked up again
    outcomes: list[PointOutcome]
    skipped_invalid: list[str]
    unavailable: str | None  # why points were not run (their model cannot be loaded), or None
    work: dict[str, float]  # the sweep/* metrics logged on the parent
    table: Any  # pandas.DataFrame: the comparison, best first
    primary_metric: str
    output_dir: Path
    tracking_uri: str
    holdout: Any = None  # rag_core.workbench.statistics.honest.WinnerReport when the sweep held out queries
    search: Any = None  # rag_core.workbench.search.driver.SearchHistory for strategy tpe or halving
    merged: list[str] = field(default_factory=list)  # grid points run as one (SweepSpec.merged), one line each
    table_metrics: tuple[str, ...] = ("latency/total_p50_ms",)  # the printed table's columns beside the primary

    @property
    def executed(self) -> list[PointOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status in (RunStatus.FINISHED, RunStatus.FAILED)]

    @property
    def failed(self) -> list[PointOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == RunStatus.FAILED]
