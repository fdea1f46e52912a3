"""Components: the generic registry (unknown names listed with the nearest), setting declarations (one
table for built-ins and plugins), plugins from a config file and from an installed package's entry
point, the retriever contract (a third retriever fused without any change to the pipeline), and
``rag-pipeline components --json``."""

from __future__ import annotations

import json
import os
import textwrap
import time

import pytest

from conftest import ROOT, run_cli
from rag_core.components import SETTINGS, Registry, Setting, UnknownComponent
from rag_core.config import ConfigError, RagConfig, load_config
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document, ScoredId
from rag_core.retrieve.fusion import reciprocal_rank_fusion
from rag_core.retrieve.index import Index
from rag_core.retrieve.pipeline import Pipeline
from rag_core.retrieve.retrievers import RETRIEVERS, ChunkSet, Query, Ranked, Retriever, retriever_choices
from rag_core.workbench.tracking.traces import query_trace

TEXTS = {
    "lighthouse.txt": "The Fresnel lens concentrates the lamp into a beam. Keepers trimmed the wicks every evening.",
    "bread.txt": "Feed the sourdough starter twice a day. The dough proofs overnight in the refrigerator.",
    "ice.txt": "Moraines are ridges of rock debris that a glacier pushes ahead of it. Glaciers flow downhill.",
}
BM25_ONLY = dict(rerank_depth=0, chunk_size=8, overlap=0)


@pytest.fixture
def corpus() -> Corpus:
    return Corpus.of([Document.from_pages(name, [text], name) for name, text in TEXTS.items()])


# --- the registry -------------------------------------------------------------------------------
def test_unknown_names_list_the_valid_ones_and_suggest_the_nearest():
    with pytest.raises(UnknownComponent, match=r"unknown retriever 'bm52'; valid retrievers: dense, bm25.*"
                                               r"\(did you mean 'bm25'\?\)"):
        RETRIEVERS.get("bm52")
    with pytest.raises(ConfigError, match=r"fusion must be one of rrf, sum, .* \(did you mean 'wsum'\?\), got 'wsun'"):
        RagConfig(fusion="wsun")
    with pytest.raises(ConfigError, match=r"unknown setting 'chunk_sise' in config \(did you mean 'chunk_size'\?\)"):
        RagConfig(chunk_sise=256)
    with pytest.raises(ConfigError, match=r"mode must be one of .*unknown retriever 'dens' \(did you mean 'dense'\?\)"):
        RagConfig(mode="dens,bm25")
    with pytest.raises(ValueError) as nothing_close:
        RETRIEVERS.get("zzzzzz")
    assert "did you mean" not in str(nothing_close.value)


def test_a_registration_declares_its_settings_once_and_names_are_checked(isolated_components):
    class Gadget:
        pass

    registry = Registry("test_gadget", setting=None)
    registry.register("plain", Gadget, help="a gadget",
                      settings=[Setting("test_gadget_depth", int, 3, "how deep", minimum=1, maximum=9)])
    [component] = registry.components()
    assert component.load() is Gadget and component.settings[0].owner == "test_gadget plain"
    assert component.origin == f"module {__name__}"  # not rag_core: a plugin's
    assert SETTINGS["test_gadget_depth"].default == 3 and RagConfig().test_gadget_depth == 3
    assert RagConfig(test_gadget_depth="7").test_gadget_depth == 7  # coerced like any setting
    with pytest.raises(ConfigError, match=r"test_gadget_depth must be between 1 and 9, got 12"):
        RagConfig(test_gadget_depth=12)
    with pytest.raises(ValueError, match="declared twice"):  # another declaration of the same name
        registry.register("other", dict, settings=[Setting("test_gadget_depth", int, 4, "deeper")])
    with pytest.raises(ValueError, match="reserved"):
        RETRIEVERS.register("fused", object)


