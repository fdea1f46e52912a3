"""Running a sweep: every point of a sweep file, each executed by papermill in a warm kernel and logged
as an MLflow child run under one parent run.

Shared work: the store (``rag_core.retrieve.index``) chunks and embeds each distinct (corpus, chunking, model)
once and the SQLite cache keeps embeddings and cross-encoder scores; each worker's kernel keeps the
models, compiled metric code and retrieval candidates, so points that differ only in ``k`` or
``rerank_depth`` retrieve nothing again. With ``workers > 1`` every distinct chunking is built first,
serially, in this process; then points run in parallel (a thread and a kernel per worker), never two
at once that would score the same cross-encoder pairs. With one worker the builds are made here too
when no point's kernel needs torch once they exist (``queries_without_torch``: an embedding backend
whose queries run on the store's export, no re-ranking): the kernel then imports no torch, and a
process that has the model loaded already (the demo, after its ingest) does not load it again. The
work is counted on the parent run (``sweep/*`` metrics: points, chunkings, dense indexes built, chunks embedded, candidates reused,
cross-encoder pairs scored vs cache hits).

Models: when the configured cross-encoder cannot be loaded, the points with ``rerank_depth > 0`` are
not run (status UNAVAILABLE), said in one line and on the parent run (``rag.points_unavailable``).

Restart: the parent run is found again by ``rag.sweep_hash`` (the resolved sweep: data, base
settings and grid), and points whose child run FINISHED with the same ``rag.point_hash`` (settings +
corpus and golden-set fingerprints) are skipped; so running a finished sweep again only prints its
table (change its name, or delete its parent run, to run it afresh). A failing point becomes a
FAILED child run (``rag.error`` tag, partial notebook) and the sweep goes on; a point whose kernel
dies likewise, and its worker gets a new kernel. Interrupted (Ctrl-C), the running points and the
parent run are marked KILLED at once.
Held-out queries, the honest winner and the table's intervals: ``sweep_report``.

Executors: ``local`` (the above: threads and kernels in this process tree) or ``ray`` (the same
scheduling of groups, each worker thread driving a Ray actor that holds the kernel and makes the child
runs; index builds as Ray tasks; a point whose worker dies is retried: ``ray_executor``).
Left out: reading the sweep file (``sweep_file``), one point's execution (``points``), the parent run's
bookkeeping in MLflow (``sweep_runs``), terminal output (``rag_core.cli``).
"""

from __future__ import annotations

import itertools
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Iterator

from rag_core.config import ConfigError
from rag_core.evaluate.evaluator import golden_fingerprint
from rag_core.paths import NOTEBOOKS_DIR
from rag_core.workbench.cost import record_runs
from rag_core.workbench.evaluation import EvalInputs, load_eval_inputs
from rag_core.workbench.tracking import TAG_PREFIX, RunStatus, Tracker, tracking_errors
from rag_core.workbench.kernels import WarmKernel
from rag_core.workbench.points import NOTEBOOK, PointJob, PointOutcome, run_point
from rag_core.workbench.search_run import run_search
from rag_core.workbench.sweep_file import SweepPoint, SweepSpec, digest
from rag_core.workbench.sweep_report import plan_holdout, sweep_table
from rag_core.workbench.sweep_result import SweepResult
from rag_core.workbench.sweep_runs import finished_points, log_parent_summary, parent_run

TABLE_METRICS = ("page/recall@5", "context/recall", "doc/mrr", "latency/total_p50_ms")  # next to the primary metric
UNAVAILABLE_TAG = TAG_PREFIX + "points_unavailable"
EXECUTORS = ("local", "ray")


def run_sweep(spec: SweepSpec, store_dir: str | Path, *, workers: int = 1, output_dir: str | Path | None = None,
              tracking_uri: str | None = None, echo: Callable[[str], None] = print,
              notebook: Path = NOTEBOOK, rerun: bool = False, executor: str = "local",
              ray_address: str | None = None) -> SweepResult:
    """Run every point of `spec` not finished before (every point, under a new parent run, with
    `rerun`); return the outcomes and the comparison table. A search (strategy tpe or halving) runs
    the points Optuna picks instead (``search_run.run_search``). `executor` "ray" runs index builds and
    points on the Ray cluster at `ray_address` (``rag_core.workbench.ray_executor``)."""
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if spec.search.is_search:  # strategy tpe or halving: Optuna picks the points
        return run_search(spec, store_dir, workers=workers, output_dir=output_dir, tracking_uri=tracking_uri, echo=echo,
                          notebook=notebook, rerun=rerun, executor=executor, ray_address=ray_address)
    started = time.perf_counter()
    first_kernel = WarmKernel() if executor == "local" and workers == 1 else None
    if first_kernel is not None:
        first_kernel.start(NOTEBOOKS_DIR)  # it starts and imports while this process sets the sweep up
    try:
        return _run_grid(spec, Path(store_dir).resolve(), workers, output_dir, tracking_uri, echo, notebook, rerun,
                         executor, ray_address, started, first_kernel)
    finally:
        if first_kernel is not None:  # normally shut down with the others; not when the set-up failed
            first_kernel.shutdown()


