"""Sweep points on a Ray cluster (``rag-pipeline sweep FILE --executor ray [--ray-address ADDR]``).

Ray schedules; the work is the local executor's. Each sweep worker is a Ray actor (``PointWorker``,
one CPU) holding a ``WarmKernel``: it creates the point's MLflow child run, has papermill execute the
evaluation notebook in its kernel and logs the executed notebook (``points.run_point``), so the
driver only makes the parent run and reads outcomes. Index builds (chunk + embed per distinct
chunking) run first as Ray tasks, one after another (two processes writing one embedded Chroma store
at once is not safe), each asking for a GPU (``num_gpus=1``) when the cluster has one.

What the nodes share: the tracking server (the driver passes its URI to every worker; use an
``http://`` MLflow server on a multi-node cluster, a ``sqlite:///`` file only works on one machine)
and the store directory, which must be the same path on every node (one machine, or a shared
filesystem). Settings reach the workers through the job's runtime environment: the variables
starting with ``RAG_``, ``HF_``, ``MLFLOW_``, ``TRANSFORMERS_``, ``TOKENIZERS_`` and ``PYTHONPATH``;
nothing whose name says key, token, secret or password is forwarded (set those on the nodes).

Fault tolerance: a worker process that dies mid-point (killed, out of memory, node lost) is
restarted by Ray (``max_restarts``) and the point is submitted again (``max_task_retries``). The dead
attempt's child run, left RUNNING, is superseded by the new attempt: marked KILLED, tagged
``rag.superseded_by_retry`` and deleted (MLflow's soft delete: hidden from searches and the UI's
default view, restorable), so every point has exactly one active child run. A point whose worker
dies on every attempt becomes a FAILED run like any failing point.
Left out: autoscaling and the cluster itself (Ray's cluster launcher or KubeRay start it), parallel
index builds into a vector server.
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Callable

import ray

from rag_core.errors import RunFailure
from rag_core.workbench.execution.evaluation import EvalInputs
from rag_core.workbench.execution.kernels import WarmKernel
from rag_core.workbench.execution.points import POINT_HASH_TAG, PointJob, run_point
from rag_core.workbench.plans.cost import describe_build
from rag_core.workbench.plans.results import PointOutcome
from rag_core.workbench.plans.sweep_file import SweepPoint
from rag_core.workbench.tracking.tracker import PARENT_RUN_TAG, TAG_PREFIX, RunStatus, Tracker

ATTEMPTS = 3  # a point is tried at most this often when its worker process dies
FORWARDED_PREFIXES = ("RAG_", "HF_", "MLFLOW_", "TRANSFORMERS_", "TOKENIZERS_", "PYTHONPATH")
PRIVATE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
SUPERSEDED_TAG = TAG_PREFIX + "superseded_by_retry"


@dataclass(frozen=True)
class WorkerCounts:
    kernels_started: int
    superseded: int  # attempts whose worker died, their child runs superseded by a retry


def forwarded_env(tracking_uri: str) -> dict[str, str]:
    """The environment every Ray worker gets: settings and model locations, never credentials."""
    env = {name: value for name, value in os.environ.items()
           if name.startswith(FORWARDED_PREFIXES) and not PRIVATE.search(name)}
    env["MLFLOW_TRACKING_URI"] = tracking_uri
    return env


class ClusterUnavailable(RunFailure, ConnectionError):
    """The Ray cluster cannot be joined (exit 1)."""


def connect(address: str | None, tracking_uri: str) -> None:
    """Join the cluster at `address` (None: ``RAY_ADDRESS``, a cluster running on this machine, or
    a new local one), with the sweep's environment for the workers."""
    if ray.is_initialized():
        ray.shutdown()
    _check_reachable(address)
    try:
        ray.init(address=address, runtime_env={"env_vars": forwarded_env(tracking_uri)}, log_to_driver=False,
                 logging_level="ERROR")
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as error:
        raise ClusterUnavailable(f"cannot join the Ray cluster at {address or 'RAY_ADDRESS/local'}: "
                                 f"{str(error).splitlines()[0][:300]}") from error


