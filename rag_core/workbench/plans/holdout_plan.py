"""A holdout sweep's plan, made before any point runs: the query split, the default configuration, and
the default as an extra point 0 when the grid lacks it.

The default configuration is RagConfig's defaults with the sweep's base settings (``--config``, ``base``,
setting flags) on top, what a user gets without tuning; ``rag_core.workbench.statistics.honest`` says why
it is scored on the same held-out queries as the winner, and ``reports.sweep_report`` reports both.
Left out: the split itself (``statistics.holdout``), choosing and reporting the winner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rag_core.config import ConfigError, RagConfig, load_config
from rag_core.evaluate.golden import GoldenQuery
from rag_core.workbench.plans.sweep_file import SweepPoint, SweepSpec, point_identity
from rag_core.workbench.statistics.holdout import QuerySplit, split_queries


@dataclass(frozen=True)
class SplitWithDefaultConfig:
    """Made before a holdout sweep runs: its query split, the default configuration, and the extra
    default point to run (None when the grid has it)."""
    split: QuerySplit
    default: "RagConfig | None"
    extra: SweepPoint | None


def plan_holdout(spec: SweepSpec, queries: Sequence[GoldenQuery],
                 points: list[SweepPoint]) -> SplitWithDefaultConfig | None:
    if spec.holdout is None:
        return None
    split = split_queries([query.id for query in queries], spec.holdout, spec.holdout_seed)
    return SplitWithDefaultConfig(split, default_config(spec), extra_default_point(spec, points))


def default_config(spec: SweepSpec) -> RagConfig | None:
    """RagConfig's defaults with the sweep's base settings; None when that combination is invalid."""
    try:
        return load_config(None, spec.base)
    except ConfigError:
        return None


def extra_default_point(spec: SweepSpec, points: list[SweepPoint]) -> SweepPoint | None:
    """Point 0, the default configuration, when a holdout sweep's grid does not contain it (a point of the same
    identity: differing only in settings that do not apply to it)."""
    default = default_config(spec)
    if spec.holdout is None or default is None or any(p.identity == point_identity(default) for p in points):
        return None
    return SweepPoint(0, {key: getattr(default, key) for key in spec.axes}, default)