def _run_grid(spec: SweepSpec, store_dir: Path, workers: int, output_dir: str | Path | None, tracking_uri: str | None,
              echo: Callable[[str], None], notebook: Path, rerun: bool, executor: str, ray_address: str | None,
              started: float, first_kernel: WarmKernel | None) -> SweepResult:
    """``run_sweep`` for a grid; `first_kernel`, already started, is the (single) worker's kernel."""
    tracker = Tracker.at(tracking_uri)
    if executor == "ray":  # joined first: an unreachable cluster leaves no parent run behind
        from rag_core.workbench import ray_executor

        ray_executor.connect(ray_address, tracker.uri)
    tracker.check()  # an unusable tracking store fails in one line, before any work
    output_dir = Path(output_dir).resolve() if output_dir else spec.path.resolve().parent / "runs" / spec.name
    output_dir.mkdir(parents=True, exist_ok=True)
    points, skipped_invalid = spec.points()
    for message in skipped_invalid:
        echo(message)
    inputs = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, beir=spec.beir, split=spec.split,
                              store_dir=store_dir, max_queries=spec.max_queries)
    experiment = spec.experiment or inputs.experiment
    plan = plan_holdout(spec, inputs.queries, points)  # holdout: the split, and the default as point 0 if not in the grid
    if plan is not None:
        points += [plan.extra] if plan.extra else []
        echo(f"Holding out {len(plan.split.held_out)} of {len(inputs.queries)} queries (seed {spec.holdout_seed}): "
             f"the winner is chosen on the other {len(plan.split.tuning)}"
             + ("; the default configuration runs as an extra point 0" if plan.extra else ""))
    data_key = {**spec.data_identity(), "corpus": inputs.corpus.fingerprint, "golden": golden_fingerprint(inputs.queries)}
    point_hashes = {point.number: digest({"settings": point.config.as_params(), "data": data_key}) for point in points}

    with tracking_errors(tracker.uri):
        parent_id, resumed = parent_run(tracker, experiment, spec, inputs, len(points), rerun)
        finished = {} if rerun else finished_points(tracker, experiment, parent_id)
    todo = [point for point in points if point_hashes[point.number] not in finished]
    outcomes = [PointOutcome(point, RunStatus.SKIPPED, finished[point_hashes[point.number]]) for point in points if point not in todo]
    unavailable, todo = _without_unavailable_models(todo)
    if unavailable:
        outcomes += [PointOutcome(point, RunStatus.UNAVAILABLE, None, error=reason) for point, reason in unavailable]
        line = _unavailable_line(unavailable)
        echo(line)
        tracker.client.set_tag(parent_id, UNAVAILABLE_TAG, line[:5000])
    distinct = len({point.chunking_key for point in points})
    echo(f"Sweep {spec.name!r}: {len(points)} points ({distinct} distinct chunkings), "
         f"{len(points) - len(todo) - len(unavailable)} already finished, {len(todo)} to run with {workers} "
         f"{'Ray ' if executor == 'ray' else ''}worker(s){' (resuming run ' + parent_id + ')' if resumed else ''}; "
         f"experiment {experiment!r}")

    job = PointJob(spec, experiment, parent_id, store_dir, output_dir, tracker, notebook)
    remote = ray_executor.RayWorkers(job) if executor == "ray" else None
    prebuild: dict[str, float] = {}
    if todo and remote is not None:
        prebuild = ray_executor.prebuild(todo, inputs, store_dir, echo)
    elif todo and (workers > 1 or queries_without_torch(todo)):
        prebuild = _prebuild(todo, inputs, store_dir, echo)

    runnable = len(points) - len(unavailable)  # progress counts the points that can run
    counter = itertools.count(runnable - len(todo) + 1)
    lock = threading.Lock()
    running: set[str] = set()  # child run ids whose notebook is executing
    all_kernels: list[WarmKernel] = []
    local = threading.local()  # each worker thread keeps its own kernel

    def run_one(point: SweepPoint) -> PointOutcome:
        if remote is not None:  # each worker thread drives its own Ray actor
            if not hasattr(local, "actor"):
                local.actor = remote.new_actor()
            outcome = remote.run(local.actor, point, point_hashes[point.number])
        else:
            if not hasattr(local, "kernel"):
                local.kernel = first_kernel or WarmKernel()
                with lock:
                    all_kernels.append(local.kernel)
            outcome = run_point(point, point_hashes[point.number], job, local.kernel, running)
        with lock:
            echo(progress_line(next(counter), runnable, outcome, spec.primary_metric))
        return outcome

    kernels_started, retried = 0, 0
    try:
        outcomes += list(_execute(todo, workers, run_one))
    except KeyboardInterrupt:
        for run_id in list(running):
            tracker.finish(run_id, RunStatus.KILLED)
        if remote is not None:
            remote.kill_running()
        tracker.finish(parent_id, RunStatus.KILLED)
        raise
    finally:
        for kernel in all_kernels:
            kernel.shutdown()
        kernels_started = sum(kernel.started for kernel in all_kernels)
        if remote is not None and remote.actors:
            counts = remote.shutdown()
            retried = counts.superseded
            kernels_started = counts.kernels_started + retried  # each dead attempt had a kernel of its own
    work = log_parent_summary(tracker, experiment, parent_id, points, skipped_invalid, len(unavailable), prebuild,
                              kernels_started, time.perf_counter() - started)
    if remote is not None:
        work["sweep/points_retried"] = float(retried)  # attempts lost with their worker, run again
        tracker.log(parent_id, metrics={"sweep/points_retried": float(retried)})
    record_runs(store_dir, tracker.child_runs(experiment, parent_id))  # this machine's throughputs, for --dry-run
    table, holdout = sweep_table(tracker, experiment, parent_id, spec, plan, outcomes, TABLE_METRICS)
    with tempfile.TemporaryDirectory(prefix="rag-sweep-") as temp:
        folder = Path(temp)
        table.to_csv(folder / "comparison.csv", index=False)
        tracker.log_artifacts(parent_id, [folder / "comparison.csv", spec.path])
    any_failed = any(outcome.status == RunStatus.FAILED for outcome in outcomes)
    tracker.finish(parent_id, RunStatus.FAILED if any_failed else RunStatus.FINISHED)
    outcomes.sort(key=lambda outcome: points.index(outcome.point))
    return SweepResult(spec.name, experiment, parent_id, resumed, outcomes, skipped_invalid,
                       _unavailable_line(unavailable) if unavailable else None, work, table, spec.primary_metric,
                       output_dir, tracker.uri, holdout)


