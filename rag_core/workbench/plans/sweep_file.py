"""Sweep files: a grid of settings over one corpus and golden set, read and checked before anything runs.

A sweep file (``experiments/*.yaml``; relative paths are relative to the file)::

    name: grid                            # the parent run's name; notebooks go to <file dir>/runs/<name>/
    input: ../data/documents              # or  beir: DIR  (and split: test)
    golden: ../data/golden/golden.jsonl   # or mlflow:NAME@3, a version of an MLflow golden dataset
    max_queries: 10                       # optional: the first N queries only
    experiment: my experiment             # optional: default "<corpus> | <golden set>"
    primary_metric: evidence/recall@1024  # optional: ranks the comparison table (best first); the default:
                                          # this with evidence text in every golden line, else page/ndcg@10;
                                          # any metric with per-query values (answer/token_f1 with answers)
    table_metrics: [page/recall@5, latency/total_p50_ms]  # optional: the printed table's metric columns beside
                                          # the primary one (default: latency/total_p50_ms); every metric is
                                          # in comparison.csv and sweep --wide whatever this says
    plugins: [my_retriever.py]            # optional: modules or .py files (relative to the file) registering
                                          # components, imported before the settings are checked
    base: {mode: hybrid}                  # settings of every point
    grid: {chunk_size: [256, 512], k: [5, 10]}   # the cartesian product is run
    points:                               # optional: listed points (each crossed with the grid, if any)
      - {mode: bm25}
      - {mode: hybrid, route_docs: 1}
    holdout: 0.3                          # optional: hold out 30% of the queries (rag_core.workbench.statistics.holdout)
    holdout_seed: 7                       # optional (0): which queries are held out
    select: one_se                        # optional (max): how the winner is chosen (rag_core.workbench.statistics.selection)
    strategy: tpe                         # optional: grid (default), tpe or halving; with budget, max_new_chunkings,
    budget: 40                            #   search_seed, halving (rag_core.workbench.plans.space); the grid
                                          #   block is then the search space, ranges {low, high, step|log} allowed

Settings, lowest precedence first: defaults, ``--config FILE``, ``base``, setting flags, a listed
point's settings, grid values. ``points`` measures techniques alone and combined without running
their whole cartesian product.
Unknown keys and settings are errors naming the key; a point whose combination is invalid
(``overlap >= chunk_size``) is skipped with a message. Points that differ only in settings their chosen
components do not read (``overlap`` under a chunker that ignores it, ``bm25_k1`` with ``mode: dense``)
are one configuration (``point_identity``: the values of every applying setting and code version): it is
run once, as the first of them, and ``merged()`` says which were merged
(``merged: chunker=semantic x overlap=0/64 -> 1 point``). Points are ordered so that those sharing a
chunking run one after another (their index and retrieval candidates are shared).
A search (``strategy: tpe`` or ``halving``) samples its points instead of running them all
(``rag_core.workbench.search.driver``); its space is ``search_space``, and its hash leaves the budget out, so
raising the budget continues the same search.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rag_core.components import load_plugins
from rag_core.components.settings import STAGES
from rag_core.components.stages import applying, key_through, stage_values
from rag_core.config import (ConfigError, RagConfig, file_plugins, load_config, read_yaml_mapping, read_yaml_settings,
                             setting_names)
from rag_core.doc_ids import escape_controls
from rag_core.evaluate.golden_records import is_dataset_ref
from rag_core.evaluate.metric_catalog import METRICS
from rag_core.evaluate.metric_registry import UnknownMetric
from rag_core.evaluate.metrics import FALLBACK_PRIMARY_METRIC, default_primary_metric
from rag_core.progress import progress
from rag_core.retrieve.rerank import RERANKERS
from rag_core.workbench.plans.space import RangeAxis, SearchSettings, SearchSpace, check_space, parse_axes, parse_search
from rag_core.workbench.statistics.holdout import check_holdout
from rag_core.workbench.statistics.selection import check_select

def point_identity(config: RagConfig, stages: Mapping[str, str] | None = None) -> tuple:
    """What a configuration's results depend on: the values of every setting that applies to it and the
    code versions of its components, by stage (``rag_core.components.stages``). Two configurations with
    the same identity give the same results: a sweep runs one of them, a search reuses the earlier trial."""
    return key_through(config, STAGES[-1], stages)


DEFAULT_TABLE_METRICS = ("latency/total_p50_ms",)  # the printed table's columns beside the primary metric (as before)
PROGRESS_MIN_POINTS = 2000  # a grid this large takes seconds to check (about 0.5 ms a point): show a bar
_PLAIN_NAME = re.compile(r"\w[\w .+=@,-]{0,99}")  # no '/', '\\', no '.' first, no control characters
SWEEP_KEYS = ("name", "description", "input", "golden", "beir", "split", "max_queries", "experiment",
              "primary_metric", "table_metrics", "plugins", "base", "grid", "points",
              "holdout", "holdout_seed", "select", "strategy", "budget", "max_new_chunkings", "search_seed", "halving")


# --- the sweep file -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    number: int  # 1-based, in grid order (a search: its trial number + 1)
    changes: dict[str, Any]  # setting -> the grid value of this point
    config: RagConfig
    query_ids: tuple[str, ...] | None = None  # evaluate on these golden queries only (a search's fidelity); None: all

    @property
    def label(self) -> str:
        label = " ".join(f"{key}={value}" for key, value in self.changes.items()) or "base"
        return label if self.query_ids is None else f"{label} [{len(self.query_ids)} queries]"

    @property
    def file_stem(self) -> str:
        safe = "".join(c if c.isalnum() or c in "=.-" else "_" for c in self.label.replace(" ", "_"))
        return f"{self.number:02d}-{safe}"[:120]

    @functools.cached_property
    def _stages(self) -> dict[str, str]:
        return applying(self.config)

    @property
    def chunking_key(self) -> tuple:
        """The chunking: the chunking stage's settings (``rag_core.components.stages``)."""
        return stage_values(self.config, "chunking", self._stages)

    @property
    def build_key(self) -> tuple:
        """What the store builds for this point: the settings of the stages up to the indexes."""
        return key_through(self.config, "index", self._stages)

    @property
    def candidates_key(self) -> tuple:
        """Points with the same key retrieve the same candidates (they differ in k, re-ranking or
        metrics only): one worker runs them one after another and reuses the candidates."""
        return key_through(self.config, "candidates", self._stages)

    @property
    def identity(self) -> tuple:
        """Its configuration's identity (``point_identity``): equal for points that give the same results."""
        return point_identity(self.config, self._stages)

    @property
    def rerank_key(self) -> tuple | None:
        """Points with the same key score the same cross-encoder pairs (its score cache: the chunks and
        the re-ranker with its own settings, whatever retrieved them): never run two at once."""
        cfg = self.config
        return (self.chunking_key, RERANKERS.get(cfg.reranker).key(cfg)) if cfg.rerank_depth > 0 else None


