"""Score-based and weighted fusion through ``ranx.fuse`` (Bassani & Romelli, "ranx.fuse: A Python
Library for Metasearch", CIKM 2022): CombSUM (``sum``), CombMNZ (``mnz``), weighted sum (``wsum``),
weighted MNZ (``wmnz``), Borda, Condorcet, ISR, RBC, ... after a score normalisation (``min-max``,
``zmuv`` = z-score, ``max``, ``sum``, ``rank``, ``borda``; ``none`` keeps raw scores).

Nothing is re-implemented here: the lists become one-query ``ranx.Run`` objects and ranx fuses them.
ranx compiles numba code when first imported (3-6 s per process), so ranx is imported only when a
fusion other than ``rrf`` runs (plain and weighted RRF are ``rag_core.retrieve.fusion.rrf``).
``learn_weights`` wraps ``ranx.optimize_fusion`` for ``rag-pipeline tune-fusion``.

Left out: ranx's supervised methods (probfuse, segfuse, slidefuse, bayesfuse, mapfuse, posfuse),
which need training runs at query time; ranx's own ``rrf`` (the project's RRF is the same formula).
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rag_core.records import Run, ScoredId
from rag_core.retrieve.fusion import FUSIONS, RANX_METHODS

if TYPE_CHECKING:
    from rag_core.components.config_fields import ConfigFields

WEIGHTED_METHODS = tuple(name for name in RANX_METHODS if FUSIONS.get(name).options["weighted"])  # take `weights`
_QUERY = "q"


def _ranx() -> Any:
    try:
        import ranx
    except ImportError:
        raise ImportError("fusion methods other than rrf need ranx: pip install ranx") from None
    logging.getLogger("numba").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="unsafe cast", module="ranx")  # ranx's own numba casts
    return ranx


def _norm(norm: str) -> str | None:
    return None if norm == "none" else norm


def fusion_params(method: str, weights: Sequence[float], n_lists: int) -> dict[str, Any]:
    """ranx ``params`` for `method`: the weights (equal when none are given) for weighted methods."""
    if method in WEIGHTED_METHODS:
        return {"weights": list(weights) if weights else [1.0 / n_lists] * n_lists}
    return {}


def fuse_runs(runs: Sequence[Run], method: str, norm: str = "min-max",
              weights: Sequence[float] = ()) -> Run:
    """Fuse runs (``query_id -> item_id -> score``, same queries in each) with ``ranx.fuse``."""
    ranx = _ranx()
    ranx_runs = [ranx.Run({qid: dict(items) or {"": 0.0} for qid, items in run.items()}) for run in runs]
    fused = ranx.fuse(ranx_runs, norm=_norm(norm), method=method, params=fusion_params(method, weights, len(runs)))
    return {qid: {item: score for item, score in items.items() if item}
            for qid, items in fused.to_dict().items()}


def ranx_fusion(scored_lists: Sequence[Sequence[ScoredId]], method: str, norm: str = "min-max",
                weights: Sequence[float] = ()) -> list[ScoredId]:
    """Fuse one query's lists (each best first, with the retriever's scores); best first, ties in
    order of first appearance across the lists."""
    first_seen = {item.id: None for scored in scored_lists for item in scored}
    if not first_seen:
        return []
    fused = fuse_runs([{_QUERY: {item.id: float(item.score) for item in scored}} for scored in scored_lists],
                      method, norm, weights)[_QUERY]
    order = {item_id: position for position, item_id in enumerate(first_seen)}
    return sorted((ScoredId(item_id, float(score)) for item_id, score in fused.items()),
                  key=lambda hit: (-hit.score, order[hit.id]))


def learn_weights(qrels: Mapping[str, Mapping[str, int]], runs: Sequence[Run], method: str, norm: str,
                  metric: str, step: float = 0.1) -> dict[str, Any]:
    """``ranx.optimize_fusion``: the parameters of `method` that maximise `metric` (a ranx metric
    name, e.g. ``ndcg@10``) over `runs` against `qrels`. Queries without any relevant item are left out
    (ranx cannot score them)."""
    ranx = _ranx()
    judged = [qid for qid, items in qrels.items() if items]
    ranx_qrels = ranx.Qrels({qid: dict(qrels[qid]) for qid in judged})
    ranx_runs = [ranx.Run({qid: dict(run.get(qid, {})) or {"": 0.0} for qid in judged}) for run in runs]
    extra = {"step": step} if method in WEIGHTED_METHODS else {}
    return ranx.optimize_fusion(ranx_qrels, ranx_runs, norm=_norm(norm), method=method, metric=metric,
                                show_progress=False, **extra)


def score_run(qrels: Mapping[str, Mapping[str, int]], run: Run, metric: str) -> float:
    """`metric` (a ranx metric name) of `run` against `qrels`, averaged over the queries with a relevant
    item (as ``learn_weights`` optimises it), so a learned fusion and a single list compare fairly."""
    ranx = _ranx()
    judged = [qid for qid, items in qrels.items() if items]
    if not judged:
        return 0.0
    ranx_qrels = ranx.Qrels({qid: dict(qrels[qid]) for qid in judged})
    ranx_run = ranx.Run({qid: dict(run.get(qid, {})) or {"": 0.0} for qid in judged})
    return float(ranx.evaluate(ranx_qrels, ranx_run, metric))


class RanxFusion:
    """A ``ranx.fuse`` method (the fusion's registered name) after ``fusion_norm``, with the
    retrievers' weights for the weighted methods (equal when none are given)."""

    def __init__(self, name: str, config: ConfigFields) -> None:
        self.method, self.norm = name, config.fusion_norm

    def fuse(self, ranked: Sequence[Sequence[ScoredId]], weights: Sequence[float] | None = None) -> list[ScoredId]:
        return ranx_fusion(ranked, self.method, self.norm, tuple(weights or ()))
