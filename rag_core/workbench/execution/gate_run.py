"""The quality gate's run (``rag-pipeline gate``): the baseline and the candidate configuration evaluated on
the same golden-set queries, over the store's (or a folder's) documents, then judged query by query.

The decision and its statistics (the one-sided paired t-test with a margin, Holm over metrics, the
intervals) are ``rag_core.workbench.statistics.gate``; this module only produces the two sides, and says
which golden set they read (``GateRun.golden``: the file, or the MLflow dataset version that
``mlflow:NAME`` resolved to, as ``eval`` records it in its run).
Left out: logging either evaluation to MLflow (the gate's result is its exit code and its table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rag_core.config import RagConfig
from rag_core.errors import BadInput
from rag_core.evaluate.evaluator import evaluate_config, golden_fingerprint
from rag_core.service import store_access
from rag_core.workbench.execution.evaluation import EvalInputs, load_eval_inputs
from rag_core.workbench.statistics.gate import DEFAULT_METRICS, GateResult, gate_values, per_query_values
from rag_core.workbench.statistics.selection import ALPHA


@dataclass(frozen=True)
class GateRun:
    result: GateResult
    golden: dict[str, Any]  # what was evaluated: source (the file, or mlflow:NAME@V), fingerprint; a version's fields

    def as_json(self) -> dict[str, Any]:
        return {**self.result.as_json(), "golden": self.golden}


def golden_used(inputs: EvalInputs) -> dict[str, Any]:
    """The golden set `inputs` holds: its source, queries and fingerprint; for an MLflow dataset its version."""
    used = {"source": inputs.golden_source, "queries": len(inputs.queries),
            "fingerprint": golden_fingerprint(inputs.queries)}
    dataset = inputs.golden_dataset
    if dataset is not None:
        used.update(name=dataset.name, version=dataset.version, dataset_id=dataset.dataset_id)
    return used


def run_gate(baseline: RagConfig, candidate: RagConfig, *, golden: str | Path, store_dir: str | Path,
             input_dir: str | Path | None = None, metrics: Sequence[str] = DEFAULT_METRICS, margin: float = 0.0,
             alpha: float = ALPHA, progress: bool = False) -> GateRun:
    """Evaluate both configurations on the golden set's queries over the store's (or `input_dir`'s) documents
    (with `progress`: each side named, then its reading, indexing and query bars)."""
    if not 0 < alpha < 1 or not math.isfinite(margin) or margin < 0:
        raise BadInput(f"`alpha` must be in (0, 1) and `margin` >= 0, got alpha {alpha}, margin {margin}")
    inputs = load_eval_inputs(input_dir=input_dir, golden=golden, store_dir=store_dir, progress=progress)
    sides = []
    with store_access(Path(store_dir)):
        for side, config in (("baseline", baseline), ("candidate", candidate)):
            if progress:
                print(f"Evaluating the {side}", flush=True)
            report = evaluate_config(config, inputs.corpus, inputs.queries, store_dir, progress=progress,
                                     read_seconds=inputs.read_seconds)
            sides.append(per_query_values(report.per_query, list(dict.fromkeys(metrics))))
    return GateRun(gate_values(*sides, margin=margin, alpha=alpha), golden_used(inputs))
