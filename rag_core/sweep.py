"""Sweeps: a grid of settings, each point evaluated by papermill running ``notebooks/02-evaluate.ipynb``,
logged as one MLflow parent run per sweep with one nested child run per point.

A sweep file (``experiments/*.yaml``; relative paths are relative to the file)::

    name: grid                            # the parent run's name; notebooks go to <file dir>/runs/<name>/
    input: ../data/documents              # or  beir: DIR  (and split: test)
    golden: ../data/golden/golden.jsonl
    max_queries: 10                       # optional: the first N queries only
    experiment: my experiment             # optional: default "<corpus> | <golden set>"
    primary_metric: page/ndcg@10          # optional: ranks the comparison table (best first)
    base: {mode: hybrid}                  # settings of every point
    grid: {chunk_size: [256, 512], k: [5, 10]}   # the cartesian product is run

Settings, lowest precedence first: defaults, ``--config FILE``, ``base``, setting flags, grid values.
Unknown keys and settings are errors naming the key; a point whose combination is invalid
(``overlap >= chunk_size``) is skipped with a message.

Shared work: the store (``rag_core.index``) chunks and embeds each distinct (corpus, chunking, model)
once and the SQLite cache keeps embeddings and cross-encoder scores, so points are ordered to run
those that share a chunking one after another. With ``workers > 1`` every distinct chunking is built
first, serially, in this process; then points run in parallel (threads, each driving a papermill
kernel), never two at once that would score the same cross-encoder pairs. The work is counted on
the parent run (``sweep/*`` metrics: points, distinct chunkings, dense indexes built, chunks embedded,
cross-encoder pairs scored vs cache hits).

Restart: the parent run is found again by ``rag.sweep_hash`` (the resolved sweep: data, base
settings and grid), and points whose child run FINISHED with the same ``rag.point_hash`` (settings +
corpus and golden-set fingerprints) are skipped; so running a finished sweep again only prints its
table (change its name, or delete its parent run, to run it afresh). A failing point becomes a
FAILED child run (``rag.error`` tag, partial notebook) and the sweep goes on; the parent then ends
FAILED, and running the sweep again retries just those points.
Left out: random or Bayesian search, and running points on other machines.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from rag_core.config import ConfigError, RagConfig, load_config, read_yaml_mapping, read_yaml_settings, setting_names
from rag_core.evaluate import golden_fingerprint
from rag_core.evaluate_cli import RESULT_MIME, EvalInputs, load_eval_inputs
from rag_core.metrics import metric_names
from rag_core.paths import NOTEBOOKS_DIR
from rag_core.relevance import LEVELS
from rag_core.tracking import TAG_PREFIX, Tracker, git_tags, run_metrics

SWEEP_KEYS = ("name", "description", "input", "golden", "beir", "split", "max_queries", "experiment",
              "primary_metric", "base", "grid")
DEFAULT_PRIMARY_METRIC = "page/ndcg@10"  # page level: comparable across chunk sizes; nDCG: rewards order
NOTEBOOK = NOTEBOOKS_DIR / "02-evaluate.ipynb"
POINT_HASH_TAG, SWEEP_HASH_TAG, KIND_TAG = TAG_PREFIX + "point_hash", TAG_PREFIX + "sweep_hash", TAG_PREFIX + "kind"
TABLE_METRICS = ("page/recall@5", "doc/mrr", "latency/total_p50_ms")  # shown next to the primary metric


# --- the sweep file -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    number: int  # 1-based, in grid order
    changes: dict[str, Any]  # setting -> the grid value of this point
    config: RagConfig

    @property
    def label(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.changes.items()) or "base"

    @property
    def file_stem(self) -> str:
        safe = "".join(c if c.isalnum() or c in "=.-" else "_" for c in self.label.replace(" ", "_"))
        return f"{self.number:02d}-{safe}"[:120]

    @property
    def build_key(self) -> tuple:
        """What the store builds for this point: chunking, dense model, BM25 settings."""
        cfg = self.config
        dense = cfg.embed_model if cfg.mode in ("dense", "hybrid") else None
        bm25 = (cfg.bm25_backend, cfg.tokenizer, cfg.bm25_k1, cfg.bm25_b) if cfg.mode in ("bm25", "hybrid") else None
        return (cfg.chunk_size, cfg.overlap, cfg.per_page, dense, bm25)

    @property
    def rerank_key(self) -> tuple | None:
        """Points with the same key score the same cross-encoder pairs: never run two at once."""
        cfg = self.config
        return (cfg.chunk_size, cfg.overlap, cfg.per_page, cfg.rerank_model) if cfg.rerank_depth > 0 else None


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

    @functools.cached_property
    def _points(self) -> tuple[list[SweepPoint], list[str]]:
        points, skipped = [], []
        keys = list(self.grid)
        for number, values in enumerate(itertools.product(*self.grid.values()), start=1):
            changes = dict(zip(keys, values))
            try:
                config = load_config(None, {**self.base, **changes})
            except ConfigError as exc:
                label = " ".join(f"{key}={value}" for key, value in changes.items()) or "base"
                skipped.append(f"skipping point {number} ({label}): {exc}")
                continue
            points.append(SweepPoint(number, changes, config))
        if not points:
            raise ConfigError(f"{self.path}: no valid point in the grid ({skipped[0] if skipped else 'empty'})")
        points.sort(key=lambda point: point.build_key[:3] + (str(point.build_key[3:]),))  # stable: grid order within
        return points, skipped

    def points(self) -> tuple[list[SweepPoint], list[str]]:
        """(valid points, ordered so that those sharing a chunking are consecutive; one message per
        skipped invalid point). Settings come from defaults < environment (models) < base < grid."""
        points, skipped = self._points
        return list(points), list(skipped)

    @functools.cached_property
    def hash(self) -> str:
        """Identifies the sweep's runs: its name, data and the resolved settings of every point (not
        the file's formatting)."""
        settings = sorted(json.dumps(point.config.as_params(), sort_keys=True) for point in self._points[0])
        return _digest({"name": self.name, "data": self.data_identity(), "points": settings})

    def data_identity(self) -> dict[str, Any]:
        return {"input": _path_str(self.input_dir), "golden": _path_str(self.golden), "beir": _path_str(self.beir),
                "split": self.split, "max_queries": self.max_queries}


