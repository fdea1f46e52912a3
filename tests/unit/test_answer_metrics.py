"""Answer metrics without an LLM against hand-computed values: SQuAD's normalisation, exact match and token F1
(examples worked by hand from the v1.1 evaluation script's definitions), "contains", and numbers in each form
the docs list (rag_core/evaluate/answer_numbers.py), one case at a time."""

from __future__ import annotations

import pytest

from rag_core.evaluate.answer_metrics import contains, exact_match, normalise, number_match, token_f1
from rag_core.evaluate.answer_numbers import gold_number, holds_gold_number, question_unit, with_gold_number
from rag_core.generate.answer import EXTRACTIVE_LABEL, answer_body

MILLIONS = "What is Amazon's FY2019 net income attributable to shareholders (in USD millions)?"


# --- SQuAD: normalisation, exact match, F1 --------------------------------------------------------------------
@pytest.mark.parametrize("text, normalised", [
    ("The Cat!", "cat"),  # case, punctuation, the article
    ("  an   apple,  a pear ", "apple pear"),  # articles and white space
    ("U.S. Army", "us army"),  # punctuation removed inside words, as SQuAD does
    ("theatre", "theatre"),  # "the" only as a word
])
def test_squad_normalisation(text, normalised):
    assert normalise(text) == normalised


@pytest.mark.parametrize("answer, gold, expected", [
    ("the Denver Broncos", "Denver Broncos", 1.0),
    ("Denver Broncos!", "denver broncos", 1.0),
    ("Denver", "Denver Broncos", 0.0),
    ("us army", "U.S. Army", 1.0),
])
def test_exact_match(answer, gold, expected):
    assert exact_match(answer, gold) == expected


@pytest.mark.parametrize("answer, gold, expected", [
    # answer tokens broncos won game ("the" dropped), gold denver broncos: 1 shared; P 1/3, R 1/2
    ("Broncos won the game", "the Denver Broncos", 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2)),
    # multisets: x x y against x x z share min(2, 2) = 2 tokens (as sets, one); P = R = 2/3
    ("x x y", "x x z", 2 / 3),
    ("nothing shared", "Denver Broncos", 0.0),
    ("Denver Broncos", "Denver Broncos", 1.0),
])
def test_token_f1(answer, gold, expected):
    assert token_f1(answer, gold) == pytest.approx(expected)


def test_contains_whole_tokens_after_normalisation():
    assert contains("Each key may send 600 requests per minute.", "600 requests per minute") == 1.0
    assert contains("It waits for minutes.", "minute") == 0.0  # whole tokens only
    assert contains("THE Answer: Default 8, maximum 64", "Default 8, maximum 64.") == 1.0


def test_no_golden_answer_has_no_value_never_zero():
    for metric in (exact_match, token_f1, contains):
        assert metric("anything", None) is None and metric("anything", " ") is None
    assert number_match("42", "not a number") is None


def test_what_is_scored_leaves_out_citations_and_the_extractive_label():
    text = (EXTRACTIVE_LABEL.format(reason="no LLM configured") + "\n\nEach key may send 600 requests per minute. "
            "[Source: api-reference.pdf, page 3]\n\nBursts get HTTP 429 [Source: a.pdf, pages 2-3; b.pdf, page 1].")
    assert answer_body(text) == "Each key may send 600 requests per minute.\n\nBursts get HTTP 429."
    assert token_f1(answer_body("600 requests per minute [Source: api-reference.pdf, page 3]"),
                    "600 requests per minute") == 1.0


# --- numbers --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gold, numeric", [
    ("$1577.00", True), ("65.4%", True), ("0.66", True), ("-3.7", True), ("$11588.00.", True),
    ("25 seconds.", False), ("QS-4091 with HTTP 409 Conflict.", False), ("Release 4.2.0 (2024-08-13).", False),
])
def test_which_golden_answers_are_numeric(gold, numeric):
    assert (gold_number(gold) is not None) is numeric


@pytest.mark.parametrize("answer, question, held", [
    ("1,577", "", True),  # thousands separator
    ("1577.0", "", True),  # fewer decimals, same value
    ("$1,577.004", "", True),  # rounds to the gold's two decimals
    ("$1.577 billion", MILLIONS, True),  # the question asks for millions: 1.577 billion is 1,577 million
    ("$1.577 billion", "What is the total?", False),  # no unit asked: 1,577,000,000 is not 1,577
    ("1,577 million", MILLIONS, True),
    ("$1577.01", "", False),  # one cent off at the gold's precision
    ("(1,577)", "", False),  # an accounting parenthesis is negative
    ("FY1577", "", False),  # inside a word: no number
])
def test_numbers_against_1577_dollars(answer, question, held):
    assert holds_gold_number(answer, "$1577.00", question) is held


@pytest.mark.parametrize("answer, gold, held", [
    ("(12)", "-12", True), ("\u221212", "-12", True), ("-12", "-12", True), ("12", "-12", False),
    ("(3.7)", "-3.7", True),
    ("65.4%", "65.4%", True), ("65.4", "65.4%", True), ("0.654", "65.4%", False),  # no share -> percent
    ("0.655", "0.66", True), ("0.6649", "0.66", True), ("0.6612", "0.66", True),
    ("0.665", "0.66", False), ("0.7", "0.66", False),  # half up: [0.655, 0.665)
])
def test_sign_percent_and_rounding(answer, gold, held):
    assert holds_gold_number(answer, gold) is held


def test_the_question_unit():
    assert (question_unit(MILLIONS), question_unit("in thousands of euros"), question_unit("a ratio")) == (6, 3, 0)


def test_numbers_compared_as_numbers_in_em_f1_and_contains():
    answer = "Net income was $11.588 billion [Source: AMAZON_2019_10K.pdf, page 38]."
    body = answer_body(answer)
    assert with_gold_number(body, "$11588.00", MILLIONS) == "Net income was $11588.00."
    assert number_match(body, "$11588.00", MILLIONS) == 1.0 and contains(body, "$11588.00", MILLIONS) == 1.0
    # tokens net income was 1158800 against 1158800: P 1/4, R 1
    assert token_f1(body, "$11588.00", MILLIONS) == pytest.approx(2 * 0.25 / 1.25)
    assert exact_match("$11,588", "$11588.00", MILLIONS) == 1.0
    assert exact_match(body, "$11588.00", MILLIONS) == 0.0
    assert contains(body, "$11588.00", "What is the total?") == 0.0  # billions are not millions here


# --- similarity ---------------------------------------------------------------------------------------------------
def test_cosine_similarity_of_each_answer_to_its_golden_answer():
    import numpy as np

    from rag_core.evaluate.answer_similarity import cosine_similarities, cross_encoder_similarities

    vectors = {"yes": [1.0, 0.0], "yes indeed": [3.0, 4.0], "no": [0.0, 2.0]}
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return np.array([vectors[text] for text in texts])

    values = cosine_similarities(encode, ["yes indeed", "no", "yes", ""], ["yes", "yes", None, "no"])
    assert values == [pytest.approx(3 / 5), pytest.approx(0.0), None, None]  # no gold, no answer: no value
    assert calls == [["no", "yes", "yes indeed"]]  # one call, each text once, shortest first
    scores = cross_encoder_similarities(lambda query, texts: [2.0 if texts[0] == query else -1.0],
                                        ["same", "other"], ["same", "same"])
    assert scores == [pytest.approx(1 / (1 + np.exp(-2.0))), pytest.approx(1 / (1 + np.exp(1.0)))]