def test_mode_is_a_list_of_retrievers_with_weights_and_hybrid_its_shorthand():
    assert [(c.name, c.weight) for c in retriever_choices(RagConfig())] == [("dense", None), ("bm25", None)]
    legacy = RagConfig(fusion_weights=(0.7, 0.3))  # fusion_weights: [w_dense, w_bm25], as before
    assert [(c.name, c.weight) for c in retriever_choices(legacy)] == [("dense", 0.7), ("bm25", 0.3)]
    assert RagConfig(mode="bm25", fusion_weights=(0.7, 0.3)).mode == "bm25"  # one retriever: weights unused
    written = RagConfig.from_dict({"mode": {"dense": 0.7, "bm25": 0.3}})  # a YAML mapping
    assert written.mode == "dense:0.7,bm25:0.3" and written.as_params()["mode"] == "dense:0.7,bm25:0.3"
    assert RagConfig.from_dict({"mode": ["bm25", "dense"]}).mode == "bm25,dense"
    with pytest.raises(ConfigError, match="fusion_weights must be empty when mode gives the weights"):
        RagConfig(mode="dense:1,bm25:2", fusion_weights=(1.0, 1.0))
    with pytest.raises(ConfigError, match="some retrievers have a weight and others not"):
        RagConfig(mode="dense:1,bm25")
    with pytest.raises(ConfigError, match="mode weights .* apply to fusion rrf, wsum"):
        RagConfig(mode="dense:1,bm25:2", fusion="mnz")


# --- the retriever contract ------------------------------------------------------------------------
class WordOverlap(Retriever):
    """Written against the contract only: it indexes nothing on disk and counts shared words."""

    def build(self, chunks: ChunkSet) -> None:
        self.chunks = chunks

    def search(self, query: Query, depth: int, allowed_doc_ids=None) -> Ranked:
        words = set(query.text.lower().split())
        scored = [(len(words & set(text.lower().split())), position)
                  for position, (chunk, text) in enumerate(zip(self.chunks.chunks, self.chunks.texts))
                  if allowed_doc_ids is None or chunk.doc_id in allowed_doc_ids]
        ranked = sorted(((-score, position) for score, position in scored if score >= self.config.test_words_min))
        return Ranked([ScoredId(self.chunks.chunks[position].id, float(-score)) for score, position in ranked[:depth]])


@pytest.fixture
def word_overlap(isolated_components):
    RETRIEVERS.register("test_words", WordOverlap, help="chunks ranked by how many query words they hold (a test)",
                        settings=[Setting("test_words_min", int, 1, "words a chunk must share", minimum=1)])


def test_a_third_retriever_is_fused_without_any_change_to_the_pipeline(corpus, tmp_path, word_overlap):
    query = "how often is the sourdough starter fed"
    pipeline = Pipeline(RagConfig(mode="bm25,test_words", **BM25_ONLY), corpus, tmp_path / "store")
    result = pipeline.retrieve(query)
    assert list(result.stages) == ["bm25", "test_words", "fused"] and result.retrievers == ("bm25", "test_words")
    assert {"bm25", "test_words", "fusion"} <= set(result.latency_ms)
    lists = [[hit.chunk.id for hit in result.stages[stage]] for stage in ("bm25", "test_words")]
    assert [hit.chunk.id for hit in result.stages["fused"]] == [item.id for item in reciprocal_rank_fusion(lists)]
    for hit in result.stages["fused"]:  # RRF by hand from each hit's ranks
        expected = sum(1 / (60 + hit.stages[stage].rank) for stage in ("bm25", "test_words") if stage in hit.stages)
        assert hit.stages["fused"].score == pytest.approx(expected)
    assert result.hits[0].chunk.doc_id == "bread.txt"
    # weights from mode, and a filter the retriever applies before ranking
    weighted = Pipeline(RagConfig(mode="bm25:2,test_words:1", **BM25_ONLY), corpus, tmp_path / "store").retrieve(query)
    for hit in weighted.stages["fused"]:
        expected = sum(weight / (60 + hit.stages[stage].rank)
                       for stage, weight in (("bm25", 2), ("test_words", 1)) if stage in hit.stages)
        assert hit.stages["fused"].score == pytest.approx(expected)
    kept = pipeline.retrieve(query, where={"doc_id": "ice.txt"})
    assert {hit.chunk.doc_id for hit in kept.stages["test_words"]} <= {"ice.txt"}
    # its MLflow trace has a span for it, lasting what it measured
    trace = query_trace({"query_id": "q1", "query": query}, result, time.time_ns(), lambda value: value)
    spans = {span["name"]: span for span in trace.spans}
    assert ["bm25", "test_words", "fusion", "query"] == [span["name"] for span in trace.spans]
    lasted = spans["test_words"]["end_time_unix_nano"] - spans["test_words"]["start_time_unix_nano"]
    assert lasted == int(result.latency_ms["test_words"] * 1e6)