def load_sweep(path: str | Path, *, config_file: str | Path | None = None,
               overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    """Read and check a sweep file. `config_file` and `overrides` (CLI setting flags) set the base,
    around the file's own ``base`` (defaults < config_file < base < overrides < grid values)."""
    path = Path(path)
    data = read_yaml_mapping(path, "name, input, golden, base, grid, ...")
    unknown = [key for key in data if key not in SWEEP_KEYS]
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in {path}; sweep files take {', '.join(SWEEP_KEYS)}")
    for section in ("base", "grid"):
        if not isinstance(data.get(section) or {}, dict):
            raise ConfigError(f"{path}: {section!r} must be a mapping of setting: value")
        unknown = [key for key in data.get(section) or {} if key not in setting_names()]
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r} in {path} {section}; "
                              f"valid settings: {', '.join(sorted(setting_names()))}")

    base = read_yaml_settings(config_file) if config_file else {}
    base.update(data.get("base") or {})
    base.update({key: value for key, value in (overrides or {}).items() if value is not None})
    grid: dict[str, tuple] = {}
    for key, values in (data.get("grid") or {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}: grid.{key} must be a non-empty list of values")
        grid[key] = tuple(values)

    folder = path.resolve().parent
    resolve = lambda value: (folder / str(value)).resolve() if value is not None else None  # noqa: E731
    if data.get("beir") is not None and (data.get("input") is not None or data.get("golden") is not None):
        raise ConfigError(f"{path}: 'beir' brings its own corpus and queries; leave out 'input' and 'golden'")
    if data.get("beir") is None and (data.get("golden") is None or data.get("input") is None):
        raise ConfigError(f"{path}: give 'input' (a folder of documents) and 'golden' (a golden set), or 'beir'")
    max_queries = data.get("max_queries")
    if max_queries is not None and (isinstance(max_queries, bool) or not isinstance(max_queries, int) or max_queries < 1):
        raise ConfigError(f"{path}: max_queries must be a positive integer")
    spec = SweepSpec(
        name=str(data.get("name") or path.stem), path=path, input_dir=resolve(data.get("input")),
        golden=resolve(data.get("golden")), beir=resolve(data.get("beir")), split=str(data.get("split", "test")),
        max_queries=max_queries, experiment=str(data["experiment"]) if data.get("experiment") else None,
        primary_metric=str(data.get("primary_metric", DEFAULT_PRIMARY_METRIC)), base=base, grid=grid,
    )
    points, _ = spec.points()  # every point checked now: a sweep that cannot run fails before it starts
    quality = {f"{level}/{name}" for level in LEVELS for name in metric_names(points[0].config.metrics_k)}
    if spec.primary_metric not in quality:
        raise ConfigError(f"{path}: primary_metric {spec.primary_metric!r} is not a retrieval metric; "
                          f"choose one of {', '.join(sorted(quality))}")
    return spec


# --- running it ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class PointOutcome:
    point: SweepPoint
    status: str  # FINISHED | FAILED | SKIPPED (finished in an earlier run of the sweep)
    run_id: str
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
    work: dict[str, float]  # the sweep/* metrics logged on the parent
    table: Any  # pandas.DataFrame: the comparison, best first
    primary_metric: str
    output_dir: Path
    tracking_uri: str

    @property
    def executed(self) -> list[PointOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status != "SKIPPED"]

    @property
    def failed(self) -> list[PointOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == "FAILED"]


def run_sweep(spec: SweepSpec, store_dir: str | Path, *, workers: int = 1, output_dir: str | Path | None = None,
              tracking_uri: str | None = None, echo: Callable[[str], None] = print) -> SweepResult:
    """Run every point of `spec` not finished before; return the outcomes and the comparison table."""
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    started = time.perf_counter()
    store_dir = Path(store_dir).resolve()
    tracker = Tracker.at(tracking_uri)
    output_dir = Path(output_dir) if output_dir else spec.path.resolve().parent / "runs" / spec.name
    output_dir.mkdir(parents=True, exist_ok=True)
    points, skipped_invalid = spec.points()
    for message in skipped_invalid:
        echo(message)
    inputs = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, beir=spec.beir, split=spec.split,
                              store_dir=store_dir, max_queries=spec.max_queries)
    experiment = spec.experiment or inputs.experiment
    data_key = {**spec.data_identity(), "corpus": inputs.corpus.fingerprint, "golden": golden_fingerprint(inputs.queries)}
    point_hashes = {point.number: _digest({"settings": point.config.as_params(), "data": data_key}) for point in points}

    parent_id, resumed = _parent_run(tracker, experiment, spec, inputs, len(points))
    finished = _finished_points(tracker, experiment, parent_id)
    todo = [point for point in points if point_hashes[point.number] not in finished]
    outcomes = [PointOutcome(point, "SKIPPED", finished[point_hashes[point.number]]) for point in points if point not in todo]
    distinct = len({point.build_key[:3] for point in points})
    echo(f"Sweep {spec.name!r}: {len(points)} points ({distinct} distinct chunkings), "
         f"{len(outcomes)} already finished, {len(todo)} to run with {workers} worker(s)"
         f"{' (resuming run ' + parent_id + ')' if resumed else ''}; experiment {experiment!r}")

    prebuild: dict[str, float] = {}
    if workers > 1 and todo:
        prebuild = _prebuild(todo, inputs, store_dir, echo)

    counter = itertools.count(len(outcomes) + 1)
    lock = threading.Lock()

    def run_one(point: SweepPoint) -> PointOutcome:
        outcome = _run_point(point, point_hashes[point.number], spec, inputs, experiment, parent_id, store_dir,
                             output_dir, tracker)
        with lock:
            echo(_progress_line(next(counter), len(points), outcome, spec.primary_metric))
        return outcome

    try:
        outcomes += list(_execute(todo, workers, run_one))
    except KeyboardInterrupt:
        tracker.finish(parent_id, "KILLED")
        raise
    work = _log_parent_summary(tracker, experiment, parent_id, points, skipped_invalid, prebuild,
                               time.perf_counter() - started)
    from rag_core.compare import comparison_table, load_runs

    table = comparison_table(load_runs(experiment, parent_run_id=parent_id, tracking_uri=tracker.uri, statuses=None),
                             spec.primary_metric, list(spec.grid), TABLE_METRICS)
    with tempfile.TemporaryDirectory(prefix="rag-sweep-") as temp:
        folder = Path(temp)
        table.to_csv(folder / "comparison.csv", index=False)
        tracker.log_artifacts(parent_id, [folder / "comparison.csv", spec.path])
    any_failed = any(outcome.status == "FAILED" for outcome in outcomes)
    tracker.finish(parent_id, "FAILED" if any_failed else "FINISHED")
    outcomes.sort(key=lambda outcome: points.index(outcome.point))
    return SweepResult(spec.name, experiment, parent_id, resumed, outcomes, skipped_invalid, work, table,
                       spec.primary_metric, output_dir, tracker.uri)


