"""MLflow tracking: where runs go, how they are written and read back, and what is kept out of them.

Everything goes through ``Tracker``, which holds nothing but a tracking URI, so an MLflow tracking
server (``http://host:5000``) replaces the local store by changing that URI. The default store is
``sqlite:///<project>/mlruns/mlflow.db`` (``paths.default_tracking_uri``; ``MLFLOW_TRACKING_URI``
overrides). For a SQLite store, each experiment keeps its artifacts next to the database, under
``<db folder>/artifacts/<experiment>``; a server decides that itself.

A run is written with ``Tracker.start_run``, ``log``, ``log_artifacts`` and ``finish``: what one evaluation's run
holds is ``rag_core.workbench.execution.evaluation_log``. Metric names keep ``@`` everywhere but in MLflow,
which allows only ``[A-Za-z0-9_ ./:-]``: ``page/recall@5`` is logged as ``page/recall_at_5``, one-to-one
(``rag_core.workbench.tracking.mlflow_names``), and ``run_metrics`` reads names back in the ``@`` form.
Experiments are created with the tags that decide what the UI opens on
(``rag_core.workbench.tracking.experiment_view``).

A tracking store that cannot be used fails in one line, never a traceback: ``Tracker.check`` runs
before an evaluation or a sweep does any work (an unknown scheme is bad input, exit 2; a server that
does not answer within ``RAG_TRACKING_TIMEOUT_S`` seconds, default 10, is named with its address,
exit 1; a SQLite URI naming a folder fails at once, without MLflow's minutes of retries), and
``tracking_errors`` turns what MLflow raises while logging (a read-only or missing database, a
``file://`` path that cannot be written) into a ``RunFailure`` naming the URI. The message ends with
how to do without MLflow, ``off_switch`` (``--no-mlflow``; a command without that flag names its own).
A SQLite store is created and migrated by the first process that opens it; ``Tracker.check`` does that
under a lock beside the database (``.mlflow.db.lock``, ``rag_core.writes``), so two processes using a
new store at once do not both migrate it (which failed one and could leave the store unusable).
An experiment that was deleted is not written to (bad input naming how to restore it): its runs and
traces would be hidden, and ``mlflow gc`` would remove them.

Secrets: params are settings only, but as a guard nothing is logged whose value contains the value
of a set API-key variable (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``): ``SecretInRun`` is raised
before the run is written. Sweeps (``rag_core.workbench``) add the executed notebook to a run;
reading runs back for comparison is ``rag_core.workbench.reports.compare``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import socket
import subprocess
import time
import traceback
from urllib.parse import urlsplit
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from rag_core._compat import StrEnum
from rag_core.api_keys import KEY_ENV, redact, secret_values
from rag_core.errors import BadInput, RunFailure
from rag_core.paths import PROJECT_ROOT, default_tracking_uri
from rag_core.workbench.tracking.experiment_view import experiment_tags, missing_tags
from rag_core.workbench.tracking.mlflow_names import metric_name_from_mlflow, mlflow_metric_name
from rag_core.writes import exclusive_lock, lock_path_beside

if TYPE_CHECKING:
    from mlflow.entities import Run


SECRET_ENV_VARS = tuple(KEY_ENV.values())  # ANTHROPIC_API_KEY, OPENAI_API_KEY
TAG_PREFIX = "rag."
GIT_COMMIT_TAG = "mlflow.source.git.commit"
PARENT_RUN_TAG = "mlflow.parentRunId"
TRACKING_TIMEOUT_ENV, DEFAULT_TRACKING_TIMEOUT_S = "RAG_TRACKING_TIMEOUT_S", 10.0
NO_MLFLOW = "use --no-mlflow"  # what a failing store's message suggests, unless the command has no such flag
TRACKING_SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql", "databricks")


class SecretInRun(ValueError):
    """A value about to be logged contains an API key; nothing was logged."""


class RunStatus(StrEnum):
    """A run's status: MLflow's own (the value is what MLflow stores), and the two a sweep point can
    also end with without a run of its own being executed."""

    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    SKIPPED = "SKIPPED"  # a sweep point finished in an earlier run of the sweep: not run again
    UNAVAILABLE = "UNAVAILABLE"  # a sweep point whose model cannot be loaded: not run


@dataclass(frozen=True)
class TrackingTarget:
    """Where an evaluation is logged in MLflow: one record instead of six arguments.

    ``uri``: the tracking store (None: ``MLFLOW_TRACKING_URI`` or ``mlruns/``); ``experiment``: its
    name (None: the caller's default, one per corpus + golden set); ``run_name`` (None: the caller's
    default, from the main settings); ``run_id``: log into this run, which the caller created and ends
    (a sweep point), else a new run is made; ``parent_run_id``: nest that new run under this one;
    ``tags``: added to the run."""

    uri: str | None = None
    experiment: str | None = None
    run_name: str | None = None
    run_id: str | None = None
    parent_run_id: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


# --- the tracker --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@dataclass(frozen=True)
class Tracker:
    uri: str
    off_switch: str = NO_MLFLOW  # the end of a failing store's message: how to do without it ("" none)

    @classmethod
    def at(cls, uri: str | None = None, off_switch: str = NO_MLFLOW) -> "Tracker":
        """The tracker for `uri`, or for the default store (``MLFLOW_TRACKING_URI`` or ``mlruns/``)."""
        return cls(uri or default_tracking_uri(), off_switch)

    @property
    def client(self):
        return _client(self.uri)

    def check(self, experiment: str | None = None) -> None:
        """Fail now, in one line, if this tracking store cannot be used: an unknown scheme (``BadInput``),
        a server that does not accept a connection within ``tracking_timeout_s()`` or a store MLflow
        cannot open (``RunFailure``); or if `experiment` was deleted (``BadInput``). MLflow's own HTTP
        timeout and retries are bounded by it too."""
        scheme = urlsplit(self.uri).scheme.split("+")[0].lower()
        if scheme not in TRACKING_SCHEMES and not (len(scheme) <= 1):  # "" or a drive letter: a local path
            raise BadInput(f"MLflow tracking URI {self.uri!r}: unknown scheme {scheme!r}; use one of "
                           f"{', '.join(TRACKING_SCHEMES)} (e.g. sqlite:///mlruns/mlflow.db or http://host:5000)"
                           + _or(self.off_switch))
        timeout = tracking_timeout_s()
        if scheme in ("http", "https"):
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, round(timeout))))
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")  # MLflow's 7, with backoff: minutes
            parts = urlsplit(self.uri)
            address = (parts.hostname or "localhost", parts.port or (443 if scheme == "https" else 80))
            try:
                socket.create_connection(address, timeout=timeout).close()
            except OSError as exc:
                raise RunFailure(f"MLflow tracking server {self.uri} ({address[0]}:{address[1]}) is unreachable "
                                 f"within {timeout:g} s ({exc.strerror or type(exc).__name__}); start it, fix "
                                 f"MLFLOW_TRACKING_URI, raise {TRACKING_TIMEOUT_ENV}" + _or(self.off_switch)) from None
        database = self.sqlite_database()
        if database is not None and database.is_dir():
            raise RunFailure(f"MLflow tracking store {self.uri} cannot be used: {database} is a folder, not a "
                             f"database file; fix MLFLOW_TRACKING_URI (e.g. sqlite:///{database / 'mlflow.db'})"
                             + _or(self.off_switch))
        with tracking_errors(self.uri, self.off_switch), self.store_lock():  # a new store: created by one process
            self.client.search_experiments(max_results=1)
        if experiment is not None:
            with tracking_errors(self.uri, self.off_switch):
                self._refuse_deleted(experiment, self.client.get_experiment_by_name(experiment))

    def _refuse_deleted(self, name: str, experiment: Any) -> None:
        if experiment is not None and experiment.lifecycle_stage == "deleted":
            raise BadInput(f"MLflow experiment {name!r} was deleted: restore it (mlflow experiments restore "
                           f"--experiment-id {experiment.experiment_id}, with MLFLOW_TRACKING_URI={self.uri}) or "
                           "name another experiment")

    def sqlite_database(self) -> Path | None:
        """The database file of a ``sqlite:///`` URI (None: another scheme, or SQLite in memory)."""
        if not self.uri.startswith("sqlite:///"):
            return None
        path = self.uri[len("sqlite:///"):].split("?")[0]  # "sqlite:////abs.db" keeps its "/"
        return Path(path) if path and path != ":memory:" else None

    @contextlib.contextmanager
    def store_lock(self, purpose: str = ""):
        """Hold the lock beside a SQLite database for the block (where it can be taken; else none): its
        creation and migration, and a short write, are one process's at a time. A `purpose` takes a lock
        of its own instead (``.mlflow.db.golden.lock``: writes of golden dataset versions). Not re-entrant."""
        database = self.sqlite_database()
        lock = (lock_path_beside(database.resolve().with_name(".".join(filter(None, (database.name, purpose)))))
                if database is not None else None)
        writable = lock is not None and lock.parent.is_dir() and os.access(lock if lock.exists() else lock.parent,
                                                                            os.W_OK)
        if not writable:  # a read-only store: nothing to create, and nothing the lock could guard
            yield
            return
        with exclusive_lock(lock, on_wait=f"waiting for another process using {self.uri}"):
            yield

    def artifact_root(self) -> Path | None:
        """Where a SQLite store keeps artifacts (``<db folder>/artifacts``); None: the server decides."""
        database = self.sqlite_database()
        return database.resolve().parent / "artifacts" if database is not None else None

    def experiment_id(self, name: str) -> str:
        """Id of experiment `name`, created (with its artifact location and the UI's tags, see
        ``rag_core.workbench.tracking.experiment_view``) when missing; an existing one gets the tags it lacks.
        A deleted one is bad input: what is logged there is hidden, and ``mlflow gc`` removes it."""
        experiment = self.client.get_experiment_by_name(name)
        self._refuse_deleted(name, experiment)
        if experiment is not None:
            for key, value in missing_tags(experiment.tags).items():
                self.client.set_experiment_tag(experiment.experiment_id, key, value)
            return experiment.experiment_id
        root = self.artifact_root()
        location = (root / _slug(name)).as_uri() if root else None
        try:
            return self.client.create_experiment(name, artifact_location=location, tags=experiment_tags())
        except Exception:  # created meanwhile by a parallel sweep point
            experiment = self.client.get_experiment_by_name(name)
            if experiment is None:
                raise
            return experiment.experiment_id

    def start_run(self, experiment: str, run_name: str | None = None, *, parent_run_id: str | None = None,
                  tags: Mapping[str, str] | None = None) -> str:
        tags = {**(tags or {}), **({PARENT_RUN_TAG: parent_run_id} if parent_run_id else {})}
        guard_secrets({**tags, "run name": run_name or ""})
        run = self.client.create_run(self.experiment_id(experiment), run_name=run_name, tags=tags)
        return run.info.run_id

    def log(self, run_id: str, *, params: Mapping[str, Any] | None = None, metrics: Mapping[str, float] | None = None,
            tags: Mapping[str, Any] | None = None) -> None:
        """Log params, metrics (``@`` names are mapped) and tags in batches."""
        from mlflow.entities import Metric, Param, RunTag

        params, tags = _strings(params or {}), _strings(tags or {})
        guard_secrets({**params, **tags})
        now = int(time.time() * 1000)
        metric_rows = [Metric(mlflow_metric_name(name), float(value), now, 0)
                       for name, value in (metrics or {}).items() if value is not None and math.isfinite(float(value))]
        for start in range(0, max(len(params), len(metric_rows), len(tags)), 100):  # MLflow's batch limits
            self.client.log_batch(
                run_id,
                metrics=metric_rows[start:start + 100],
                params=[Param(key, value) for key, value in list(params.items())[start:start + 100]],
                tags=[RunTag(key, value) for key, value in list(tags.items())[start:start + 100]],
            )

    def log_artifacts(self, run_id: str, paths: Iterable[str | Path], artifact_path: str | None = None) -> None:
        """Log files or folders, after checking that none contains an API key."""
        paths = [Path(path) for path in paths]
        guard_secret_files(paths)
        for path in paths:
            if path.is_dir():
                self.client.log_artifacts(run_id, str(path), artifact_path)
            else:
                self.client.log_artifact(run_id, str(path), artifact_path)

    def finish(self, run_id: str, status: RunStatus = RunStatus.FINISHED) -> None:
        self.client.set_terminated(run_id, str(status))

    def fail(self, run_id: str, error: str) -> None:
        """Mark a run FAILED, with the error as the ``rag.error`` tag."""
        self.client.set_tag(run_id, TAG_PREFIX + "error", redact(error)[:5000])
        self.client.set_terminated(run_id, RunStatus.FAILED.value)

    def runs(self, experiment: str, filter_string: str = "", order_by: list[str] | None = None) -> list["Run"]:
        """Runs of `experiment` matching an MLflow filter (all pages); [] when it does not exist."""
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            return []
        runs, token = [], None
        while True:
            page = self.client.search_runs([found.experiment_id], filter_string, max_results=1000,
                                           order_by=order_by, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def child_runs(self, experiment: str, parent_run_id: str) -> list["Run"]:
        return self.runs(experiment, f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}'", ["attributes.start_time ASC"])

    def download(self, run_id: str, path: str, destination: str | Path) -> Path:
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per small file: noise
        return Path(self.client.download_artifacts(run_id, path, str(destination)))


def tracking_timeout_s() -> float:
    """Seconds to wait for a tracking server: ``$RAG_TRACKING_TIMEOUT_S`` (default 10)."""
    value = os.environ.get(TRACKING_TIMEOUT_ENV, "")
    try:
        seconds = float(value) if value.strip() else DEFAULT_TRACKING_TIMEOUT_S
    except ValueError:
        raise BadInput(f"{TRACKING_TIMEOUT_ENV}={value!r} is not a number of seconds") from None
    if not 0 < seconds < float("inf"):
        raise BadInput(f"{TRACKING_TIMEOUT_ENV} must be a positive number of seconds, got {value!r}")
    return seconds


_TRACKING_LIBRARIES = ("mlflow", "sqlalchemy", "alembic", "requests", "urllib3", "sqlite3")


@contextlib.contextmanager
def tracking_errors(uri: str, off_switch: str = NO_MLFLOW):
    """Failures of the tracking store itself (raised by MLflow or its database and HTTP libraries, or
    an OSError inside MLflow: a read-only or missing path) as one ``RunFailure`` naming `uri` (and
    ending with `off_switch`, how to do without MLflow)."""
    try:
        yield
    except (BadInput, RunFailure, SecretInRun):
        raise
    except Exception as exc:
        inside = any(f"{os.sep}{name}{os.sep}" in frame.filename
                     for frame in traceback.extract_tb(exc.__traceback__) for name in _TRACKING_LIBRARIES)
        if type(exc).__module__.split(".")[0] not in _TRACKING_LIBRARIES and not (isinstance(exc, OSError) and inside):
            raise
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        first = first.split(". ")[0]  # its first sentence
        raise RunFailure(f"MLflow tracking store {uri} cannot be used: {redact(first)[:300]}; fix "
                         "MLFLOW_TRACKING_URI (e.g. sqlite:///mlruns/mlflow.db)" + _or(off_switch)) from None


def _or(off_switch: str) -> str:
    return f", or {off_switch}" if off_switch else ""


@contextlib.contextmanager
def global_tracking_uri(uri: str):
    """MLflow's label-schema, review-queue and dataset-record functions use its global tracking URI, not a
    client's: point that at `uri` meanwhile."""
    import mlflow
    from mlflow.tracking._tracking_service import utils

    before, environment = utils._tracking_uri, os.environ.get("MLFLOW_TRACKING_URI")  # MLflow sets and unsets both
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before)
        if environment is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = environment


