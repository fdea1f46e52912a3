"""Reciprocal Rank Fusion against hand-computed scores."""

from __future__ import annotations

import pytest

from rag_core.config import RagConfig
from rag_core.records import ScoredId
from rag_core.retrieve.fusion import FUSIONS, reciprocal_rank_fusion


@pytest.fixture
def dense_and_bm25() -> list[list[str]]:
    dense = ["a", "b", "c"]
    bm25 = ["c", "d", "a"]
    return [dense, bm25]


def test_two_lists_hand_computed(dense_and_bm25):
    fused = reciprocal_rank_fusion(dense_and_bm25)
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 3))
    assert scores["c"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))
    assert scores["b"] == pytest.approx(1 / (60 + 2))
    assert scores["d"] == pytest.approx(1 / (60 + 2))
    # a and c tie exactly; a appears first. Then b and d tie; b appears first (list 1 before list 2).
    assert [hit.id for hit in fused] == ["a", "c", "b", "d"]


def test_three_lists_hand_computed():
    fused = reciprocal_rank_fusion([["x", "y"], ["y", "z"], ["z", "y", "x"]], k=10)
    assert dict(fused) == pytest.approx(
        {
            "y": 1 / 12 + 1 / 11 + 1 / 12,
            "z": 1 / 12 + 1 / 11,
            "x": 1 / 11 + 1 / 13,
        }
    )
    assert [hit.id for hit in fused] == ["y", "z", "x"]


def test_item_in_one_list_only():
    fused = reciprocal_rank_fusion([["a"], ["b", "a"], []])
    assert fused == [ScoredId("a", pytest.approx(1 / 61 + 1 / 62)), ScoredId("b", pytest.approx(1 / 61))]


def test_k_zero_is_plain_reciprocal_rank():
    fused = reciprocal_rank_fusion([["a", "b", "c", "d"]], k=0)
    assert [score for _, score in fused] == pytest.approx([1.0, 1 / 2, 1 / 3, 1 / 4])


def test_empty_inputs():
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []


def test_repeated_id_counts_at_first_rank_only():
    fused = reciprocal_rank_fusion([["a", "b", "a"]])
    assert dict(fused) == pytest.approx({"a": 1 / 61, "b": 1 / 62})


def test_equal_rank_sets_tie_exactly_whatever_the_list_order():
    lists = [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    scores = {score for _, score in reciprocal_rank_fusion(lists)}
    assert len(scores) == 1
    assert [hit.id for hit in reciprocal_rank_fusion(lists)] == ["a", "b", "c"]


def test_negative_k_rejected():
    with pytest.raises(ValueError, match="k must be >= 0"):
        reciprocal_rank_fusion([["a"]], k=-1)


def test_fuse_by_name(dense_and_bm25):
    assert list(FUSIONS)[0] == "rrf"
    rrf = FUSIONS.load("rrf")("rrf", RagConfig(rrf_k=1))
    scored = [[ScoredId(item, 0.0) for item in ranked] for ranked in dense_and_bm25]
    assert rrf.fuse(scored) == reciprocal_rank_fusion(dense_and_bm25, k=1)
    assert dict(rrf.fuse(scored))["b"] == pytest.approx(1 / 3)


def test_unknown_method_lists_valid_names(dense_and_bm25):
    with pytest.raises(ValueError, match="unknown fusion 'combsum'; valid fusions: rrf, sum"):
        FUSIONS.get("combsum")
