"""Evaluate: golden sets (and BEIR datasets), relevance derived from evidence for any chunking, ranking
metrics at chunk, page and document level, one configuration's evaluation (``evaluator``), golden sets
written by an LLM (``golden_generation``), the LLM judge, and golden-set lines from labelled traces
(``feedback``)."""

from rag_core._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "evaluate_config": "evaluator", "EvalReport": "evaluator", "evaluate_rankings": "metrics",
    "load_golden": "golden", "GoldenQuery": "golden", "build_qrels": "relevance", "judge_answers": "answers",
    "generate_golden": "golden_generation", "write_golden": "golden_generation", "agreement": "calibration",
    "load_labels": "judge_labels", "load_beir": "beir", "RankingMetrics": "metrics", "export_feedback": "feedback",
})