def run_metrics(run: "Run") -> dict[str, float]:
    """A run's metrics read back from MLflow, with ``@`` names."""
    return {metric_name_from_mlflow(name): value for name, value in run.data.metrics.items()}


# --- the code's version ------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def git_tags() -> dict[str, str]:
    """The project's git commit (and whether the work tree had changes); {} outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {}
    return {GIT_COMMIT_TAG: commit, TAG_PREFIX + "git_dirty": str(dirty).lower()}


# --- secrets ------------------------------------------------------------------------------------
def guard_secrets(values: Mapping[str, Any]) -> None:
    """Raise ``SecretInRun`` (naming the key, never the value) when a value contains an API key."""
    secrets = secret_values()
    for key, value in values.items():
        if any(secret in str(value) or secret in str(key) for secret in secrets):
            raise SecretInRun(f"refusing to log {key!r}: its value contains an API key "
                              f"(the value of {' or '.join(SECRET_ENV_VARS)})")


def guard_secret_files(paths: Iterable[Path]) -> None:
    """Raise ``SecretInRun`` when a file (or any file in a folder) contains an API key."""
    secrets = [secret.encode() for secret in secret_values()]
    if not secrets:
        return
    for path in paths:
        for file in (sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]):
            data = file.read_bytes()
            if any(secret in data for secret in secrets):
                raise SecretInRun(f"refusing to log the artifact {file.name}: it contains an API key")


def secret_scrubber() -> Callable[[Any], Any]:
    """A function that applies ``rag_core.api_keys.redact`` to every string of a value (strings, lists,
    mappings; keys included): for text that must be kept, such as traces. Identity when no key is set."""
    if not secret_values():
        return lambda value: value

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value)
        if isinstance(value, Mapping):
            return {scrub(key): scrub(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [scrub(item) for item in value]
        return value

    return scrub


def _strings(values: Mapping[str, Any]) -> dict[str, str]:
    return {key: value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)
            for key, value in values.items()}


def _slug(name: str) -> str:
    """A folder name for an experiment: readable part plus a short hash (names may differ only in
    characters the slug drops)."""
    import hashlib

    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:60] or "experiment"
    return f"{readable}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"
