"""Metrics at chunk, page and document level (rag_core.evaluate.metrics), against hand-computed values."""

from __future__ import annotations

from math import log2

import pytest

from rag_core.evaluate.golden import Evidence, GoldenQuery
from rag_core.evaluate.metrics import RankingMetrics, evaluate_rankings, first_relevant_rank, latency_summary, metric_names
from rag_core.records import Chunk, Document
from rag_core.evaluate.relevance import build_qrels


def make_chunk(chunk_id: str, doc_id: str, page_start: int, page_end: int) -> Chunk:
    return Chunk(chunk_id, doc_id, f"text of {chunk_id}", 0, 10, page_start, page_end)


# Document A has pages 1-3, document B pages 1-2.
CHUNKS = {
    chunk.id: chunk
    for chunk in [
        make_chunk("c1", "A", 1, 1),
        make_chunk("c2", "A", 1, 2),  # crosses pages 1-2
        make_chunk("c3", "A", 2, 2),
        make_chunk("c4", "B", 1, 1),
        make_chunk("c5", "B", 2, 2),
        make_chunk("c6", "A", 3, 3),
        make_chunk("c7", "B", 1, 1),
        make_chunk("c8", "A", 3, 3),
    ]
}


def ranked(*chunk_ids: str) -> list[Chunk]:
    return [CHUNKS[chunk_id] for chunk_id in chunk_ids]


# level -> query_id -> item_id -> 1, written by hand (not built from evidence) to test metrics alone.
QRELS = {
    "chunk": {"q1": {"c2": 1, "c3": 1}, "q2": {"c1": 1, "c8": 1}, "q3": {"c1": 1}},
    "page": {"q1": {"A#p2": 1}, "q2": {"A#p1": 1, "A#p3": 1}, "q3": {"A#p1": 1}},
    "doc": {"q1": {"B": 1}, "q2": {"A": 1}, "q3": {"A": 1}},
}
RANKED = {
    "q1": ranked("c1", "c2", "c3", "c4", "c5", "c6"),
    # pages: B#p1 B#p2 A#p3 A#p1 (c7: B#p1 again) A#p2; documents: B A
    "q2": ranked("c4", "c5", "c6", "c1", "c7", "c2"),
    "q3": [],  # nothing retrieved: must count as 0, not be skipped
}


@pytest.fixture(scope="module")
def result() -> RankingMetrics:
    return evaluate_rankings(QRELS, RANKED, ks=(3, 5))


def test_chunk_level_by_hand(result):
    q1, q2 = result.per_query["q1"], result.per_query["q2"]
    # q1: relevant c2, c3 at ranks 2 and 3 of 2 relevant.
    assert q1["chunk/recall@3"] == pytest.approx(1.0)
    assert q1["chunk/mrr"] == pytest.approx(1 / 2)
    assert q1["chunk/hit_rate@3"] == 1.0
    # nDCG@3 = (1/log2(3) + 1/log2(4)) / (1 + 1/log2(3)) = 0.6934
    assert q1["chunk/ndcg@3"] == pytest.approx((1 / log2(3) + 1 / log2(4)) / (1 + 1 / log2(3)))
    # q2: relevant c1 at rank 4, c8 never retrieved.
    assert q2["chunk/recall@3"] == 0.0
    assert q2["chunk/recall@5"] == pytest.approx(1 / 2)
    assert q2["chunk/hit_rate@3"] == 0.0
    assert q2["chunk/hit_rate@5"] == 1.0
    assert q2["chunk/mrr"] == pytest.approx(1 / 4)
    # nDCG@5 = (1/log2(5)) / (1 + 1/log2(3))   (ideal: two relevant at ranks 1 and 2)
    assert q2["chunk/ndcg@5"] == pytest.approx((1 / log2(5)) / (1 + 1 / log2(3)))


