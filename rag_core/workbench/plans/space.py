"""Search spaces: a sweep file's ``grid:`` block as axes, and the search settings around it.

A list in ``grid:`` is a categorical axis; a mapping is a range of a numeric setting::

    chunk_size: [256, 512]                       # categorical: a grid runs each value, a search picks
    bm25_k1: {low: 0.4, high: 2.0, step: 0.4}    # 0.4, 0.8, ..., 2.0 (a grid runs all five)
    bm25_b: {low: 0.1, high: 1.0, log: true}     # continuous, sampled on a log scale (searches only)
    retrieve_depth: {low: 10, high: 40}          # an integer setting: every integer (step 1)

The strategy and its settings are keys of the sweep file::

    strategy: tpe              # grid (the default: every point), tpe (Optuna's TPE sampler) or
                               # halving (successive halving over query subsets, Optuna's pruners)
    budget: 40                 # points (full evaluations); or {seconds: 600}, "10 min", {points: 40, seconds: 600}
    max_new_chunkings: 1       # chunkings the search may embed that are not in the store yet (default: any)
    search_seed: 0             # the sampler's seed and the query subsets' order
    halving: {eta: 3, min_queries: 5, pruner: asha}   # promote the best 1/eta to eta times the queries;
                               # the first rung uses at least min_queries; pruner asha or hyperband

``SearchSpace`` is what a search samples from: the categorical axes, the ranges and the file's
``points:`` (each crossed with the axes, as in a grid: a search picks one listed point per trial).
Sampling goes through an Optuna trial's ``suggest_*`` methods; nothing here imports Optuna.
Left out: conditional axes (an axis that exists only for some values of another), several objectives.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from rag_core.components import SETTINGS
from rag_core.config import ConfigError, RagConfig, load_config

STRATEGIES = ("grid", "tpe", "halving")
PRUNERS = ("asha", "hyperband")
LISTED_AXIS = "listed_point"  # the Optuna parameter that picks one of the file's ``points:``
_SECONDS = {"s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60,
            "h": 3600, "hour": 3600, "hours": 3600}
_BUDGET_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


@dataclass(frozen=True)
class RangeAxis:
    """A numeric setting between `low` and `high` (both included): every `step`, on a log scale
    (`log`), or continuous; an integer setting without a step takes every integer."""
    name: str
    low: float
    high: float
    integer: bool  # the setting is an int: Optuna's suggest_int
    step: float | None = None
    log: bool = False

    @property
    def finite(self) -> bool:
        return self.step is not None or (self.integer and not self.log)

    def values(self) -> tuple:
        """Every value, low first (finite axes only)."""
        if not self.finite:
            raise ConfigError(f"grid.{self.name}: a continuous range has no list of values")
        step = self.step or 1
        count = int(math.floor((self.high - self.low) / step + 1e-9)) + 1
        values = [self.low + i * step for i in range(count)]
        return tuple(int(round(v)) for v in values) if self.integer else tuple(round(v, 10) for v in values)

    @property
    def size(self) -> int | None:
        return len(self.values()) if self.finite else None

    def suggest(self, trial: Any) -> Any:
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.values()[-1] if self.finite else self.high),
                                     step=int(self.step or 1), log=self.log)
        if self.step is None:
            return trial.suggest_float(self.name, self.low, self.high, log=self.log)
        values = self.values()
        value = trial.suggest_float(self.name, self.low, values[-1], step=self.step)
        return min(values, key=lambda v: abs(v - value))  # 1.4, as the grid lists it, not 1.4000000000000001

    def describe(self) -> str:
        if self.log:
            return f"{self.name} {self.low:g}..{self.high:g} (log scale)"
        if self.step is not None or self.integer:
            return f"{self.name} {self.low:g}..{self.high:g} step {self.step or 1:g} ({self.size} values)"
        return f"{self.name} {self.low:g}..{self.high:g} (continuous)"


@dataclass(frozen=True)
class Budget:
    """When a search stops: after `points` full evaluations (a halving trial on a third of the queries
    counts a third), or after `seconds` of work (one worker: wall time), whichever comes first."""
    points: float | None = None
    seconds: float | None = None

    def allows(self, points: float, seconds: float) -> bool:
        """Whether spending up to `points` (what is spent plus the next evaluation) is within the budget
        while `seconds` are spent: the points are never exceeded, the seconds by at most one evaluation."""
        return (self.points is None or points <= self.points + 1e-9) and (self.seconds is None or seconds < self.seconds)

    def describe(self) -> str:
        parts = ([f"{self.points:g} points"] if self.points is not None else []) + \
                ([f"{self.seconds:g} s"] if self.seconds is not None else [])
        return " or ".join(parts)

    def as_dict(self) -> dict[str, float]:
        return {key: value for key, value in dataclasses.asdict(self).items() if value is not None}


@dataclass(frozen=True)
class Halving:
    eta: int = 3  # reduction factor: a third of the trials go on to three times the queries
    min_queries: int = 5  # the first rung's queries, at least
    pruner: str = "asha"  # asha: Optuna's SuccessiveHalvingPruner (asynchronous); hyperband: HyperbandPruner

    def rungs(self, n_queries: int) -> tuple[int, ...]:
        """Queries per rung, fewest first, the last rung all `n_queries`: n / eta^K, ..., n / eta, n."""
        sizes = [n_queries]
        while math.ceil(sizes[0] / self.eta) >= self.min_queries and sizes[0] > 1:
            sizes.insert(0, math.ceil(sizes[0] / self.eta))
        return tuple(sizes)


@dataclass(frozen=True)
class SearchSettings:
    strategy: str = "grid"
    budget: Budget | None = None
    max_new_chunkings: int | None = None  # None: no limit
    seed: int = 0
    halving: Halving = field(default_factory=Halving)

    @property
    def is_search(self) -> bool:
        return self.strategy != "grid"

    def identity(self) -> dict[str, Any]:
        """What makes two searches the same study (the budget is left out: raising it continues a search)."""
        return {"strategy": self.strategy, "seed": self.seed, "max_new_chunkings": self.max_new_chunkings,
                **({"halving": dataclasses.asdict(self.halving)} if self.strategy == "halving" else {})}


@dataclass(frozen=True)
class SearchSpace:
    categorical: dict[str, tuple]  # setting -> values
    ranges: dict[str, RangeAxis]
    listed: tuple[dict[str, Any], ...] = ()

    @property
    def size(self) -> int | None:
        """Configurations in the space (listed points x axes); None when an axis is continuous."""
        total = max(len(self.listed), 1)
        for values in self.categorical.values():
            total *= len(values)
        for axis in self.ranges.values():
            if axis.size is None:
                return None
            total *= axis.size
        return total

    def suggest(self, trial: Any) -> dict[str, Any]:
        """The settings of one configuration, through an Optuna trial: a listed point's settings, then the axes'."""
        changes: dict[str, Any] = {}
        if self.listed:
            labels = [listed_label(number, point) for number, point in enumerate(self.listed, start=1)]
            changes.update(self.listed[labels.index(trial.suggest_categorical(LISTED_AXIS, labels))])
        for name, values in self.categorical.items():
            labels = [value_label(value) for value in values]
            changes[name] = values[labels.index(trial.suggest_categorical(name, labels))]
        for name, axis in self.ranges.items():
            changes[name] = axis.suggest(trial)
        return changes

    def sample(self, rng: random.Random) -> dict[str, Any]:
        """A configuration drawn uniformly (finite axes) or between the bounds (continuous ones)."""
        changes = dict(rng.choice(self.listed)) if self.listed else {}
        changes.update({name: rng.choice(values) for name, values in self.categorical.items()})
        for name, axis in self.ranges.items():
            if axis.finite:
                changes[name] = rng.choice(axis.values())
            else:
                low, high = (math.log(axis.low), math.log(axis.high)) if axis.log else (axis.low, axis.high)
                value = rng.uniform(low, high)
                changes[name] = math.exp(value) if axis.log else value
                changes[name] = int(round(changes[name])) if axis.integer else changes[name]
        return changes

    def describe(self) -> list[str]:
        lines = [f"{name} {len(values)} values ({', '.join(map(str, values))})" for name, values in self.categorical.items()]
        lines += [axis.describe() for axis in self.ranges.values()]
        if self.listed:
            lines.insert(0, f"{len(self.listed)} listed points, each crossed with the axes")
        return lines

    def identity(self) -> dict[str, Any]:
        return {"categorical": {name: [value_label(v) for v in values] for name, values in self.categorical.items()},
                "ranges": {name: dataclasses.asdict(axis) for name, axis in self.ranges.items()},
                "listed": [dict(point) for point in self.listed]}


def value_label(value: Any) -> Any:
    """A categorical value as Optuna stores it: None, bool, int, float and str as they are, others as JSON."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value)