def _execute(points: list[SweepPoint], workers: int, run_one: Callable[[SweepPoint], PointOutcome]) -> Iterator[PointOutcome]:
    """Run points in order; with several workers, in parallel, but never two points with the same
    cross-encoder work at once (the second then finds the first one's scores in the cache)."""
    if workers == 1:
        yield from map(run_one, points)
        return
    pending, running, busy = list(points), {}, set()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            while len(running) < workers:
                ready = next((p for p in pending if p.rerank_key is None or p.rerank_key not in busy), None)
                if ready is None:
                    break
                pending.remove(ready)
                busy.add(ready.rerank_key)
                running[pool.submit(run_one, ready)] = ready
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                busy.discard(running.pop(future).rerank_key)
                yield future.result()


def _run_point(point: SweepPoint, point_hash: str, spec: SweepSpec, inputs: EvalInputs, experiment: str,
               parent_id: str, store_dir: Path, output_dir: Path, tracker: Tracker) -> PointOutcome:
    """Create the child run, have papermill execute the notebook into it, attach the notebook, end it."""
    import papermill

    started = time.perf_counter()
    tags = {POINT_HASH_TAG: point_hash, SWEEP_HASH_TAG: spec.hash, KIND_TAG: "sweep-point", **git_tags()}
    run_id = tracker.start_run(experiment, point.label, parent_run_id=parent_id, tags=tags)
    tracking_seconds = time.perf_counter() - started
    notebook = output_dir / f"{point.file_stem}.ipynb"
    parameters = {
        **notebook_settings(point.config),
        "input_dir": _path_str(spec.input_dir), "golden": _path_str(spec.golden), "beir": _path_str(spec.beir),
        "split": spec.split, "max_queries": spec.max_queries, "store": str(store_dir),
        "tracking_uri": tracker.uri, "experiment": experiment, "run_name": point.label, "run_id": run_id,
        "parent_run_id": parent_id, "point_hash": point_hash, "log_to_mlflow": True,
    }
    error = None
    metrics: dict[str, float] = {}
    executed_at = time.perf_counter()
    try:
        papermill.execute_notebook(str(NOTEBOOK), str(notebook), parameters=parameters, progress_bar=False,
                                   cwd=str(NOTEBOOKS_DIR), kernel_name="python3",
                                   # the local kernel's "running over TCP without encryption" warning, once per point
                                   extra_arguments=["--IPKernelApp.log_level=ERROR"])
        notebook_seconds = time.perf_counter() - executed_at
        metrics = read_recorded_result(notebook).get("metrics", {})
    except Exception as exc:  # noqa: BLE001 - whatever failed the point is recorded, the others go on
        notebook_seconds = time.perf_counter() - executed_at
        error = _error_text(exc)
    finishing = time.perf_counter()
    if notebook.exists():
        tracker.log_artifacts(run_id, [notebook], "notebook")
    tracker.log(run_id, metrics={"timing/notebook_seconds": notebook_seconds})
    if error:
        tracker.fail(run_id, error)
    else:
        tracking_seconds += time.perf_counter() - finishing
        tracker.log(run_id, metrics={"timing/sweep_tracking_seconds": tracking_seconds})
        tracker.finish(run_id)
    return PointOutcome(point, "FAILED" if error else "FINISHED", run_id, metrics, time.perf_counter() - started,
                        error, notebook)