def test_constructing_an_index_or_a_pipeline_does_no_work(corpus, tmp_path, monkeypatch):
    import rag_core.retrieve.index as index_module

    def refuse(*args, **kwargs):
        raise AssertionError("extraction ran while constructing")

    monkeypatch.setattr(index_module, "prepare_corpus", refuse)
    store = tmp_path / "store"
    Index(store, corpus, RagConfig(extract_tables=True))
    Pipeline(RagConfig(extract_tables=True, mode="bm25"), corpus, store)
    assert not store.exists()  # no folder, no cache database, no chunks


# --- plugins ------------------------------------------------------------------------------------
PLUGIN = '''
from rag_core.components import Setting
from rag_core.records import ScoredId
from rag_core.retrieve.retrievers import RETRIEVERS, Ranked, Retriever


@RETRIEVERS.register("{name}", help="first chunks first", settings=[Setting("{name}_skip", int, 0, "chunks skipped", minimum=0)])
class FirstChunks(Retriever):
    def build(self, chunks):
        self.ids = [chunk.id for chunk in chunks.chunks]
        self.doc = chunks.doc_of

    def search(self, query, depth, allowed_doc_ids=None):
        ids = [i for i in self.ids if allowed_doc_ids is None or self.doc[i] in allowed_doc_ids]
        ids = ids[self.config.{name}_skip:][:depth]
        return Ranked([ScoredId(i, 1.0 / (rank + 1)) for rank, i in enumerate(ids)])
'''


def test_a_plugin_file_named_in_a_config_file_registers_before_the_settings_are_checked(corpus, tmp_path,
                                                                                        isolated_components):
    plugins = tmp_path / "my plugins"
    plugins.mkdir()
    (plugins / "first_chunks.py").write_text(PLUGIN.format(name="test_first"))
    config_file = plugins / "config.yaml"  # the plugin path is relative to the config file
    config_file.write_text("plugins: [first_chunks.py]\nmode: test_first\ntest_first_skip: 1\nrerank_depth: 0\n"
                           "chunk_size: 8\noverlap: 0\n")
    config = load_config(config_file)
    assert config.plugins == (str((plugins / "first_chunks.py").resolve()),)
    assert config.as_params()["test_first_skip"] == "1"
    result = Pipeline(config, corpus, tmp_path / "store").retrieve("anything")
    index = Index(tmp_path / "store", corpus, config)
    assert [hit.chunk.id for hit in result.hits] == [chunk.id for chunk in index.chunks[1:6]]
    [component] = [c for c in RETRIEVERS.components() if c.name == "test_first"]
    assert component.origin.startswith("module first_chunks.py")
    with pytest.raises(ConfigError, match="plugin file not found: .*missing.py"):
        RagConfig(plugins=[str(tmp_path / "missing.py")])
    with pytest.raises(ConfigError, match="plugin 'no_such_plugin_module': no module named"):
        RagConfig(plugins=["no_such_plugin_module"])


