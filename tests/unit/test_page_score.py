"""Page scores (``page_score``): a page ranked by pooling the scores of the chunks ranked on it,
checked against values worked out by hand on a six-chunk list."""

from types import SimpleNamespace

import pytest

from rag_core.config import RagConfig
from rag_core.components import ConfigError
from rag_core.evaluate.metrics import evaluate_rankings, page_rankings, rank_pages
from rag_core.evaluate.page_credit import flatten
from rag_core.records import Chunk
from rag_core.retrieve.parent_child import pool_scores


def chunk(name: str, first: int, last: int | None = None) -> Chunk:
    return Chunk(name, "a.pdf", name, 0, 1, first, first if last is None else last)


# rank: chunk (pages) score   ->  pages' chunk scores
# 1 c1 (p1) 0.875              p1: 0.875, 0.125   max .875  sum 1.0    mean_top2 .5
# 2 c2 (p2) 0.75               p2: 0.75, 0.625    max .75   sum 1.375  mean_top2 .6875
# 3 c3 (p2) 0.625              p3: 0.5            max .5    sum .5     mean_top2 .5
# 4 c4 (p3-p4) 0.5             p4: 0.5, 0.375     max .5    sum .875   mean_top2 .4375
# 5 c6 (p4) 0.375
# 6 c5 (p1) 0.125
CHUNKS = [chunk("c1", 1), chunk("c2", 2), chunk("c3", 2), chunk("c4", 3, 4), chunk("c6", 4), chunk("c5", 1)]
SCORES = [0.875, 0.75, 0.625, 0.5, 0.375, 0.125]
P = {n: f"a.pdf#p{n}" for n in range(1, 5)}


@pytest.mark.parametrize("rule, top_m, expected", [
    ("first", 2, [1, 2, 3, 4]),
    ("max", 2, [1, 2, 3, 4]),  # p3 and p4 tie at 0.5: p3 occurs first (c4 counts on both)
    ("sum", 2, [2, 1, 4, 3]),  # 1.375, 1.0, 0.875, 0.5
    ("mean_top", 2, [2, 1, 3, 4]),  # 0.6875, 0.5 (p1 before p3: first occurrence), 0.5, 0.4375
    ("mean_top", 1, [1, 2, 3, 4]),  # the best one: max
    ("mean_top", 3, [2, 1, 3, 4]),  # no page has three chunks: as mean_top2
])
def test_pages_ranked_by_each_rule(rule, top_m, expected):
    assert flatten(rank_pages(CHUNKS, SCORES, rule, top_m)) == [P[n] for n in expected]


@pytest.mark.parametrize("rule, groups", [
    ("first", [[1], [2], [3, 4]]),  # c4's pages share its rank
    ("max", [[1], [2], [3, 4]]),  # p3 and p4: both 0.5, both first found in c4
    ("sum", [[2], [1], [4], [3]]),  # no equal scores
])
def test_tied_credit_groups_the_pages_of_one_passage(rule, groups):
    assert rank_pages(CHUNKS, SCORES, rule, 2, credit="tied") == [[P[n] for n in group] for group in groups]


def test_pool_scores_by_hand():
    assert pool_scores([0.5, 0.375], "sum") == 0.875
    assert pool_scores([0.75, 0.625, 0.125], "mean_top", 2) == 0.6875
    assert pool_scores([0.75, 0.625, 0.125], "max") == 0.75
    with pytest.raises(ValueError, match="unknown page score"):
        pool_scores([1.0], "median")


def test_scores_out_of_order_are_pooled_as_reciprocal_ranks():
    # a re-ranked head (10.0) above a fused tail (0.2, 0.3): two scales. Raw sums would put p1 first
    # (10 against 0.5); reciprocal ranks give p1 1/61 = 0.0164 and p2 1/62 + 1/63 = 0.0320.
    chunks = [chunk("h", 1), chunk("t1", 2), chunk("t2", 2)]
    assert flatten(rank_pages(chunks, [10.0, 0.2, 0.3], "sum", rrf_k=60)) == [P[2], P[1]]
    assert flatten(rank_pages(chunks, [10.0, 0.3, 0.2], "sum", rrf_k=60)) == [P[1], P[2]]  # in order: raw scores


def test_page_level_metrics_use_the_page_ranking():
    qrels = {"chunk": {"q": {"c2": 1}}, "page": {"q": {P[2]: 1}}, "doc": {"q": {"a.pdf": 1}}}
    first = evaluate_rankings(qrels, {"q": CHUNKS}, (1, 10), page_credit="page_order")
    pooled = evaluate_rankings(qrels, {"q": CHUNKS}, (1, 10), pages={"q": rank_pages(CHUNKS, SCORES, "sum")})
    assert first.averages["page/recall@1"] == 0.0 and pooled.averages["page/recall@1"] == 1.0
    assert first.averages["page/ndcg@10"] == pytest.approx(1 / 1.5849625007211563)  # rank 2: 1/log2(3)
    assert pooled.averages["page/ndcg@10"] == 1.0
    assert pooled.averages["chunk/recall@1"] == first.averages["chunk/recall@1"] == 0.0  # other levels as they were


def test_page_rankings_from_hits_and_config():
    hits = [SimpleNamespace(chunk=c, score=s) for c, s in zip(CHUNKS, SCORES)]
    first = SimpleNamespace(page_score="first", page_top_m=2, rrf_k=60, page_credit="page_order", metrics_k=(5, 10))
    assert page_rankings({"q": hits}, first) == {"q": [[P[1]], [P[2]], [P[3]], [P[4]]]}
    config = SimpleNamespace(page_score="mean_top", page_top_m=2, rrf_k=60, page_credit="tied", metrics_k=(5, 10))
    assert page_rankings({"q": hits}, config) == {"q": [[P[2]], [P[1]], [P[3]], [P[4]]]}  # 0.5 ties: other chunks
    short = SimpleNamespace(page_score="first", page_top_m=2, rrf_k=60, page_credit="tied", metrics_k=(3,))
    assert page_rankings({"q": hits}, short) == {"q": [[P[1]], [P[2]]]}  # 'first' reads max(metrics_k) passages


def test_page_score_is_a_checked_setting():
    assert RagConfig().page_score == "first" and RagConfig().page_top_m == 2
    assert RagConfig(page_score="sum").page_score == "sum"
    with pytest.raises(ConfigError, match="page_score"):
        RagConfig(page_score="median")
    with pytest.raises(ConfigError, match="page_top_m"):
        RagConfig(page_top_m=0)


def test_every_page_score_setting_but_first_is_a_pooling_rule():
    """config declares page_score's choices; parent_child pools them: the two lists must agree."""
    from rag_core.config import PAGE_SCORES
    from rag_core.retrieve.parent_child import PAGE_POOLS, pool_scores

    assert PAGE_SCORES == ("first", *PAGE_POOLS)
    assert [pool_scores([0.2, 0.5, 0.1], rule, top_m=2) for rule in PAGE_POOLS] == pytest.approx([0.5, 0.8, 0.35])