def notebook_settings(config: RagConfig) -> dict[str, Any]:
    """Every setting as a papermill parameter (plain values; tuples as lists)."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in config.as_dict().items()}


def read_recorded_result(notebook: str | Path) -> dict[str, Any]:
    """The JSON the evaluation notebook's last cell records (run id, metrics, params, timing)."""
    import nbformat

    executed = nbformat.read(str(notebook), as_version=4)
    for cell in reversed(executed.cells):
        for output in cell.get("outputs", []):
            if RESULT_MIME in output.get("data", {}):
                return dict(output["data"][RESULT_MIME])
    raise RuntimeError(f"{notebook} recorded no result (its last cell did not run)")


def _prebuild(points: list[SweepPoint], inputs: EvalInputs, store_dir: Path, echo: Callable[[str], None]) -> dict[str, float]:
    """Chunk, embed and index every distinct build of `points`, one after another, before points
    run in parallel: two parallel points then never embed the same chunking."""
    from rag_core.pipeline import Pipeline

    totals = {"dense_indexes_built": 0.0, "chunkings_built": 0.0, "embedded": 0.0, "embed_cache_hits": 0.0, "seconds": 0.0}
    builds = {point.build_key: point.config for point in points}
    echo(f"Building indexes for {len(builds)} distinct chunking/model combinations first ...")
    for config in builds.values():
        started = time.perf_counter()
        stats = Pipeline(config, inputs.corpus, store_dir).build()
        totals["dense_indexes_built"] += float(stats.embedded + stats.embed_cache_hits > 0)
        totals["chunkings_built"] += stats.chunkings_built
        totals["embedded"] += stats.embedded
        totals["embed_cache_hits"] += stats.embed_cache_hits
        totals["seconds"] += time.perf_counter() - started
    return totals