def listed_label(number: int, point: Mapping[str, Any]) -> str:
    return f"{number}: " + (" ".join(f"{key}={value}" for key, value in point.items()) or "base")


# --- reading a sweep file's search keys -------------------------------------------------------------
def parse_search(data: Mapping[str, Any], where: str) -> SearchSettings:
    """The strategy, budget, max_new_chunkings, search_seed and halving keys, checked."""
    strategy = data.get("strategy", "grid")
    if strategy not in STRATEGIES:
        raise ConfigError(f"{where}: strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    searching = strategy != "grid"
    for key in ("budget", "max_new_chunkings", "search_seed", "halving"):
        if data.get(key) is not None and not searching:
            raise ConfigError(f"{where}: {key} applies to strategy tpe or halving, not grid")
    if data.get("halving") is not None and strategy != "halving":
        raise ConfigError(f"{where}: halving applies to strategy halving, not {strategy}")
    if searching and data.get("budget") is None:
        raise ConfigError(f"{where}: strategy {strategy} needs a budget: points (budget: 40) or seconds "
                          f"(budget: {{seconds: 600}}, or \"10 min\")")
    return SearchSettings(
        strategy=strategy,
        budget=parse_budget(data["budget"], where) if searching else None,
        max_new_chunkings=_whole(data.get("max_new_chunkings"), "max_new_chunkings", where, minimum=0),
        seed=_whole(data.get("search_seed"), "search_seed", where, minimum=0) or 0,
        halving=parse_halving(data.get("halving"), where),
    )


def parse_budget(value: Any, where: str) -> Budget:
    """``40`` (points), ``"40 points"``, ``"600 s"``, ``"10 min"``, ``"2h"``, or ``{points: 40, seconds: 600}``."""
    problem = (f"{where}: budget must be a number of points (40), a duration (\"10 min\", \"600 s\"), or "
               f"{{points: N, seconds: S}}; got {value!r}")
    if isinstance(value, bool):
        raise ConfigError(problem)
    if isinstance(value, (int, float)):
        budget = Budget(points=float(value))
    elif isinstance(value, str):
        match = _BUDGET_TEXT.match(value.lower())
        if not match or (match.group(2) and match.group(2) not in _SECONDS and match.group(2) not in ("point", "points")):
            raise ConfigError(problem)
        number, unit = float(match.group(1)), match.group(2)
        budget = Budget(seconds=number * _SECONDS[unit]) if unit in _SECONDS else Budget(points=number)
    elif isinstance(value, dict):
        unknown = [key for key in value if key not in ("points", "seconds")]
        numbers = [v for v in value.values() if not isinstance(v, bool) and isinstance(v, (int, float))]
        if unknown or not value or len(numbers) != len(value):
            raise ConfigError(problem)
        budget = Budget(**{key: float(number) for key, number in value.items()})
    else:
        raise ConfigError(problem)
    for number in (budget.points, budget.seconds):
        if number is not None and not (math.isfinite(number) and number > 0):
            raise ConfigError(f"{where}: budget must be positive, got {value!r}")
    return budget


def parse_halving(value: Any, where: str) -> Halving:
    if value is None:
        return Halving()
    if not isinstance(value, dict) or any(key not in ("eta", "min_queries", "pruner") for key in value):
        raise ConfigError(f"{where}: halving must be a mapping with eta, min_queries and pruner, got {value!r}")
    eta = _whole(value.get("eta"), "halving.eta", where, minimum=2)
    min_queries = _whole(value.get("min_queries"), "halving.min_queries", where, minimum=1)
    pruner = value.get("pruner", "asha")
    if pruner not in PRUNERS:
        raise ConfigError(f"{where}: halving.pruner must be one of {', '.join(PRUNERS)}, got {pruner!r}")
    defaults = Halving()
    return Halving(eta or defaults.eta, min_queries or defaults.min_queries, pruner)


def parse_axes(grid: Any, strategy: str, where: str) -> tuple[dict[str, tuple], dict[str, RangeAxis]]:
    """(categorical axes, range axes) of a ``grid:`` block; for strategy grid, finite ranges become
    lists of values and a continuous one is an error."""
    categorical: dict[str, tuple] = {}
    ranges: dict[str, RangeAxis] = {}
    for name, values in (grid or {}).items():
        if isinstance(values, dict):
            axis = parse_range(name, values, where)
            if strategy == "grid":
                if not axis.finite:
                    raise ConfigError(f"{where}: grid.{name} is continuous; a grid needs a step "
                                      f"({{low, high, step}}) or strategy tpe or halving")
                categorical[name] = axis.values()
            else:
                ranges[name] = axis
        elif isinstance(values, list) and values:
            categorical[name] = tuple(values)
        else:
            raise ConfigError(f"{where}: grid.{name} must be a non-empty list of values or a range "
                              f"{{low, high, step}} / {{low, high, log: true}}")
    return categorical, ranges


def parse_range(name: str, spec: Mapping[str, Any], where: str) -> RangeAxis:
    label = f"{where}: grid.{name}"
    unknown = [key for key in spec if key not in ("low", "high", "step", "log")]
    if unknown:
        raise ConfigError(f"{label}: unknown key {unknown[0]!r} in a range; use low, high and step or log: true")
    kind = _setting_kind(name)
    if kind not in ("int", "float"):
        raise ConfigError(f"{label}: a range needs a numeric setting; {name} is {kind}: give a list of values")
    numbers = {key: spec.get(key) for key in ("low", "high", "step")}
    for key, number in numbers.items():
        if (key != "step" or number is not None) and (isinstance(number, bool) or not isinstance(number, (int, float))
                                                      or not math.isfinite(number)):
            raise ConfigError(f"{label}: {key} must be a finite number, got {number!r}")
        if kind == "int" and number is not None and float(number) != int(number):
            raise ConfigError(f"{label}: {name} is an integer setting; {key} must be an integer, got {number!r}")
    low, high, step = numbers["low"], numbers["high"], numbers["step"]
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{label}: log must be true or false, got {log!r}")
    if not low < high:
        raise ConfigError(f"{label}: low must be below high, got low {low!r}, high {high!r}")
    if step is not None and (step <= 0 or log):
        raise ConfigError(f"{label}: step must be > 0, and a log range takes no step")
    if log and low <= 0:
        raise ConfigError(f"{label}: a log range needs low > 0, got {low!r}")
    return RangeAxis(name, low, high, kind == "int", step, log)


def check_space(space: SearchSpace, base: Mapping[str, Any], where: str, tries: int = 200) -> None:
    """Every axis value and range end can be part of a valid configuration: each is tried with the
    base settings and random values of the other axes (`tries` draws); one that never makes a valid
    configuration is an error naming it, with the reason (a value no setting takes, like mode: bm52)."""
    rng = random.Random(0)
    candidates = [(name, value) for name, values in space.categorical.items() for value in values]
    candidates += [(name, value) for name, axis in space.ranges.items() for value in (axis.low, axis.high)]
    for name, value in candidates:
        error = None
        for _ in range(tries):
            try:
                load_config(None, {**base, **space.sample(rng), name: value})
                break
            except ConfigError as exc:
                error = exc
        else:
            raise ConfigError(f"{where}: grid.{name} value {value!r} makes no valid configuration ({error})")


def _setting_kind(name: str) -> str:
    return SETTINGS[name].type_name if name in SETTINGS else "unknown"


def _whole(value: Any, key: str, where: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    return value
