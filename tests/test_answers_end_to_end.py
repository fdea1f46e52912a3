"""Answers end to end on the sample corpus: `rag-pipeline query` with a key (the real anthropic SDK
against the project's Messages API server on 127.0.0.1), without one, and off-topic; and an
evaluation with the LLM judge, averaged by hand."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli
from llm_fixtures import PLANTED_KEY, anthropic_env, clean_llm_env, llm_server  # noqa: F401 - fixtures
from llm_server import rate_limited, reply
from rag_core.evaluate.answers import judge_answers
from rag_core.config import RagConfig
from rag_core.ingest.corpus import DocumentStore
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import load_golden
from rag_core.retrieve.tokenizer import get_tokenizer

pytestmark = pytest.mark.slow
NO_RERANK = ["--rerank-depth", "0"]  # the offline re-ranker has a random head: use retriever agreement


def test_query_with_a_key_gives_the_models_cited_answer(sample_store, anthropic_env):
    cited = "Clients must back off and retry after a 429. [Source: api-reference.pdf, page 2]"
    anthropic_env.script(reply(cited))
    result = run_cli("query", "How should a client handle HTTP 429 responses?", "--json", *NO_RERANK,
                     store=sample_store, env={"ANTHROPIC_API_KEY": PLANTED_KEY,
                                              "ANTHROPIC_BASE_URL": anthropic_env.anthropic_base_url})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["mode"] == "llm" and payload["answer"] == cited
    [request] = anthropic_env.requests
    assert request.body["model"] == RagConfig().llm_model
    for passage in payload["passages"]:
        assert passage["text"][:60] in request.user
    assert PLANTED_KEY not in result.stdout + result.stderr


def test_query_without_a_key_is_extractive_with_citations(sample_store, clean_llm_env):
    result = run_cli("query", "How should a client handle HTTP 429 responses?", "--json", *NO_RERANK,
                     store=sample_store)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["mode"] == "extractive"
    assert "extractive" in payload["answer"].lower()
    cited = re.findall(r"\[Source: ([^,\]]+), pages? (\d+)", payload["answer"])
    assert cited  # each sentence shown cites a page of a passage given (whole in "passages")
    for source, page in cited:
        assert any(passage["source"] == source and passage["page_start"] <= int(page) <= passage["page_end"]
                   for passage in payload["passages"])


def test_off_topic_question_is_not_in_the_documents(sample_store, anthropic_env):
    question = "What is the capital of Australia?"
    tokenize = get_tokenizer("stem")
    corpus_tokens = {t for doc in DocumentStore(sample_store).corpus().documents for t in tokenize(doc.text)}
    assert not set(tokenize(question)) & corpus_tokens  # the premise: no query term is in the corpus
    result = run_cli("query", question, "--json", *NO_RERANK, store=sample_store,
                     env={"ANTHROPIC_API_KEY": PLANTED_KEY, "ANTHROPIC_BASE_URL": anthropic_env.anthropic_base_url})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["mode"] == "no_answer"
    assert "do not contain" in payload["answer"].lower()
    assert anthropic_env.requests == []  # decided without calling the LLM


def test_judged_evaluation_averages_present_scores_and_marks_failures_missing(
        sample_store, sample_golden_file, anthropic_env):
    corpus = DocumentStore(sample_store).corpus()
    queries = load_golden(sample_golden_file, corpus.by_id)[:2]
    config = RagConfig(mode="bm25", rerank_depth=0, k=3)
    report = evaluate_config(config, corpus, queries, sample_store)
    judge = lambda score: reply(json.dumps({"score": score, "reason": "because"}))  # noqa: E731
    anthropic_env.script(
        reply("Answer one [Source: nowhere.pdf, page 1]."),  # cites a passage it was not given
        reply("Answer two."),
        # query 1: faithfulness 5, relevance: a 429 then 3, coverage 4, correctness 2
        judge(5), rate_limited(), judge(3), judge(4), judge(2),
        # query 2: faithfulness malformed on every try -> missing; relevance 5, coverage 2, correctness 4
        reply("no json"), reply("still none"), reply("nope"), reply("{}"),
        judge(5), judge(2), judge(4),
    )
    from rag_core.llm import LLMClient

    metrics, rows = judge_answers(queries, report.retrievals, config, client=LLMClient.from_config(config),
                                  backoff_s=0.001)
    assert metrics["judge/faithfulness"] == 5  # query 2 missing, not 0
    assert metrics["judge/answer_relevance"] == pytest.approx((3 + 5) / 2)
    assert metrics["judge/coverage"] == pytest.approx((4 + 2) / 2)
    assert metrics["judge/answer_correctness"] == pytest.approx((2 + 4) / 2)
    assert metrics["judge/failures"] == 1 and metrics["judge/unparseable"] == 1
    assert rows[1]["judge/faithfulness"] is None
    assert metrics["citation/valid_share"] == pytest.approx(0.0)  # the only citation named no passage
    assert metrics["answer/llm_share"] == 1.0
