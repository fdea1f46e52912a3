"""Issue 51: ``chunker`` as a sweep axis that stays honest, end to end. A grid over built-in and plugin
chunkers, sizes, overlaps and a plugin chunker's own setting: ``sweep --dry-run`` lists exactly the chunkings
(by the store's own names) and dense indexes the run then builds, with the embedding model that loads
(offline: the packaged MiniLM where BAAI/bge-small-en-v1.5 is configured); grid points that differ only in
settings their chunker does not read run once, listed as merged and counted once; the builds show which
chunking is built, i of n, before the points run."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import ROOT, run_cli
from mlflow.tracking import MlflowClient
from sweep_fixtures import tiny_corpus, tracking_uri  # noqa: F401

pytestmark = pytest.mark.slow

PLUGIN = '''
from rag_core.components import Setting
from rag_core.ingest.chunkers import CHUNKERS, Chunker, span_chunk


@CHUNKERS.register("window", reads=(), help="windows of window_chars characters", settings=[
    Setting("window_chars", int, 300, "window: characters per chunk", minimum=50, stage="chunking")])
class WindowChunker(Chunker):
    def chunk(self, document):
        text, size = document.text, self.config.window_chars
        return [span_chunk(document, start, min(start + size, len(text))) for start in range(0, len(text), size)]
'''
CHUNKERS = ["recursive", "fixed", "semantic", "window"]
SHIPPED = ROOT / "experiments"


def test_the_dry_run_lists_what_the_run_builds_and_merged_points_run_once(tiny_corpus, tmp_path,  # noqa: F811
                                                                          tracking_uri):  # noqa: F811
    (tmp_path / "window.py").write_text(PLUGIN)
    sweep = tmp_path / "chunkers.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "chunkers", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden),
        "plugins": ["window.py"],
        "base": {"mode": "dense", "rerank_depth": 0, "k": 3, "embed_backend": "torch",
                 "embed_model": "BAAI/bge-small-en-v1.5"},
        "grid": {"chunker": CHUNKERS, "chunk_size": [24], "overlap": [0, 6], "window_chars": [300, 600]},
    }, sort_keys=False))
    store = tmp_path / "store"
    dry = run_cli("sweep", str(sweep), "--dry-run", "--json", store=store)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)

    ran = run_cli("sweep", str(sweep), "--json", "--output", str(tmp_path / "runs"), store=store)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)

    # 16 grid points, 7 configurations: window_chars applies to window only, overlap not to semantic or window
    assert [point["status"] for point in result["points"]] == ["FINISHED"] * 7
    assert len(result["merged"]) == 7 == len(planned["merged"]) and result["work"]["sweep/points_merged"] == 9
    assert ("merged: chunker=semantic chunk_size=24 x overlap=0/6 x window_chars=300/600 -> 1 point "
            "(overlap, window_chars do not apply)") in result["merged"]
    assert len(result["table"]) == 7  # ranked once each

    # the chunkings and dense indexes the dry run listed are those the run made, by the store's names
    made = {path.parent.name for path in store.glob("chunks/*/chunks.jsonl")}
    assert planned["chunkings"] == 7 and {chunking["key"] for chunking in planned["chunking_plan"]} == made
    assert not any(chunking["in_store"] for chunking in planned["chunking_plan"])
    manifests = list(store.glob("chunks/*/dense-*.json"))
    assert planned["dense_indexes"] == len(planned["to_embed"]) == len(manifests) == 7

    # the model named is the one that loaded (offline: the fallback, named in the chunking of semantic)
    client = MlflowClient(tracking_uri)
    used = {client.get_run(point["run_id"]).data.params["embed_model_used"] for point in result["points"]}
    assert used == {planned["models_loaded"]["BAAI/bge-small-en-v1.5"]}
    [semantic] = [c for c in planned["chunking_plan"] if c["label"].startswith("chunker=semantic")]
    assert f"model {used.pop()}" in semantic["label"]

    # the builds before the points, each said with its place and what it did (and its bar, on stderr)
    said = ran.stderr
    assert "Building indexes for 7 distinct chunking/model combinations first" in said
    assert all(f"[build {number}/7] chunker=" in said for number in range(1, 8))
    assert said.count("chunks made,") == 7 and said.count(" embedded (") == 7

    again = json.loads(run_cli("sweep", str(sweep), "--dry-run", "--json", store=store).stdout)
    assert all(chunking["in_store"] for chunking in again["chunking_plan"]) and again["to_embed"] == []


def test_the_chunkers_sweep_file_runs_on_a_corpus_given_by_argument(tiny_corpus, tmp_path, tracking_uri):  # noqa: F811
    """experiments/chunkers.yaml on another corpus (--input, --golden): every built-in chunker at its three sizes,
    each chunking of that corpus (not the sample's), overlap merged away where the chunker does not read it."""
    from rag_core.ingest.chunkers import CHUNKERS

    sweep = SHIPPED / "chunkers.yaml"
    built_in = {name for name in CHUNKERS if CHUNKERS.get(name).origin == "built-in"}
    assert set(yaml.safe_load(sweep.read_text())["grid"]["chunker"]) == built_in
    dry = run_cli("sweep", str(sweep), "--input", str(tiny_corpus.documents), "--golden", str(tiny_corpus.golden),
                  "--dry-run", "--json", store=tmp_path / "store")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["chunkings"] == 18 and planned["dense_indexes"] == 18  # 6 chunkers x 3 sizes, none merged
    assert planned["queries"] == len(tiny_corpus.golden.read_text().splitlines())
    own = json.loads(run_cli("sweep", str(sweep), "--dry-run", "--json", store=tmp_path / "store").stdout)
    assert own["queries"] == 36  # the sample corpus's golden set, and its chunkings: none of them the same
    assert not {c["key"] for c in planned["chunking_plan"]} & {c["key"] for c in own["chunking_plan"]}

    missing = run_cli("sweep", str(sweep), "--input", str(tmp_path / "nowhere"), "--dry-run", store=tmp_path / "store")
    assert missing.returncode == 2 and "--input" in missing.stderr and "Traceback" not in missing.stderr
