"""Fusion methods: ranx's weighted sum / CombMNZ / CombSUM against hand computations, weighted RRF by
hand, the pipeline's hybrid fusion with ``fusion: wsum`` against the stage scores, and
``rag-pipeline tune-fusion`` learning weights on one half of the sample golden set and reporting them
on the other."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from rag_core.config import ConfigError, RagConfig
from rag_core.records import ScoredId
from rag_core.retrieve.fusion import reciprocal_rank_fusion
from rag_core.retrieve.fusion.ranx import ranx_fusion

DENSE = [ScoredId("a", 0.9), ScoredId("b", 0.5), ScoredId("c", 0.1)]
BM25 = [ScoredId("c", 10.0), ScoredId("d", 4.0), ScoredId("a", 2.0)]


def min_max(scored):
    low, high = min(s for _, s in scored), max(s for _, s in scored)
    return {item: (s - low) / (high - low) for item, s in scored}


def test_wsum_min_max_by_hand():
    # min-max: dense a 1, b 0.5, c 0; bm25 c 1, d 0.25, a 0.
    fused = dict(ranx_fusion([DENSE, BM25], "wsum", "min-max", (0.3, 0.7)))
    assert fused == pytest.approx({"a": 0.3 * 1 + 0.7 * 0, "b": 0.3 * 0.5, "c": 0.3 * 0 + 0.7 * 1, "d": 0.7 * 0.25})


def test_combmnz_and_combsum_match_an_independent_computation():
    dense, bm25 = min_max(DENSE), min_max(BM25)
    ids = dense.keys() | bm25.keys()
    combsum = {i: dense.get(i, 0) + bm25.get(i, 0) for i in ids}
    combmnz = {i: combsum[i] * ((i in dense) + (i in bm25)) for i in ids}
    assert dict(ranx_fusion([DENSE, BM25], "sum", "min-max")) == pytest.approx(combsum)
    assert dict(ranx_fusion([DENSE, BM25], "mnz", "min-max")) == pytest.approx(combmnz)
    ranked = ranx_fusion([DENSE, BM25], "mnz", "min-max")
    assert [hit.score for hit in ranked] == sorted((hit.score for hit in ranked), reverse=True)


def test_zmuv_normalisation_by_hand():
    import statistics

    def zmuv(scored):
        values = [s for _, s in scored]
        mean, std = statistics.fmean(values), statistics.pstdev(values)
        return {item: (s - mean) / std for item, s in scored}

    dense, bm25 = zmuv(DENSE), zmuv(BM25)
    expected = {i: 0.5 * dense.get(i, 0) + 0.5 * bm25.get(i, 0) for i in dense.keys() | bm25.keys()}
    assert dict(ranx_fusion([DENSE, BM25], "wsum", "zmuv", (0.5, 0.5))) == pytest.approx(expected, abs=1e-6)


def test_weighted_rrf_by_hand():
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=60, weights=[2.0, 0.5]))
    assert fused == pytest.approx({"a": 2 / 61, "b": 2 / 62 + 0.5 / 61, "c": 0.5 / 62})


def test_empty_lists_fuse_to_nothing():
    assert ranx_fusion([[], []], "wsum", "min-max") == []
    assert [hit.id for hit in ranx_fusion([DENSE, []], "sum", "min-max")] == ["a", "b", "c"]


def test_fusion_settings_are_checked():
    with pytest.raises(ConfigError, match="fusion must be one of"):
        RagConfig(fusion="magic")
    with pytest.raises(ConfigError, match="fusion_weights"):
        RagConfig(fusion_weights=(1.0,))
    with pytest.raises(ConfigError, match="fusion_weights apply to"):
        RagConfig(fusion="mnz", fusion_weights=(0.5, 0.5))
    with pytest.raises(ConfigError, match="fusion_norm"):
        RagConfig(fusion_norm="log")
    assert RagConfig.from_dict({"fusion_weights": "0.3,0.7"}).fusion_weights == (0.3, 0.7)
    assert RagConfig.from_dict({"fusion_weights": ""}).fusion_weights == ()


@pytest.mark.slow
def test_pipeline_wsum_fuses_the_stage_scores(sample_store):
    from rag_core.service import open_pipeline

    config = RagConfig(rerank_depth=0, fusion="wsum", fusion_norm="min-max", fusion_weights=(0.4, 0.6))
    result = open_pipeline(sample_store, config, progress=False).retrieve("How are API keys rotated?")
    dense = min_max([(h.chunk.id, h.stages["dense"].score) for h in result.stages["dense"]])
    bm25 = min_max([(h.chunk.id, h.stages["bm25"].score) for h in result.stages["bm25"]])
    for hit in result.stages["fused"]:
        expected = 0.4 * dense.get(hit.chunk.id, 0.0) + 0.6 * bm25.get(hit.chunk.id, 0.0)
        assert hit.stages["fused"].score == pytest.approx(expected, abs=1e-9)
    plain = open_pipeline(sample_store, config.replace(fusion="rrf", fusion_weights=()), progress=False)
    assert plain.first_stage.key("q", None) != open_pipeline(sample_store, config, progress=False).first_stage.key("q", None)


@pytest.mark.slow
def test_tune_fusion_learns_on_one_half_and_reports_on_the_other(sample_store, sample_golden_file, tmp_path):
    lines = sample_golden_file.read_text().splitlines()
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("\n".join(lines[::2]) + "\n")
    test.write_text("\n".join(lines[1::2]) + "\n")
    result = run_cli("tune-fusion", "--golden", str(train), "--test-golden", str(test), "--rerank-depth", "0",
                     "--step", "0.25", "--json", store=sample_store)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    weights = report["learned"]["weights"]
    assert len(weights) == 2 and sum(weights) == pytest.approx(1.0)
    # --norm all: the weights were learned after every normalisation; the one kept scores best in training
    assert set(report["norm_scores"]) == {"min-max", "max", "sum", "zmuv", "rank", "borda"}
    assert report["norm_scores"][report["norm"]] == max(report["norm_scores"].values())
    assert report["candidates"]["learned fusion"] == report["norm_scores"][report["norm"]]
    candidates = {"learned fusion", "dense alone", "bm25 alone"}
    assert set(report["candidates"]) == candidates and report["chosen"] in candidates
    assert {(row["golden"], row["config"]) for row in report["rows"]} == {
        (golden, config) for golden in ("train", "test")
        for config in ("start", "tuned", *(candidates - {report["chosen"]}))}
    train_rows = {row["config"]: row for row in report["rows"] if row["golden"] == "train"}
    # Each candidate's training score (ranx) is what the project's own metrics give its evaluation there,
    # and the tuned configuration is never below a retriever alone on the set it was tuned on.
    for label, score in report["candidates"].items():
        row = train_rows["tuned" if label == report["chosen"] else label]
        assert score == pytest.approx(row["chunk/ndcg@10"], abs=1e-6)
    assert train_rows["tuned"]["chunk/ndcg@10"] >= max(train_rows[label]["chunk/ndcg@10"]
                                                       for label in ("dense alone", "bm25 alone") if label in train_rows)
    tuned = next(row for row in report["rows"] if row["golden"] == "test" and row["config"] == "tuned")
    if report["chosen"] == "learned fusion":
        assert f"fusion_weights: [{weights[0]:g}, {weights[1]:g}]" in report["yaml"]
        assert f"fusion_norm: {report['norm']}" in report["yaml"]
        pasted = ["--fusion", "wsum", "--fusion-norm", report["norm"], "--fusion-weights", f"{weights[0]},{weights[1]}"]
    else:
        assert report["yaml"] == [f"mode: {report['chosen'].split()[0]}"]
        pasted = ["--mode", report["chosen"].split()[0]]
    # The tuned row on the test half is what eval reports for the pasted settings.
    again = run_cli("eval", "--golden", str(test), "--rerank-depth", "0", *pasted, "--no-mlflow", "--json",
                    store=sample_store)
    assert again.returncode == 0, again.stderr
    metrics = json.loads(again.stdout)["metrics"]
    assert metrics["page/ndcg@10"] == pytest.approx(tuned["page/ndcg@10"])
    # Bad input is exit 2 with a message, not a traceback.
    bad = run_cli("tune-fusion", "--golden", str(train), "--method", "sum", store=sample_store)
    assert bad.returncode == 2 and "--method must be one of" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("tune-fusion", "--golden", str(train), "--norm", "min-max,softmax", store=sample_store)
    assert bad.returncode == 2 and "--norm must be 'all' or names among" in bad.stderr and "Traceback" not in bad.stderr


def test_the_techniques_are_sweep_grid_axes():
    from rag_core.paths import PROJECT_ROOT
    from rag_core.workbench.plans.sweep_file import load_sweep

    spec = load_sweep(PROJECT_ROOT / "experiments" / "retrieval-techniques.yaml")
    points, _ = spec.points()
    assert len(points) == 18
    configs = {(p.config.query_expansion, p.config.child_size, p.config.fusion) for p in points}
    assert ("rm3", 64, "wsum") in configs and ("none", 0, "rrf") in configs
    assert all(p.config.mode == "hybrid" and p.config.rerank_depth == 0 for p in points)