@dataclass(frozen=True)
class MergedPoints:
    """Grid points that are one configuration: `kept` runs (the first in grid order, labelled by the axes
    that apply to it), the others are not run."""
    kept: SweepPoint
    merged: tuple[SweepPoint, ...]  # every point of the group, `kept`'s original included, in grid order

    def describe(self) -> str:
        """``merged: chunker=semantic x overlap=0/64 -> 1 point (overlap does not apply)``: the point run,
        then the values of the settings it was merged over."""
        axes = list(dict.fromkeys(key for point in self.merged for key in point.changes))
        values = {axis: list(dict.fromkeys(str(point.changes.get(axis, "-")) for point in self.merged)) for axis in axes}
        unread = [axis for axis in axes if len(values[axis]) > 1]
        return (f"merged: {' x '.join([self.kept.label, *(f'{axis}=' + '/'.join(values[axis]) for axis in unread)])}"
                f" -> 1 point ({', '.join(unread)} {'does' if len(unread) == 1 else 'do'} not apply)")


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    input_dir: Path | None
    golden: Path | None
    beir: Path | None
    split: str
    max_queries: int | None
    experiment: str | None
    primary_metric: str
    base: dict[str, Any]  # the settings every point starts from (config file, base, flags), not yet checked
    grid: dict[str, tuple]  # setting -> values, in file order
    holdout: float | None = None  # share of the queries held out (the winner is chosen on the others)
    holdout_seed: int = 0
    listed: tuple[dict[str, Any], ...] = ()  # the file's ``points``: settings of each listed point
    select: str = "max"  # the selection rule: max | one_se (not in the hash: changing it re-runs no point)
    ranges: dict[str, RangeAxis] = field(default_factory=dict)  # a search's range axes (a grid's are in `grid`)
    search: SearchSettings = field(default_factory=SearchSettings)  # strategy grid: every point is run
    table_metrics: tuple[str, ...] = DEFAULT_TABLE_METRICS  # the printed table's metric columns, beside the primary

    @property
    def axes(self) -> list[str]:
        """The settings that vary between points: the grid's, then those of the listed points."""
        listed = [key for point in self.listed for key in point if key not in self.grid and key not in self.ranges]
        return list(self.grid) + list(self.ranges) + list(dict.fromkeys(listed))

    @property
    def space(self) -> SearchSpace:
        """What a search samples from: the categorical axes, the ranges and the listed points."""
        return SearchSpace(self.grid, self.ranges, self.listed)

    @functools.cached_property
    def _points(self) -> tuple[list[SweepPoint], list[str], list[MergedPoints]]:
        points, skipped = [], []
        keys = list(self.grid)
        combinations = itertools.product(self.listed or ({},), itertools.product(*self.grid.values()))
        total = len(self.listed or ({},)) * math.prod(len(values) for values in self.grid.values())
        combinations = progress(combinations, total >= PROGRESS_MIN_POINTS, "Checking sweep points", "point", total)
        for number, (listed, values) in enumerate(combinations, start=1):
            changes = {**listed, **dict(zip(keys, values))}
            try:
                config = load_config(None, {**self.base, **changes})
            except ConfigError as exc:
                label = " ".join(f"{key}={value}" for key, value in changes.items()) or "base"
                skipped.append(f"skipping point {number} ({label}): {exc}")
                continue
            points.append(SweepPoint(number, changes, config))
        if not points:
            raise ConfigError(f"{self.path}: no valid point in the grid ({skipped[0] if skipped else 'empty'})")
        points, merged = _merge(points)
        # stable: grid order within a chunking, and points sharing candidates next to each other (a candidate
        # group where its first point is in the grid)
        first: dict[tuple, int] = {}
        for point in points:
            first.setdefault(point.candidates_key, point.number)
        points.sort(key=lambda point: (point.chunking_key, first[point.candidates_key]))
        return points, skipped, merged

    def points(self) -> tuple[list[SweepPoint], list[str]]:
        """(valid points, one per configuration (``merged``), ordered so that those sharing a chunking are
        consecutive; one message per skipped invalid point). Settings come from defaults < environment
        (models) < base < grid."""
        points, skipped, _ = self._points
        return list(points), list(skipped)

    def merged(self) -> list[MergedPoints]:
        """The groups of grid points run as one (they differ only in settings that do not apply to them)."""
        return list(self._points[2])

    @functools.cached_property
    def hash(self) -> str:
        """Identifies the sweep's runs: its name, data and the resolved settings of every point (not
        the file's formatting). A search: its space and strategy, not its budget."""
        if self.search.is_search:
            held_out = {"holdout": [self.holdout, self.holdout_seed]} if self.holdout is not None else {}
            return digest({"name": self.name, "data": self.data_identity(), "base": self.base,
                           "space": self.space.identity(), "search": self.search.identity(), **held_out})
        settings = sorted(json.dumps(point.config.as_params(), sort_keys=True) for point in self._points[0])
        held_out = {"holdout": [self.holdout, self.holdout_seed]} if self.holdout is not None else {}
        return digest({"name": self.name, "data": self.data_identity(), "points": settings, **held_out})

    def data_identity(self) -> dict[str, Any]:
        return {"input": path_str(self.input_dir), "golden": path_str(self.golden), "beir": path_str(self.beir),
                "split": self.split, "max_queries": self.max_queries}


