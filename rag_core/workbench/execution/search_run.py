"""Running a search (``strategy: tpe`` or ``halving``): every trial an MLflow child run of the
sweep's parent, executed like a grid point, then the winner's held-out score and the table.

``NotebookTrials`` is the ``TrialEvaluator`` of real searches: a trial's evaluation is a sweep point
(run by the grid's executor, ``executors``: the evaluation notebook in a warm kernel, or on a Ray
actor) whose settings are the trial's and whose ``query_ids`` are its rung's queries, logged with
the param ``fidelity_queries``, the tag ``rag.search_trial`` and the metrics ``search/cost_seconds``
(its wall time) and ``search/cold_seconds`` (of which building indexes). A point already finished under the same parent
(same settings, data and queries) is reused, never run again: that is how a resumed search (Ctrl-C,
then the same command) picks up the runs the study did not hear of. Each worker thread keeps its
kernel, so trials reuse the models, indexes and retrieval candidates a grid reuses.

``run_search`` does the rest: the parent run (found again by the sweep's hash, which leaves the budget
out), the Optuna study in ``<store>/search/studies.db`` (its name and storage as tags on the parent),
the search itself (``rag_core.workbench.search.driver.SearchDriver``), and with ``holdout:`` the winner and the default
configuration evaluated on every query (child runs tagged ``rag.search_role``), so that the held-out
queries, which no trial saw, score the choice. The table, the holdout report and the measured
throughputs (``cost``) come last.
Left out: the sampler and pruners (``rag_core.workbench.search.driver``), the table
(``rag_core.workbench.reports.search_report``), terminal output.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from rag_core.config import ConfigError, RagConfig
from rag_core.evaluate.evaluator import golden_fingerprint
from rag_core.retrieve.rerank.base import rerank_unavailable
from rag_core.retrieve.retrievers import uses_embedder
from rag_core.workbench.execution.evaluation import EvalInputs, load_eval_inputs
from rag_core.workbench.execution.executors import PointExecutor, open_executor
from rag_core.workbench.execution.points import NOTEBOOK, PointJob
from rag_core.workbench.execution.sweep_runs import finished_points, log_parent_summary, parent_run
from rag_core.workbench.plans.cost import (describe_build, dense_built, dense_index_key, load_throughputs,
                                           record_runs)
from rag_core.workbench.plans.holdout_plan import default_config, plan_holdout
from rag_core.workbench.plans.results import PointOutcome, SweepResult
from rag_core.workbench.plans.sweep_file import SweepPoint, SweepSpec, digest, point_identity
from rag_core.workbench.reports.search_report import search_table
from rag_core.workbench.reports.sweep_report import EXTRA_POINT
from rag_core.workbench.search.driver import (STORAGE_TAG, STUDY_TAG, SearchDriver, SearchHistory, TrialScore, existing_trials,
                                       open_study)
from rag_core.workbench.tracking.tracker import TAG_PREFIX, Tracker, run_metrics

STUDIES = "search/studies.db"  # in the store
ROLE_TAG, TRIAL_TAG = TAG_PREFIX + "search_role", TAG_PREFIX + "search_trial"


class NotebookTrials:
    """Trials as sweep points: child runs executed by `executor` (warm kernels in threads, or Ray actors)."""

    def __init__(self, job: PointJob, inputs: EvalInputs, data_key: dict, finished: dict[str, str], metric: str,
                 executor: PointExecutor):
        self.job, self.inputs, self.data_key, self.finished, self.metric = job, inputs, data_key, finished, metric
        self.executor = executor  # started with `job`
        self.outcomes: list[PointOutcome] = []
        self.lock = threading.Lock()
        self._built: dict[tuple, bool] = {}
        self.prebuild = {"dense_indexes_built": 0.0, "chunkings_built": 0.0, "embedded": 0.0, "embed_cache_hits": 0.0}
        self.throughputs = load_throughputs(job.store_dir)

    def point_hash(self, point: SweepPoint) -> str:
        queries = {"queries": list(point.query_ids)} if point.query_ids is not None else {}
        return digest({"settings": point.config.as_params(), "data": self.data_key, **queries})

    def evaluate(self, point: SweepPoint, role: str | None = None) -> TrialScore:
        """Run `point` (or reuse its finished run); charged: this call's whole wall time."""
        started = time.perf_counter()
        point_hash = self.point_hash(point)
        tracker = self.job.tracker
        if point_hash in self.finished:
            run_id = self.finished[point_hash]
            value = run_metrics(tracker.client.get_run(run_id)).get(self.metric)
            with self.lock:
                self.outcomes.append(PointOutcome(point, "SKIPPED", run_id))
            return TrialScore(value, time.perf_counter() - started, 0.0, run_id, reused=True)
        outcome = self.executor.run(point, point_hash)
        cold = outcome.metrics.get("timing/build_seconds", 0.0)
        if outcome.run_id:
            tags = {ROLE_TAG: role} if role else {TRIAL_TAG: str(point.number - 1)}
            tracker.log(outcome.run_id, metrics={"search/cost_seconds": outcome.seconds, "search/cold_seconds": cold},
                        tags=tags)
        with self.lock:
            self.outcomes.append(outcome)
            if outcome.status == "FINISHED":
                self.finished[point_hash] = outcome.run_id
        value = outcome.metrics.get(self.metric) if outcome.status == "FINISHED" else None
        return TrialScore(value, time.perf_counter() - started, cold, outcome.run_id, False, outcome.error)

    def embedding_needed(self, config: RagConfig) -> str | None:
        if not uses_embedder(config):
            return None
        key = dense_index_key(config)  # the dense retriever's settings up to its index (the stage table)
        if key not in self._built:
            self._built[key] = dense_built(config, self.inputs.corpus, self.job.store_dir)
        return None if self._built[key] else describe_build(config)

    def cold_estimate(self, config: RagConfig) -> float | None:
        from rag_core.workbench.plans.cost import existing_chunks

        rate = self.throughputs.embed_rate(config.embed_model)
        if rate is None:
            return None
        chunks = existing_chunks(config, self.inputs.corpus, self.job.store_dir)
        if chunks is None:
            words = sum(len(doc.text.split()) for doc in self.inputs.corpus.documents)
            chunks = words / max(config.chunk_size - config.overlap, 1)
        return chunks / rate

    def unavailable(self, config: RagConfig) -> str | None:
        """Why `config`'s re-ranker cannot run, or None (the sweeps' one check: ``rerank_unavailable``)."""
        return rerank_unavailable(config, self.job.store_dir)

    def build(self, config: RagConfig) -> float:
        """Build `config`'s indexes in this process (or as a Ray task): several workers never embed into
        one store at once. Counted like a grid's prebuild (``sweep/prebuild_*`` on the parent run)."""
        started = time.perf_counter()
        done = self.executor.build(config, self.inputs.corpus, self.job.store_dir)
        for name in self.prebuild:
            self.prebuild[name] += done.get(name, 0.0)
        self._built.clear()
        return time.perf_counter() - started

    def kill_running(self) -> None:
        self.executor.kill_running()

    def shutdown(self) -> int:
        """End the kernels (or actors); how many kernels were started."""
        return self.executor.shutdown().kernels_started