def test_page_level_collapses_chunks_to_pages(result):
    q1, q2 = result.per_query["q1"], result.per_query["q2"]
    # q1 pages: A#p1 (c1), A#p2 (c2 adds p2 after p1), B#p1, B#p2, A#p3 -> A#p2 at rank 2 of 1 relevant.
    assert q1["page/mrr"] == pytest.approx(1 / 2)
    assert q1["page/recall@3"] == 1.0
    assert q1["page/ndcg@3"] == pytest.approx(1 / log2(3))  # ideal DCG = 1
    # q2 pages: B#p1, B#p2, A#p3, A#p1, A#p2 -> relevant A#p3, A#p1 at ranks 3 and 4.
    assert q2["page/recall@3"] == pytest.approx(1 / 2)
    assert q2["page/recall@5"] == 1.0
    assert q2["page/mrr"] == pytest.approx(1 / 3)
    assert q2["page/ndcg@5"] == pytest.approx((1 / log2(4) + 1 / log2(5)) / (1 + 1 / log2(3)))


def test_doc_level_collapses_chunks_to_documents(result):
    q1, q2 = result.per_query["q1"], result.per_query["q2"]
    # q1 documents: A, B -> B at rank 2. q2 documents: B, A -> A at rank 2.
    for values in (q1, q2):
        assert values["doc/mrr"] == pytest.approx(1 / 2)
        assert values["doc/recall@3"] == 1.0
        assert values["doc/ndcg@3"] == pytest.approx(1 / log2(3))


def test_nothing_retrieved_counts_as_zero_in_the_averages(result):
    assert set(result.per_query) == {"q1", "q2", "q3"}
    assert set(result.per_query["q3"].values()) == {0.0}
    # mean over three queries, q3 included as 0
    assert result.averages["chunk/recall@3"] == pytest.approx((1 + 0 + 0) / 3)
    assert result.averages["chunk/mrr"] == pytest.approx((1 / 2 + 1 / 4 + 0) / 3)
    assert result.averages["page/mrr"] == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)
    assert result.averages["doc/hit_rate@5"] == pytest.approx(2 / 3)


def test_no_query_retrieving_anything_gives_zeros():
    qrels = {"chunk": {"q1": {"c1": 1}, "q2": {"c2": 1}}, "page": {"q1": {"A#p1": 1}}, "doc": {"q1": {"A": 1}}}
    result = evaluate_rankings(qrels, {"q1": [], "q2": []}, ks=(5,))
    assert set(result.per_query) == {"q1", "q2"}
    assert set(result.averages.values()) == {0.0}


def test_a_query_without_relevant_items_at_a_level_counts_as_zero():
    # q2 has chunk qrels but no page/doc qrels: retrieved or not, it scores 0 there and still counts.
    qrels = {"chunk": {"q1": {"c1": 1}, "q2": {"c1": 1}}, "page": {"q1": {"A#p1": 1}}, "doc": {"q1": {"A": 1}}}
    result = evaluate_rankings(qrels, {"q1": ranked("c1"), "q2": ranked("c1")}, ks=(5,))
    assert result.per_query["q2"]["chunk/mrr"] == 1.0
    assert result.per_query["q2"]["doc/mrr"] == 0.0
    assert result.averages["doc/mrr"] == pytest.approx(1 / 2)


def test_metric_names_are_flat_and_complete(result):
    expected = {
        f"{level}/{name}"
        for level in ("chunk", "page", "doc")
        for name in ["recall@3", "ndcg@3", "hit_rate@3", "recall@5", "ndcg@5", "hit_rate@5", "mrr"]
    }
    assert set(result.averages) == expected
    assert all(set(values) == expected for values in result.per_query.values())
    assert metric_names((5, 10)) == [
        "recall@5", "ndcg@5", "hit_rate@5", "recall@10", "ndcg@10", "hit_rate@10", "mrr",
    ]


def test_rank_order_is_kept_exactly():
    # The relevant chunk "a" is last of five; ids sort the other way, so any tie-breaking by id shows.
    chunks = [make_chunk(chunk_id, "D", 1, 1) for chunk_id in ("e", "d", "c", "b", "a")]
    result = evaluate_rankings({"chunk": {"q": {"a": 1}}, "page": {}, "doc": {}}, {"q": chunks}, ks=(1,))
    assert result.per_query["q"]["chunk/mrr"] == pytest.approx(1 / 5)
    assert result.per_query["q"]["chunk/hit_rate@1"] == 0.0


