"""Running a sweep: every point of a sweep file, each executed by papermill in a warm kernel and logged
as an MLflow child run under one parent run.

Shared work: the store (``rag_core.retrieve.index``) chunks and embeds each distinct (corpus, chunking, model)
once and the SQLite cache keeps embeddings and cross-encoder scores; each worker's kernel keeps the
models, compiled metric code and retrieval candidates, so points that differ only in ``k`` or
``rerank_depth`` retrieve nothing again. With ``workers > 1`` every distinct chunking is built first,
serially, in this process; then points run in parallel (a thread and a kernel per worker), never two
at once that would score the same cross-encoder pairs. With one worker the builds are made here too
when a chunking or dense index is not in the store yet (``cost.unbuilt``: each build then shows its
line, ``[build 2/5] chunker=... model ...``, and its embedding bar, where a kernel's would not show), and
when no point's kernel needs torch once they exist (``queries_without_torch``: an embedding backend
whose queries run on the store's export, no re-ranking): the kernel then imports no torch, and a
process that has the model loaded already (the demo, after its ingest) does not load it again.
Grid points that differ only in settings that do not apply to them are one point
(``SweepSpec.merged``): run once, said in one line each (``merged: ... -> 1 point``) and on the parent
run (``rag.points_merged``). The
work is counted on the parent run (``sweep/*`` metrics: points, chunkings, dense indexes built, chunks embedded, candidates reused,
cross-encoder pairs scored vs cache hits).

Models: when the configured re-ranker cannot run (the cross-encoder's model cannot be loaded; asked
through ``rag_core.retrieve.rerank.base.rerank_unavailable``, the check searches make too), the points
with ``rerank_depth > 0`` are not run (status UNAVAILABLE), said in one line and on the parent run
(``rag.points_unavailable``). A re-ranker that loads no model (a plugin's) is never unavailable.

Restart: the parent run is found again by ``rag.sweep_hash`` (the resolved sweep: data, base
settings and grid), and points whose child run FINISHED with the same ``rag.point_hash`` (settings +
corpus and golden-set fingerprints) are skipped; so running a finished sweep again only prints its
table (change its name, or delete its parent run, to run it afresh). A failing point becomes a
FAILED child run (``rag.error`` tag, partial notebook) and the sweep goes on; a point whose kernel
dies likewise, and its worker gets a new kernel. Interrupted (Ctrl-C), the running points and the
parent run are marked KILLED at once.
Held-out queries, the honest winner and the table's intervals: ``sweep_report``.

Executors (``executors``, shared with searches): ``local`` (the above: threads and kernels in this
process tree) or ``ray`` (the same scheduling of groups, each worker thread driving a Ray actor that
holds the kernel and makes the child runs; index builds as Ray tasks; a point whose worker dies is
retried: ``ray_executor``). A grid runs in steps: ``_plan_grid`` (points, data, hashes),
``_sort_points`` (finished before, unavailable, to run), ``_run_points`` and ``_finish_grid`` (table,
parent run).
Left out: reading the sweep file (``sweep_file``), one point's execution (``points``), the parent run's
bookkeeping in MLflow (``sweep_runs``), terminal output (``rag_core.cli``).
"""

from __future__ import annotations

import itertools
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from rag_core.config import ConfigError
from rag_core.evaluate.evaluator import golden_fingerprint
from rag_core.paths import NOTEBOOKS_DIR
from rag_core.terminal_text import fitted
from rag_core.workbench.execution.evaluation import EvalInputs, load_eval_inputs
from rag_core.workbench.execution.executors import EXECUTORS, ExecutorCounts, PointExecutor, open_executor
from rag_core.workbench.execution.executors import queries_without_torch  # noqa: F401 - its name here before executors
from rag_core.workbench.execution.kernels import WarmKernel
from rag_core.workbench.execution.points import NOTEBOOK, PointJob
from rag_core.workbench.execution.search_run import run_search
from rag_core.workbench.execution.sweep_runs import finished_points, log_parent_summary, parent_run
from rag_core.workbench.plans.cost import record_runs, unbuilt
from rag_core.workbench.plans.holdout_plan import plan_holdout
from rag_core.workbench.plans.results import PointOutcome, SweepResult
from rag_core.workbench.plans.sweep_file import SweepPoint, SweepSpec, digest
from rag_core.workbench.reports.sweep_report import sweep_table
from rag_core.workbench.tracking.tracker import TAG_PREFIX, RunStatus, Tracker, tracking_errors

