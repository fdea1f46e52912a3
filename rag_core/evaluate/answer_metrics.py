"""Answer metrics that need no LLM: exact match, token F1 and "contains" against the golden answer, with
numbers compared as numbers.

Each scores what an answer says (``rag_core.generate.answer.answer_body``: the text without its citation
markers and without the extractive answer's label) against the golden set's ``answer``, after SQuAD's
normalisation (Rajpurkar et al., "SQuAD: 100,000+ Questions for Machine Comprehension of Text", 2016, and
its evaluation script v1.1): lower case, punctuation removed, the articles a, an and the removed, white space
collapsed. When the golden answer is a number, every number of the answer that matches it
(``rag_core.evaluate.answer_numbers``: sign, the question's unit, rounding to the golden precision) is first
written as the golden answer writes it, so the three compare numbers as numbers and the rest as text.

- ``answer/exact_match``: 1 when the normalised answer is the normalised golden answer, else 0;
- ``answer/token_f1``: the harmonic mean of the shares of the answer's tokens found in the golden answer and
  of the golden answer's tokens found in the answer (tokens as multisets; 0 when none is shared);
- ``answer/contains``: 1 when the normalised golden answer occurs in the normalised answer as whole tokens
  (FlashRAG's and BERGEN's "match");
- ``answer/number_match``: for a numeric golden answer only, 1 when the answer holds a matching number.

A query without a golden answer has no value (left out of the averages, never 0). Each function has the
registry's answer-metric shape ``(answer body, golden answer, question) -> value or None``.
Left out: answer similarity (a model: ``rag_core.evaluate.answer_similarity``), several golden answers per
question (SQuAD's maximum over them).
"""

from __future__ import annotations

import re
import string
from collections import Counter

from rag_core.evaluate.answer_numbers import holds_gold_number, with_gold_number
from rag_core.evaluate.metric_registry import METRICS

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalise(text: str) -> str:
    """SQuAD's ``normalize_answer``: lower case, punctuation, articles and extra white space removed."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _compared(answer: str, gold: str | None, question: str) -> tuple[list[str], list[str]] | None:
    """(answer tokens, golden tokens), numbers matching the golden one written alike; None without a golden answer."""
    if gold is None or not normalise(gold):
        return None
    return normalise(with_gold_number(answer, gold, question)).split(), normalise(gold).split()


@METRICS.define("exact_match", ("answer",), "1 when the answer is the golden answer (SQuAD normalisation; numbers "
                "as numbers)", best=1.0)
def exact_match(answer: str, gold: str | None, question: str = "") -> float | None:
    tokens = _compared(answer, gold, question)
    return None if tokens is None else float(tokens[0] == tokens[1])


@METRICS.define("token_f1", ("answer",), "F1 of the answer's and the golden answer's tokens (SQuAD; numbers as "
                "numbers)", best=1.0)
def token_f1(answer: str, gold: str | None, question: str = "") -> float | None:
    tokens = _compared(answer, gold, question)
    if tokens is None:
        return None
    predicted, expected = tokens
    shared = sum((Counter(predicted) & Counter(expected)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(expected)
    return 2 * precision * recall / (precision + recall)


@METRICS.define("contains", ("answer",), "1 when the golden answer occurs in the answer (SQuAD normalisation; "
                "numbers as numbers)", best=1.0)
def contains(answer: str, gold: str | None, question: str = "") -> float | None:
    tokens = _compared(answer, gold, question)
    if tokens is None:
        return None
    return float(f" {' '.join(tokens[1])} " in f" {' '.join(tokens[0])} ")


@METRICS.define("number_match", ("answer",), "numeric golden answers only: 1 when the answer holds the golden "
                "number (sign, the question's unit, rounded to the golden precision)", best=1.0)
def number_match(answer: str, gold: str | None, question: str = "") -> float | None:
    held = holds_gold_number(answer, gold or "", question)
    return None if held is None else float(held)


__all__ = ["contains", "exact_match", "normalise", "number_match", "token_f1"]
