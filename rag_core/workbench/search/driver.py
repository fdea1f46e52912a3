"""Searches: Optuna chooses the configurations a sweep evaluates, within a budget.

``strategy: tpe`` samples each trial with Optuna's TPE sampler (Bergstra et al., "Algorithms for
Hyper-Parameter Optimization", NeurIPS 2011) and evaluates it on every tuning query.
``strategy: halving`` samples the same way, but evaluates a trial on a random subset of the tuning
queries first and promotes only the best to more queries (successive halving, Jamieson & Talwalkar,
AISTATS 2016; its asynchronous form ASHA, Li et al., MLSys 2020, is Optuna's
``SuccessiveHalvingPruner``; ``halving: {pruner: hyperband}`` uses ``HyperbandPruner``, Li et al.,
JMLR 2018). Rung k uses the first n_k queries of one seeded order of the tuning queries (nested
subsets, the same for every trial), n_k = n / eta^(K-k); a trial reports its mean primary metric at
step eta^k and the pruner decides whether it goes on.

The driver asks and tells (Optuna's ask-and-tell interface) from one thread; trials run on worker
threads (each a warm kernel, or a Ray actor) through a ``TrialEvaluator``, so ``--workers N`` and
``--executor ray`` work as for grids. A configuration that is invalid, needs a cross-encoder that
cannot be loaded, or would embed a chunking beyond ``max_new_chunkings`` (or one whose embedding does
not fit the remaining seconds) is told to Optuna as infeasible (``Trial.set_constraint``) without
running, so TPE learns to avoid it. A configuration evaluated before (in this search or an earlier
session of it) is not run again: its values are told again at no cost. "The same configuration" is one of
the same identity (``sweep_file.point_identity``): a trial that differs from an earlier one only in settings
its components do not read (``overlap`` under a chunker that ignores it) is a repeat. Each trial's cost is recorded
(seconds, cold seconds spent building indexes, optimizer seconds, budget points) in its Optuna user
attributes, which is what a resumed search reads back to know what was spent and embedded.

The study lives in an Optuna storage (``open_study``: an SQLite file in the store by default; the live
copy in memory, each finished trial saved at once) and is named after the sweep's hash, which leaves
the budget out: running the file again resumes the study, and a larger budget continues it.
Left out: MLflow, kernels and the final report (``search_run``); several objectives.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from rag_core.config import ConfigError, RagConfig, load_config
from rag_core.workbench.plans.space import SearchSettings, SearchSpace
from rag_core.workbench.plans.sweep_file import SweepPoint, digest, point_identity

RECORD_ATTR = "rag"  # the user attribute holding a trial's record (JSON)
STORAGE_TAG, STUDY_TAG = "rag.search_storage", "rag.search_study"  # on the sweep's parent run: where the study is
FEASIBLE = "feasible"  # the constraint set on infeasible trials
MAX_IDLE_TRIALS = 50  # stop after this many trials in a row evaluated nothing new
COMPLETE, PRUNED, REPEAT, FAILED = "complete", "pruned", "repeat", "failed"
INFEASIBLE = ("invalid", "unavailable", "over_limit")  # told as infeasible, never run


@dataclass(frozen=True)
class TrialScore:
    """One evaluation of one configuration on some queries."""
    value: float | None  # the primary metric's mean over the queries; None when the evaluation failed
    seconds: float  # charged: the evaluation's wall time, cold work included (0 when reused)
    cold_seconds: float = 0.0  # of which building indexes (chunking, embedding, BM25)
    run_id: str | None = None
    reused: bool = False  # a finished run of the same point and queries was found: nothing ran
    error: str | None = None


class TrialEvaluator(Protocol):
    """Runs trials for the driver: MLflow child runs in warm kernels (``search_run``) or a table of
    measured results (``benchmarks/search.py``)."""

    def evaluate(self, point: SweepPoint) -> TrialScore:
        """Evaluate `point` on its ``query_ids``; called from worker threads."""

    def embedding_needed(self, config: RagConfig) -> str | None:
        """A label of the dense index `config` would have to embed (not in the store yet), else None."""

    def cold_estimate(self, config: RagConfig) -> float | None:
        """Seconds that embedding would take, when known."""

    def unavailable(self, config: RagConfig) -> str | None:
        """Why `config` cannot run here (its cross-encoder cannot be loaded), else None."""

    def build(self, config: RagConfig) -> float:
        """Build `config`'s indexes now, in the driver (before parallel trials); its seconds."""


