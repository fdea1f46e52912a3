"""Answers in an evaluation: generate one per query, check its citations, and have an LLM judge it.

Needs an API key for the configured provider; without one, ``judge_answers`` raises ``MissingAPIKey``
(the CLI reports it) rather than scoring extractive answers as if they were the model's. A failure on
one query (rate limit, malformed judge reply, network) is recorded as missing for that query and the
evaluation goes on; missing scores never count as zero.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from rag_core.api_keys import redact
from rag_core.config import RagConfig
from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.judge import JudgeItem, judge_many
from rag_core.generate.answer import Answer, AnswerMode, answer_question
from rag_core.generate.citations import average_citation_checks
from rag_core.llm import LLMClient, LLMError
from rag_core.progress import progress as progress_bar
from rag_core.retrieve.pipeline import Retrieval

ANSWER_ERROR = "error"  # the answer_mode of a query whose answer failed (an LLMError), beside AnswerMode's


def judge_answers(queries: Sequence[GoldenQuery], retrievals: Mapping[str, Retrieval], config: RagConfig,
                  progress: bool = False, client: LLMClient | None = None,
                  backoff_s: float = 2.0) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(averaged metrics, one row per query) for the answers to `queries`."""
    client = client or LLMClient.from_config(config)  # MissingAPIKey names the variable to set
    answers: list[Answer | None] = []
    rows: list[dict[str, Any]] = []
    for query in progress_bar(queries, progress, "Answering", unit="query"):
        started = time.perf_counter()
        try:
            answer = answer_question(query.query, retrievals[query.id].hits, config, client, backoff_s=backoff_s)
            rows.append({"answer_mode": answer.mode, "answer": answer.text, **_usage_columns(answer),
                         "answer_ms": (time.perf_counter() - started) * 1000})
        except LLMError as exc:
            answer = None
            rows.append({"answer_mode": ANSWER_ERROR, "answer": "", "answer_error": redact(str(exc))})
        answers.append(answer)

    judged = [(index, answer) for index, answer in enumerate(answers) if answer is not None and answer.mode == AnswerMode.LLM]
    items = [JudgeItem(queries[i].query, answer.text, answer.passages, queries[i].answer, queries[i].id)
             for i, answer in judged]
    scores, metrics = judge_many(items, client=client, backoff_s=backoff_s) if items else ([], {})
    metrics = dict(metrics)
    for (index, _), score in zip(judged, scores):
        rows[index].update(score.as_row())
    checks = [answer.citation_check for answer in answers if answer is not None and answer.citation_check]
    if checks:
        metrics.update(average_citation_checks(checks))
    modes = [row["answer_mode"] for row in rows]
    for mode in (AnswerMode.LLM, AnswerMode.NO_ANSWER, AnswerMode.EXTRACTIVE, ANSWER_ERROR):
        metrics[f"answers/{mode}_share"] = modes.count(mode) / len(modes) if modes else 0.0
    return metrics, rows


def _usage_columns(answer: Answer) -> dict[str, Any]:
    """The model and its token counts (LLM answers only): per-query cost, and the generation span of a trace."""
    if answer.usage is None:
        return {}
    return {"answer_model": answer.model, "answer_input_tokens": answer.usage["input_tokens"],
            "answer_output_tokens": answer.usage["output_tokens"]}

