"""A sweep's parent run in MLflow: found again or started (tags, the sweep's settings as params),
the point hashes its FINISHED child runs already cover, and the summed work of the whole sweep
(``sweep/*`` metrics) logged on it at the end.

Left out: scheduling and running the points (``sweep``, ``points``), the comparison table
(``sweep_report``).
"""

from __future__ import annotations

import json
from typing import Mapping

from rag_core.evaluate.evaluator import golden_fingerprint
from rag_core.workbench.execution.evaluation import EvalInputs
from rag_core.workbench.execution.points import KIND_TAG, POINT_HASH_TAG, SWEEP_HASH_TAG
from rag_core.workbench.plans.sweep_file import SweepPoint, SweepSpec
from rag_core.workbench.tracking.tracker import TAG_PREFIX, RunStatus, Tracker, git_tags, run_metrics


def parent_run(tracker: Tracker, experiment: str, spec: SweepSpec, inputs: EvalInputs, n_points: int,
               rerun: bool) -> tuple[str, bool]:
    """(run id, resumed): the latest parent run of this sweep (interrupted, failed or finished: its
    finished points are kept), or a new one (always, with `rerun`)."""
    earlier = [] if rerun else tracker.runs(
        experiment, f"tags.`{SWEEP_HASH_TAG}` = '{spec.hash}' and tags.`{KIND_TAG}` = 'sweep'", ["attributes.start_time DESC"])
    if earlier:
        run_id = earlier[0].info.run_id
        tracker.client.update_run(run_id, status=RunStatus.RUNNING.value)
        return run_id, True
    tags = {SWEEP_HASH_TAG: spec.hash, KIND_TAG: "sweep", TAG_PREFIX + "corpus_fingerprint": inputs.corpus.fingerprint,
            TAG_PREFIX + "golden_fingerprint": golden_fingerprint(inputs.queries), **git_tags()}
    run_id = tracker.start_run(experiment, spec.name, tags=tags)
    params = {**{f"base.{key}": value for key, value in spec.base.items()},
              **{f"grid.{key}": [str(v) for v in values] for key, values in spec.grid.items()},
              **({"listed_points": json.dumps(spec.listed, default=str)} if spec.listed else {}),
              "sweep_file": str(spec.path), "primary_metric": spec.primary_metric, "points": n_points,
              **{key: value for key, value in spec.data_identity().items() if value is not None},
              **({"holdout": spec.holdout, "holdout_seed": spec.holdout_seed} if spec.holdout is not None else {})}
    tracker.log(run_id, params=params)
    return run_id, False


def finished_points(tracker: Tracker, experiment: str, parent_id: str) -> dict[str, str]:
    """point hash -> run id of its FINISHED child run; children left RUNNING by an interruption are
    marked KILLED (their points run again)."""
    finished = {}
    for run in tracker.child_runs(experiment, parent_id):
        point_hash = run.data.tags.get(POINT_HASH_TAG)
        if run.info.status == RunStatus.FINISHED and point_hash:
            finished[point_hash] = run.info.run_id
        elif run.info.status == RunStatus.RUNNING:
            tracker.finish(run.info.run_id, RunStatus.KILLED)
    return finished


def log_parent_summary(tracker: Tracker, experiment: str, parent_id: str, points: list[SweepPoint],
                       skipped_invalid: list[str], points_unavailable: int, prebuild: Mapping[str, float],
                       kernels_started: int, wall_seconds: float, points_merged: int = 0) -> dict[str, float]:
    """The work of the whole sweep, summed over its finished child runs (all attempts) + the prebuild;
    `points_merged`: grid points not run because another of the same configuration runs."""
    children = tracker.child_runs(experiment, parent_id)
    done = [run_metrics(run) for run in children if run.info.status == RunStatus.FINISHED]
    previous = tracker.client.get_run(parent_id).data.metrics  # prebuild work of earlier attempts

    def total(name: str) -> float:
        return sum(metrics.get(name, 0.0) for metrics in done)

    def prebuilt(name: str) -> float:
        return prebuild.get(name, 0.0) + previous.get(f"sweep/prebuild_{name}", 0.0)

    work = {
        "sweep/points": float(len(points)),
        "sweep/points_invalid": float(len(skipped_invalid)),
        "sweep/points_merged": float(points_merged),
        "sweep/points_unavailable": float(points_unavailable),
        "sweep/points_finished": float(len({run.data.tags.get(POINT_HASH_TAG) for run in children
                                            if run.info.status == RunStatus.FINISHED})),
        "sweep/points_failed": float(sum(run.info.status == RunStatus.FAILED for run in children)),
        "sweep/distinct_chunkings": float(len({point.chunking_key for point in points})),
        "sweep/chunkings_built": total("index/chunkings_built") + prebuilt("chunkings_built"),
        "sweep/dense_indexes_built": sum(float(m.get("index/embedded", 0) + m.get("index/embed_cache_hits", 0) > 0)
                                         for m in done) + prebuilt("dense_indexes_built"),
        "sweep/chunks_embedded": total("index/embedded") + prebuilt("embedded"),
        "sweep/embed_cache_hits": total("index/embed_cache_hits") + prebuilt("embed_cache_hits"),
        "sweep/candidates_reused": total("retrieval/candidates_reused"),
        "sweep/candidates_computed": total("retrieval/candidates_computed"),
        "sweep/rerank_pairs_scored": total("rerank/pairs_scored"),
        "sweep/rerank_cache_hits": total("rerank/cache_hits"),
        "sweep/notebook_seconds": total("timing/notebook_seconds"),
        "sweep/kernels_started": float(kernels_started),
        "sweep/wall_seconds": wall_seconds,
        # the worst point: units longer than the embedding model's window, and text dense search never reads
        "sweep/truncated_share_max": max((m.get("index/truncated_share", 0.0) for m in done), default=0.0),
        "sweep/unread_share_max": max((m.get("index/unread_share", 0.0) for m in done), default=0.0),
    }
    work.update({f"sweep/prebuild_{name}": prebuilt(name) for name in ("chunkings_built", "dense_indexes_built",
                                                                       "embedded", "embed_cache_hits")})
    tracker.log(parent_id, metrics=work)
    return work