def study_storage(store_dir: Path) -> str:
    path = store_dir / STUDIES
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def run_search(spec: SweepSpec, store_dir: str | Path, *, workers: int = 1, output_dir: str | Path | None = None,
               tracking_uri: str | None = None, echo: Callable[[str], None] = print, notebook: Path = NOTEBOOK,
               rerun: bool = False, executor: str = "local", ray_address: str | None = None) -> SweepResult:
    """Search `spec`'s space within its budget (resuming an earlier session of the same search unless
    `rerun`); the result holds the trials' outcomes, the table and the search's history."""
    if not spec.search.is_search:
        raise ConfigError(f"{spec.path}: strategy grid is run by run_sweep")
    started = time.perf_counter()
    store_dir = Path(store_dir).resolve()
    tracker = Tracker.at(tracking_uri)
    points_executor = open_executor(executor, ray_address=ray_address, tracking_uri=tracker.uri)  # Ray joined first
    output_dir = Path(output_dir).resolve() if output_dir else spec.path.resolve().parent / "runs" / spec.name
    output_dir.mkdir(parents=True, exist_ok=True)
    inputs = load_eval_inputs(input_dir=spec.input_dir, golden=spec.golden, beir=spec.beir, split=spec.split,
                              store_dir=store_dir, max_queries=spec.max_queries)
    experiment = spec.experiment or inputs.experiment
    plan = plan_holdout(spec, inputs.queries, [])
    query_ids = [query.id for query in inputs.queries]
    tuning = list(plan.split.tuning) if plan else query_ids
    data_key = {**spec.data_identity(), "corpus": inputs.corpus.fingerprint, "golden": golden_fingerprint(inputs.queries)}

    parent_id, resumed = parent_run(tracker, experiment, spec, inputs, spec.space.size or 0, rerun)
    storage, study_name = study_storage(store_dir), f"{spec.name}-{spec.hash}"
    if rerun:
        _delete_study(storage, study_name)
    tracker.log(parent_id, params={f"range.{name}": axis.describe() for name, axis in spec.ranges.items()} | {
        "strategy": spec.search.strategy, "search_seed": spec.search.seed} if not resumed else None,
        tags={STORAGE_TAG: storage, STUDY_TAG: study_name, TAG_PREFIX + "search_budget": spec.search.budget.describe()})
    finished = {} if rerun else finished_points(tracker, experiment, parent_id)
    job = PointJob(spec, experiment, parent_id, store_dir, output_dir, tracker, notebook)
    points_executor.start(job)
    trials = NotebookTrials(job, inputs, data_key, finished, spec.primary_metric, points_executor)
    earlier = existing_trials(storage, study_name)
    rungs = spec.search.halving.rungs(len(tuning)) if spec.search.strategy == "halving" else (len(tuning),)
    study = open_study(storage, study_name, spec.search, spec.search.halving.eta ** (len(rungs) - 1), earlier)
    driver = SearchDriver(study, spec.space, spec.base, spec.search, trials, tuning, metric=spec.primary_metric,
                          workers=workers, echo=echo, storage=storage, study_name=study_name)
    echo(f"Search {spec.name!r}: strategy {spec.search.strategy}, budget {spec.search.budget.describe()}, space of "
         f"{spec.space.size if spec.space.size is not None else 'infinitely many'} configurations; "
         f"{len(tuning)} tuning queries{' in rungs of ' + '/'.join(map(str, driver.rungs)) if len(driver.rungs) > 1 else ''}"
         f"; {workers} {points_executor.label}worker(s)"
         f"{f'; resuming ({earlier} trials, {driver.spent_points:.1f} points spent)' if earlier else ''}; "
         f"experiment {experiment!r}")
    try:
        history = driver.run()
        echo(f"Search stopped: {history.stopped}")
        final = _final_runs(spec, history, plan, trials, echo)  # in the same kernels, shut down only after
    except KeyboardInterrupt:
        trials.kill_running()
        tracker.finish(parent_id, "KILLED")
        raise
    finally:
        kernels_started = trials.shutdown()
    points = [outcome.point for outcome in trials.outcomes]
    work = log_parent_summary(tracker, experiment, parent_id, points, [], 0, trials.prebuild, kernels_started,
                              time.perf_counter() - started)
    search_metrics = history.metrics()
    tracker.log(parent_id, metrics=search_metrics, tags={TAG_PREFIX + "search_winner": _label(history)})
    work.update(search_metrics)
    table, report = search_table(tracker, experiment, parent_id, spec, history, plan.split if plan else None, final,
                                 spec.table_metrics)
    with tempfile.TemporaryDirectory(prefix="rag-search-") as temp:
        table.to_csv(Path(temp) / "comparison.csv", index=False)
        tracker.log_artifacts(parent_id, [Path(temp) / "comparison.csv", spec.path])
    record_runs(store_dir, tracker.child_runs(experiment, parent_id))
    failed = any(outcome.status == "FAILED" for outcome in trials.outcomes)
    tracker.finish(parent_id, "FAILED" if failed else "FINISHED")
    return SweepResult(spec.name, experiment, parent_id, resumed, trials.outcomes, [], None, work, table,
                       spec.primary_metric, output_dir, tracker.uri, report, history, table_metrics=spec.table_metrics)


