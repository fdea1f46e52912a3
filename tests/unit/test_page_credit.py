"""Page credit (``page_credit``): tie-aware page metrics checked against values worked out by hand and
against a brute-force average over every order of the tied pages; the rules compared on one passage."""

import itertools
import random

import pytest

from rag_core.config import PAGE_CREDITS, RagConfig
from rag_core.evaluate.metrics import evaluate_rankings, metric_names, query_metric
from rag_core.evaluate.page_credit import (PAGE_CREDITS as CREDIT_RULES, as_scores, flatten, from_scores, page_groups,
                                         tied_metric)
from rag_core.records import Chunk, Document

# a.pdf: page 1 holds characters 0-29, page 2 characters 32-131 (pages joined by "\n\n")
DOCUMENT = Document.from_pages("a.pdf", ["x" * 30, "y" * 100], "hash")
P1, P2 = "a.pdf#p1", "a.pdf#p2"


def chunk(name: str, start: int, end: int, first: int, last: int) -> Chunk:
    return Chunk(name, "a.pdf", DOCUMENT.text[start:end], start, end, first, last)


ACROSS = chunk("c", 0, 132, 1, 2)  # 30 characters on page 1, 100 on page 2
QRELS_P2 = {"chunk": {"q": {"other": 1}}, "page": {"q": {P2: 1}}, "doc": {"q": {"a.pdf": 1}}}


def test_a_passage_over_two_pages_with_the_evidence_on_the_second():
    """The issue's case: pages 1-2 at rank 1, evidence on page 2."""
    scores = {credit: evaluate_rankings(QRELS_P2, {"q": [ACROSS]}, (1, 2), page_credit=credit,
                                        documents={"a.pdf": DOCUMENT}).averages for credit in CREDIT_RULES}
    assert scores["tied"]["page/mrr"] == pytest.approx(0.75)  # (1/1 + 1/2) / 2
    assert scores["page_order"]["page/mrr"] == pytest.approx(0.5)  # page 1 first, page 2 at rank 2
    assert scores["majority"]["page/mrr"] == pytest.approx(1.0)  # page 2 holds 100 of the 130 characters
    assert scores["tied"]["page/recall@1"] == pytest.approx(0.5)  # one of two positions shown, one relevant
    assert scores["tied"]["page/hit_rate@1"] == pytest.approx(0.5)  # 1 - C(1,1)/C(2,1)
    assert scores["tied"]["page/ndcg@1"] == pytest.approx(0.5)  # (1/2) / log2(2), ideal 1
    assert scores["tied"]["page/ndcg@2"] == pytest.approx(0.5 + 0.5 / 1.5849625007211563)  # + (1/2) / log2(3)


def test_majority_orders_a_passages_pages_by_their_share_of_its_text():
    mostly_first = chunk("m", 0, 40, 1, 2)  # 30 characters on page 1, 8 on page 2
    documents = {"a.pdf": DOCUMENT}
    assert page_groups([mostly_first], "majority", documents) == [[P1], [P2]]
    assert page_groups([ACROSS], "majority", documents) == [[P2], [P1]]
    assert page_groups([ACROSS], "page_order") == [[P1], [P2]]
    assert page_groups([ACROSS], "tied") == [[P1, P2]]
    with pytest.raises(ValueError, match="majority needs the document"):
        page_groups([ACROSS], "majority")


def test_a_page_keeps_its_first_occurrence_and_later_groups_lose_it():
    first, second = chunk("a", 0, 30, 1, 1), ACROSS
    assert page_groups([first, second], "tied") == [[P1], [P2]]  # page 1 already ranked: page 2 alone


def brute_force(name: str, groups: list[list[str]], relevant: set[str]) -> float:
    """The mean of the usual metric over every order of the pages within each group."""
    orders = list(itertools.product(*(itertools.permutations(group) for group in groups)))
    return sum(query_metric(name, [page for group in order for page in group], relevant) for order in orders) / len(orders)


def test_tied_metrics_equal_the_average_over_every_order():
    rng = random.Random(7)
    for _ in range(60):
        pages = [f"p{i}" for i in range(rng.randint(1, 8))]
        rng.shuffle(pages)
        groups, at = [], 0
        while at < len(pages):
            size = rng.randint(1, 3)
            groups.append(pages[at:at + size])
            at += size
        relevant = {page for page in pages if rng.random() < 0.4} | ({"missing"} if rng.random() < 0.3 else set())
        for name in metric_names((1, 2, 3, 5)):
            assert tied_metric(name, groups, relevant) == pytest.approx(brute_force(name, groups, relevant)), (name, groups)


def test_tied_credit_does_not_depend_on_the_order_of_a_passages_pages():
    """Where the evidence sits inside a passage (its first or second page) moves page_order, not tied."""
    for relevant in ({P1}, {P2}):
        qrels = {"chunk": {"q": {}}, "page": {"q": dict.fromkeys(relevant, 1)}, "doc": {"q": {"a.pdf": 1}}}
        tied = evaluate_rankings(qrels, {"q": [ACROSS]}, (1, 5), page_credit="tied").averages
        assert tied["page/mrr"] == pytest.approx(0.75) and tied["page/ndcg@5"] == pytest.approx(0.8154648767857288)
    assert flatten([[P1, P2]]) == [P1, P2]


def test_page_credit_is_a_checked_setting_with_the_rules_of_page_credit():
    assert PAGE_CREDITS == tuple(CREDIT_RULES)
    assert RagConfig().page_credit == "tied"
    assert RagConfig(page_credit="page_order").page_credit == "page_order"
    with pytest.raises(Exception, match="page_credit"):
        RagConfig(page_credit="optimistic")


def test_tie_groups_survive_a_ranx_run_and_back():
    """The ranx/run.json artifact writes tied pages with equal scores; paired tests read them back as ties."""
    groups = [["a"], ["b", "c"], ["d"], ["e", "f", "g"]]
    scores = as_scores(groups)
    assert scores == {"a": 1.0, "b": 0.5, "c": 0.5, "d": 0.25, "e": 0.2, "f": 0.2, "g": 0.2}
    assert from_scores(scores) == groups


def test_the_runs_written_as_ranx_run_json_are_the_rankings_scored():
    """``RankingMetrics.runs`` (the ranx/run.json artifact) holds what the metrics scored, at every level:
    the passage over pages 1-2 gives both pages rank 1 under ``tied`` and ranks 1 and 2 under ``page_order``."""
    later = chunk("d", 32, 60, 2, 2)  # page 2 again: a page keeps its first occurrence
    tied, ordered = (evaluate_rankings(QRELS_P2, {"q": [ACROSS, later]}, (1,), page_credit=credit).runs
                     for credit in ("tied", "page_order"))
    assert tied["chunk"] == {"q": {"c": 1.0, "d": 0.5}} and tied["doc"] == {"q": {"a.pdf": 1.0}}
    assert tied["page"] == {"q": {P1: 1.0, P2: 1.0}}
    assert ordered["page"] == {"q": {P1: 1.0, P2: 0.5}}
    only_judged = evaluate_rankings(QRELS_P2, {}, (1,)).runs  # a judged query without a ranking: no run
    assert only_judged == {"chunk": {}, "page": {}, "doc": {}}