# --- MLflow: parent run, finished points, summary ------------------------------------------------
def _parent_run(tracker: Tracker, experiment: str, spec: SweepSpec, inputs: EvalInputs, n_points: int) -> tuple[str, bool]:
    """(run id, resumed): the latest parent run of this sweep (interrupted, failed or finished: its
    finished points are kept), or a new one."""
    earlier = tracker.runs(experiment, f"tags.`{SWEEP_HASH_TAG}` = '{spec.hash}' and tags.`{KIND_TAG}` = 'sweep'",
                           ["attributes.start_time DESC"])
    if earlier:
        run_id = earlier[0].info.run_id
        tracker.client.update_run(run_id, status="RUNNING")
        return run_id, True
    tags = {SWEEP_HASH_TAG: spec.hash, KIND_TAG: "sweep", TAG_PREFIX + "corpus_fingerprint": inputs.corpus.fingerprint,
            TAG_PREFIX + "golden_fingerprint": golden_fingerprint(inputs.queries), **git_tags()}
    run_id = tracker.start_run(experiment, spec.name, tags=tags)
    params = {**{f"base.{key}": value for key, value in spec.base.items()},
              **{f"grid.{key}": [str(v) for v in values] for key, values in spec.grid.items()},
              "sweep_file": str(spec.path), "primary_metric": spec.primary_metric, "points": n_points,
              **{key: value for key, value in spec.data_identity().items() if value is not None}}
    tracker.log(run_id, params=params)
    return run_id, False


def _finished_points(tracker: Tracker, experiment: str, parent_id: str) -> dict[str, str]:
    """point hash -> run id of its FINISHED child run; children left RUNNING by an interruption are
    marked KILLED (their points run again)."""
    finished = {}
    for run in tracker.child_runs(experiment, parent_id):
        point_hash = run.data.tags.get(POINT_HASH_TAG)
        if run.info.status == "FINISHED" and point_hash:
            finished[point_hash] = run.info.run_id
        elif run.info.status == "RUNNING":
            tracker.finish(run.info.run_id, "KILLED")
    return finished


def _log_parent_summary(tracker: Tracker, experiment: str, parent_id: str, points: list[SweepPoint],
                        skipped_invalid: list[str], prebuild: Mapping[str, float], wall_seconds: float) -> dict[str, float]:
    """The work of the whole sweep, summed over its finished child runs (all attempts) + the prebuild."""
    children = tracker.child_runs(experiment, parent_id)
    done = [run_metrics(run) for run in children if run.info.status == "FINISHED"]
    previous = tracker.client.get_run(parent_id).data.metrics  # prebuild work of earlier attempts

    def total(name: str) -> float:
        return sum(metrics.get(name, 0.0) for metrics in done)

    def prebuilt(name: str) -> float:
        return prebuild.get(name, 0.0) + previous.get(f"sweep/prebuild_{name}", 0.0)

    work = {
        "sweep/points": float(len(points)),
        "sweep/points_invalid": float(len(skipped_invalid)),
        "sweep/points_finished": float(len({run.data.tags.get(POINT_HASH_TAG) for run in children
                                            if run.info.status == "FINISHED"})),
        "sweep/points_failed": float(sum(run.info.status == "FAILED" for run in children)),
        "sweep/distinct_chunkings": float(len({point.build_key[:3] for point in points})),
        "sweep/chunkings_built": total("index/chunkings_built") + prebuilt("chunkings_built"),
        "sweep/dense_indexes_built": sum(float(m.get("index/embedded", 0) + m.get("index/embed_cache_hits", 0) > 0)
                                         for m in done) + prebuilt("dense_indexes_built"),
        "sweep/chunks_embedded": total("index/embedded") + prebuilt("embedded"),
        "sweep/embed_cache_hits": total("index/embed_cache_hits") + prebuilt("embed_cache_hits"),
        "sweep/rerank_pairs_scored": total("rerank/pairs_scored"),
        "sweep/rerank_cache_hits": total("rerank/cache_hits"),
        "sweep/notebook_seconds": total("timing/notebook_seconds"),
        "sweep/wall_seconds": wall_seconds,
    }
    work.update({f"sweep/prebuild_{name}": prebuilt(name) for name in ("chunkings_built", "dense_indexes_built",
                                                                       "embedded", "embed_cache_hits")})
    tracker.log(parent_id, metrics=work)
    return work


