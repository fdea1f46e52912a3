"""The default primary metric of a sweep: the evidence at a budget when every golden line quotes its
evidence, page nDCG@10 otherwise (issue 46, docs/evaluation.md "Which metric to trust")."""

import json

from rag_core.evaluate.metrics import DEFAULT_PRIMARY_METRIC, FALLBACK_PRIMARY_METRIC, default_primary_metric


def golden(tmp_path, *evidence_lists) -> str:
    lines = [json.dumps({"id": f"q{i}", "query": "?", "evidence": evidence}) for i, evidence in enumerate(evidence_lists)]
    (tmp_path / "golden.jsonl").write_text("\n".join(lines) + "\n")
    return "golden.jsonl"


def test_every_line_quoting_its_evidence_ranks_by_the_evidence(tmp_path):
    name = golden(tmp_path, [{"source": "a.pdf", "page": 1, "text": "quoted"}], [{"source": "b.pdf", "text": "too"}])
    assert default_primary_metric(name, tmp_path) == DEFAULT_PRIMARY_METRIC == "evidence/recall@1024"


def test_one_line_without_text_falls_back_to_pages(tmp_path):
    name = golden(tmp_path, [{"source": "a.pdf", "page": 1, "text": "quoted"}], [{"source": "b.pdf", "page": 2}])
    assert default_primary_metric(name, tmp_path) == FALLBACK_PRIMARY_METRIC == "page/ndcg@10"


def test_a_set_that_cannot_be_read_here_keeps_the_default(tmp_path):
    assert default_primary_metric("mlflow:golden@2", tmp_path) == DEFAULT_PRIMARY_METRIC  # an MLflow dataset
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    assert default_primary_metric("broken.jsonl", tmp_path) == DEFAULT_PRIMARY_METRIC  # the sweep reports it