def test_a_plugin_setting_is_a_cli_flag_and_a_plugin_error_is_one_line(tmp_path):
    plugin = tmp_path / "first_chunks.py"
    plugin.write_text(PLUGIN.format(name="cli_first"))
    store = tmp_path / "store"
    documents = tmp_path / "documents"
    documents.mkdir()
    for name, text in TEXTS.items():
        (documents / name).write_text(text)
    ingest = run_cli("ingest", "--input", str(documents), "--plugins", str(plugin), "--mode", "cli_first",
                     "--chunk-size", "8", "--overlap", "0", store=store)
    assert ingest.returncode == 0, ingest.stderr
    answer = run_cli("query", "anything", "--plugins", str(plugin), "--mode", "cli_first", "--cli-first-skip", "2",
                     "--chunk-size", "8", "--overlap", "0", "--rerank-depth", "0", "--no-llm", "--json", store=store)
    assert answer.returncode == 0, answer.stderr
    passages = json.loads(answer.stdout)["passages"]
    assert passages and all(set(p["scores"]) == {"cli_first", "fused"} for p in passages)
    explained = run_cli("query", "anything", "--plugins", str(plugin), "--mode", "cli_first", "--chunk-size", "8",
                        "--overlap", "0", "--rerank-depth", "0", "--no-llm", "--explain", store=store).stdout
    header = next(line for line in explained.splitlines() if line.lstrip().startswith("#"))
    assert header.split()[2:] == ["dense", "bm25", "cli_first", "fused", "rerank"]
    help_text = run_cli("query", "--help", "--plugins", str(plugin)).stdout
    assert "--cli-first-skip" in help_text
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    failed = run_cli("query", "anything", "--plugins", str(broken), store=store)
    assert failed.returncode == 2 and failed.stderr.strip().splitlines() == [
        f"error: plugin {broken} failed to import: RuntimeError: boom"]


def test_an_installed_package_registers_through_its_entry_point(tmp_path):
    """A temporary dist-info on sys.path stands for an installed package (what pip writes)."""
    site = tmp_path / "site"
    info = site / "gadget_fusions-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gadget-fusions\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rag_core.components]\ngadgets = gadget_fusions\n")
    (site / "gadget_fusions.py").write_text(textwrap.dedent('''
        from rag_core.components import Setting
        from rag_core.retrieve.fusion import FUSIONS, RRF


        @FUSIONS.register("first_list", weighted=False, help="the first retriever's list, unchanged",
                          settings=[Setting("first_list_keep", int, 10, "how many to keep", minimum=1)])
        class FirstList(RRF):
            def fuse(self, ranked, weights=None):
                return list(ranked[0])
    '''))
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    listed = run_cli("components", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [fusion] = [c for c in json.loads(listed.stdout)["kinds"]["fusion"]["components"] if c["name"] == "first_list"]
    assert fusion["origin"] == "entry point gadgets (gadget-fusions)"
    assert fusion["settings"][0]["name"] == "first_list_keep" and fusion["settings"][0]["default"] == 10
    assert "--first-list-keep N   how many to keep [10]" in run_cli("query", "--help", env=env).stdout


def test_components_json_lists_every_kind_with_settings_and_origin():
    plugin = ROOT / "examples" / "plugins" / "tfidf_retriever.py"
    listed = run_cli("components", "--json", "--plugins", str(plugin))
    assert listed.returncode == 0, listed.stderr
    kinds = json.loads(listed.stdout)["kinds"]
    assert {"retriever", "chunker", "fusion", "reranker", "query_expansion", "embed_backend", "rerank_backend",
            "vector_store", "bm25_backend", "tokenizer"} <= set(kinds)
    retrievers = {c["name"]: c for c in kinds["retriever"]["components"]}
    assert kinds["retriever"]["setting"] == "mode" and retrievers["bm25"]["origin"] == "built-in"
    assert {s["name"]: (s["type"], s["default"], s["range"]) for s in retrievers["bm25"]["settings"]}["bm25_b"] == (
        "float", 0.75, "between 0 and 1")
    assert retrievers["tfidf"]["origin"] == f"module tfidf_retriever.py ({plugin})"
    assert [s["name"] for s in retrievers["tfidf"]["settings"]] == ["tfidf_ngram_max", "tfidf_sublinear_tf"]
    assert {c["name"] for c in kinds["query_expansion"]["components"]} == {"none", "rm3", "multi_query", "hyde"}
    text = run_cli("components").stdout
    assert "retriever (setting mode)" in text and "tfidf" not in text  # plugins only when named


def test_no_file_under_rag_core_names_the_example_plugins():
    named = [str(path) for path in (ROOT / "rag_core").rglob("*.py")
             if any(word in path.read_text() for word in ("tfidf", "sentence_chunker", "SentenceChunker"))]
    assert named == []
