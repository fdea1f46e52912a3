"""``rag-pipeline eval``: evaluate one configuration and print the metrics table (or JSON).

The table (``format_report``) is also what the evaluation notebook shows. Loading inputs, evaluating
and logging are ``rag_core.workbench.evaluation``'s job.
Left out: sweeps (``rag_core.cli.sweep``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from rag_core.config import RagConfig
from rag_core.evaluate.evaluation import EvalReport
from rag_core.evaluate.metrics import metric_names
from rag_core.evaluate.relevance import LEVELS
from rag_core.finetune.fingerprints import trained_on_warnings
from rag_core.workbench.evaluation import evaluate_and_log, load_eval_inputs

MLFLOW_UI_URL = "http://127.0.0.1:5000"  # where `make mlflow-ui` serves the UI


# --- text output --------------------------------------------------------------------------------
def format_report(report: EvalReport) -> str:
    metrics, params = report.metrics, report.params
    ks = sorted({int(k) for k in params.get("metrics_k", "5,10").split(",")})
    names = metric_names(ks)
    lines = [f"Retrieval: {int(metrics.get('eval/queries', 0))} queries, mode {params.get('mode')}, "
             f"rerank_depth {params.get('rerank_depth')}; the final ranking is scored to depth {max(ks)}"]
    lines += _table(["level", *names], [[level, *(f"{metrics.get(f'{level}/{name}', 0.0):.3f}" for name in names)]
                                        for level in (*LEVELS, *(("child",) if "child/mrr" in metrics else ()))])
    lines += ["", f"Context (the k={params.get('k')} passages given to the LLM): "
                  f"recall {metrics.get('context/recall', 0.0):.3f}, precision {metrics.get('context/precision', 0.0):.3f}, "
                  f"{metrics.get('context/words', 0.0):.0f} words per query"]
    stages = [name[len("latency/"):-len("_p50_ms")] for name in metrics if name.endswith("_p50_ms")]
    if stages:
        lines += ["", "Latency per query (ms)"]
        lines += _table(["stage", "p50", "p95"], [[stage, f"{metrics[f'latency/{stage}_p50_ms']:.2f}",
                                                    f"{metrics[f'latency/{stage}_p95_ms']:.2f}"] for stage in stages])
    if "expansion/input_tokens" in metrics:
        lines.append(f"Query expansion {params.get('query_expansion')}: {metrics['expansion/input_tokens']:.0f} tokens in, "
                     f"{metrics['expansion/output_tokens']:.0f} out per query (LLM)")
    index = {name[len("index/"):]: value for name, value in metrics.items() if name.startswith("index/")}
    lines += ["", f"Index: {int(index.get('documents', 0))} documents, {int(index.get('chunks', 0))} chunks "
                  f"(chunked now: {'yes' if index.get('chunkings_built') else 'no, reused'}), "
                  f"ingest {index.get('ingest_seconds', 0.0):.1f} s"]
    if "embed_model_used" in params:
        rate = index.get("embed_chunks_per_s")
        lines.append(f"Embeddings: {int(index.get('embedded', 0))} computed"
                     + (f" ({rate:.1f} chunks/s)" if rate else "")
                     + f", {int(index.get('embed_cache_hits', 0))} from cache; {int(index.get('truncated', 0))} chunks "
                     f"({100 * index.get('truncated_share', 0.0):.1f}%) longer than the model's "
                     f"{int(index.get('max_seq_length', 0))} tokens")
        lines.append(f"Embedding model: {params['embed_model_used']}")
    if "rerank_model_used" in params:
        lines.append(f"Re-rank: {int(metrics.get('rerank/pairs_scored', 0))} pairs scored, "
                     f"{int(metrics.get('rerank/cache_hits', 0))} from cache; model: {params['rerank_model_used']}")
    return "\n".join(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    fmt = lambda row: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths)))  # noqa: E731
    return [fmt(header), *map(fmt, rows)]


# --- the CLI command ----------------------------------------------------------------------------
def run_eval_command(args: argparse.Namespace, config: RagConfig, store_dir: Path) -> int:
    """``rag-pipeline eval``: 0 on success; bad input raises (the CLI maps it to exit code 2)."""
    with contextlib.redirect_stdout(sys.stderr):  # progress never mixes with the table or the JSON
        inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, beir=args.beir, split=args.split,
                                  store_dir=store_dir, max_queries=args.max_queries, progress=True)
        from rag_core.retrieve.filters import parse_where

        evaluation = evaluate_and_log(config, inputs, store_dir, log_to_mlflow=not args.no_mlflow,
                                      experiment=args.experiment, judge=args.judge, progress=True,
                                      where=parse_where(getattr(args, "where", None) or []))
    report = evaluation.report
    for line in trained_on_warnings([report.params.get("embed_model_used", ""), report.params.get("rerank_model_used", "")],
                                    {query.id: query.query for query in inputs.queries}):
        print(f"warning: {line}", file=sys.stderr)
    if args.per_query:
        import pandas as pd

        Path(args.per_query).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(report.per_query).to_csv(args.per_query, index=False)
    if args.json:
        payload: dict[str, Any] = {"metrics": report.metrics, "per_query": report.per_query, "params": report.params}
        if evaluation.run_id:
            payload["mlflow"] = {"run_id": evaluation.run_id, "experiment": evaluation.experiment,
                                 "tracking_uri": evaluation.tracking_uri}
        print(json.dumps(payload, indent=2, default=str))
        return 0
    print(format_report(report))
    if args.per_query:
        print(f"\nPer-query table: {args.per_query}")
    if evaluation.run_id:
        from rag_core.workbench.experiment_view import runs_view_url
        from rag_core.workbench.tracking import Tracker

        print(f"\nMLflow: run {evaluation.run_id} in experiment {evaluation.experiment!r} ({evaluation.tracking_uri})")
        experiment_id = Tracker(evaluation.tracking_uri).experiment_id(evaluation.experiment)
        print(f"MLflow UI (make mlflow-ui): {runs_view_url(MLFLOW_UI_URL, experiment_id)}")
    return 0
