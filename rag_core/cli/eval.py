"""``rag-pipeline eval``: evaluate one configuration, log it as one MLflow run, print the metrics table (or JSON).

Loading inputs, evaluating and logging are ``rag_core.workbench.execution.evaluation``'s job; the table is
``rag_core.workbench.reports.text.format_eval_report`` (what the evaluation notebook shows too).
Left out: sweeps (``rag_core.cli.sweep``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from rag_core.cli.common import EXIT_OK, add_where_argument, config_from_args, store_from_args
from rag_core.retrieve.filters import parse_where
from rag_core.terminal_text import fit
from rag_core.writes import check_output_file, write_atomic

NAME = "eval"
HELP = "evaluate retrieval (and answers) against a golden set; logs one MLflow run"
DESCRIPTION = ("Run every golden-set query through the pipeline and report Recall@K, MRR, nDCG@K and hit rate at "
               "chunk, page and document level, evidence at a context budget, latency per stage and index statistics. "
               "--answers also answers every query (the LLM when a key is set, else extractively) and scores the "
               "answers without an LLM (exact match, token F1, contains, similarity, citation precision and recall, "
               "quote support); --oracle answers again from the golden evidence, to split the loss due to retrieval "
               "from the loss due to generation; --judge adds the LLM judge (needs a key).")
MLFLOW_UI_URL = "http://127.0.0.1:5000"  # where `make mlflow-ui` serves the UI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--golden", metavar="FILE", help="golden set (JSONL) over the documents of --input or the store, "
                        "or mlflow:NAME[@VERSION], a version of an MLflow golden dataset (rag-pipeline golden)")
    source.add_argument("--beir", metavar="DIR", help="a BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("--input", metavar="DIR", help="documents to evaluate on (default: the store's documents)")
    parser.add_argument("--split", default="test", help="BEIR qrels split [test]")
    parser.add_argument("--max-queries", type=int, default=None, metavar="N", help="evaluate only the first N queries")
    parser.add_argument("--judge", action="store_true", help="also generate answers and score them with the LLM judge "
                        "as well as the metrics that need no LLM (needs an API key)")
    parser.add_argument("--oracle", action="store_true", help="also answer every query from its golden evidence "
                        "passages and report, per answer metric, the loss due to retrieval (oracle - retrieved, "
                        "paired) and due to generation (perfect - oracle); implies --answers")
    parser.add_argument("--experiment", metavar="NAME", help="MLflow experiment (default: one per corpus + golden set)")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    parser.add_argument("--per-query", metavar="CSV", help="also write the per-query table to this CSV file")
    add_where_argument(parser, " (queries with their own \"filter\" in the golden set keep theirs)")


def run(args: argparse.Namespace) -> int:
    """0 on success; bad input raises (``rag_core.cli`` maps it to exit code 2)."""
    config, store_dir = config_from_args(args), store_from_args(args)  # settings errors, before anything runs
    if args.per_query:
        check_output_file(args.per_query, "--per-query")  # a folder or a path under a file: before evaluating
    from rag_core.finetune.fingerprints import trained_on_warnings
    from rag_core.workbench.execution.evaluation import evaluate_and_log, load_eval_inputs
    from rag_core.workbench.reports.text import format_eval_report
    from rag_core.workbench.tracking.tracker import TrackingTarget

    with contextlib.redirect_stdout(sys.stderr):  # progress never mixes with the table or the JSON
        inputs = load_eval_inputs(input_dir=args.input, golden=args.golden, beir=args.beir, split=args.split,
                                  store_dir=store_dir, max_queries=args.max_queries, progress=True)
        tracking = None if args.no_mlflow else TrackingTarget(experiment=args.experiment)
        evaluation = evaluate_and_log(config, inputs, store_dir, tracking=tracking, judge=args.judge,
                                      oracle=args.oracle, progress=True, where=parse_where(args.where))
    report = evaluation.report
    for line in trained_on_warnings([report.params.get("embed_model_used", ""), report.params.get("rerank_model_used", "")],
                                    {query.id: query.query for query in inputs.queries}):
        print(fit(f"warning: {line}"), file=sys.stderr)
    if args.per_query:
        import pandas as pd

        write_atomic(args.per_query, pd.DataFrame(report.per_query).to_csv(index=False))
    if args.json:
        from rag_core.workbench.statistics.oracle_loss import answer_losses

        payload: dict[str, Any] = {"metrics": report.metrics, "per_query": report.per_query, "params": report.params}
        losses = answer_losses(report.per_query)
        if losses:
            payload["oracle"] = [loss.as_dict() for loss in losses]
        if evaluation.run_id:
            payload["mlflow"] = {"run_id": evaluation.run_id, "experiment": evaluation.experiment,
                                 "tracking_uri": evaluation.tracking_uri}
        print(json.dumps(payload, indent=2, default=str))
        return EXIT_OK
    print(format_eval_report(report))
    if args.per_query:
        print(f"\nPer-query table: {args.per_query}")
    if evaluation.run_id:
        from rag_core.workbench.tracking.experiment_view import runs_view_url
        from rag_core.workbench.tracking.tracker import Tracker

        print(fit(f"\nMLflow: run {evaluation.run_id} in experiment {evaluation.experiment!r} ({evaluation.tracking_uri})"))
        experiment_id = Tracker(evaluation.tracking_uri).experiment_id(evaluation.experiment)
        print(fit(f"MLflow UI (make mlflow-ui): {runs_view_url(MLFLOW_UI_URL, experiment_id)}"))  # the URL: a line of its own
    return EXIT_OK