@dataclass
class TrialRecord:
    """What a trial did; kept in the trial's user attributes."""
    number: int
    changes: dict[str, Any]
    status: str = ""  # complete | pruned | repeat | failed | invalid | unavailable | over_limit
    reason: str = ""
    evaluations: list[list] = field(default_factory=list)  # [queries, value, run id, reused] per rung reached
    seconds: float = 0.0  # evaluations and builds (wall time, cold work included)
    cold_seconds: float = 0.0
    optimizer_seconds: float = 0.0
    points: float = 0.0  # budget points: the fraction of a full evaluation that actually ran
    new_chunking: str | None = None  # the dense index this trial embedded first
    config_key: str = ""

    @property
    def charged(self) -> float:
        """What the trial cost: its evaluations, builds and the optimizer's own time."""
        return self.seconds + self.optimizer_seconds

    @property
    def value(self) -> float | None:
        """The value at the highest fidelity reached."""
        return self.evaluations[-1][1] if self.evaluations else None

    @property
    def queries(self) -> int:
        return self.evaluations[-1][0] if self.evaluations else 0

    @property
    def run_ids(self) -> list[str]:
        return [evaluation[2] for evaluation in self.evaluations if evaluation[2]]


@dataclass
class SearchHistory:
    strategy: str
    study_name: str
    storage: str
    budget: dict[str, float]
    rungs: tuple[int, ...]  # queries per rung (tpe: one rung, every tuning query)
    trials: list[TrialRecord]
    stopped: str  # why the search stopped
    spent_points: float = 0.0
    spent_seconds: float = 0.0  # charged, every session included
    wall_seconds: float = 0.0  # this session's wall time, from the first ask to the last tell

    @property
    def best(self) -> TrialRecord | None:
        """The best trial at the highest fidelity any trial reached (the first of equals)."""
        scored = [t for t in self.trials if t.value is not None and t.status in (COMPLETE, PRUNED, REPEAT)]
        if not scored:
            return None
        top = max(t.queries for t in scored)
        return max((t for t in scored if t.queries == top), key=lambda t: (t.value, -t.number))

    def best_so_far(self) -> list[tuple[float, float]]:
        """(cumulative charged seconds, best full-fidelity value so far) after each trial, in trial order."""
        steps, spent, best = [], 0.0, -math.inf
        for trial in sorted(self.trials, key=lambda t: t.number):
            spent += trial.charged
            if trial.value is not None and trial.queries == self.rungs[-1] and trial.status != FAILED:
                best = max(best, trial.value)
            steps.append((spent, best if best > -math.inf else math.nan))
        return steps

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for trial in self.trials:
            counts[trial.status] = counts.get(trial.status, 0) + 1
        return counts

    def metrics(self) -> dict[str, float]:
        """For the sweep's parent run (``search/*``)."""
        trials = len(self.trials)
        counts = self.counts()
        values = {"search/trials": float(trials), "search/points_spent": self.spent_points,
                  "search/charged_seconds": self.spent_seconds,
                  "search/evaluations": float(sum(len([e for e in t.evaluations if not e[3]]) for t in self.trials)),
                  "search/new_chunkings": float(sum(t.new_chunking is not None for t in self.trials)),
                  "search/optimizer_seconds_per_trial": (sum(t.optimizer_seconds for t in self.trials) / trials
                                                         if trials else 0.0)}
        values.update({f"search/trials_{status}": float(count) for status, count in counts.items()})
        if self.best is not None:
            values["search/best_value"] = float(self.best.value)
        return values