def _merge(points: list[SweepPoint]) -> tuple[list[SweepPoint], list[MergedPoints]]:
    """One point per identity, the first in grid order; a merged group's kept point is labelled by the axes
    that apply to it (the others' values are not read)."""
    groups: dict[tuple, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(point.identity, []).append(point)
    kept, merged = [], []
    for group in groups.values():
        point = group[0]
        if len(group) > 1:
            applying_axes = {key: value for key, value in point.changes.items() if key in point._stages}
            point = SweepPoint(point.number, applying_axes, point.config, point.query_ids)
            merged.append(MergedPoints(point, tuple(group)))
        kept.append(point)
    return kept, merged


def check_name(value: Any, path: Path) -> str:
    """The sweep's name (the file's stem when none), a plain name: it names the folder
    ``runs/<name>/``, so it cannot be a path (``../../x``), hidden, empty or hold control characters."""
    if value is None or value == "":
        value = path.stem
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{path}: 'name' must be a plain name, not a {type(value).__name__}")
    name = str(value)
    if (not _PLAIN_NAME.fullmatch(name)) or name.strip() != name:
        raise ConfigError(f"{path}: 'name' must be a plain name of at most 100 letters, digits, spaces and "
                          f"'-_.+=@,' not starting with '.' (it names the folder runs/<name>/), not "
                          f"{escape_controls(name[:100])!r}")
    return name


def load_sweep(path: str | Path, *, config_file: str | Path | None = None,
               overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    """Read and check a sweep file. `config_file` and `overrides` (CLI setting flags) set the base,
    around the file's own ``base`` (defaults < config_file < base < overrides < grid values)."""
    path = Path(path)
    data = read_yaml_mapping(path, "name, input, golden, base, grid, ...")
    unknown = [key for key in data if key not in SWEEP_KEYS]
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in {path}; sweep files take {', '.join(SWEEP_KEYS)}")
    plugins = list(file_plugins(data.get("plugins"), path))  # imported now: their settings are checked below
    if isinstance(data.get("base"), dict) and data["base"].get("plugins"):
        data["base"] = {**data["base"], "plugins": list(file_plugins(data["base"]["plugins"], path))}
        plugins += data["base"]["plugins"]
    load_plugins(plugins)  # the sweep file's one load (after the CLI's, it finds them loaded)
    listed = data.get("points") or []
    if not isinstance(listed, list):
        raise ConfigError(f"{path}: 'points' must be a list of mappings of setting: value")
    sections = [("base", data.get("base")), ("grid", data.get("grid"))]
    sections += [(f"points[{number}]", point) for number, point in enumerate(listed, start=1)]
    for section, values in sections:
        if not isinstance(values or {}, dict):
            raise ConfigError(f"{path}: {section!r} must be a mapping of setting: value")
        unknown = [key for key in values or {} if key not in setting_names()]
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r} in {path} {section}; "
                              f"valid settings: {', '.join(sorted(setting_names()))}")

    base = read_yaml_settings(config_file) if config_file else {}
    base.update(data.get("base") or {})
    base.update({key: value for key, value in (overrides or {}).items() if value is not None})
    given = base.get("plugins") or ()
    plugins = list(dict.fromkeys([*(given.split(",") if isinstance(given, str) else given), *plugins]))
    if plugins:  # every point's config names them: notebooks import them, runs record them
        base["plugins"] = plugins
    search = parse_search(data, str(path))
    grid, ranges = parse_axes(data.get("grid"), search.strategy, str(path))

    folder = path.resolve().parent
    resolve = lambda value: (folder / str(value)).resolve() if value is not None else None  # noqa: E731
    if data.get("beir") is not None and (data.get("input") is not None or data.get("golden") is not None):
        raise ConfigError(f"{path}: 'beir' brings its own corpus and queries; leave out 'input' and 'golden'")
    if data.get("beir") is None and (data.get("golden") is None or data.get("input") is None):
        raise ConfigError(f"{path}: give 'input' (a folder of documents) and 'golden' (a golden set), or 'beir'")
    max_queries = data.get("max_queries")
    if max_queries is not None and (isinstance(max_queries, bool) or not isinstance(max_queries, int) or max_queries < 1):
        raise ConfigError(f"{path}: max_queries must be a positive integer")
    holdout, holdout_seed = check_holdout(data.get("holdout"), data.get("holdout_seed"), str(path))
    spec = SweepSpec(
        # resolved: papermill changes the process's directory while a notebook runs (racy with worker threads)
        name=check_name(data.get("name"), path), path=path.resolve(), input_dir=resolve(data.get("input")),
        golden=Path(data["golden"]) if is_dataset_ref(data.get("golden")) else resolve(data.get("golden")),  # mlflow:NAME@3
        beir=resolve(data.get("beir")), split=str(data.get("split", "test")),
        max_queries=max_queries, experiment=str(data["experiment"]) if data.get("experiment") else None,
        primary_metric=str(data.get("primary_metric") or (FALLBACK_PRIMARY_METRIC if data.get("beir") is not None
                                                          else default_primary_metric(data.get("golden"), folder))),
        base=base, grid=grid,
        holdout=holdout, holdout_seed=holdout_seed, listed=tuple(dict(point or {}) for point in listed),
        select=check_select(data.get("select"), str(path)),
        table_metrics=table_metrics_of(data.get("table_metrics"), path),
        ranges=ranges, search=search,
    )
    if search.is_search:  # a space is sampled, not enumerated: each value must be able to make a valid point
        check_space(spec.space, base, str(path))
        scoring = load_config(None, {name: base[name] for name in ("metrics_k", "context_budgets") if name in base})
    else:
        points, _ = spec.points()  # every point checked now: a sweep that cannot run fails before it starts
        scoring = points[0].config
    answered = bool(base.get("answers")) if search.is_search else all(point.config.answers for point in points)
    check_metrics(spec, scoring, answered)
    return spec


