"""Numbers compared as numbers, for answers whose golden answer is a number (FinanceBench's ``$1577.00``,
``65.4%``, ``0.66``).

A golden answer is **numeric** when, its citations and a final full stop removed, it is one number and nothing
else: an optional sign (``-``, the minus sign) or accounting parenthesis, an optional currency sign ($, €, £,
¥), digits with optional thousands separators and decimals, then an optional ``%`` and scale word (thousand,
million, billion, trillion, bn, mn; after a currency sign also k, m, mm, b). A number in an answer is read the
same way (not inside a word: ``FY2019`` holds none; not a piece of ``2.1.3`` or of a date's ``-08``), and it
**matches** the golden number when:

1. the signs agree: ``-12``, ``(12)`` and ``−12`` are all -12;
2. both are put in the unit the question asks for: a question that says *thousands*, *millions* or
   *billions* (``in USD millions``) makes that the unit, so ``$1.577 billion`` is 1,577 (millions) there; a
   number with a scale word is converted to that unit, one without is taken as written in it;
3. the answer's value rounds to the golden one at the golden answer's own precision: with ``g`` written to
   ``d`` decimals, ``g - h <= a < g + h`` with ``h = 0.5 * 10^-d`` (half up): ``0.655`` and ``0.6612``
   match ``0.66``; ``0.7`` does not; ``1,577``, ``1577.0`` and ``$1,577.004`` match ``$1577.00``;
4. currency signs, thousands separators and a percent sign are ignored: ``65.4`` matches ``65.4%``
   (``0.654`` does not: a share is not converted to a percentage).

``with_gold_number`` writes every number of an answer that matches as the golden answer writes it, so that
exact match, token F1 and "contains" (``rag_core.evaluate.answer_metrics``) compare numbers as numbers and
everything else as text. Left out: units other than the scale (``5 MiB`` is 5), ranges (``1 to 1,000``),
numbers written in words (``five``), fractions (``1/3``), a share converted to a percentage.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal

_NUMBER = re.compile(
    r"(?<![^\W_])(?<!\d[.,])(?<!\d[-\u2212])"  # not inside a word, not the tail of "2.1.3", "1,23" or "2024-08"
    r"(?:(?P<open>\()|(?P<minus>[-\u2212]))?"  # an accounting parenthesis or a minus sign
    r"(?:(?P<currency>[$\u20ac\u00a3\u00a5])\s?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?(?![.,]?\d)"
    r"(?:\s?(?P<percent>%))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|mn)\b|(?P<abbr>mm|k|m|b)\b)?"
    r"(?(open)\))"
    r"(?![^\W_%])",
    re.IGNORECASE)
_POWERS = {"thousand": 3, "k": 3, "million": 6, "mn": 6, "m": 6, "mm": 6, "billion": 9, "bn": 9, "b": 9,
           "trillion": 12}
_QUESTION_UNIT = re.compile(r"\b(thousands|millions|billions)\b", re.IGNORECASE)
_UNIT_POWERS = {"thousands": 3, "millions": 6, "billions": 9}


@dataclass(frozen=True)
class Number:
    value: Decimal  # signed, as written (scale not applied)
    decimals: int  # digits after the decimal point, as written
    power: int | None  # the scale word's power of ten (million: 6), None without one
    start: int
    end: int


def numbers_in(text: str) -> list[Number]:
    """Every number of `text` (NFKC-normalised), in order."""
    found = []
    for match in _NUMBER.finditer(unicodedata.normalize("NFKC", text)):
        abbr = (match["abbr"] or "").lower()
        if abbr and not match["currency"]:  # "5m" alone may be five metres
            continue
        frac = match["frac"] or ""
        value = Decimal(match["int"].replace(",", "") + (f".{frac}" if frac else ""))
        negative = bool(match["open"] or match["minus"])
        scale = (match["scale"] or abbr).lower()
        found.append(Number(-value if negative else value, len(frac), _POWERS[scale] if scale else None,
                            match.start(), match.end()))
    return found


def gold_number(gold: str) -> Number | None:
    """The golden answer's number when the answer is one number and nothing else (see the docstring), else None."""
    text = unicodedata.normalize("NFKC", gold).strip().rstrip(".").strip()
    found = numbers_in(text)
    return found[0] if len(found) == 1 and found[0].start == 0 and found[0].end == len(text) else None


def question_unit(question: str) -> int:
    """The power of ten of the unit `question` asks for: 6 for "in USD millions", 0 when it names none."""
    match = _QUESTION_UNIT.search(question or "")
    return _UNIT_POWERS[match.group(1).lower()] if match else 0


def matches(answer: Number, gold: Number, unit: int = 0) -> bool:
    """Does `answer` round to `gold` in the question's unit (power of ten `unit`)? (rule in the docstring)"""
    def in_unit(number: Number) -> Decimal:
        return number.value.scaleb(number.power - unit) if number.power is not None else number.value

    half = Decimal(5).scaleb(-gold.decimals - 1)
    if gold.power is not None:
        half = half.scaleb(gold.power - unit)
    target = in_unit(gold)
    return target - half <= in_unit(answer) < target + half


def with_gold_number(answer: str, gold: str, question: str = "") -> str:
    """`answer` with each number that matches the golden answer's number written as the golden answer
    writes it; `answer` unchanged when the golden answer is not numeric."""
    target = gold_number(gold)
    if target is None:
        return answer
    text = unicodedata.normalize("NFKC", answer)
    unit, written = question_unit(question), unicodedata.normalize("NFKC", gold).strip().rstrip(".").strip()
    pieces, cursor = [], 0
    for number in numbers_in(text):
        if matches(number, target, unit):
            pieces += [text[cursor:number.start], written]
            cursor = number.end
    return "".join(pieces) + text[cursor:]


def holds_gold_number(answer: str, gold: str, question: str = "") -> bool | None:
    """Does `answer` hold a number that matches the golden one? None when the golden answer is not numeric."""
    target = gold_number(gold)
    if target is None:
        return None
    unit = question_unit(question)
    return any(matches(number, target, unit) for number in numbers_in(answer))


__all__ = ["Number", "gold_number", "holds_gold_number", "matches", "numbers_in", "question_unit", "with_gold_number"]