class SavedStudy:
    """The study a search asks and tells: held in memory (sampling and the pruner's rungs read it at every
    trial, in microseconds), and each finished trial copied into the study `name` at `storage` (one
    transaction per trial), which is what a resumed search, ``read_search`` and ``optuna-dashboard``
    load. A trial an interruption left running is never saved: a resumed search samples afresh.

    Talking to an SQLite study directly costs Optuna about ten commits per trial (each parameter is one);
    on a loaded 2-core machine that alone passed 0.2 s per trial."""

    def __init__(self, storage: str | None, name: str, settings: SearchSettings, top_step: int, resumed_trials: int = 0):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=settings.seed + resumed_trials, multivariate=True)
        pruner: Any = optuna.pruners.NopPruner()
        if settings.strategy == "halving":
            eta = settings.halving.eta
            pruner = (optuna.pruners.HyperbandPruner(min_resource=1, max_resource=top_step, reduction_factor=eta)
                      if settings.halving.pruner == "hyperband" else
                      optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=eta, min_early_stopping_rate=0))
        self.study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
        self.saved = None
        self._saved: set[int] = set()  # numbers (in memory) of the trials saved
        if storage:
            self.saved = optuna.create_study(storage=rdb_storage(storage), study_name=name, direction="maximize",
                                             load_if_exists=True)
            for trial in self.saved.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
                self.saved.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
            self.study.add_trials(self.saved.get_trials(deepcopy=False))
            self._saved = {trial.number for trial in self.study.get_trials(deepcopy=False)}

    def save(self, trial: Any) -> None:
        """Copy the finished `trial` (a FrozenTrial) into the storage, once."""
        if self.saved is not None and trial.number not in self._saved:
            self._saved.add(trial.number)
            self.saved.add_trial(trial)


def open_study(storage: str | None, name: str, settings: SearchSettings, top_step: int,
               resumed_trials: int = 0) -> SavedStudy:
    """The study `name` in `storage` (created, or loaded to resume; None: in memory only), with the
    strategy's sampler and pruner (`top_step`: the last rung's step, for Hyperband). The sampler's seed
    moves on with the trials already run, so a resumed search does not draw its first random trials again."""
    return SavedStudy(storage, name, settings, top_step, resumed_trials)


def rdb_storage(url: str):
    """Optuna's RDB storage at `url`; an SQLite file in write-ahead-log mode without a sync per commit
    (a trial's half-dozen commits otherwise cost about 50 ms on a busy disk; a crash can lose only the
    last trials, which a resumed search runs again)."""
    import optuna

    storage = optuna.storages.RDBStorage(url)
    if url.startswith("sqlite:"):
        from sqlalchemy import event

        def pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        event.listen(storage.engine, "connect", pragmas)
        storage.engine.dispose()  # connections opened before the listener get the pragmas too
    return storage


def existing_trials(storage: str, name: str) -> int:
    """How many trials the study `name` holds already (0 when it does not exist)."""
    import optuna

    try:
        return len(optuna.load_study(study_name=name, storage=storage).trials)
    except KeyError:
        return 0


def query_order(tuning_ids: Sequence[str], seed: int) -> list[str]:
    """The tuning queries in one seeded order; rung k evaluates its first n_k."""
    return sorted(tuning_ids, key=lambda query_id: hashlib.sha256(f"{seed}:{query_id}".encode()).hexdigest())