def _without_unavailable_models(points: list[SweepPoint]) -> tuple[list[tuple[SweepPoint, str]], list[SweepPoint]]:
    """((point, why) for the points whose cross-encoder cannot be loaded, the points that can run)."""
    from rag_core.retrieve.rerank import Reranker

    models = {point.config.rerank_model for point in points if point.config.rerank_depth > 0}
    errors = {name: error for name in models if (error := Reranker(name).unavailable()) is not None}
    unavailable = [(point, f"cross-encoder {point.config.rerank_model!r} cannot be loaded "
                           f"({errors[point.config.rerank_model].reason})")
                   for point in points if point.config.rerank_depth > 0 and point.config.rerank_model in errors]
    skipped = {point.number for point, _ in unavailable}
    return unavailable, [point for point in points if point.number not in skipped]


def _unavailable_line(unavailable: list[tuple[SweepPoint, str]]) -> str:
    reasons = "; ".join(dict.fromkeys(reason for _, reason in unavailable))
    return (f"not running {len(unavailable)} point(s) with rerank_depth > 0: {reasons}. Set RAG_RERANK_MODEL to a "
            f"local cross-encoder directory to run them.")


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


def queries_without_torch(points: list[SweepPoint]) -> bool:
    """Whether every point, once its indexes are built, runs without torch: no re-ranking, and an
    embedding backend whose queries run on the store's ONNX export (bf16, onnx, onnx-int8)."""
    return all(point.config.rerank_depth == 0 and point.config.embed_backend != "torch" for point in points)


def _prebuild(points: list[SweepPoint], inputs: EvalInputs, store_dir: Path, echo: Callable[[str], None]) -> dict[str, float]:
    """Chunk, embed and index every distinct build of `points`, one after another, before the points
    run: two parallel points then never embed the same chunking, and a kernel need not load the model."""
    from rag_core.retrieve.pipeline import Pipeline

    totals = {"dense_indexes_built": 0.0, "chunkings_built": 0.0, "embedded": 0.0, "embed_cache_hits": 0.0, "seconds": 0.0}
    builds = {point.build_key: point.config for point in points}
    echo(f"Building indexes for {len(builds)} distinct chunking/model combinations first ...")
    for config in builds.values():
        started = time.perf_counter()
        try:
            stats = Pipeline(config, inputs.corpus, store_dir).build()
        except Exception as exc:  # noqa: BLE001 - its points build it again in their kernels, and fail there, recorded
            echo(f"could not build an index first ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                 "its points will try in their kernels")
            continue
        totals["dense_indexes_built"] += float(stats.embedded + stats.embed_cache_hits > 0)
        totals["chunkings_built"] += stats.chunkings_built
        totals["embedded"] += stats.embedded
        totals["embed_cache_hits"] += stats.embed_cache_hits
        totals["seconds"] += time.perf_counter() - started
    return totals


def progress_line(position: int, total: int, outcome: PointOutcome, primary_metric: str) -> str:
    head = f"[{position}/{total}] {outcome.point.label}"
    if outcome.status == RunStatus.FAILED:
        return f"{head}: FAILED ({outcome.error.splitlines()[0][:200] if outcome.error else ''}) [{outcome.seconds:.1f} s]"
    value = outcome.metrics.get(primary_metric)
    shown = f"{primary_metric} {value:.3f}" if value is not None else "done"
    return f"{head}: {shown} [{outcome.seconds:.1f} s]"
