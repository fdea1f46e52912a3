"""The metric registry: every metric the workbench reports, what it applies to and which way is better.

A metric is declared once, where it is computed, as a ``Metric``: its name within a level (``recall``,
``token_f1``), the levels it applies to (``chunk``, ``page``, ``doc``, ``child``, ``evidence``,
``context``, ``answer``, ``citation``, ``judge``, ``latency``, ...), whether it takes a cutoff (``@K``, the
``metrics_k`` setting) or a budget (``@B``, ``context_budgets``), its direction (``higher_is_better``: the gate
and the sweep's selection read it), a line of help, and, for the kinds the evaluator computes generically, the
function that computes it (a ranking metric: ``function(spans, cutoff, relevant)``, see
``rag_core.evaluate.page_credit``; an answer metric: ``function(answer, gold, question)``, see
``rag_core.evaluate.answer_metrics``). A full name is ``level/name`` with ``@K`` or ``@B`` when it takes one:
``page/recall@5``, ``evidence/iou@1024``, ``answer/token_f1``; ``{stage}`` in a name stands for any stage
(``latency/{stage}_p50_ms`` covers ``latency/rerank_p50_ms``).

A name read back may carry prefixes before its level: a retriever's own list (``dense/page/recall@5``), a part of
the queries (``tune/``, ``holdout/``), a sweep's summary (``winner/``, ``default/``, ``optimism/``), the oracle run
(``oracle/answer/token_f1``). ``lookup`` reads the last two parts; a name with a ``loss`` part
(``loss/retrieval/answer/token_f1``: how much worse one run is than another) is lower-is-better.

Names, ``--help`` texts, the docs' metrics table and the tests are derived from this table
(``rag_core.evaluate.metric_catalog`` imports every built-in metric's module, so the table is whole); a
plugin registers its own metric the same way (``docs/adding.md``, "Add a metric").
Left out: graded metrics of several arguments beyond those two shapes (a metric the evaluator cannot call
generically is declared without a function, and its module computes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from rag_core.components.settings import LOADING, did_you_mean

RANKING_LEVELS = ("chunk", "page", "doc", "child")  # levels of the ranking metrics (child: parent-child chunks)
CUTOFF, BUDGET = "cutoff", "budget"  # what a metric's "@" holds: K of metrics_k, B (words) of context_budgets
LOSS_PART = "loss"  # a prefix part that turns a metric into a loss (lower is better)
# the order reports list levels in (a level not listed, a plugin's, comes last)
LEVEL_ORDER = ("chunk", "page", "doc", "child", "evidence", "evidence_top", "context", "answer", "citation", "judge",
               "latency", "expansion")
_STAGE = "{stage}"


class UnknownMetric(ValueError):
    """A metric name that no registered metric matches."""


@dataclass(frozen=True)
class Metric:
    name: str  # within its level: "recall", "token_f1", "{stage}_p50_ms" ({stage}: any stage)
    levels: tuple[str, ...]  # where it applies: ("chunk", "page", "doc"), ("answer",)
    help: str
    higher_is_better: bool = True
    parameter: str | None = None  # CUTOFF (name@K), BUDGET (name@B) or None
    function: Callable[..., Any] | None = None  # how the evaluator computes it generically (see the docstring)
    per_query: bool = True  # has a value per query: its interval is a bootstrap over queries
    best: float | None = None  # the perfect value (1 for a share), if it has one: the oracle's generation loss
    origin: str = "built-in"

    def matches(self, name: str) -> bool:
        """Does `name` (the part after the level, without ``@``) name this metric?"""
        if _STAGE not in self.name:
            return name == self.name
        head, _, tail = self.name.partition(_STAGE)
        return re.fullmatch(re.escape(head) + r"\w+" + re.escape(tail), name) is not None

    def full_names(self, ks: Iterable[int] = (5, 10), budgets: Iterable[int] = (), level: str | None = None) -> list[str]:
        """Its names at `level` (default: each of its levels): ``page/recall@5``, ``page/recall@10``, ..."""
        values = {CUTOFF: list(ks), BUDGET: list(budgets)}.get(self.parameter or "", [None])
        return [f"{where}/{self.name}" + (f"@{value}" if value is not None else "")
                for where in ([level] if level else self.levels) for value in values]

    @property
    def written(self) -> str:
        """``recall@K``, ``recall@B``, ``token_f1``: the name as the docs' table writes it."""
        return self.name + {CUTOFF: "@K", BUDGET: "@B"}.get(self.parameter or "", "")


@dataclass(frozen=True)
class Found:
    """What a full name stands for: the metric, the level, the value after ``@`` and whether it is a loss."""
    metric: Metric
    level: str
    value: int | None
    loss: bool = False

    @property
    def higher_is_better(self) -> bool:
        return self.metric.higher_is_better != self.loss


