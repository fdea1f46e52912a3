"""``rag-pipeline query "QUESTION"``: retrieve passages and answer with citations (``--explain``: each
passage's rank and score at every stage).

The work is ``rag_core.service.answer_query``; the text is ``rag_core.workbench.reports.text``.
"""

from __future__ import annotations

import argparse
import sys
import time

from rag_core.cli.common import EXIT_OK, add_where_argument, config_from_args, emit, store_from_args
from rag_core.retrieve.filters import parse_where
from rag_core.terminal_text import fit

NAME = "query"
HELP = "answer a question from the ingested documents, with citations"
DESCRIPTION = ("Retrieve passages for QUESTION and answer with [Source: document, page N] citations (LLM with an "
               "API key, extractive without).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument("--explain", action="store_true",
                        help="show each final passage's rank and score at every stage (vector, BM25, fused, re-ranked)")
    parser.add_argument("--no-llm", action="store_true", help="never call the LLM: extractive answer")
    parser.add_argument("--trace", action="store_true",
                        help="log the question, passages and answer as an MLflow trace to label (setting trace_queries)")
    parser.add_argument("--experiment", default=None, metavar="NAME", help="MLflow experiment of --trace [queries]")
    add_where_argument(parser)


def run(args: argparse.Namespace) -> int:
    from rag_core.generate.answer import quote_passages
    from rag_core.service import answer_query
    from rag_core.workbench.reports.text import format_answer, format_explain

    config = config_from_args(args)
    target = trace_target(args) if args.trace or config.trace_queries else None  # a bad store fails before answering
    started_ns = time.time_ns()
    result = answer_query(args.question, store_from_args(args), config, use_llm=not args.no_llm,
                          where=parse_where(args.where))
    text = format_answer(result)
    if args.explain:
        text += "\n\n" + format_explain(result, config)
        if result.answer.passages:  # an extractive answer quotes a few sentences of them: here they are whole
            text += "\n\nThe passages given:\n\n" + quote_passages(result.answer.passages)
    trace = log_trace(target, config, result, started_ns) if target else None
    emit(args, {**result.as_json(), **({"trace": trace.as_json()} if trace else {})}, text)
    return EXIT_OK


def trace_target(args: argparse.Namespace):
    """The tracking store and experiment of --trace, checked (a deleted experiment is bad input)."""
    from rag_core.workbench.tracking.query_traces import DEFAULT_EXPERIMENT, trace_target as checked_target

    return checked_target(args.experiment or DEFAULT_EXPERIMENT)


def log_trace(target, config, result, started_ns: int):
    """Log the answered question as an MLflow trace; says where on stderr."""
    from rag_core.workbench.tracking.query_traces import log_answered_query

    trace = log_answered_query(result, config, started_ns=started_ns, target=target)
    print(fit(f"MLflow trace {trace.trace_id} in experiment {trace.experiment!r} ({trace.tracking_uri})"), file=sys.stderr)
    return trace