UNAVAILABLE_TAG = TAG_PREFIX + "points_unavailable"
MERGED_TAG = TAG_PREFIX + "points_merged"


def run_sweep(spec: SweepSpec, store_dir: str | Path, *, workers: int = 1, output_dir: str | Path | None = None,
              tracking_uri: str | None = None, echo: Callable[[str], None] = print,
              notebook: Path = NOTEBOOK, rerun: bool = False, executor: str = "local",
              ray_address: str | None = None) -> SweepResult:
    """Run every point of `spec` not finished before (every point, under a new parent run, with
    `rerun`); return the outcomes and the comparison table. A search (strategy tpe or halving) runs
    the points Optuna picks instead (``search_run.run_search``). `executor` "ray" runs index builds and
    points on the Ray cluster at `ray_address` (``rag_core.workbench.execution.ray_executor``)."""
    if workers < 1:
        raise ConfigError(f"`workers` must be at least 1, got {workers}")
    if executor not in EXECUTORS:
        raise ConfigError(f"`executor` must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    echo = fitted(echo)  # each progress line fits the terminal (the reason a point is not run is long)
    if spec.search.is_search:  # strategy tpe or halving: Optuna picks the points
        return run_search(spec, store_dir, workers=workers, output_dir=output_dir, tracking_uri=tracking_uri, echo=echo,
                          notebook=notebook, rerun=rerun, executor=executor, ray_address=ray_address)
    options = GridOptions(workers, output_dir, tracking_uri, echo, notebook, rerun, executor, ray_address)
    started = time.perf_counter()
    first_kernel = WarmKernel() if executor == "local" and workers == 1 else None
    if first_kernel is not None:
        first_kernel.start(NOTEBOOKS_DIR)  # it starts and imports while this process sets the sweep up
    try:
        return _run_grid(spec, Path(store_dir).resolve(), options, started, first_kernel)
    finally:
        if first_kernel is not None:  # normally shut down with the others; not when the set-up failed
            first_kernel.shutdown()


@dataclass(frozen=True)
class GridOptions:
    """How ``run_sweep`` runs a grid (its keyword arguments)."""

    workers: int
    output_dir: str | Path | None
    tracking_uri: str | None
    echo: Callable[[str], None]
    notebook: Path
    rerun: bool
    executor: str
    ray_address: str | None


@dataclass
class GridPlan:
    """A grid's points and data, read before any run is made."""

    points: list[SweepPoint]
    skipped_invalid: list[str]  # one line per grid point that is not a valid configuration
    inputs: EvalInputs
    experiment: str
    holdout: Any  # holdout_plan.plan_holdout's plan, or None
    point_hashes: dict[int, str]  # point number -> its rag.point_hash
    output_dir: Path


def _run_grid(spec: SweepSpec, store_dir: Path, options: GridOptions, started: float,
              first_kernel: WarmKernel | None) -> SweepResult:
    """``run_sweep`` for a grid; `first_kernel`, already started, is the (single) worker's kernel."""
    echo = options.echo
    tracker = Tracker.at(options.tracking_uri)
    executor = open_executor(options.executor, ray_address=options.ray_address, tracking_uri=tracker.uri,
                             first_kernel=first_kernel)  # Ray joined first: an unreachable cluster leaves no run
    tracker.check()  # an unusable tracking store fails in one line, before any work
    grid = _plan_grid(spec, store_dir, options.output_dir, echo)
    with tracking_errors(tracker.uri):
        parent_id, resumed = parent_run(tracker, grid.experiment, spec, grid.inputs, len(grid.points), options.rerun)
        finished = {} if options.rerun else finished_points(tracker, grid.experiment, parent_id)
    todo, outcomes, unavailable = _sort_points(grid, finished)
    if unavailable:
        line = _unavailable_line(unavailable)
        echo(line)
        tracker.client.set_tag(parent_id, UNAVAILABLE_TAG, line[:5000])
    merged = [group.describe() for group in spec.merged()]
    if merged:
        tracker.client.set_tag(parent_id, MERGED_TAG, "\n".join(merged)[:5000])
    distinct = len({point.chunking_key for point in grid.points})
    echo(f"Sweep {spec.name!r}: {len(grid.points)} points ({distinct} distinct chunkings"
         f"{f'; {sum(len(group.merged) for group in spec.merged())} grid points merged into {len(merged)}' if merged else ''}), "
         f"{len(grid.points) - len(todo) - len(unavailable)} already finished, {len(todo)} to run with "
         f"{options.workers} {executor.label}worker(s){' (resuming run ' + parent_id + ')' if resumed else ''}; "
         f"experiment {grid.experiment!r}")
    executor.start(PointJob(spec, grid.experiment, parent_id, store_dir, grid.output_dir, tracker, options.notebook))
    prebuild: dict[str, float] = {}
    builds = list({point.build_key: point.config for point in todo}.values())
    if todo and executor.builds_first(todo, options.workers, bool(unbuilt(builds, grid.inputs.corpus, store_dir))):
        prebuild = executor.build_all(todo, grid.inputs, store_dir, echo)
    runnable = len(grid.points) - len(unavailable)  # progress counts the points that can run
    ran, counts = _run_points(todo, grid, executor, options.workers, runnable, spec.primary_metric, echo)
    outcomes += ran
    work = log_parent_summary(tracker, grid.experiment, parent_id, grid.points, grid.skipped_invalid, len(unavailable),
                              prebuild, counts.kernels_started, time.perf_counter() - started,
                              sum(len(group.merged) - 1 for group in spec.merged()))
    if options.executor == "ray":
        work["sweep/points_retried"] = float(counts.points_retried)  # attempts lost with their worker, run again
        tracker.log(parent_id, metrics={"sweep/points_retried": float(counts.points_retried)})
    return _finish_grid(spec, grid, tracker, parent_id, resumed, outcomes, unavailable, work, store_dir)


def _plan_grid(spec: SweepSpec, store_dir: Path, output_dir: str | Path | None, echo: Callable[[str], None]) -> GridPlan:
    """The grid's points (with the holdout's extra point 0), its data and each point's hash."""
    output_dir = Path(output_dir).resolve() if output_dir else spec.path.resolve().parent / "runs" / spec.name
    output_dir.mkdir(parents=True, exist_ok=True)
    points, skipped_invalid = spec.points()
    for message in skipped_invalid:
        echo(message)
    for group in spec.merged():  # points that are one configuration: run once
        echo(group.describe())
    inputs = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, beir=spec.beir, split=spec.split,
                              store_dir=store_dir, max_queries=spec.max_queries)
    plan = plan_holdout(spec, inputs.queries, points)  # holdout: the split, and the default as point 0 if not in the grid
    if plan is not None:
        points += [plan.extra] if plan.extra else []
        echo(f"Holding out {len(plan.split.held_out)} of {len(inputs.queries)} queries (seed {spec.holdout_seed}): "
             f"the winner is chosen on the other {len(plan.split.tuning)}"
             + ("; the default configuration runs as an extra point 0" if plan.extra else ""))
    data_key = {**spec.data_identity(), "corpus": inputs.corpus.fingerprint, "golden": golden_fingerprint(inputs.queries)}
    point_hashes = {point.number: digest({"settings": point.config.as_params(), "data": data_key}) for point in points}
    return GridPlan(points, skipped_invalid, inputs, spec.experiment or inputs.experiment, plan, point_hashes,
                    output_dir)


