"""The re-ranker contract (issue 32 item 1), through the example plugin ``examples/plugins/passage_bm25.py``:
it registers like any component and ``rag-pipeline components`` lists it; its scores are BM25's, checked
against values computed by hand; the pipeline re-ranks with it and records it; the one availability
check of sweeps and searches asks the configured re-ranker, so the plugin runs where the cross-encoder
cannot be loaded; ``min_rerank_score`` is the cross-encoder's threshold only; and its sweep
(``examples/plugins/rerank-sweep.yaml``) runs offline from a clean checkout with every point FINISHED."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, run_cli
from llm_fixtures import make_hit
from rag_core.components import load_plugins
from rag_core.config import RagConfig
from rag_core.records import Document

EXAMPLES = ROOT / "examples" / "plugins"
PLUGIN = EXAMPLES / "passage_bm25.py"


@pytest.fixture
def plugin(isolated_components):
    load_plugins([str(PLUGIN)])
    from rag_core.retrieve.rerank import RERANKERS

    return RERANKERS.get("passage_bm25")


def test_the_plugin_registers_a_reranker_with_its_settings(plugin):
    from rag_core.retrieve.rerank import RERANKERS, BaseReranker

    assert "passage_bm25" in RERANKERS and "cross_encoder" in RERANKERS
    assert plugin.origin == f"module passage_bm25.py ({PLUGIN})"
    assert [setting.name for setting in plugin.settings] == ["passage_bm25_k1", "passage_bm25_b"]
    assert issubclass(plugin.load(), BaseReranker)
    config = RagConfig(reranker="passage_bm25", passage_bm25_b=0.5)
    assert (config.passage_bm25_k1, config.passage_bm25_b) == (1.2, 0.5)
    with pytest.raises(Exception, match="passage_bm25_b"):
        RagConfig(reranker="passage_bm25", passage_bm25_b=1.5)  # its declared range


def test_components_lists_the_plugin_reranker():
    listed = run_cli("components", "--json", "--plugins", str(PLUGIN))
    assert listed.returncode == 0, listed.stderr
    rerankers = {c["name"]: c for c in json.loads(listed.stdout)["kinds"]["reranker"]["components"]}
    assert set(rerankers) == {"cross_encoder", "passage_bm25"}
    assert rerankers["passage_bm25"]["origin"] == f"module passage_bm25.py ({PLUGIN})"
    assert [s["name"] for s in rerankers["passage_bm25"]["settings"]] == ["passage_bm25_k1", "passage_bm25_b"]


def test_passage_bm25_scores_match_values_computed_by_hand(plugin):
    texts = ["The cat sat on the mat.", "The dog.", "Cat, cat!"]
    # N = 3 passages of 6, 2 and 2 terms (mean 10/3); df(cat) = 2, df(mat) = 1; k1 = 1.2, b = 0.75
    idf_cat, idf_mat = math.log(1 + 1.5 / 2.5), math.log(1 + 2.5 / 1.5)
    norm_6, norm_2 = 1.2 * (0.25 + 0.75 * 6 / (10 / 3)), 1.2 * (0.25 + 0.75 * 2 / (10 / 3))  # 1.92, 0.84
    expected = [(idf_cat + idf_mat) * 2.2 / (1 + norm_6), 0.0, idf_cat * 2 * 2.2 / (2 + norm_2)]
    assert expected == pytest.approx([1.09309, 0.0, 0.72817], abs=1e-5)
    reranker = plugin.load().from_config(RagConfig(reranker="passage_bm25"), None, ROOT)
    result = reranker.score("cat mat", texts)
    assert result.scores == pytest.approx(expected, rel=1e-12)
    assert (result.pairs_scored, result.cache_hits) == (3, 0) and result.model_seconds == result.computed_seconds
    assert reranker.unavailable() is None and reranker.name_used == "passage_bm25"
    # b = 0: no length normalisation; a repeated query term counts twice
    flat = plugin.load().from_config(RagConfig(reranker="passage_bm25", passage_bm25_b=0.0), None, ROOT)
    assert flat.score("cat cat", texts).scores == pytest.approx(
        [2 * idf_cat * 2.2 / 2.2, 0.0, 2 * idf_cat * 2 * 2.2 / 3.2], rel=1e-12)
    assert reranker.score("cat", []).scores == []


def test_the_pipeline_reranks_with_the_plugin_where_the_cross_encoder_cannot_load(plugin, tmp_path):
    from rag_core.ingest.corpus import Corpus
    from rag_core.retrieve.pipeline import Pipeline

    bm25_scores = sys.modules[plugin.load().__module__].bm25_scores  # the plugin's own function
    texts = {"a.txt": "the reactor runs on flux crystals and flux", "b.txt": "flux reactor",
             "c.txt": "crystals grow slowly in the reactor hall", "d.txt": "stock prices fell sharply"}
    corpus = Corpus.of([Document.from_pages(name, [text], name) for name, text in texts.items()])
    config = RagConfig(mode="bm25", reranker="passage_bm25", rerank_depth=3, chunk_size=50, overlap=0,
                       rerank_model=str(tmp_path / "no-such-cross-encoder"))
    pipeline = Pipeline(config, corpus, tmp_path / "store")
    result = pipeline.retrieve("flux reactor crystals")
    head = result.stages["fused"][:3]
    expected = dict(zip([hit.chunk.id for hit in head],
                        bm25_scores("flux reactor crystals", [hit.chunk.text for hit in head])))
    assert [hit.score for hit in result.stages["rerank"]] == pytest.approx(sorted(expected.values(), reverse=True))
    assert all(hit.score == pytest.approx(expected[hit.chunk.id]) for hit in result.stages["rerank"])
    assert [hit.chunk.id for hit in result.ranking[:3]] == [hit.chunk.id for hit in result.stages["rerank"]]
    assert pipeline.models_used()["rerank_model_used"] == "passage_bm25"
    assert result.work["rerank_pairs_scored"] == 3


def test_the_one_availability_check_asks_the_configured_reranker(plugin, tmp_path):
    from rag_core.retrieve.rerank import rerank_unavailable
    from rag_core.workbench.execution.sweep import _without_unavailable_rerankers
    from rag_core.workbench.plans.sweep_file import SweepPoint

    missing = str(tmp_path / "no-such-cross-encoder")
    cross = RagConfig(rerank_depth=5, rerank_model=missing)
    bm25 = RagConfig(rerank_depth=5, rerank_model=missing, reranker="passage_bm25")
    reason = rerank_unavailable(cross)
    assert reason.startswith(f"cross-encoder {missing!r} cannot be loaded (") and reason.endswith(")")
    assert rerank_unavailable(bm25) is None  # the plugin loads no model: not marked unavailable
    assert rerank_unavailable(RagConfig(rerank_depth=0, rerank_model=missing)) is None  # no re-ranking
    points = [SweepPoint(1, {"reranker": "cross_encoder"}, cross), SweepPoint(2, {"reranker": "passage_bm25"}, bm25)]
    unavailable, runnable = _without_unavailable_rerankers(points)
    assert [(point.number, why) for point, why in unavailable] == [(1, reason)]
    assert [point.number for point in runnable] == [2]


def test_min_rerank_score_is_the_cross_encoders_threshold_only(plugin):
    from rag_core.generate.answer import passage_clears, threshold_description

    low = make_hit("a.pdf", "text", stages={"dense": (1, 0.7), "bm25": (2, 3.0), "fused": (1, 0.03),
                                            "rerank": (1, -2.0)})
    alone = make_hit("a.pdf", "text", stages={"dense": (1, 0.7), "fused": (1, 0.016), "rerank": (1, 9.0)})
    cross = RagConfig(min_rerank_score=0.0, min_retriever_agreement=2)
    assert not passage_clears(low, cross) and passage_clears(alone, cross)  # the logit decides
    assert threshold_description(cross, reranked=True) == "re-rank score >= 0.0"
    bm25 = RagConfig(reranker="passage_bm25", min_rerank_score=0.0, min_retriever_agreement=2)
    assert passage_clears(low, bm25) and not passage_clears(alone, bm25)  # the retrievers' agreement decides
    assert threshold_description(bm25, reranked=True) == "found by 2 of the hybrid retriever(s)"


def test_no_file_under_rag_core_names_the_example_reranker():
    named = [str(path) for path in (ROOT / "rag_core").rglob("*.py")
             if any(word in path.read_text() for word in ("passage_bm25", "PassageBM25"))]
    assert named == []


@pytest.mark.slow
def test_the_rerank_plugin_sweep_runs_offline_from_a_clean_checkout(tmp_path):
    """The offline default: no RAG_RERANK_MODEL, so the cross-encoder cannot be loaded; the plugin's
    re-ranked points run all the same and end FINISHED, recording the plugin as the model used."""
    from test_plugins_example import _clean_checkout

    checkout = _clean_checkout(tmp_path / "checkout")
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    env = {key: value for key, value in os.environ.items() if key != "RAG_RERANK_MODEL"}
    env.update(PYTHONPATH=str(checkout), MLFLOW_TRACKING_URI=uri, HF_HUB_OFFLINE="1")
    completed = subprocess.run([sys.executable, "-m", "rag_core.cli", "sweep", "examples/plugins/rerank-sweep.yaml",
                                "--store", str(tmp_path / "store"), "--no-tracing"],
                               cwd=checkout, env=env, capture_output=True, text=True, timeout=1500)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr and "UNAVAILABLE" not in completed.stdout
    client = MlflowClient(uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "documents | golden"]
    runs = [run for run in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in run.data.tags]
    assert len(runs) == 4 and {run.info.status for run in runs} == {"FINISHED"}
    assert {(run.data.params["mode"], run.data.params["rerank_depth"]) for run in runs} == {
        (mode, depth) for mode in ("dense", "bm25") for depth in ("0", "20")}
    reranked = [run for run in runs if run.data.params["rerank_depth"] == "20"]
    for run in reranked:
        assert run.data.params["reranker"] == "passage_bm25" and run.data.params["rerank_model_used"] == "passage_bm25"
        assert run.data.params["passage_bm25_k1"] == "1.2" and run.data.metrics["rerank/pairs_scored"] > 0
    assert all("rerank_model_used" not in run.data.params for run in runs if run not in reranked)


def test_the_unavailable_line_gives_the_cross_encoder_advice_only_for_cross_encoder_points(plugin):
    from rag_core.workbench.execution.sweep import _unavailable_line
    from rag_core.workbench.plans.sweep_file import SweepPoint

    cross = SweepPoint(1, {}, RagConfig(rerank_depth=5))
    assert _unavailable_line([(cross, "cross-encoder 'x' cannot be loaded (gone)")]) == (
        "not running 1 point(s) with rerank_depth > 0: cross-encoder 'x' cannot be loaded (gone). "
        "Set RAG_RERANK_MODEL to a local cross-encoder directory to run them.")
    other = SweepPoint(2, {}, RagConfig(rerank_depth=5, reranker="passage_bm25"))
    assert _unavailable_line([(other, "re-ranker 'y' cannot be loaded (gone)")]) == (
        "not running 1 point(s) with rerank_depth > 0: re-ranker 'y' cannot be loaded (gone).")
