"""Where sweep points run: the executor contract shared by grids (``sweep``) and searches (``search_run``).

An executor (``open_executor(name, ...)``: ``local`` or ``ray``) is made before any run exists (joining
a Ray cluster first, so that an unreachable one leaves no parent run behind), then ``start(job)``
once the parent run is known. Worker threads call ``run(point, point_hash)``: each thread keeps its
own warm kernel (``local``) or Ray actor (``ray``), made on its first point. ``build_all`` builds every
distinct chunking of some points before they run, one line per build (``[build 2/5] chunker=...``,
then the embedding bar on stderr, then what it did), ``build`` one configuration (a search's trial);
``kill_running`` ends what an interruption left running; ``shutdown`` ends the kernels or actors and
says how many kernels were started and how many points were run again after their worker died.

- ``LocalExecutor``: threads and ``WarmKernel``s in this process tree (``points.run_point``); index
  builds here, one after another, whenever there is something to build (a kernel's progress would not
  show), and always with several workers or a kernel that then needs no torch.
- ``RayExecutor``: a Ray actor per worker thread (``ray_executor``); index builds as Ray tasks.
Left out: executors for other schedulers (Slurm, Dask); the Ray specifics stay in ``ray_executor``.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rag_core.workbench.execution.evaluation import EvalInputs
from rag_core.workbench.execution.kernels import WarmKernel
from rag_core.workbench.execution.points import PointJob, run_point
from rag_core.workbench.plans.cost import describe_build, record_builds
from rag_core.workbench.plans.results import PointOutcome
from rag_core.workbench.plans.sweep_file import SweepPoint
from rag_core.workbench.tracking.tracker import RunStatus

if TYPE_CHECKING:
    from rag_core.config import RagConfig

EXECUTORS = ("local", "ray")
BUILD_TOTALS = ("dense_indexes_built", "chunkings_built", "embedded", "embed_cache_hits")


@dataclass(frozen=True)
class ExecutorCounts:
    kernels_started: int  # every kernel a point ran in (a dead attempt's included)
    points_retried: int  # attempts lost with their worker and run again (Ray)


class PointExecutor(ABC):
    label = ""  # how the start line names its workers: "" or "Ray "

    def __init__(self) -> None:
        self.job: PointJob | None = None
        self.running: set[str] = set()  # child run ids whose notebook is executing here
        self.lock = threading.Lock()
        self.local = threading.local()  # each worker thread's own kernel or actor

    def start(self, job: PointJob) -> None:
        """Ready to run points of `job` (its parent run exists)."""
        self.job = job

    @abstractmethod
    def run(self, point: SweepPoint, point_hash: str) -> PointOutcome:
        """Run `point` as a child run (called from a worker thread)."""

    @abstractmethod
    def builds_first(self, points: list[SweepPoint], workers: int, unbuilt: bool) -> bool:
        """Whether a grid builds every chunking of `points` before running them (``build_all``); `unbuilt`:
        some chunking or dense index of theirs is not in the store yet."""

    @abstractmethod
    def build_all(self, points: list[SweepPoint], inputs: EvalInputs, store_dir: Path,
                  echo: Callable[[str], None]) -> dict[str, float]:
        """Build every distinct chunking/model of `points`, one after another; the work done (``BUILD_TOTALS``,
        ``seconds``)."""

    @abstractmethod
    def build(self, config: RagConfig, corpus: Any, store_dir: Path, progress: bool = False) -> dict[str, Any]:
        """Build one configuration's indexes (with `progress`, the embedding bar on stderr); the work done
        (``BUILD_TOTALS``, ``chunks``, and ``embed_seconds`` and ``model`` when it embedded)."""

    def kill_running(self) -> None:
        """After an interruption: the child runs still executing become KILLED."""
        for run_id in list(self.running):
            self.job.tracker.finish(run_id, RunStatus.KILLED)

    @abstractmethod
    def shutdown(self) -> ExecutorCounts:
        """End the kernels or actors; what they did."""


class LocalExecutor(PointExecutor):
    """Points in warm kernels of this process tree, one per worker thread (``points.run_point``).
    `first_kernel`, already started, is the first thread's."""

    def __init__(self, first_kernel: WarmKernel | None = None) -> None:
        super().__init__()
        self.first_kernel = first_kernel
        self.kernels: list[WarmKernel] = []

    def run(self, point: SweepPoint, point_hash: str) -> PointOutcome:
        if not hasattr(self.local, "kernel"):
            with self.lock:
                self.local.kernel, self.first_kernel = self.first_kernel or WarmKernel(), None
                self.kernels.append(self.local.kernel)
        return run_point(point, point_hash, self.job, self.local.kernel, self.running)

    def builds_first(self, points: list[SweepPoint], workers: int, unbuilt: bool) -> bool:
        """Several workers never embed into one store at once; one worker builds here when something is to
        be built (its progress shows here, a kernel's would not), or when its kernel then needs no torch
        (``queries_without_torch``)."""
        return workers > 1 or unbuilt or queries_without_torch(points)

    def build_all(self, points: list[SweepPoint], inputs: EvalInputs, store_dir: Path,
                  echo: Callable[[str], None]) -> dict[str, float]:
        totals = dict.fromkeys((*BUILD_TOTALS, "seconds"), 0.0)
        builds = list({point.build_key: point.config for point in points}.values())
        echo(f"Building indexes for {len(builds)} distinct chunking/model combinations first ...")
        measured = []
        for number, config in enumerate(builds, start=1):
            head = f"[build {number}/{len(builds)}]"
            echo(f"{head} {describe_build(config)}")
            started = time.perf_counter()
            try:
                done = self.build(config, inputs.corpus, store_dir, progress=True)
            except Exception as exc:  # noqa: BLE001 - its points build it again in their kernels, and fail there, recorded
                echo(f"{head} could not build it first ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                     "its points will try in their kernels")
                continue
            seconds = time.perf_counter() - started
            echo(f"{head} {built_line(done)} in {seconds:.1f} s")
            totals.update({name: totals[name] + done[name] for name in BUILD_TOTALS})
            totals["seconds"] += seconds
            if done.get("model") and done["embedded"]:
                measured.append((str(done["model"]), done["embedded"], done["embed_seconds"]))
        record_builds(store_dir, measured)  # this machine's embedding throughput, for --dry-run
        return totals

    def build(self, config: RagConfig, corpus: Any, store_dir: Path, progress: bool = False) -> dict[str, Any]:
        return build_indexes(config, corpus, store_dir, progress)

    def shutdown(self) -> ExecutorCounts:
        for kernel in self.kernels:
            kernel.shutdown()
        return ExecutorCounts(sum(kernel.started for kernel in self.kernels), 0)


class RayExecutor(PointExecutor):
    """Points on Ray actors, one per worker thread (``ray_executor.RayWorkers``); joins the cluster at
    `address` when made."""

    label = "Ray "

    def __init__(self, address: str | None, tracking_uri: str) -> None:
        super().__init__()
        from rag_core.workbench.execution import ray_executor

        self.ray_executor = ray_executor
        ray_executor.connect(address, tracking_uri)
        self.workers: Any = None

    def start(self, job: PointJob) -> None:
        super().start(job)
        self.workers = self.ray_executor.RayWorkers(job)

    def run(self, point: SweepPoint, point_hash: str) -> PointOutcome:
        if not hasattr(self.local, "actor"):
            self.local.actor = self.workers.new_actor()
        return self.workers.run(self.local.actor, point, point_hash)

    def builds_first(self, points: list[SweepPoint], workers: int, unbuilt: bool) -> bool:
        return True  # as Ray tasks, before the actors need them

    def build_all(self, points: list[SweepPoint], inputs: EvalInputs, store_dir: Path,
                  echo: Callable[[str], None]) -> dict[str, float]:
        return self.ray_executor.prebuild(points, inputs, store_dir, echo)

    def build(self, config: RagConfig, corpus: Any, store_dir: Path, progress: bool = False) -> dict[str, Any]:
        import ray

        return ray.get(self.ray_executor.build_indexes.remote(config, corpus, store_dir))

    def kill_running(self) -> None:
        super().kill_running()
        if self.workers is not None:
            self.workers.kill_running()

    def shutdown(self) -> ExecutorCounts:
        if self.workers is None or not self.workers.actors:
            return ExecutorCounts(0, 0)
        counts = self.workers.shutdown()  # each dead attempt had a kernel of its own
        return ExecutorCounts(counts.kernels_started + counts.superseded, counts.superseded)


def open_executor(name: str, *, ray_address: str | None = None, tracking_uri: str = "",
                  first_kernel: WarmKernel | None = None) -> PointExecutor:
    """The executor called `name` (``EXECUTORS``); ``ray`` joins its cluster now."""
    if name == "ray":
        return RayExecutor(ray_address, tracking_uri)
    return LocalExecutor(first_kernel)


def build_indexes(config: RagConfig, corpus: Any, store_dir: Path, progress: bool = False) -> dict[str, Any]:
    """Chunk, embed and index one configuration here; the work done (``LocalExecutor.build``)."""
    from rag_core.retrieve.pipeline import Pipeline

    pipeline = Pipeline(config, corpus, store_dir, progress=progress)
    stats = pipeline.build()
    done: dict[str, Any] = {"dense_indexes_built": float(stats.embedded + stats.embed_cache_hits > 0),
                            "chunkings_built": float(stats.chunkings_built), "embedded": float(stats.embedded),
                            "embed_cache_hits": float(stats.embed_cache_hits), "chunks": float(stats.chunks),
                            "embed_seconds": stats.embed_seconds}
    if stats.embedded:
        done["model"] = pipeline.models_used().get("embed_model_used", "")
    return done


def built_line(done: dict[str, Any]) -> str:
    """What one build did, for its progress line: ``412 chunks made, 412 embedded (0 from the cache)``."""
    chunks = f"{int(done.get('chunks', 0)):,} chunks {'made' if done['chunkings_built'] else 'read from the store'}"
    if not done["embedded"] and not done["embed_cache_hits"]:
        return f"{chunks}, nothing embedded"
    return f"{chunks}, {int(done['embedded']):,} embedded ({int(done['embed_cache_hits']):,} from the cache)"


def queries_without_torch(points: list[SweepPoint]) -> bool:
    """Whether every point, once its indexes are built, runs without torch: no re-ranking, and an
    embedding backend whose queries run on the store's ONNX export (bf16, onnx, onnx-int8)."""
    return all(point.config.rerank_depth == 0 and point.config.embed_backend != "torch" for point in points)