def _sort_points(grid: GridPlan, finished: dict[str, str]) -> tuple[list[SweepPoint], list[PointOutcome],
                                                                    list[tuple[SweepPoint, str]]]:
    """(the points to run, the outcomes of those finished before, (point, why) for those whose
    re-ranker cannot run)."""
    todo = [point for point in grid.points if grid.point_hashes[point.number] not in finished]
    outcomes = [PointOutcome(point, RunStatus.SKIPPED, finished[grid.point_hashes[point.number]])
                for point in grid.points if point not in todo]
    unavailable, todo = _without_unavailable_rerankers(todo)
    outcomes += [PointOutcome(point, RunStatus.UNAVAILABLE, None, error=reason) for point, reason in unavailable]
    return todo, outcomes, unavailable


def _run_points(todo: list[SweepPoint], grid: GridPlan, executor: PointExecutor, workers: int, runnable: int,
                primary_metric: str, echo: Callable[[str], None]) -> tuple[list[PointOutcome], ExecutorCounts]:
    """Run `todo` on `executor` with `workers` threads, a progress line per point; on Ctrl-C the
    running child runs and the parent are KILLED. The outcomes, and what the executor counted."""
    counter = itertools.count(runnable - len(todo) + 1)
    lock = threading.Lock()

    def run_one(point: SweepPoint) -> PointOutcome:
        outcome = executor.run(point, grid.point_hashes[point.number])
        with lock:
            echo(progress_line(next(counter), runnable, outcome, primary_metric))
        return outcome

    try:
        outcomes = list(_execute(todo, workers, run_one))
    except KeyboardInterrupt:
        executor.kill_running()
        executor.job.tracker.finish(executor.job.parent_run_id, RunStatus.KILLED)
        raise
    finally:
        counts = executor.shutdown()
    return outcomes, counts


