"""The request that turns one passage into a golden question, and the reading of its reply.

The instructions live in ``prompts/golden_question.yaml``. The passage, with its document name and
page as attributes, is sent inside a ``<passage-NONCE ...>`` element whose random code occurs
nowhere in the text, so no document text (file names included) is outside the delimiters. The reply
is a JSON object ``{"question", "answer", "evidence": [quotes]}``, or ``{"skip": reason}`` when
the passage holds nothing to ask about; ``parse_question_reply`` finds it anywhere in the reply.

Left out: several questions per request, asking for distractors or unanswerable questions.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from rag_core.doc_ids import escape_controls
from rag_core.records import Passage
from rag_core.llm import json_objects_in, new_nonce

QUESTION_MAX_TOKENS = 600


class MalformedQuestionReply(ValueError):
    """The reply holds no JSON object with a question, an answer and evidence quotes (or a skip)."""


@dataclass(frozen=True)
class WrittenQuestion:
    question: str
    answer: str
    evidence: tuple[str, ...]  # quotes, as the model copied them from the passage


@lru_cache(maxsize=1)
def load_template() -> dict[str, Any]:
    text = resources.files("rag_core.generate.prompts").joinpath("golden_question.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def question_types() -> tuple[str, ...]:
    return tuple(load_template()["types"])


def question_prompt(passage: Passage, question_type: str, *, nonce: str | None = None) -> tuple[str, str]:
    """(system, user) asking for one question of `question_type` about `passage`."""
    template = load_template()
    if question_type not in template["types"]:
        raise ValueError(f"unknown question type {question_type!r}; valid types: {', '.join(template['types'])}")
    tag = "passage-" + new_nonce([passage.text, passage.doc_id], nonce)
    system = template["system"].replace("{passage_tag}", tag) + "\n" + template["output_format"]
    opening = escape_controls(f'<{tag} source="{html.escape(passage.doc_id)}" page="{passage.page}">')
    user = (
        f"Question type: {question_type}. {template['types'][question_type]}\n\n"
        f"Passage, between <{tag} ...> and </{tag}>:\n{opening}\n{passage.text}\n</{tag}>\n\n"
        "Reply with the JSON object only."
    )
    return system, user


def parse_question_reply(text: str) -> WrittenQuestion | str:
    """The question written, or the reason given for skipping the passage (a str)."""
    for value in json_objects_in(text):
        if "skip" in value and "question" not in value:
            return str(value["skip"]) or "skipped"
        if "question" in value:
            return _checked(value)
    raise MalformedQuestionReply(f"no JSON object with a question in the reply: {text[:200]!r}")


def _checked(value: dict[str, Any]) -> WrittenQuestion:
    question, answer, evidence = value.get("question"), value.get("answer"), value.get("evidence")
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(question, str) or not question.strip():
        raise MalformedQuestionReply("'question' must be a non-empty string")
    if not isinstance(answer, str) or not answer.strip():
        raise MalformedQuestionReply("'answer' must be a non-empty string")
    if not isinstance(evidence, list) or not evidence or not all(isinstance(q, str) and q.strip() for q in evidence):
        raise MalformedQuestionReply("'evidence' must be a non-empty list of quotes")
    return WrittenQuestion(question.strip(), answer.strip(), tuple(q.strip() for q in evidence))