def _final_runs(spec: SweepSpec, history: SearchHistory, plan, trials: NotebookTrials,
                echo: Callable[[str], None]) -> dict[str, object]:
    """With a holdout: the winner and the default configuration on every query (the held-out ones
    included: no trial saw them). Returns {"winner": run id, "default": run id, "default_status": ...}."""
    best = history.best
    if plan is None or best is None:
        return {}
    from rag_core.config import load_config

    winner_config = load_config(None, {**spec.base, **best.changes})
    echo(f"Winner: trial {best.number} ({_label(history)}); scoring it and the default configuration on all queries")
    score = trials.evaluate(SweepPoint(0, best.changes, winner_config), role="winner")
    final: dict[str, object] = {"winner": score.run_id if score.value is not None else None}
    default = default_config(spec)
    if default is None:
        final["default_status"] = "invalid: RagConfig defaults with the base settings are not a valid configuration"
    elif point_identity(default) == point_identity(winner_config):  # the same configuration (what applies)
        final.update(default=final["winner"], default_status="searched point")
    elif (reason := trials.unavailable(default)) is not None:
        final["default_status"] = f"unavailable: {reason}"
    else:
        changes = {key: getattr(default, key) for key in spec.axes}
        default_score = trials.evaluate(SweepPoint(0, changes, default), role="default")
        final.update(default=default_score.run_id if default_score.value is not None else None,
                     default_status=EXTRA_POINT if default_score.value is not None else f"failed: {default_score.error}")
    return final


def _label(history: SearchHistory) -> str:
    best = history.best
    return " ".join(f"{key}={value}" for key, value in best.changes.items()) if best else "none"


def _delete_study(storage: str, name: str) -> None:
    import optuna

    try:
        optuna.delete_study(study_name=name, storage=storage)
    except KeyError:
        pass
