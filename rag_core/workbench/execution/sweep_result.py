"""What a sweep returns: its outcomes, comparison table, work and honest winner; a search adds its
history. Shared by the grid (``sweep``) and the searches (``search_run``), which import it from here.

Left out: running anything, terminal output (``rag_core.workbench.reports.text``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_core.workbench.execution.points import PointOutcome
from rag_core.workbench.tracking.tracker import RunStatus


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

    @property
    def executed(self) -> list[PointOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status in (RunStatus.FINISHED, RunStatus.FAILED)]

    @property
    def failed(self) -> list[PointOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == RunStatus.FAILED]