def _check_reachable(address: str | None) -> None:
    """Fail at once (Ray itself retries for minutes) when a host:port address refuses connections."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # None, "auto", "local", ray:// client addresses: Ray's own resolution
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as error:
        raise ClusterUnavailable(f"cannot join the Ray cluster at {address}: {error} (is `ray start --head` "
                                 f"running there, on that port?)") from error


def supersede_dead_attempts(tracker: Tracker, experiment: str, parent_run_id: str, point_hash: str) -> int:
    """Mark KILLED, tag and delete the child runs of this point still RUNNING (attempts whose worker
    died: the driver gives a point to one worker at a time); return how many."""
    stale = tracker.runs(experiment, f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}' and "
                                     f"tags.`{POINT_HASH_TAG}` = '{point_hash}' and attributes.status = 'RUNNING'")
    for run in stale:
        tracker.client.set_tag(run.info.run_id, SUPERSEDED_TAG, "true")
        tracker.finish(run.info.run_id, RunStatus.KILLED)
        tracker.client.delete_run(run.info.run_id)
    return len(stale)


@ray.remote(num_cpus=1, max_restarts=ATTEMPTS - 1, max_task_retries=ATTEMPTS - 1)
class PointWorker:
    """One sweep worker: a warm kernel that executes point after point."""

    def __init__(self) -> None:
        self.kernel = WarmKernel()
        self.superseded = 0

    def run(self, point: SweepPoint, point_hash: str, job: PointJob) -> PointOutcome:
        self.superseded += supersede_dead_attempts(job.tracker, job.experiment, job.parent_run_id, point_hash)
        return run_point(point, point_hash, job, self.kernel, set())

    def counts(self) -> WorkerCounts:
        """Kernels started and dead attempts superseded since this actor (re)started."""
        return WorkerCounts(self.kernel.started, self.superseded)

    def shutdown(self) -> None:
        self.kernel.shutdown()


@ray.remote(max_retries=ATTEMPTS - 1)
def build_indexes(config, corpus, store_dir) -> dict[str, float]:
    """Chunk, embed and index one chunking (a Ray task); its work counts."""
    from rag_core.retrieve.pipeline import Pipeline

    started = time.perf_counter()
    stats = Pipeline(config, corpus, store_dir).build()
    return {"dense_indexes_built": float(stats.embedded + stats.embed_cache_hits > 0),
            "chunkings_built": float(stats.chunkings_built), "embedded": float(stats.embedded),
            "embed_cache_hits": float(stats.embed_cache_hits), "seconds": time.perf_counter() - started,
            "on_gpu": float(bool(ray.get_gpu_ids()))}


def prebuild(points: list[SweepPoint], inputs: EvalInputs, store_dir, echo: Callable[[str], None]) -> dict[str, float]:
    """Every distinct build of `points` as a Ray task (on a GPU when the cluster has one), in turn."""
    builds = {point.build_key: point.config for point in points}
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    echo(f"Building indexes for {len(builds)} distinct chunking/model combinations as Ray tasks"
         f"{' on GPU nodes' if gpus else ''} ...")
    corpus = ray.put(inputs.corpus)
    totals = {"dense_indexes_built": 0.0, "chunkings_built": 0.0, "embedded": 0.0, "embed_cache_hits": 0.0,
              "seconds": 0.0, "on_gpu": 0.0}
    for number, config in enumerate(builds.values(), start=1):
        echo(f"[build {number}/{len(builds)}] {describe_build(config)}")
        done = ray.get(build_indexes.options(num_gpus=gpus).remote(config, corpus, store_dir))
        totals = {name: totals[name] + done[name] for name in totals}
        echo(f"[build {number}/{len(builds)}] done in {done['seconds']:.1f} s: {int(done['embedded']):,} embedded")
    echo(f"{int(totals['on_gpu'])} of {len(builds)} index builds ran on a GPU ({totals['seconds']:.1f} s)")
    return totals


class RayWorkers:
    """The driver's side: an actor per worker thread of the sweep, created on first use."""

    def __init__(self, job: PointJob) -> None:
        self.job = job
        self.actors: list = []

    def new_actor(self):
        actor = PointWorker.remote()
        self.actors.append(actor)
        return actor

    def run(self, actor, point: SweepPoint, point_hash: str) -> PointOutcome:
        """Run `point` on `actor`; a point whose worker died on every attempt is a FAILED run."""
        started = time.perf_counter()
        try:
            return ray.get(actor.run.remote(point, point_hash, self.job))
        except ray.exceptions.RayError as error:
            job, tracker = self.job, self.job.tracker
            stale = tracker.runs(job.experiment, f"tags.`{PARENT_RUN_TAG}` = '{job.parent_run_id}' and "
                                                 f"tags.`{POINT_HASH_TAG}` = '{point_hash}' and attributes.status = 'RUNNING'")
            message = f"Ray worker lost after {ATTEMPTS} attempts: {type(error).__name__}: {str(error)[:500]}"
            for run in stale[1:]:
                tracker.finish(run.info.run_id, RunStatus.KILLED)
            if stale:
                tracker.fail(stale[0].info.run_id, message)
            return PointOutcome(point, RunStatus.FAILED, stale[0].info.run_id if stale else None,
                                seconds=time.perf_counter() - started, error=message)

    def kill_running(self) -> None:
        """After an interruption: the children still RUNNING become KILLED, the actors end."""
        job = self.job
        for run in job.tracker.child_runs(job.experiment, job.parent_run_id):
            if run.info.status == RunStatus.RUNNING:
                job.tracker.finish(run.info.run_id, RunStatus.KILLED)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []

    def shutdown(self) -> WorkerCounts:
        """End every actor's kernel and the actors; what they did, summed."""
        counts = []
        for actor in self.actors:
            try:
                counts.append(ray.get(actor.counts.remote()))
                ray.get(actor.shutdown.remote())
            except ray.exceptions.RayError:  # an actor lost for good (its points are FAILED runs)
                pass
            ray.kill(actor, no_restart=True)
        self.actors = []
        return WorkerCounts(sum(c.kernels_started for c in counts), sum(c.superseded for c in counts))