class MetricRegistry:
    """Metrics by (level, name), listed by level (``LEVEL_ORDER``) then in registration order."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}  # key: the name, or "name in level" when two levels differ

    def declare(self, name: str, levels: Sequence[str], help: str, **facts: Any) -> Metric:
        """Register a metric (``Metric``'s fields as keywords); its module computes it."""
        levels = tuple(levels)
        origin = facts.pop("origin", "built-in")
        metric = Metric(name, levels, help, origin=LOADING[-1] if LOADING else origin, **facts)
        for level in levels:
            known = self.find(level, name)
            if known is not None and known.origin != metric.origin:
                raise ValueError(f"metric {level}/{name} is registered twice: by {known.origin} and by {metric.origin}")
            if known is not None:
                self._metrics = {key: value for key, value in self._metrics.items() if value is not known}
        self._metrics[f"{name} in {','.join(levels)}"] = metric
        return metric

    def define(self, name: str, levels: Sequence[str], help: str, **facts: Any) -> Callable[[Callable], Callable]:
        """Decorator: register the decorated function as the metric's ``function``."""
        def register(function: Callable) -> Callable:
            self.declare(name, levels, help, function=function, **facts)
            return function
        return register

    def remove(self, level: str, name: str) -> None:
        """Forget a metric (a test's plugin, once the test is done)."""
        known = self.find(level, name)
        self._metrics = {key: value for key, value in self._metrics.items() if value is not known}

    def __iter__(self):
        """The metrics by level (``LEVEL_ORDER``: a metric counts at its first level), then as registered."""
        rank = lambda metric: LEVEL_ORDER.index(metric.levels[0]) if metric.levels[0] in LEVEL_ORDER else len(LEVEL_ORDER)  # noqa: E731
        return iter(sorted(self._metrics.values(), key=rank))

    def __len__(self) -> int:
        return len(self._metrics)

    def at(self, level: str) -> list[Metric]:
        """The metrics of `level`, in registration order."""
        return [metric for metric in self if level in metric.levels]

    def find(self, level: str, name: str) -> Metric | None:
        """The metric `name` (without ``@``) of `level`, or None."""
        return next((metric for metric in self if level in metric.levels and metric.matches(name)), None)

    def lookup(self, full_name: str) -> Found | None:
        """What `full_name` stands for (prefixes before the level allowed), or None when nothing matches:
        an unknown level or name, ``@`` on a metric that takes none, or none on one that takes it."""
        parts = str(full_name).split("/")
        if len(parts) < 2:
            return None
        name, at, value = parts[-1].partition("@")
        metric = self.find(parts[-2], name)
        if metric is None or bool(at) != bool(metric.parameter) or (at and not value.isdigit()):
            return None
        return Found(metric, parts[-2], int(value) if at else None, LOSS_PART in parts[:-2])

    def direction(self, full_name: str) -> bool | None:
        """True: higher is better; False: lower is better; None: not a registered metric."""
        found = self.lookup(full_name)
        return None if found is None else found.higher_is_better

    def names(self, levels: Iterable[str] | None = None, ks: Iterable[int] = (5, 10),
              budgets: Iterable[int] = ()) -> list[str]:
        """Every full name of the metrics of `levels` (default: all) for these K and B values; ``{stage}``
        names are left out (they have a name per stage)."""
        wanted = list(levels) if levels is not None else None
        return [name for metric in self if _STAGE not in metric.name
                for level in metric.levels if wanted is None or level in wanted
                for name in metric.full_names(ks, budgets, level)]

    def check(self, full_name: str, ks: Iterable[int] = (5, 10), budgets: Iterable[int] = (),
              what: str = "metric") -> Found:
        """What `full_name` stands for; ``UnknownMetric`` naming the valid names (did you mean) when no metric
        matches it or its ``@K`` / ``@B`` is not one of `ks` / `budgets`."""
        found = self.lookup(full_name)
        ks, budgets = list(ks), list(budgets)
        allowed = {CUTOFF: ks, BUDGET: budgets}
        if found is not None and (found.value is None or found.value in allowed[found.metric.parameter or CUTOFF]):
            return found
        valid = self.names(ks=ks, budgets=budgets)
        if found is not None:
            setting = "metrics_k" if found.metric.parameter == CUTOFF else "context_budgets"
            raise UnknownMetric(f"{what} {full_name!r}: {found.value} is not in {setting} "
                                f"({', '.join(map(str, allowed[found.metric.parameter or CUTOFF]))})")
        stages = [metric.full_names(level=level)[0] for metric in self if _STAGE in metric.name for level in metric.levels]
        raise UnknownMetric(f"unknown {what} {full_name!r}; valid metrics: {', '.join([*valid, *stages])}"
                            f"{did_you_mean(full_name, valid)}")


METRICS = MetricRegistry()

__all__ = ["BUDGET", "CUTOFF", "METRICS", "RANKING_LEVELS", "Found", "Metric", "MetricRegistry", "UnknownMetric"]
