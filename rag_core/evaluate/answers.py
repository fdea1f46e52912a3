"""Answers in an evaluation: one per query, scored by the metrics that need no LLM, judged by an LLM when
asked, and the same answer step given the golden evidence instead of the retrieved passages (the oracle).

``evaluate_answers`` is what ``eval --answers`` (the ``answers`` setting), ``eval --judge`` and ``eval --oracle``
run after retrieval: it answers every query as ``rag-pipeline query`` would (``answer_question``: the LLM when a
key is set, else the extractive answer, chosen by the pipeline's sentence scorer), then scores each answer
(``rag_core.evaluate.answer_scoring``: exact match, token F1, contains, numbers, similarity, citation precision,
recall and quote support). With ``judge`` the LLM judge scores the generated answers too (``judge_answers``:
an API key is required, ``MissingAPIKey`` otherwise, so extractive answers are never judged as if they were
the model's). With ``oracle`` every query is answered again from its golden evidence passages
(``rag_core.evaluate.oracle``), without the no-answer threshold, and scored the same way: columns and metrics
``oracle/answer/token_f1``, ... beside ``answer/token_f1``; their paired difference is the loss due to retrieval
(``rag_core.workbench.statistics.oracle_loss``).

A failure on one query (rate limit, network, malformed judge reply) is recorded for that query and the
evaluation goes on: its answer scores as the empty text, its judge scores are missing (never 0) and counted in
``judge/failures``. ``answer/<mode>_share`` says how the answers were made (llm, extractive, no_answer, error);
``timing/answer_metrics_seconds`` what scoring the answers took.
Left out: caching answers between runs, the pairwise judge (``rag_core.evaluate.pairwise_judge``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rag_core.api_keys import redact
from rag_core.config import RagConfig
from rag_core.evaluate.answer_scoring import AnswerContext, average_scores, score_answers
from rag_core.evaluate.golden import GoldenQuery
from rag_core.evaluate.judge import JudgeItem, judge_many
from rag_core.evaluate.oracle import ORACLE, oracle_passages
from rag_core.generate.answer import Answer, AnswerMode, answer_question
from rag_core.generate.citations import average_citation_checks
from rag_core.llm import LLMClient, LLMError
from rag_core.progress import progress as progress_bar
from rag_core.records import Hit
from rag_core.retrieve.pipeline import Retrieval

ANSWER_ERROR = "error"  # the answer_mode of a query whose answer failed (an LLMError), beside AnswerMode's


@dataclass
class AnswerSet:
    """One answer per query (None: it failed) and its row of the per-query table."""

    answers: list[Answer | None] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def answer_all(queries: Sequence[GoldenQuery], passages: Mapping[str, Sequence[Hit]], config: RagConfig, *,
               client: LLMClient | None = None, context: AnswerContext | None = None, check_relevance: bool = True,
               progress: bool = False, backoff_s: float = 2.0, label: str = "Answering") -> AnswerSet:
    """Answer each query from its `passages` as ``answer_question`` does (the LLM when `client` is given or a
    key is set, else extractively, by `context`'s sentence scorer and documents)."""
    answers = AnswerSet()
    scorer = context.sentence_scorer if context else None
    documents = context.documents if context else None
    for query in progress_bar(queries, progress, label, unit="query"):
        started = time.perf_counter()
        try:
            answer = answer_question(query.query, passages.get(query.id, ()), config, client, backoff_s=backoff_s,
                                     sentence_scorer=scorer, documents=documents, check_relevance=check_relevance)
            answers.rows.append({"answer_mode": answer.mode, "answer": answer.text, **_usage_columns(answer),
                                 "answer_ms": (time.perf_counter() - started) * 1000})
        except LLMError as exc:
            answer = None
            answers.rows.append({"answer_mode": ANSWER_ERROR, "answer": "", "answer_error": redact(str(exc))})
        answers.answers.append(answer)
    return answers


def evaluate_answers(queries: Sequence[GoldenQuery], retrievals: Mapping[str, Retrieval], config: RagConfig,
                     context: AnswerContext, *, judge: bool = False, oracle: bool = False, progress: bool = False,
                     client: LLMClient | None = None, backoff_s: float = 2.0) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(averaged metrics, one row per query): answers scored (see the module docstring)."""
    if judge:
        client = client or LLMClient.from_config(config)  # MissingAPIKey names the variable to set
    answered = answer_all(queries, {qid: retrieval.hits for qid, retrieval in retrievals.items()}, config,
                          client=client, context=context, progress=progress, backoff_s=backoff_s)
    started = time.perf_counter()
    scores = score_answers(queries, answered.answers, context, config.page_credit)
    metrics = {**average_scores(scores), **answer_shares(answered.rows), **citation_checks(answered.answers),
               "timing/answer_metrics_seconds": time.perf_counter() - started}  # what scoring costs (issue 52: <= 5%)
    rows = [{**row, **values} for row, values in zip(answered.rows, scores)]
    if judge:
        judged, judge_rows = judge_set(queries, answered.answers, client, backoff_s)
        metrics.update(judged)
        for index, extra in judge_rows.items():
            rows[index].update(extra)
    if oracle:
        metrics_oracle, rows_oracle = oracle_answers(queries, config, context, client, progress, backoff_s)
        metrics.update(metrics_oracle)
        for row, extra in zip(rows, rows_oracle):
            row.update(extra)
    return metrics, rows


def oracle_answers(queries: Sequence[GoldenQuery], config: RagConfig, context: AnswerContext,
                   client: LLMClient | None, progress: bool, backoff_s: float) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The same answer step given each query's golden evidence passages: ``oracle/``-prefixed metrics and columns."""
    passages = {query.id: oracle_passages(query, context.documents) for query in queries}
    given = config.replace(k=max([config.k, *map(len, passages.values())]))  # every evidence passage is given
    answered = answer_all(queries, passages, given, client=client, context=context, check_relevance=False,
                          progress=progress, backoff_s=backoff_s, label="Answering from the evidence (oracle)")
    scores = score_answers(queries, answered.answers, context, config.page_credit)
    prefixed = lambda values: {f"{ORACLE}/{name}": value for name, value in values.items()}  # noqa: E731
    metrics = prefixed({**average_scores(scores), **answer_shares(answered.rows)})
    rows = [prefixed({"answer_mode": row["answer_mode"], "answer": row["answer"], **values})
            for row, values in zip(answered.rows, scores)]
    return metrics, rows


def judge_set(queries: Sequence[GoldenQuery], answers: Sequence[Answer | None], client: LLMClient,
              backoff_s: float) -> tuple[dict[str, float], dict[int, dict[str, Any]]]:
    """The judge's averages and its columns by query position, for the generated (LLM) answers."""
    judged = [(index, answer) for index, answer in enumerate(answers)
              if answer is not None and answer.mode == AnswerMode.LLM]
    items = [JudgeItem(queries[i].query, answer.text, answer.passages, queries[i].answer, queries[i].id)
             for i, answer in judged]
    scores, metrics = judge_many(items, client=client, backoff_s=backoff_s) if items else ([], {})
    return dict(metrics), {index: score.as_row() for (index, _), score in zip(judged, scores)}


def judge_answers(queries: Sequence[GoldenQuery], retrievals: Mapping[str, Retrieval], config: RagConfig,
                  progress: bool = False, client: LLMClient | None = None,
                  backoff_s: float = 2.0) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """(averaged metrics, one row per query) for the LLM's answers to `queries`, judged (a key is required)."""
    client = client or LLMClient.from_config(config)  # MissingAPIKey names the variable to set
    answered = answer_all(queries, {qid: retrieval.hits for qid, retrieval in retrievals.items()}, config,
                          client=client, progress=progress, backoff_s=backoff_s)
    metrics, judge_rows = judge_set(queries, answered.answers, client, backoff_s)
    for index, extra in judge_rows.items():
        answered.rows[index].update(extra)
    metrics.update(citation_checks(answered.answers))
    metrics.update(answer_shares(answered.rows))
    return metrics, answered.rows


def citation_checks(answers: Sequence[Answer | None]) -> dict[str, float]:
    """``citation/valid_share`` and ``citation/cited_sentence_share`` of the generated answers."""
    return average_citation_checks(answer.citation_check for answer in answers if answer is not None)


def answer_shares(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``answer/<mode>_share``: how the answers were made (llm, no_answer, extractive, error)."""
    modes = [row["answer_mode"] for row in rows]
    return {f"answer/{mode}_share": modes.count(mode) / len(modes) if modes else 0.0
            for mode in (AnswerMode.LLM, AnswerMode.NO_ANSWER, AnswerMode.EXTRACTIVE, ANSWER_ERROR)}


def _usage_columns(answer: Answer) -> dict[str, Any]:
    """The model and its token counts (LLM answers only): per-query cost, and the generation span of a trace."""
    if answer.usage is None:
        return {}
    return {"answer_model": answer.model, "answer_input_tokens": answer.usage["input_tokens"],
            "answer_output_tokens": answer.usage["output_tokens"]}
