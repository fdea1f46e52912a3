"""The quality gate's run (``rag-pipeline gate``): the baseline and the candidate configuration evaluated on
the same golden-set queries, over the store's (or a folder's) documents, then judged query by query.

The decision and its statistics (the one-sided paired t-test with a margin, Holm over metrics, the
intervals) are ``rag_core.workbench.statistics.gate``; this module only produces the two sides, and says
which golden set they read (``GateRun.golden``: the file, or the MLflow dataset version that
``mlflow:NAME`` resolved to, as ``eval`` records it in its run).
A gated answer or citation metric (``answer/token_f1``) makes both sides answer every query; ``--judge`` makes
them answer with the LLM and gates on ``judge/pairwise_win`` as well: the two answers to each query judged
twice, in both orders, a verdict that flips counted as a tie (``rag_core.evaluate.pairwise_judge``).
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
from rag_core.evaluate.metric_catalog import METRICS
from rag_core.evaluate.pairwise_judge import PAIRWISE_WIN, judge_pairs, pair_items
from rag_core.llm import LLMClient
from rag_core.service import store_access
from rag_core.workbench.execution.evaluation import EvalInputs, load_eval_inputs
from rag_core.workbench.statistics.gate import DEFAULT_METRICS, GateResult, gate_values, per_query_values
from rag_core.workbench.statistics.selection import ALPHA

ANSWER_LEVELS = ("answer", "citation")  # metrics measured on answers: both sides answer every query


@dataclass(frozen=True)
class GateRun:
    result: GateResult
    golden: dict[str, Any]  # what was evaluated: source (the file, or mlflow:NAME@V), fingerprint; a version's fields
    pairwise: dict[str, Any] | None = None  # gate --judge: "counts" (wins, ties, flips, failures), "verdicts" per query

    def as_json(self) -> dict[str, Any]:
        return {**self.result.as_json(), "golden": self.golden, **({"pairwise": self.pairwise} if self.pairwise else {})}


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
             alpha: float = ALPHA, progress: bool = False, judge: bool = False) -> GateRun:
    """Evaluate both configurations on the golden set's queries over the store's (or `input_dir`'s) documents
    (with `progress`: each side named, then its reading, indexing and query bars). A gated answer or citation
    metric makes both sides answer (the ``answers`` setting); `judge` makes them answer with the LLM and gates
    on ``judge/pairwise_win`` too: each pair of answers judged twice, swapped (``pairwise_judge``)."""
    if not 0 < alpha < 1 or not math.isfinite(margin) or margin < 0:
        raise BadInput(f"`alpha` must be in (0, 1) and `margin` >= 0, got alpha {alpha}, margin {margin}")
    client = LLMClient.from_config(baseline) if judge else None  # MissingAPIKey (exit 1) before any work
    metrics = list(dict.fromkeys([*metrics, *([PAIRWISE_WIN] if judge else [])]))
    scored = [metric for metric in metrics if metric != PAIRWISE_WIN]
    answers = judge or any(found.level in ANSWER_LEVELS for found in map(METRICS.lookup, scored) if found)
    inputs = load_eval_inputs(input_dir=input_dir, golden=golden, store_dir=store_dir, progress=progress)
    sides, rows = [], []
    with store_access(Path(store_dir)):
        for side, config in (("baseline", baseline), ("candidate", candidate)):
            if progress:
                print(f"Evaluating the {side}", flush=True)
            report = evaluate_config(config.replace(answers=True) if answers else config, inputs.corpus,
                                     inputs.queries, store_dir, progress=progress, read_seconds=inputs.read_seconds)
            sides.append(per_query_values(report.per_query, scored))
            rows.append(report.per_query)
    pairwise = None
    if client is not None:
        if progress:
            print("Judging each pair of answers twice, in both orders", flush=True)
        verdicts, counts = judge_pairs(pair_items(inputs.queries, *rows), client)
        wins = {str(verdict.query_id): verdict.candidate_score for verdict in verdicts}
        sides[0][PAIRWISE_WIN], sides[1][PAIRWISE_WIN] = {q: 1.0 - w for q, w in wins.items()}, wins
        pairwise = {"counts": counts, "verdicts": [verdict.as_row() for verdict in verdicts]}
    return GateRun(gate_values(*sides, margin=margin, alpha=alpha), golden_used(inputs), pairwise)