def test_query_missing_from_ranked_counts_as_zero_and_extra_query_is_an_error():
    chunk = make_chunk("c1", "A", 1, 1)
    qrels = {"chunk": {"q1": {"c1": 1}, "q2": {"c1": 1}}, "page": {}, "doc": {}}
    result = evaluate_rankings(qrels, {"q1": [chunk]}, ks=(5,))
    assert result.averages["chunk/mrr"] == pytest.approx(1 / 2)  # (1 + 0) / 2
    assert result.per_query["q2"]["chunk/recall@5"] == 0.0
    with pytest.raises(ValueError, match="without qrels: q9"):
        evaluate_rankings(qrels, {"q1": [chunk], "q9": [chunk]})


def test_metrics_from_evidence_are_comparable_across_chunkings():
    # One document of two pages; the evidence sits on page 2. Chunking "small" has three chunks,
    # chunking "big" one chunk per page. A retriever that ranks the evidence chunk second in both
    # gives the same page- and doc-level metrics, whatever the chunk size.
    document = Document.from_pages("d.pdf", ["Alpha beta gamma. Delta epsilon.", "Zeta eta theta."], "h")
    text = document.text

    def chunk_of(chunk_id: str, piece: str) -> Chunk:
        start = text.index(piece)
        end = start + len(piece)
        return Chunk(chunk_id, "d.pdf", piece, start, end, document.page_at(start), document.page_at(end - 1))

    small = [chunk_of("s1", "Alpha beta gamma."), chunk_of("s2", "Delta epsilon."), chunk_of("s3", "Zeta eta theta.")]
    big = [chunk_of("b1", document.page_text(1)), chunk_of("b2", document.page_text(2))]
    golden = [GoldenQuery("q", "?", None, (Evidence("d.pdf", 2, "eta theta"),))]

    small_result = evaluate_rankings(
        build_qrels(golden, {"d.pdf": document}, small), {"q": [small[0], small[2], small[1]]}, ks=(1, 2)
    )
    big_result = evaluate_rankings(build_qrels(golden, {"d.pdf": document}, big), {"q": [big[0], big[1]]}, ks=(1, 2))
    for values in (small_result.averages, big_result.averages):
        assert values["chunk/mrr"] == pytest.approx(1 / 2)
        assert values["page/mrr"] == pytest.approx(1 / 2)  # pages: d.pdf#p1, d.pdf#p2
        assert values["doc/mrr"] == 1.0
        assert values["page/recall@1"] == 0.0 and values["page/recall@2"] == 1.0


def test_first_relevant_rank():
    assert first_relevant_rank(["a", "b", "c"], {"c", "z"}) == 3
    assert first_relevant_rank(["a", "b"], ["b", "a"]) == 1
    assert first_relevant_rank(["a", "b"], {"z"}) is None
    assert first_relevant_rank([], {"a"}) is None


def test_latency_summary_percentiles():
    summary = latency_summary({"bm25": [10.0, 20.0, 30.0, 40.0], "rerank": [7.0], "generate": []})
    # linear: p50 at position 1.5 -> 25; p95 at position 0.95 * 3 = 2.85 -> 30 + 0.85 * 10 = 38.5
    assert summary == pytest.approx(
        {
            "latency/bm25_p50_ms": 25.0,
            "latency/bm25_p95_ms": 38.5,
            "latency/rerank_p50_ms": 7.0,
            "latency/rerank_p95_ms": 7.0,
        }
    )


def test_every_metric_equals_ranx_on_random_rankings():
    """ranx is the independent implementation: the same values on 60 random queries."""
    import random

    from ranx import Qrels, Run, evaluate

    from rag_core.evaluate.metrics import query_metric

    rng = random.Random(7)
    items = [f"d{i}" for i in range(40)]
    qrels, runs = {}, {}
    for number in range(60):
        qid = f"q{number}"
        qrels[qid] = {item: 1 for item in rng.sample(items, rng.randint(1, 8))}
        runs[qid] = rng.sample(items, rng.randint(1, 25))
    names = metric_names((1, 3, 5, 10, 20)) + ["mrr"]
    ranx_run = Run({qid: {item: 1.0 / rank for rank, item in enumerate(ranking, 1)} for qid, ranking in runs.items()})
    evaluate(Qrels(qrels), ranx_run, names, save_results_in_run=True)
    for name in names:
        for qid, ranking in runs.items():
            assert query_metric(name, ranking, set(qrels[qid])) == pytest.approx(ranx_run.scores[name][qid]), (name, qid)