class SearchDriver:
    """Asks Optuna for trials, has `evaluator` run them on `workers` threads, tells Optuna the results."""

    def __init__(self, study: SavedStudy, space: SearchSpace, base: Mapping[str, Any], settings: SearchSettings,
                 evaluator: TrialEvaluator, tuning_ids: Sequence[str], *, metric: str, workers: int = 1,
                 echo: Callable[[str], None] = print, storage: str = "", study_name: str = ""):
        if not tuning_ids:
            raise ConfigError("a search needs at least one query to tune on")
        self.saved, self.study = study, study.study  # SavedStudy, and the Optuna study it holds in memory
        self.space, self.base, self.settings = space, dict(base), settings
        self.evaluator, self.metric, self.workers, self.echo = evaluator, metric, workers, echo
        self.storage, self.study_name = storage, study_name
        order = query_order(tuning_ids, settings.seed)
        self.rungs = settings.halving.rungs(len(order)) if settings.strategy == "halving" else (len(order),)
        self.subsets = [tuple(query_id for query_id in tuning_ids if query_id in set(order[:n])) for n in self.rungs]
        self.lock = threading.RLock()  # every call into the study
        self.records: dict[int, TrialRecord] = {}
        self.results: dict[tuple[str, int], list] = {}  # (config key, queries) -> [queries, value, run id, reused]
        self.embedded: set[str] = set()  # dense indexes this search embedded (all sessions)
        self.running: dict[Future, tuple[Any, TrialRecord, float]] = {}  # future -> (trial, record, started)
        self.current: tuple[Any, TrialRecord] | None = None  # the trial running in this thread (one worker)
        self.idle = 0  # trials in a row that evaluated nothing new
        self.spent_points = self.spent_seconds = 0.0
        self._resume()

    # --- resuming -------------------------------------------------------------------------------
    def _resume(self) -> None:
        """Read back what earlier sessions did (their finished trials, loaded by ``SavedStudy``)."""
        for trial in self.study.get_trials(deepcopy=False):
            if RECORD_ATTR not in trial.user_attrs:
                continue
            record = TrialRecord(**json.loads(trial.user_attrs[RECORD_ATTR]))
            self._account(record)

    def _account(self, record: TrialRecord) -> None:
        self.records[record.number] = record
        self.spent_points += record.points
        self.spent_seconds += record.charged
        if record.new_chunking:
            self.embedded.add(record.new_chunking)
        for evaluation in record.evaluations:
            if evaluation[1] is not None:
                self.results.setdefault((record.config_key, evaluation[0]), evaluation)

    # --- the loop -------------------------------------------------------------------------------
    def run(self) -> SearchHistory:
        budget = self.settings.budget
        stopped = ""
        started = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="search")
        try:
            while True:
                while not stopped and len(self.running) < self.workers:
                    stopped = self._why_stop()
                    if stopped:
                        break
                    self._start_trial(pool)
                if not self.running:
                    break
                done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
                for future in done:
                    self._finish(future)
        except BaseException:
            self._fail_running("interrupted")
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return SearchHistory(self.settings.strategy, self.study_name, self.storage, budget.as_dict() if budget else {},
                             self.rungs, sorted(self.records.values(), key=lambda r: r.number), stopped or "done",
                             self.spent_points, self.spent_seconds, time.perf_counter() - started)

    def _why_stop(self) -> str:
        budget = self.settings.budget
        first_rung = self.rungs[0] / self.rungs[-1]  # what starting a trial costs at least
        reserved_points = first_rung * (len(self.running) + 1)
        running_seconds = sum(time.perf_counter() - started for _, _, started in self.running.values())
        if budget is not None and not budget.allows(self.spent_points + reserved_points,
                                                    self.spent_seconds + running_seconds):
            return f"the budget ({budget.describe()}) is spent"
        if self.idle >= MAX_IDLE_TRIALS:
            return (f"the sampler proposed {self.idle} trials in a row that evaluated nothing new (evaluated before, "
                    f"pruned again, invalid or over a limit): "
                    f"the space is exhausted or the search has converged")
        return ""

    def _start_trial(self, pool: ThreadPoolExecutor) -> bool:
        """Ask for a trial and start it; False when it evaluated nothing new (told at once)."""
        started = time.perf_counter()
        with self.lock:
            trial = self.study.ask()
            changes = self.space.suggest(trial)
        record = TrialRecord(trial.number, changes)
        try:
            config = load_config(None, {**self.base, **changes})
        except ConfigError as exc:
            return self._tell_infeasible(trial, record, "invalid", str(exc), started)
        record.config_key = digest(point_identity(config))  # settings that apply: a twin's repeat is told again
        reason = self.evaluator.unavailable(config)
        if reason:
            return self._tell_infeasible(trial, record, "unavailable", reason, started)
        twin = next((future for future, (_, other, _) in self.running.items() if other.config_key == record.config_key), None)
        if twin is not None:  # the same configuration is being evaluated: wait for it, then tell its values again
            twin.result()
            self._finish(twin)
        top = (record.config_key, self.rungs[-1])
        if top in self.results:  # evaluated before on every tuning query: told again, nothing runs
            record.evaluations = [[*self.results[top][:3], True]]
            record.optimizer_seconds = time.perf_counter() - started
            self._tell(trial, record, REPEAT, self.results[top][1])
            return False
        label = self.evaluator.embedding_needed(config)
        if label is not None and label not in self.embedded:
            why = self._over_limit(config, label)
            if why:
                return self._tell_infeasible(trial, record, "over_limit", why, started)
            record.new_chunking = label
            self.embedded.add(label)
            if self.workers > 1:  # no two kernels embed into one store at once: build it here, first
                for future in list(self.running):
                    future.result()
                    self._finish(future)
                record.cold_seconds = self.evaluator.build(config)
                record.seconds += record.cold_seconds
                self.spent_seconds += record.cold_seconds
        record.optimizer_seconds = time.perf_counter() - started - record.cold_seconds
        if self.workers == 1:  # in this thread, as a grid runs its points: Ctrl-C interrupts the trial itself
            self.current = (trial, record)
            status = self._run_trial_safely(trial, record, config)
            self.current = None
            self._tell(trial, record, status, record.value if status == COMPLETE else None)
            return True
        future = pool.submit(self._run_trial_safely, trial, record, config)
        self.running[future] = (trial, record, time.perf_counter())
        return True

    def _over_limit(self, config: RagConfig, label: str) -> str:
        limit, budget = self.settings.max_new_chunkings, self.settings.budget
        if limit is not None and len(self.embedded) >= limit:
            return f"it would embed {label}, beyond max_new_chunkings {limit}"
        estimate = self.evaluator.cold_estimate(config)
        if budget is not None and budget.seconds is not None and estimate is not None and \
                self.spent_seconds + estimate > budget.seconds:
            return (f"embedding {label} (about {estimate:.0f} s) does not fit the {budget.seconds - self.spent_seconds:.0f} s "
                    f"left of the budget")
        return ""

    def _run_trial_safely(self, trial: Any, record: TrialRecord, config: RagConfig) -> str:
        try:
            return self._run_trial(trial, record, config)
        except Exception as exc:  # noqa: BLE001 - a failing evaluator fails its trial, not the search
            record.reason = f"{type(exc).__name__}: {exc}"
            return FAILED

    def _run_trial(self, trial: Any, record: TrialRecord, config: RagConfig) -> str:
        """Rung after rung (one for tpe): evaluate or reuse, report, ask the pruner. A worker thread."""
        for rung, (queries, subset) in enumerate(zip(self.rungs, self.subsets)):
            key = (record.config_key, queries)
            if key in self.results:
                record.evaluations.append([*self.results[key][:3], True])
            else:
                if rung > 0 and not self._budget_allows(queries / self.rungs[-1]):
                    record.reason = "stopped before the next rung: the budget is spent"
                    return PRUNED
                point = SweepPoint(record.number + 1, record.changes, config, subset)
                score = self.evaluator.evaluate(point)
                with self.lock:
                    record.seconds += score.seconds
                    record.cold_seconds += score.cold_seconds
                    fraction = 0.0 if score.reused else queries / self.rungs[-1]
                    record.points += fraction
                    self.spent_points += fraction
                    self.spent_seconds += score.seconds
                if score.value is None:
                    record.reason = score.error or "the evaluation failed"
                    if score.run_id:
                        record.evaluations.append([queries, None, score.run_id, score.reused])
                    return FAILED
                evaluation = [queries, score.value, score.run_id, score.reused]
                record.evaluations.append(evaluation)
                self.results.setdefault(key, evaluation)
            if rung < len(self.rungs) - 1:
                started = time.perf_counter()
                with self.lock:
                    trial.report(record.value, step=self.settings.halving.eta ** rung)
                    prune = trial.should_prune()
                record.optimizer_seconds += time.perf_counter() - started
                if prune:
                    return PRUNED
        return COMPLETE

    def _budget_allows(self, points: float) -> bool:
        budget = self.settings.budget
        with self.lock:
            return budget is None or budget.allows(self.spent_points + points, self.spent_seconds)

    def _finish(self, future: Future) -> None:
        trial, record, _ = self.running.pop(future)
        status = future.result()
        self._tell(trial, record, status, record.value if status == COMPLETE else None)

    # --- telling Optuna -------------------------------------------------------------------------
    def _tell_infeasible(self, trial: Any, record: TrialRecord, status: str, reason: str, started: float) -> bool:
        record.reason = reason
        record.optimizer_seconds = time.perf_counter() - started
        with self.lock:
            trial.set_constraint(FEASIBLE, 1.0)
        self._tell(trial, record, status, None)
        return False

    def _tell(self, trial: Any, record: TrialRecord, status: str, value: float | None) -> None:
        from optuna.trial import TrialState

        started = time.perf_counter()
        record.status = status
        state = {COMPLETE: TrialState.COMPLETE, REPEAT: TrialState.COMPLETE, FAILED: TrialState.FAIL}.get(status, TrialState.PRUNED)
        with self.lock:
            trial.set_user_attr(RECORD_ATTR, json.dumps(asdict(record), default=str))
            self.saved.save(self.study.tell(trial, value if state == TrialState.COMPLETE else None, state=state))
            record.optimizer_seconds += time.perf_counter() - started  # the telling itself: not in the stored record
            self.records[record.number] = record
            self.spent_seconds += record.optimizer_seconds
            self.idle = 0 if any(not evaluation[3] for evaluation in record.evaluations) else self.idle + 1
        self.echo(self._line(record))

    def _fail_running(self, reason: str) -> None:
        from optuna.trial import TrialState

        with self.lock:
            running = [(trial, record) for trial, record, _ in self.running.values()] + ([self.current] if self.current else [])
            for trial, record in running:
                record.status, record.reason = FAILED, reason
                trial.set_user_attr(RECORD_ATTR, json.dumps(asdict(record), default=str))
                self.saved.save(self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True))
                self.records[record.number] = record

    def _line(self, record: TrialRecord) -> str:
        changes = " ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                           for key, value in record.changes.items())
        best = max((r.value for r in self.records.values() if r.value is not None and r.queries == self.rungs[-1]
                    and r.status != FAILED), default=None)
        if record.status in INFEASIBLE:
            result = f"not run ({record.status}: {record.reason[:160]})"
        elif record.status == FAILED:
            result = f"FAILED ({record.reason.splitlines()[0][:160] if record.reason else ''})"
        else:
            steps = ", ".join(f"{v:.3f}@{q}" for q, v, *_ in record.evaluations if v is not None)
            result = f"{self.metric} {steps}" + {PRUNED: " pruned", REPEAT: " (evaluated before)"}.get(record.status, "")
        tail = f" [{record.charged:.1f} s]" + (f"; best {best:.3f}" if best is not None else "")
        return f"[trial {record.number}] {changes}: {result}{tail}"
