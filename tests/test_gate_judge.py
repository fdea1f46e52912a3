"""`rag-pipeline gate --judge` (issue 52): the pairwise judge asked twice with the two configurations' answers in
swapped order, through the real anthropic SDK against the project's Messages API server; a judge that prefers a
position decides nothing (every verdict flips: ties), a consistent one fails a worse candidate, an unparseable
reply is counted and makes a tie."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fixtures import anthropic_env, clean_llm_env, llm_server  # noqa: F401 - fixtures
from llm_responders import is_pairwise, position_biased_judge, preferring_judge
from rag_core.config import RagConfig
from rag_core.workbench.execution.gate_run import run_gate
from test_answer_evaluation import tiny_corpus

pytestmark = pytest.mark.slow


def gate_with_judge(tmp_path: Path, llm: "object", judge) -> "object":
    """The gate between two LLM models on the tiny corpus; each answer names the model that wrote it."""
    folder, golden = tiny_corpus(tmp_path)

    def respond(request):
        if is_pairwise(request):
            return judge(request)
        return f"An answer by {request.body['model']} [Source: volcano.txt, page 1]."

    llm.responder = respond
    baseline = RagConfig(mode="bm25", rerank_depth=0, llm_model="model-a")
    candidate = RagConfig(mode="bm25", rerank_depth=0, llm_model="model-b")
    return run_gate(baseline, candidate, golden=golden, store_dir=tmp_path / "store", input_dir=folder,
                    metrics=["answer/token_f1"], judge=True)


def test_a_judge_that_prefers_a_position_decides_nothing(tmp_path, anthropic_env):
    gate = gate_with_judge(tmp_path, anthropic_env, position_biased_judge("first"))
    counts = gate.pairwise["counts"]
    assert counts["judge/pairwise_flips"] == 3 and counts["judge/pairwise_ties"] == 3  # every verdict flipped
    assert counts["judge/pairwise_win"] == 0.5 and not gate.result.failed
    verdicts = gate.pairwise["verdicts"]
    assert {(v["judge/baseline_first"], v["judge/candidate_first"]) for v in verdicts} == {("baseline", "candidate")}
    pairwise = [request for request in anthropic_env.requests if is_pairwise(request)]
    assert len(pairwise) == 6  # each pair twice
    first_shown = [request.user.split("Second answer")[0] for request in pairwise[:2]]
    assert "model-a" in first_shown[0] and "model-b" in first_shown[1]  # the baseline's answer first, then the other


def test_a_consistent_verdict_stands_and_fails_a_worse_candidate(tmp_path, anthropic_env):
    gate = gate_with_judge(tmp_path, anthropic_env, preferring_judge("model-a"))  # the baseline's, in both orders
    counts = gate.pairwise["counts"]
    assert (counts["judge/pairwise_baseline_wins"], counts["judge/pairwise_flips"], counts["judge/pairwise_win"]) == (3, 0, 0)
    judged = next(metric for metric in gate.result.metrics if metric.metric == "judge/pairwise_win")
    assert judged.worse and gate.result.failed
    assert (judged.baseline.estimate, judged.candidate.estimate) == (1.0, 0.0)


def test_an_unparseable_pairwise_reply_is_counted_and_makes_a_tie(tmp_path, anthropic_env, monkeypatch):
    monkeypatch.setattr("rag_core.evaluate.judge.retry_delay", lambda *args: 0.0)  # retried at once
    gate = gate_with_judge(tmp_path, anthropic_env, lambda request: "I cannot decide, sorry.")
    counts = gate.pairwise["counts"]
    assert counts["judge/failures"] == 6 and counts["judge/pairwise_ties"] == 3  # 3 pairs x 2 orders, after retries
    assert all(v["judge/failures"] == 2 for v in gate.pairwise["verdicts"])
    assert sum(is_pairwise(request) for request in anthropic_env.requests) == 3 * 2 * 4  # each reply tried 4 times


def test_an_answer_metric_makes_both_sides_answer(tmp_path, clean_llm_env):
    folder, golden = tiny_corpus(tmp_path)
    same = RagConfig(mode="bm25", rerank_depth=0)
    gate = run_gate(same, same, golden=golden, store_dir=tmp_path / "store", input_dir=folder,
                    metrics=["answer/token_f1", "citation/recall"])
    assert [metric.metric for metric in gate.result.metrics] == ["answer/token_f1", "citation/recall"]
    f1 = gate.result.metrics[0]
    assert 0 < f1.baseline.estimate == f1.candidate.estimate < 1 and f1.difference.estimate == 0 and not gate.result.failed
    assert gate.pairwise is None  # no judge asked for


def test_gate_judge_on_the_command_line(tmp_path, anthropic_env):
    from conftest import run_cli
    from llm_fixtures import PLANTED_KEY

    folder, golden = tiny_corpus(tmp_path)
    (tmp_path / "a.yaml").write_text("mode: bm25\nrerank_depth: 0\nllm_model: model-a\n")
    (tmp_path / "b.yaml").write_text("mode: bm25\nrerank_depth: 0\nllm_model: model-b\n")
    judge = position_biased_judge("second")
    anthropic_env.responder = lambda request: judge(request) if is_pairwise(request) else "An answer."
    arguments = ["gate", "--golden", str(golden), "--input", str(folder), "--baseline", str(tmp_path / "a.yaml"),
                 "--candidate", str(tmp_path / "b.yaml"), "--judge"]
    env = {"ANTHROPIC_API_KEY": PLANTED_KEY, "ANTHROPIC_BASE_URL": anthropic_env.anthropic_base_url}
    result = run_cli(*arguments, store=tmp_path / "store", env=env)
    assert result.returncode == 0, result.stderr
    assert "judge/pairwise_win" in result.stdout and "ties 3 (flipped with the order 3)" in result.stdout
    missing = run_cli(*arguments, store=tmp_path / "store", env={"ANTHROPIC_API_KEY": ""})
    assert missing.returncode == 1 and "ANTHROPIC_API_KEY" in missing.stderr
