"""Evaluate: golden sets, relevance derived from evidence for any chunking, ranking metrics at chunk,
page and document level, one configuration's evaluation, and the LLM judge."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "evaluate_config": "evaluation", "EvalReport": "evaluation", "evaluate_rankings": "metrics",
    "load_golden": "golden", "GoldenQuery": "golden", "build_qrels": "relevance", "judge_answers": "answers",
    "generate_golden": "make_golden", "write_golden": "make_golden", "agreement": "calibration",
    "load_labels": "judge_labels",
})
