"""LLM-as-judge: faithfulness, answer relevance, coverage and (with a reference) answer correctness.

Each score is an integer 1-5 from its own request, following a written rubric with few-shot
examples, all kept in ``prompts/judge_rubrics.yaml``. The judge replies with a JSON object
``{"score": n, "reason": "..."}``; ``parse_judge_reply`` finds it anywhere in the reply.

Failures: a rate limit, an unreachable server or a malformed reply (no JSON object, or a score that
is not an integer from 1 to 5) is retried with exponential backoff (``retries`` times, starting at
``backoff_s``); if it still fails, the score is recorded as missing (None, with the reason in
``errors``), never as 0, and averages leave it out; it is counted (``judge/failures`` per query and in
all, ``judge/unparseable`` for replies that never parsed), so a judge that fails often shows. A refused key or an over-long prompt is not
retried. ``judge_many`` carries on past failures; after a missing or refused key it records the
remaining queries as missing without calling the API again.

The judge is whichever ``LLMClient`` it is given (the CLI passes the generation client).
Left out: pairwise comparison of runs (``rag_core.evaluate.pairwise_judge``), caching of judge replies (calibration against a person's scores is
``rag_core.workbench.statistics.judge_calibration``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Iterable, Sequence

import yaml

from rag_core.api_keys import redact
from rag_core.evaluate.metric_registry import METRICS as METRIC_REGISTRY
from rag_core.generate.answer import format_passages
from rag_core.llm import (TRANSIENT_ERRORS, InvalidAPIKey, LLMClient, LLMError, MissingAPIKey, delimited,
                          json_objects_in, new_nonce, retry_delay)
from rag_core.records import Hit

log = logging.getLogger(__name__)

METRICS = ("faithfulness", "answer_relevance", "coverage", "answer_correctness")
for _axis, _rubric in (("faithfulness", "every claim supported by the passages"),
                       ("answer_relevance", "the answer addresses the question"),
                       ("coverage", "the answer uses what the passages hold for the question"),
                       ("answer_correctness", "the answer agrees with the golden answer")):
    METRIC_REGISTRY.declare(_axis, ("judge",), f"LLM judge, 1-5: {_rubric} (rubric in prompts/judge_rubrics.yaml)",
                            best=5.0)
METRIC_REGISTRY.declare("failures", ("judge",), "judge scores missing after retries (unparseable replies, rate "
                        "limits, network): counted, never dropped unseen", higher_is_better=False)
METRIC_REGISTRY.declare("unparseable", ("judge",), "of the failures, replies that never held a valid score",
                        higher_is_better=False, per_query=False)
JUDGE_MAX_TOKENS = 400


class MalformedJudgeReply(ValueError):
    """The judge's reply holds no JSON object with an integer score from 1 to 5."""


@dataclass(frozen=True)
class JudgeScores:
    faithfulness: int | None = None
    answer_relevance: int | None = None
    coverage: int | None = None
    answer_correctness: int | None = None  # None without an error: no reference answer given
    reasons: dict[str, str] = field(default_factory=dict)  # metric -> the judge's reason
    errors: dict[str, str] = field(default_factory=dict)  # metric -> why the score is missing
    query_id: str | None = None
    model: str | None = None  # the judge model

    def scores(self) -> dict[str, int | None]:
        return {metric: getattr(self, metric) for metric in METRICS}

    @property
    def missing(self) -> list[str]:
        return list(self.errors)

    @property
    def unparseable(self) -> int:
        """Scores missing because the judge's replies never parsed (``MalformedJudgeReply``)."""
        return sum(error.startswith(MalformedJudgeReply.__name__) for error in self.errors.values())

    def as_row(self) -> dict[str, Any]:
        """Flat columns for the per-query results table."""
        row: dict[str, Any] = {f"judge/{metric}": score for metric, score in self.scores().items()}
        row.update({f"judge/{metric}_reason": reason for metric, reason in self.reasons.items()})
        row.update({f"judge/{metric}_error": error for metric, error in self.errors.items()})
        row["judge/failures"] = len(self.errors)  # counted per query: a missing score is never dropped unseen
        return row


@dataclass(frozen=True)
class JudgeItem:
    query: str
    answer_text: str
    hits: Sequence[Hit]  # the passages the answer was generated from
    reference_answer: str | None = None
    query_id: str | None = None