def table_metrics_of(value: Any, path: Path) -> tuple[str, ...]:
    """The file's ``table_metrics`` (a list of metric names, or one name), or the default."""
    if value is None:
        return DEFAULT_TABLE_METRICS
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise ConfigError(f"{path}: table_metrics must be a list of metric names, e.g. [page/recall@5, answer/token_f1]")
    return tuple(dict.fromkeys(names))


def check_metrics(spec: SweepSpec, scoring: RagConfig, answered: bool) -> None:
    """``primary_metric`` and ``table_metrics`` are registered metrics (``rag_core.evaluate.metric_catalog``) with
    the ``@K`` / ``@B`` the points compute; the primary one has a value per query (the paired tests need them);
    an answer or citation metric needs ``answers: true`` in every point; a sweep does not judge."""
    for what, name in [("primary_metric", spec.primary_metric), *(("table_metrics", name) for name in spec.table_metrics)]:
        try:
            found = METRICS.check(name, scoring.metrics_k, scoring.context_budgets, what=what)
        except UnknownMetric as exc:
            raise ConfigError(f"{spec.path}: {exc}") from None
        if what == "primary_metric" and not found.metric.per_query:
            raise ConfigError(f"{spec.path}: primary_metric {name!r} has no value per query, which ranking and the "
                              "paired tests need; choose a metric with per-query values (docs/evaluation.md#every-metric)")
        if found.level in ("answer", "citation") and not answered:
            raise ConfigError(f"{spec.path}: {what} {name!r} is measured on answers: add answers: true to base "
                              "(every point then answers each query and scores the answers)")
        if found.level == "judge":
            raise ConfigError(f"{spec.path}: {what} {name!r} needs the LLM judge, which sweeps do not run; use an "
                              "answer metric (answer/token_f1, citation/recall) with answers: true, or rag-pipeline "
                              "gate --judge")


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def path_str(path: Path | None) -> str | None:
    return str(path) if path is not None else None
