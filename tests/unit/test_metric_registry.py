"""The metric registry (rag_core/evaluate/metric_registry.py): names, directions and the docs' table derived from
it, unknown names refused with the valid ones, and a metric added as a plugin (examples/plugins/precision_metric.py,
the example of docs/adding.md) computed by the evaluation with hand-computed values."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from rag_core.components.registry import loading
from rag_core.evaluate.metric_catalog import METRICS, metrics_table, reported_metrics
from rag_core.evaluate.metric_registry import MetricRegistry, UnknownMetric
from rag_core.evaluate.metrics import evaluate_rankings, metric_names
from rag_core.records import Chunk
from rag_core.workbench.statistics.gate import metric_direction

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "evaluation.md"
TABLE = re.compile(r"<!-- metrics table: generated.*?-->\n(.*?)\n<!-- end of the metrics table -->", re.S)


def test_ranking_names_come_from_the_registry_in_report_order():
    assert metric_names((5, 10)) == ["recall@5", "ndcg@5", "hit_rate@5", "recall@10", "ndcg@10", "hit_rate@10", "mrr"]
    ranking = [metric.name for metric in METRICS.at("page") if metric.function is not None]
    assert ranking == ["recall", "ndcg", "hit_rate", "mrr"]


@pytest.mark.parametrize("name, level, value, higher", [
    ("page/recall@5", "page", 5, True),
    ("dense/page/ndcg@10", "page", 10, True),  # a retriever's own list
    ("holdout/evidence/recall@1024", "evidence", 1024, True),  # a part of the queries
    ("oracle/answer/token_f1", "answer", None, True),
    ("loss/retrieval/answer/token_f1", "answer", None, False),  # a loss: lower is better
    ("latency/rerank_p95_ms", "latency", None, False),  # {stage} stands for any stage
    ("latency/total_ms", "latency", None, False),
    ("context/words", "context", None, False),
    ("judge/failures", "judge", None, False),
    ("citation/quote_support", "citation", None, True),
])
def test_lookup_reads_the_level_and_name_after_any_prefix(name, level, value, higher):
    found = METRICS.lookup(name)
    assert (found.level, found.value, found.higher_is_better) == (level, value, higher)
    assert metric_direction(name) is higher  # the gate reads the registry


@pytest.mark.parametrize("name", ["page/recall", "doc/mrr@5", "answer/token_f1@3", "page/recall@x", "index/chunks",
                                  "top_sources", "judge/faithfulness_reason", "query", "chunk/nope@5"])
def test_what_is_not_a_metric_has_no_direction(name):
    assert METRICS.lookup(name) is None and metric_direction(name) is None


def test_check_refuses_unknown_names_and_values_listing_the_valid_ones():
    assert METRICS.check("page/ndcg@10", (5, 10)).metric.name == "ndcg"
    with pytest.raises(UnknownMetric, match=r"unknown metric 'page/ncdg@10'; valid metrics: .*page/ndcg@10.*"
                                            r"did you mean 'page/ndcg@10'"):
        METRICS.check("page/ncdg@10", (5, 10))
    with pytest.raises(UnknownMetric, match=r"100 is not in metrics_k \(5, 10\)"):
        METRICS.check("page/ndcg@100", (5, 10))
    with pytest.raises(UnknownMetric, match=r"300 is not in context_budgets \(256, 1024\)"):
        METRICS.check("evidence/recall@300", (5, 10), (256, 1024))


def test_a_name_registered_twice_by_different_origins_is_refused():
    registry = MetricRegistry()
    registry.declare("score", ("answer",), "one")
    registry.declare("score", ("answer",), "one, again")  # the same origin (a module imported again): replaced
    assert len(registry) == 1 and registry.find("answer", "score").help == "one, again"
    with loading("module mine"), pytest.raises(ValueError, match="registered twice: by built-in and by module mine"):
        registry.declare("score", ("answer",), "another")


def test_every_metric_says_what_it_measures_and_reported_metrics_keep_registry_order():
    assert all(metric.help and metric.levels for metric in METRICS)
    columns = ["latency/total_p50_ms", "run_id", "answer/token_f1", "dense/page/recall@5", "page/ndcg@10",
               "page/recall@5", "index/chunks", "oracle/answer/token_f1", "evidence/recall@1024"]
    assert reported_metrics(columns) == ["page/recall@5", "page/ndcg@10", "evidence/recall@1024", "answer/token_f1",
                                         "latency/total_p50_ms", "dense/page/recall@5", "oracle/answer/token_f1"]


def test_the_docs_table_is_the_registry():
    found = TABLE.search(DOCS.read_text(encoding="utf-8"))
    assert found, "docs/evaluation.md has lost its generated metrics table"
    assert found.group(1) == metrics_table(), "paste into docs/evaluation.md:\n" + metrics_table()


# --- a metric added as a plugin: docs/adding.md's example --------------------------------------------------
@pytest.fixture
def precision_plugin():
    path = ROOT / "examples" / "plugins" / "precision_metric.py"
    spec = importlib.util.spec_from_file_location("precision_metric_under_test", path)
    with loading("module precision_metric"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    yield
    for level in ("chunk", "page", "doc", "child"):
        METRICS.remove(level, "precision")


def chunk(doc: str, page: int) -> Chunk:
    return Chunk(f"{doc}{page}", doc, "text", 0, 4, page, page)


def test_a_ranking_metric_plugin_is_computed_at_every_level(precision_plugin):
    assert "precision@5" in metric_names((5,)) and METRICS.check("page/precision@5").metric.origin.startswith("module")
    assert "example plugin" not in metrics_table()  # the docs list the built-in metrics only
    # one query: pages a1, a2 (relevant), b1 (relevant); ranked a1, b1, a2, c1
    qrels = {"chunk": {"q": {"a2": 1, "b1": 1}}, "page": {"q": {"a.pdf#p2": 1, "b.pdf#p1": 1}},
             "doc": {"q": {"a.pdf": 1, "b.pdf": 1}}}
    ranked = {"q": [chunk("a.pdf", 1), chunk("b.pdf", 1), chunk("a.pdf", 2), chunk("c.pdf", 1)]}
    result = evaluate_rankings(qrels, ranked, ks=(2, 5))
    assert result.per_query["q"]["page/precision@2"] == pytest.approx(1 / 2)  # a1, b1: one relevant of 2
    assert result.per_query["q"]["page/precision@5"] == pytest.approx(2 / 5)  # four pages shown, two relevant, K 5
    assert result.per_query["q"]["doc/precision@2"] == pytest.approx(2 / 2)  # a.pdf, b.pdf
    assert metric_direction("page/precision@5") is True


def test_an_answer_metric_plugin_is_scored_on_every_answer():
    from rag_core.evaluate.answer_scoring import AnswerContext, score_answers
    from rag_core.evaluate.golden import GoldenQuery
    from rag_core.generate.answer import Answer, AnswerMode

    @METRICS.define("mentions_a_number", ("answer",), "1 when the answer holds a digit")  # docs/adding.md's example
    def mentions_a_number(answer, gold, question):
        return float(any(char.isdigit() for char in answer))

    try:
        queries = [GoldenQuery(id="a", query="How many?", evidence=(), answer="Four."),
                   GoldenQuery(id="b", query="Who?", evidence=(), answer="Ann")]
        answers = [Answer("There are 4 [Source: x.pdf, page 1].", AnswerMode.LLM, "m", (), (), None, None),
                   Answer("Nobody knows [Source: x.pdf, page 2].", AnswerMode.LLM, "m", (), (), None, None)]
        rows = score_answers(queries, answers, AnswerContext({}), "tied")
        assert [row["answer/mentions_a_number"] for row in rows] == [1.0, 0.0]  # "x.pdf, page 2" is no longer there
    finally:
        METRICS.remove("answer", "mentions_a_number")
