"""benchmarks/rerank_earns.py: its points and its summary (paired tests against re-ranking off and the
selection rules) on tiny per-query values computed by hand (no process, no model)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "rerank_earns.py"
spec = importlib.util.spec_from_file_location("rerank_earns", SCRIPT)
rerank_earns = importlib.util.module_from_spec(spec)
sys.modules["rerank_earns"] = rerank_earns
spec.loader.exec_module(rerank_earns)


def point(values: dict[str, float], latency: float) -> dict:
    return {"values": {"page/recall@5": values, "page/ndcg@10": values}, "latency_p50_ms": latency}


def test_a_self_supervised_model_is_scored_only_on_its_own_corpus():
    models = {"sup-scifact": "/m/sup", "ss-sample": "/m/ss", "ss-filings": "/m/fb"}
    labels = [label for label, _ in rerank_earns.points("sample", models)]
    assert labels == ["off", "sup-scifact alone", "sup-scifact + rrf", "ss-sample alone", "ss-sample + rrf"]
    settings = dict(rerank_earns.points("sample", models))
    assert settings["off"] == ["--rerank-depth", "0"]
    assert settings["ss-sample + rrf"] == ["--rerank-depth", "20", "--rerank-model", "/m/ss", "--rerank-fusion", "rrf"]


def test_a_clear_gain_turns_re_ranking_on_under_both_rules():
    # differences 0.5, 0.5, 0: mean 1/3, sd 0.2887, SE 1/6, t = 2 with 2 degrees of freedom: p = 0.1835
    found = {"off": point({"q1": 0.5, "q2": 0.0, "q3": 1.0}, 1.0),
             "m alone": point({"q1": 1.0, "q2": 0.5, "q3": 1.0}, 10.0)}
    summary = rerank_earns.summarise("sample", found)
    row = summary["rows"][1]
    assert row["page/ndcg@10 vs off"]["difference"] == pytest.approx(0.3333, abs=1e-4)
    assert row["page/ndcg@10 vs off"]["p_ttest"] == pytest.approx(0.1835, abs=1e-4)
    assert row["page/ndcg@10"][0] == pytest.approx(0.8333, abs=1e-4)
    assert summary["rerank_on"] == {"max": True, "one_se": True}


def test_one_se_keeps_the_cheaper_point_off_when_the_gain_is_within_one_standard_error():
    # differences 0.1, -0.05, 0: mean 0.0167 <= SE 0.0441, and off is ten times faster
    found = {"off": point({"q1": 0.5, "q2": 0.3, "q3": 1.0}, 1.0),
             "m alone": point({"q1": 0.6, "q2": 0.25, "q3": 1.0}, 10.0)}
    summary = rerank_earns.summarise("sample", found)
    assert summary["selection"]["max"]["chosen"] == "m alone"
    assert summary["selection"]["one_se"]["chosen"] == "off"
    assert summary["rerank_on"] == {"max": True, "one_se": False}