# --- prompts ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def load_rubrics() -> dict[str, Any]:
    text = resources.files("rag_core.generate.prompts").joinpath("judge_rubrics.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def judge_prompt(
    metric: str, query: str, answer_text: str, hits: Sequence[Hit], reference_answer: str | None = None
) -> tuple[str, str]:
    """(system, user) asking for one score."""
    rubrics = load_rubrics()
    if metric not in rubrics["rubrics"]:
        raise ValueError(f"unknown judge metric {metric!r}; valid metrics: {', '.join(rubrics['rubrics'])}")
    rubric = rubrics["rubrics"][metric]
    texts = [query, answer_text, reference_answer or "", *(h.chunk.text for h in hits), *(h.chunk.doc_id for h in hits)]
    nonce = new_nonce(texts)
    tags = {"passage_tag": f"passage-{nonce}", "answer_tag": f"answer-{nonce}", "reference_tag": f"reference-{nonce}",
            "question_tag": f"question-{nonce}"}
    system = rubrics["system"]
    for name, tag in tags.items():
        system = system.replace("{" + name + "}", tag)
    scale = "\n".join(f"{score}: {rubric['scale'][score]}" for score in sorted(rubric["scale"], reverse=True))
    examples = "\n\n".join(_format_example(n, example) for n, example in enumerate(rubric["examples"], start=1))
    system = (
        f"{system}\nRubric: {rubric['title']}. {rubric['question']}\n{scale}\n\n"
        f"Examples (these are illustrations, not the case to score):\n\n{examples}\n\n{rubrics['output_format']}"
    )
    parts = [f"Question:\n{delimited(tags['question_tag'], query)}"]
    if "passages" in rubric["uses"]:
        parts.append(f"Passages ({len(hits)}):\n{format_passages(hits, tags['passage_tag'])}")
    if "reference" in rubric["uses"]:
        parts.append(f"Reference answer:\n{delimited(tags['reference_tag'], str(reference_answer))}")
    parts.append(f"Answer to evaluate:\n{delimited(tags['answer_tag'], answer_text)}")
    parts.append(f"Score the answer's {rubric['title'].lower()}: {rubric['question']} Reply with the JSON object only.")
    return system, "\n\n".join(parts)


def _format_example(number: int, example: dict[str, Any]) -> str:
    lines = [f"Example {number}", f"Question: {example['query']}"]
    if "passages" in example:
        lines += ["Passages:", *(f"- {passage}" for passage in example["passages"])]
    if "reference" in example:
        lines.append(f"Reference answer: {example['reference']}")
    lines += [f"Answer: {example['answer']}", f"Reply: {json.dumps(example['reply'])}"]
    return "\n".join(lines)


def parse_judge_reply(text: str) -> tuple[int, str]:
    """(score, reason) from the first JSON object in ``text`` that has a "score" key."""
    for value in json_objects_in(text):
        if "score" in value:
            score = value["score"]
            if isinstance(score, str) and score.strip().isdigit():
                score = int(score.strip())
            if isinstance(score, float) and score.is_integer():
                score = int(score)
            if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
                raise MalformedJudgeReply(f"judge score {value['score']!r} is not an integer from 1 to 5")
            return score, str(value.get("reason", ""))
    raise MalformedJudgeReply(f"no JSON object with a score in the judge's reply: {text[:200]!r}")


# --- judging ------------------------------------------------------------------------------------
def judge_answer(
    query: str,
    answer_text: str,
    hits: Sequence[Hit],
    reference_answer: str | None = None,
    *,
    client: LLMClient,
    retries: int = 3,
    backoff_s: float = 2.0,
    max_delay_s: float = 60.0,
    query_id: str | None = None,
) -> JudgeScores:
    """All applicable scores for one answer; failures are recorded as missing, never raised."""
    item = JudgeItem(query, answer_text, hits, reference_answer, query_id)
    scores, _ = _judge(item, client, retries, backoff_s, max_delay_s)
    return scores