# --- output -------------------------------------------------------------------------------------
def _progress_line(position: int, total: int, outcome: PointOutcome, primary_metric: str) -> str:
    head = f"[{position}/{total}] {outcome.point.label}"
    if outcome.status == "FAILED":
        return f"{head}: FAILED ({outcome.error.splitlines()[0][:200] if outcome.error else ''}) [{outcome.seconds:.1f} s]"
    value = outcome.metrics.get(primary_metric)
    shown = f"{primary_metric} {value:.3f}" if value is not None else "done"
    return f"{head}: {shown} [{outcome.seconds:.1f} s]"


def format_result(result: SweepResult) -> str:
    """The comparison table (best first) and where things are."""
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 40):
        table = result.table.to_string(index=False, float_format=lambda v: f"{v:.3f}")
    work = result.work
    lines = [
        f"Sweep {result.name!r}: best first by {result.primary_metric}",
        table,
        "",
        f"Work: {int(work['sweep/points'])} points, {int(work['sweep/distinct_chunkings'])} distinct chunkings, "
        f"{int(work['sweep/dense_indexes_built'])} dense indexes built, {int(work['sweep/chunks_embedded'])} chunks "
        f"embedded ({int(work['sweep/embed_cache_hits'])} from cache), {int(work['sweep/rerank_pairs_scored'])} "
        f"cross-encoder pairs scored ({int(work['sweep/rerank_cache_hits'])} from cache); "
        f"{work['sweep/wall_seconds']:.0f} s",
        f"MLflow: experiment {result.experiment!r}, parent run {result.parent_run_id} ({result.tracking_uri})",
        f"Executed notebooks: {result.output_dir}",
    ]
    if result.failed:
        lines.append(f"{len(result.failed)} point(s) FAILED: " + "; ".join(
            f"{outcome.point.label}: {(outcome.error or '').splitlines()[0][:150]}" for outcome in result.failed)
            + ". Run the sweep again to retry them.")
    return "\n".join(lines)


def run_sweep_command(args: argparse.Namespace, config: RagConfig, store_dir: Path) -> int:
    """``rag-pipeline sweep FILE``: 0 when every point finished, 1 when some failed. `config` (the
    CLI's merged settings) is rebuilt here so that the sweep file's base sits between ``--config``
    and the setting flags."""
    flags = {name: getattr(args, name) for name in setting_names() if getattr(args, name, None) is not None}
    spec = load_sweep(args.file, config_file=args.config, overrides=flags)
    echo = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    result = run_sweep(spec, store_dir, workers=args.workers, output_dir=args.output, echo=echo)
    if args.json:
        print(json.dumps({
            "name": result.name, "experiment": result.experiment, "parent_run_id": result.parent_run_id,
            "tracking_uri": result.tracking_uri, "primary_metric": result.primary_metric, "work": result.work,
            "points": [{"label": o.point.label, "settings": o.point.changes, "status": o.status, "run_id": o.run_id,
                        "error": o.error} for o in result.outcomes],
            "table": json.loads(result.table.to_json(orient="records")),
        }, indent=2, default=str))
    else:
        print("\n" + format_result(result))
    return 1 if result.failed else 0


# --- helpers ------------------------------------------------------------------------------------
def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _path_str(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _error_text(exc: BaseException) -> str:
    """``ename: evalue`` for a failed notebook cell, else the exception itself."""
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    return f"{ename}: {evalue}" if ename else f"{type(exc).__name__}: {exc}"