def _finish_grid(spec: SweepSpec, grid: GridPlan, tracker: Tracker, parent_id: str, resumed: bool,
                 outcomes: list[PointOutcome], unavailable: list[tuple[SweepPoint, str]], work: dict[str, float],
                 store_dir: Path) -> SweepResult:
    """The table and its artifacts on the parent run, which ends FAILED when a point failed."""
    record_runs(store_dir, tracker.child_runs(grid.experiment, parent_id))  # this machine's throughputs, for --dry-run
    table, holdout = sweep_table(tracker, grid.experiment, parent_id, spec, grid.holdout, outcomes, spec.table_metrics)
    with tempfile.TemporaryDirectory(prefix="rag-sweep-") as temp:
        folder = Path(temp)
        table.to_csv(folder / "comparison.csv", index=False)
        tracker.log_artifacts(parent_id, [folder / "comparison.csv", spec.path])
    any_failed = any(outcome.status == RunStatus.FAILED for outcome in outcomes)
    tracker.finish(parent_id, RunStatus.FAILED if any_failed else RunStatus.FINISHED)
    outcomes.sort(key=lambda outcome: grid.points.index(outcome.point))
    return SweepResult(spec.name, grid.experiment, parent_id, resumed, outcomes, grid.skipped_invalid,
                       _unavailable_line(unavailable) if unavailable else None, work, table, spec.primary_metric,
                       grid.output_dir, tracker.uri, holdout, merged=[group.describe() for group in spec.merged()],
                       table_metrics=spec.table_metrics)


def _without_unavailable_rerankers(points: list[SweepPoint]) -> tuple[list[tuple[SweepPoint, str]], list[SweepPoint]]:
    """((point, why) for the points whose re-ranker cannot run, the points that can run): the
    configured re-ranker is asked (``rerank_unavailable``), a plugin's as much as the cross-encoder."""
    from rag_core.retrieve.rerank.base import rerank_unavailable

    unavailable = [(point, reason) for point in points if (reason := rerank_unavailable(point.config)) is not None]
    skipped = {point.number for point, _ in unavailable}
    return unavailable, [point for point in points if point.number not in skipped]


def _unavailable_line(unavailable: list[tuple[SweepPoint, str]]) -> str:
    """One line for the points not run; the advice on RAG_RERANK_MODEL when a cross-encoder is among them."""
    reasons = "; ".join(dict.fromkeys(reason for _, reason in unavailable))
    advice = (" Set RAG_RERANK_MODEL to a local cross-encoder directory to run them."
              if any(point.config.reranker == "cross_encoder" for point, _ in unavailable) else "")
    return f"not running {len(unavailable)} point(s) with rerank_depth > 0: {reasons}.{advice}"


def _execute(points: list[SweepPoint], workers: int, run_one: Callable[[SweepPoint], PointOutcome]) -> Iterator[PointOutcome]:
    """Run points in order. With several workers, groups of points that share their candidates run
    in parallel, each group on one worker (so its kernel reuses the candidates), but never two groups
    at once that would score the same cross-encoder pairs (the second finds the first's in the cache)."""
    if workers == 1:
        yield from map(run_one, points)
        return
    groups: dict[tuple, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(point.candidates_key, []).append(point)
    pending, running, busy = list(groups.values()), {}, set()

    def rerank_keys(group: list[SweepPoint]) -> set:
        return {point.rerank_key for point in group} - {None}

    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            while len(running) < workers:
                ready = next((group for group in pending if not rerank_keys(group) & busy), None)
                if ready is None:
                    break
                pending.remove(ready)
                busy |= rerank_keys(ready)
                running[pool.submit(lambda group: [run_one(point) for point in group], ready)] = ready
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                busy -= rerank_keys(running.pop(future))
                yield from future.result()


def progress_line(position: int, total: int, outcome: PointOutcome, primary_metric: str) -> str:
    head = f"[{position}/{total}] {outcome.point.label}"
    if outcome.status == RunStatus.FAILED:
        return f"{head}: FAILED ({outcome.error.splitlines()[0][:200] if outcome.error else ''}) [{outcome.seconds:.1f} s]"
    value = outcome.metrics.get(primary_metric)
    shown = f"{primary_metric} {value:.3f}" if value is not None else "done"
    return f"{head}: {shown} [{outcome.seconds:.1f} s]"