def judge_many(
    items: Iterable[JudgeItem],
    *,
    client: LLMClient,
    retries: int = 3,
    backoff_s: float = 2.0,
    max_delay_s: float = 60.0,
) -> tuple[list[JudgeScores], dict[str, float]]:
    """(per-query scores, averages). A missing or refused key stops further calls (see docstring)."""
    per_query: list[JudgeScores] = []
    fatal: LLMError | None = None
    for item in items:
        if fatal is not None:
            errors = {metric: f"not judged: {type(fatal).__name__}: {fatal}" for metric in _metrics_for(item)}
            per_query.append(JudgeScores(errors=errors, query_id=item.query_id, model=client.model))
            continue
        scores, fatal = _judge(item, client, retries, backoff_s, max_delay_s)
        per_query.append(scores)
    return per_query, average_judge_scores(per_query)


def average_judge_scores(per_query: Sequence[JudgeScores]) -> dict[str, float]:
    """``judge/<metric>``: mean of the scores present (absent when none is); ``judge/failures``: the scores
    missing (every cause); ``judge/unparseable``: of which the judge's replies never parsed."""
    averages: dict[str, float] = {}
    for metric in METRICS:
        present = [s for s in (getattr(scores, metric) for scores in per_query) if s is not None]
        if present:
            averages[f"judge/{metric}"] = sum(present) / len(present)
    averages["judge/failures"] = float(sum(len(scores.errors) for scores in per_query))
    averages["judge/unparseable"] = float(sum(scores.unparseable for scores in per_query))
    return averages


def _metrics_for(item: JudgeItem) -> list[str]:
    return [m for m in METRICS if m != "answer_correctness" or item.reference_answer]


def _judge(
    item: JudgeItem, client: LLMClient, retries: int, backoff_s: float, max_delay_s: float
) -> tuple[JudgeScores, LLMError | None]:
    """(scores, the key error that makes further calls pointless, if one happened)."""
    values: dict[str, int] = {}
    reasons: dict[str, str] = {}
    errors: dict[str, str] = {}
    fatal: LLMError | None = None
    for metric in _metrics_for(item):
        if fatal is not None:
            errors[metric] = f"not judged: {type(fatal).__name__}: {fatal}"
            continue
        system, user = judge_prompt(metric, item.query, item.answer_text, item.hits, item.reference_answer)
        outcome = _score_with_retries(client, system, user, retries, backoff_s, max_delay_s)
        if isinstance(outcome, tuple):
            values[metric], reasons[metric] = outcome
            continue
        errors[metric] = redact(f"{type(outcome).__name__}: {outcome}")
        which = item.query_id or repr(item.query[:60])
        log.warning("judge %s for query %s is missing: %s", metric, which, errors[metric])
        if isinstance(outcome, (MissingAPIKey, InvalidAPIKey)):
            fatal = outcome
    scores = JudgeScores(**values, reasons=reasons, errors=errors, query_id=item.query_id, model=client.model)
    return scores, fatal


def _score_with_retries(
    client: LLMClient, system: str, user: str, retries: int, backoff_s: float, max_delay_s: float
) -> tuple[int, str] | Exception:
    """(score, reason), or the last error once retries are spent (or at once when retrying cannot help)."""
    return ask_with_retries(client, system, user, parse_judge_reply, retries, backoff_s, max_delay_s)


def ask_with_retries(client: LLMClient, system: str, user: str, parse: Callable[[str], Any], retries: int,
                     backoff_s: float, max_delay_s: float) -> Any:
    """``parse`` of the judge's reply, or the last error once retries are spent: a rate limit, a server error
    or a reply ``parse`` rejects (``MalformedJudgeReply``) is retried with backoff; a refused key, an over-long
    prompt or a bad request is returned at once (the same next time)."""
    last: Exception = MalformedJudgeReply("not attempted")
    for attempt in range(retries + 1):
        try:
            return parse(client.complete(system, user, JUDGE_MAX_TOKENS).text)
        except (*TRANSIENT_ERRORS, MalformedJudgeReply) as exc:
            last = exc
        except LLMError as exc:  # refused key, prompt too long, bad request: the same next time
            return exc
        if attempt < retries:
            delay = retry_delay(attempt, last, backoff_s, max_delay_s)
            log.info("judge call failed (%s); retry %d/%d in %.2fs", redact(str(last)), attempt + 1, retries, delay)
            time.sleep(delay)
    return last
