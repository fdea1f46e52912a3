"""Evidence metrics at a context budget, checked against values worked out by hand.

The document is 40 words ``w00 w01 ... w39``: word i lies at characters [4i, 4i + 3), a space after it.
Text is measured in characters other than whitespace: 3 a word. The evidence of the main query is
words 10-19: characters [40, 79), 30 characters of text."""

import pytest

from rag_core.evaluate.evidence_budget import TextCounts, evidence_metrics, kept_spans, merged
from rag_core.evaluate.golden import Evidence, GoldenQuery
from rag_core.records import Chunk, Document

WORDS = [f"w{i:02d}" for i in range(40)]
DOCUMENT = Document.from_pages("d.pdf", [" ".join(WORDS)], "hash")
DOCUMENTS = {"d.pdf": DOCUMENT}
COUNTS = TextCounts(DOCUMENTS)
EVIDENCE = " ".join(WORDS[10:20])
QUERY = GoldenQuery("q", "which words?", None, (Evidence("d.pdf", 1, EVIDENCE),))


def words(first: int, last: int) -> Chunk:
    """A chunk of words first..last (inclusive)."""
    start, end = 4 * first, 4 * last + 3
    return Chunk(f"c{first}-{last}", "d.pdf", DOCUMENT.text[start:end], start, end, 1, 1)


def scores(ranking, budget, queries=(QUERY,)):
    averages, per_query = evidence_metrics(list(queries), DOCUMENTS, {"q": ranking}, (budget,))
    return {name.split("/")[1].split("@")[0]: value for name, value in averages.items() if "@" in name}, per_query


def test_two_overlapping_passages_count_their_common_text_once():
    # words 0-19 and 10-29: 40 words fit in the budget; kept words 0-29 once, 90 characters
    found, _ = scores([words(0, 19), words(10, 29)], 40)
    assert found == pytest.approx({"recall": 1.0, "precision": 30 / 90, "iou": 30 / 90})


def test_a_budget_that_cuts_a_passage_keeps_its_first_words():
    # 15 words of words 0-19: [0, 59), 45 characters; words 10-14 are evidence: 15 characters
    assert kept_spans([words(0, 19)], 15, COUNTS) == {"d.pdf": [(0, 59)]}
    found, _ = scores([words(0, 19)], 15)
    assert found == pytest.approx({"recall": 15 / 30, "precision": 15 / 45, "iou": 15 / (45 + 30 - 15)})


def test_evidence_split_over_two_passages():
    # words 0-14 and 15-29: five evidence words in each, 30 of the 90 characters kept
    found, _ = scores([words(0, 14), words(15, 29)], 100)
    assert found == pytest.approx({"recall": 1.0, "precision": 30 / 90, "iou": 30 / 90})
    found, _ = scores([words(0, 14), words(15, 29)], 15)  # the budget ends with the first passage
    assert found == pytest.approx({"recall": 15 / 30, "precision": 15 / 45, "iou": 15 / 60})
    found, _ = scores([words(15, 29), words(0, 14)], 20)  # the other one first: 15 words, then 5 of the first
    assert found == pytest.approx({"recall": 15 / 30, "precision": 15 / 60, "iou": 15 / 75})


def test_evidence_that_cannot_be_located_or_has_no_text_is_not_available_not_zero():
    lost = GoldenQuery("lost", "?", None, (Evidence("d.pdf", None, "words that are nowhere in the document at all"),))
    page_only = GoldenQuery("page", "?", None, (Evidence("d.pdf", 1),))
    averages, per_query = evidence_metrics([lost, page_only], DOCUMENTS, {}, (100,))
    assert averages == {"evidence/queries": 0.0} and per_query == {}
    averages, per_query = evidence_metrics([QUERY, lost], DOCUMENTS, {"q": [words(0, 39)], "lost": [words(0, 39)]},
                                           (100,))
    assert set(per_query) == {"q"} and averages["evidence/queries"] == 1.0
    assert averages["evidence/recall@100"] == 1.0  # the mean over the one query that has evidence


def test_moving_a_boundary_without_changing_the_text_kept_changes_nothing():
    """The same text in the same order, cut into passages at other places: equal at every budget."""
    cuttings = [[words(0, 9), words(10, 24), words(25, 39)], [words(0, 14), words(15, 39)],
                [words(0, 3), words(4, 17), words(18, 30), words(31, 39)]]
    for budget in (5, 12, 16, 25, 40):
        results = [scores(ranking, budget)[0] for ranking in cuttings]
        assert all(result == pytest.approx(results[0]) for result in results), budget


def test_merged_joins_overlapping_and_touching_spans():
    assert merged([(5, 9), (0, 3), (3, 4), (8, 12), (20, 20)]) == [(0, 4), (5, 12)]


def test_words_are_counted_as_split_counts_them():
    """A passage that starts inside a word counts the rest of that word as its first word."""
    inside = Chunk("x", "d.pdf", DOCUMENT.text[1:23], 1, 23, 1, 1)  # "00 w01 w02 w03 w04 w05"
    assert len(inside.text.split()) == 6
    assert kept_spans([inside], 6, COUNTS) == {"d.pdf": [(1, 23)]}
    assert kept_spans([inside], 2, COUNTS) == {"d.pdf": [(1, 7)]}  # "00 w01"
    assert kept_spans([words(0, 3), inside], 5, COUNTS) == {"d.pdf": [(0, 15)]}  # "00" is inside words 0-3


def top(ranking, k, queries=(QUERY,)):
    averages, _ = evidence_metrics(list(queries), DOCUMENTS, {"q": ranking}, (), (k,))
    return {name.split("/")[1].split("@")[0]: value for name, value in averages.items() if name.startswith("evidence_top/")}


def test_the_top_k_passages_whole_are_scored_as_chromas_protocol_does():
    # top 2 of [words 5-14, words 12-21, words 30-39]: the evidence (words 10-19, 30 characters) holds
    # words 10-19 = 30 characters; the passages' summed lengths: 10 + 10 words = 60 characters (words 12-14
    # counted twice, as Chroma's precision denominator sums the chunks); union = 60 + 30 - 30 = 60
    ranking = [words(5, 14), words(12, 21), words(30, 39)]
    assert top(ranking, 2) == pytest.approx({"recall": 1.0, "precision": 30 / 60, "iou": 30 / 60})
    # top 1: words 10-14 of the evidence = 15 characters of 30 shown; union 30 + 30 - 15 = 45
    assert top(ranking, 1) == pytest.approx({"recall": 0.5, "precision": 0.5, "iou": 15 / 45})
    # top 3: the third passage adds 30 characters and no evidence: 30 / 90, union 90
    assert top(ranking, 3) == pytest.approx({"recall": 1.0, "precision": 30 / 90, "iou": 30 / 90})


def test_the_top_k_has_no_budget_a_long_passage_is_shown_whole():
    # one passage of all 40 words (120 characters) holds the evidence whole, whatever its length
    assert top([words(0, 39)], 5) == pytest.approx({"recall": 1.0, "precision": 30 / 120, "iou": 30 / 120})
    # an empty ranking scores 0, never an error
    assert top([], 5) == {"recall": 0.0, "precision": 0.0, "iou": 0.0}
