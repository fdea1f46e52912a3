"""Issue 43: every reuse key is derived from the settings' stage column.

The property: for every built-in setting, changing it (to another valid value) changes exactly the keys
of its stage and of the stages after it, and no earlier one:
- the derived keys (``rag_core.components.stages``): the sweep's chunking, build and candidate keys
  (``SweepPoint``), the keys of the ingest, re-rank, answer and evaluation stages, and the cost
  estimate's dense index key (which holds the dense retriever's settings only);
- the keys kept outside the sweep: the candidates cache's (``FirstStage.settings_key``) and the store's
  names (the chunking folder, and each chosen retriever's index, ``Retriever.index_key``), which keep
  their format of before and add what it does not hold by stage; where a name holds a setting through
  something else (the documents, the model as loaded) the test names it (``HELD_ELSEWHERE``);
- the sweep's re-rank lock: the cross-encoder's scores are addressed by passage and model, so it moves
  for the chunking and the re-ranker's own settings only, never for a later stage.
A plugin's setting declares its stage the same way and moves the same keys (every stage tried).
Settings that do not apply to a config (bm25's with mode dense, fusion's with one retriever) change no
key at all. The store's names are computed over a small corpus with retrievers made but not built, and
an embedding model that stands in for the configured one (its name as loaded), so nothing is loaded.
"""

from __future__ import annotations

import json

import pytest

from rag_core.catalog import built_in_settings
from rag_core.components import REGISTRIES, SETTINGS, Component, Setting
from rag_core.components.settings import STAGES
from rag_core.components.stages import applying, key_through
from rag_core.config import ConfigError, RagConfig
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.ingest.chunkers.recursive import RecursiveChunker
from rag_core.ingest.corpus import Corpus
from rag_core.records import Document
from rag_core.retrieve.candidates import FirstStage
from rag_core.retrieve.index import STORE_FORMAT_1, Index
from rag_core.retrieve.retrievers import RETRIEVERS, Retriever, retriever_choices
from rag_core.workbench.plans.cost import dense_index_key
from rag_core.workbench.plans.sweep_file import SweepPoint

# values to try beyond the generic ones, for settings whose valid values cannot be guessed from the type
TRIES = {"mode": ["bm25", "bm25,dense"], "metadata_pattern": ["(?P<company>[^_]+)_"], "embed_model": ["packaged:minilm"],
         "plugins": [["rag_core.retrieve.fusion"]], "fusion_weights": [[0.7, 0.3]], "dense_pooling": ["first"],
         "rerank_model": ["cross-encoder/other"], "llm_model": ["another-model"], "vector_store": ["qdrant:qdrant"]}
# what a setting needs around it to apply (or to take another value): besides choosing its component
CONTEXT = {"fusion_weights": {"fusion": "wsum"}, "child_size": {"chunk_size": 512}}
# Settings the store's names hold through something other than their value, which this corpus and this
# stand-in model leave as they were: a change that changes nothing stored keeps the names.
HELD_ELSEWHERE = {
    "plugins": "what is loaded changes nothing until a config chooses it (the chosen names are held)",
    "extract_tables": "the corpus fingerprint: plain-text documents have no tables (test_table_text_pdf)",
    "table_text": "the corpus fingerprint: plain-text documents have no tables (test_table_text_pdf)",
    "metadata_pattern": "the corpus fingerprint: the documents' metadata, which the pattern does not match here",
    "model_fallback": "the model as loaded (Embedder.cache_name), which it changes only when the model cannot load",
}
TEXTS = {"cats": "Cats purr and sleep on warm windows all afternoon. " * 6,
         "dogs": "Dogs bark at the mail carrier and chase the ball. " * 8}
CORPUS = Corpus.of([Document.from_pages(f"{name}.txt", [text], name) for name, text in TEXTS.items()])
DERIVED = ("chunking", "ingest", "index", "candidates", "rerank", "answer", "evaluation")


class StandInModel:
    """The configured embedding model as if loaded: its name and backend; words as its tokens."""

    def __init__(self, config: RagConfig) -> None:
        self.name_used = config.embed_model
        self.cache_name = f"{config.embed_model} [{config.embed_backend}]"

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class UnbuiltIndex(Index):
    """An index that chunks nothing and whose retrievers are made but not built: only keys are asked for."""

    def retriever(self, name: str) -> Retriever:
        return RETRIEVERS.load(name)(name, self.config, self.resources)

    def _load_or_build_chunks(self) -> list:
        return []


def keys(config: RagConfig, store=None) -> dict[str, tuple]:
    """Every key, by name: the derived ones by stage, then (with a `store` folder) those kept outside the sweep."""
    point = SweepPoint(1, {}, config)
    found = {"chunking": point.chunking_key, "index": point.build_key, "candidates": point.candidates_key}
    found.update((stage, key_through(config, stage)) for stage in ("ingest", "rerank", "answer", "evaluation"))
    found.update({"cost": dense_index_key(config), "rerank lock": point.rerank_key})
    if store is not None:
        index = UnbuiltIndex(store, CORPUS, config, embedder=StandInModel(config))
        found["chunks folder"] = index.chunking_key
        found["store"] = {choice.name: index.retriever(choice.name).index_key(index.retriever_chunks(choice.name))
                          for choice in retriever_choices(config)}
        found["candidates cache"] = FirstStage(config, index).settings_key
    return found


def expected(key: str, setting: Setting, config: RagConfig) -> bool | None:
    """Whether a change of `setting` moves `key`: by the stage rule, with what a key holds less of (the
    cost key: the dense retriever's; the re-rank lock: the chunking and the re-ranker's own); None: it
    may, or may not (the store's names, for a setting they hold through the documents or the model)."""
    stage = STAGES.index(setting.stage)
    if key in DERIVED or key == "candidates cache":
        return stage <= STAGES.index(key if key in DERIVED else "candidates")
    if key == "cost":
        dense = applying(config, {"retriever": ("dense",)})
        return stage <= STAGES.index("index") and setting.name in dense and setting.name != "mode"
    if key == "rerank lock":
        own = {name for name, _ in REGISTRIES["reranker"].get(config.reranker).key(config)[1:]} | {"reranker"}
        return setting.stage == "chunking" or setting.name in own
    last = "ingest" if key == "chunks folder" else "index"
    if stage > STAGES.index(last):
        return False
    if setting.name in HELD_ELSEWHERE or (key == "chunks folder" and setting.stage != "chunking"):
        return None  # held by the names through the documents, the model, or (the folder) the retrievers' keys
    return True


def base_for(setting: Setting) -> dict:
    """Settings under which `setting` applies: its component chosen (a retriever: alone in mode)."""
    values = dict(CONTEXT.get(setting.name, {}))
    kind, _, name = setting.owner.partition(" ")
    if name:
        values[REGISTRIES[kind].setting] = name
    return values


def candidates(setting: Setting) -> list:
    tries = list(TRIES.get(setting.name, []))
    tries += [choice for choice in setting.valid_choices() if choice != setting.default]
    if setting.type is bool:
        tries.append(not setting.default)
    elif setting.type is int:
        tries += [setting.default + 1, setting.default * 2, 1, 3]
    elif setting.type is float:
        tries += [setting.default / 2 if setting.default else 0.5, setting.default + 0.5]
    elif setting.type == tuple[int, ...]:
        tries.append([3])
    return tries


def changed(setting: Setting, base: dict) -> RagConfig:
    for value in candidates(setting):
        try:
            config = RagConfig.from_dict({**base, setting.name: value})
        except ConfigError:
            continue
        if getattr(config, setting.name) != getattr(RagConfig.from_dict(base), setting.name):
            return config
    raise AssertionError(f"no other valid value tried for {setting.name}")


@pytest.fixture
def second_components(monkeypatch):
    """A second chunker and re-ranker (one built-in each), so that the settings choosing them can change."""
    monkeypatch.setitem(CHUNKERS._components, "other", Component("chunker", "other", RecursiveChunker))
    monkeypatch.setitem(REGISTRIES["reranker"]._components, "other", Component("reranker", "other", None))


@pytest.mark.parametrize("setting", built_in_settings(), ids=lambda setting: setting.name)
def test_a_change_changes_the_keys_of_its_stage_and_later_ones_only(setting, second_components, tmp_path):
    base = base_for(setting)
    before, config = RagConfig.from_dict(base), changed(setting, base)
    assert setting.name in applying(before)
    old, new = keys(before, tmp_path), keys(config, tmp_path)
    for key in old:
        should = expected(key, setting, before)
        if should is not None:
            assert (old[key] != new[key]) == should, (setting.name, key)


@pytest.mark.parametrize("stage", STAGES)
def test_a_plugin_setting_moves_the_keys_of_its_stage_and_later_ones(stage, isolated_components, tmp_path):
    SETTINGS.declare(Setting("mine_knob", int, 1, "a plugin's", stage=stage), owner="mine", origin="module mine")
    old, new = keys(RagConfig(), tmp_path), keys(RagConfig(mine_knob=2), tmp_path)
    held = {"cost": "index", "rerank lock": "chunking", "chunks folder": "ingest", "store": "index",
            "candidates cache": "candidates"}  # the last stage whose settings each key holds
    for key in old:
        assert (old[key] != new[key]) == (STAGES.index(stage) <= STAGES.index(held.get(key, key))), key


@pytest.mark.parametrize("stage, moved", [("chunking", True), ("index", False)])
def test_a_plugin_chunkers_setting_joins_the_chunking_folder_by_its_stage(stage, moved, isolated_components,
                                                                          tmp_path):
    CHUNKERS.register("mine", RecursiveChunker, settings=[Setting("mine_min", int, 1, "a plugin's", stage=stage)])
    old, new = keys(RagConfig(chunker="mine"), tmp_path), keys(RagConfig(chunker="mine", mine_min=2), tmp_path)
    assert (old["chunks folder"] != new["chunks folder"]) == moved and old["store"] != new["store"]


class OwnKey(Retriever):
    """A plugin retriever whose cache_key leaves its own setting out."""

    def cache_key(self, chunks):
        return f"{self.name}-{len(chunks.context)}-{'-'.join(map(str, chunks.context))}"

    def build(self, chunks):
        return None

    def search(self, query, depth, allowed_doc_ids=None):
        raise NotImplementedError


@pytest.mark.parametrize("own_key", [False, True])
def test_a_plugin_retrievers_setting_moves_its_index_whether_its_key_holds_it_or_not(own_key, isolated_components,
                                                                                    tmp_path):
    implementation = OwnKey if own_key else type("DefaultKey", (OwnKey,), {"cache_key": Retriever.cache_key})
    RETRIEVERS.register("mine", implementation, settings=[Setting("mine_depth", int, 1, "a plugin's", stage="index")])
    old, new = keys(RagConfig(mode="mine"), tmp_path), keys(RagConfig(mode="mine", mine_depth=2), tmp_path)
    assert old["store"] != new["store"] and old["chunks folder"] == new["chunks folder"]


def test_every_built_in_setting_says_its_stage():
    stages = {setting.name: setting.stage for setting in built_in_settings()}
    assert set(stages.values()) == set(STAGES)
    assert stages["chunk_size"] == "chunking" and stages["table_text"] == "ingest" and stages["bm25_k1"] == "index"
    assert stages["fusion"] == "candidates" and stages["rerank_model"] == "rerank" and stages["k"] == "answer"
    assert stages["page_credit"] == "evaluation"


def test_the_stores_format_names_built_in_settings_no_later_than_the_indexes():
    """Format 1 is a record of what the names held; a setting declared since is added by its stage."""
    stages = {setting.name: setting.stage for setting in built_in_settings()}
    assert STORE_FORMAT_1 <= set(stages)
    assert all(STAGES.index(stages[name]) <= STAGES.index("index") for name in STORE_FORMAT_1)


def test_the_store_keeps_the_names_of_format_1(tmp_path):
    """Names of stores built before the stage column (a default config's), unchanged: nothing is built again."""
    names = keys(RagConfig(), tmp_path)
    assert names["chunks folder"] == "efd53297b8a254d1"
    assert names["store"] == {"dense": "dense-00be125fe7265739/dense-23835e327f3b8ebb", "bm25": "bm25-84b3856f6587f9ec"}


def test_a_plugin_setting_that_does_not_say_invalidates_everything():
    assert Setting("mine_depth", int, 3, "a plugin's").stage == "chunking" == STAGES[0]
    with pytest.raises(ValueError, match="stage must be one of"):
        Setting("mine_depth", int, 3, "a plugin's", stage="later")


@pytest.mark.parametrize("base, change", [
    ({"mode": "dense"}, {"bm25_k1": 1.2}),          # bm25's settings with no bm25 retriever
    ({"mode": "bm25"}, {"dense_pooling": "max"}),   # dense's with no dense retriever
    ({"mode": "bm25"}, {"fusion": "mnz"}),          # fusion with one retriever: nothing is fused
    ({"query_expansion": "none"}, {"rm3_docs": 5}),  # rm3's without rm3
])
def test_a_setting_that_does_not_apply_changes_no_key(base, change, tmp_path):
    before, after = keys(RagConfig.from_dict(base), tmp_path), keys(RagConfig.from_dict({**base, **change}), tmp_path)
    before.pop("cost"), after.pop("cost")  # the dense index a config would need, whether it runs dense or not
    assert before == after


@pytest.mark.parametrize("expansion, moved", [("multi_query", True), ("hyde", True), ("none", False)])
def test_a_setting_a_chosen_component_uses_counts_at_that_components_stage(expansion, moved, tmp_path):
    """The LLM's model is an answer setting, but the queries multi_query and HyDE write change the candidates."""
    config = RagConfig(query_expansion=expansion, mode="bm25" if expansion != "hyde" else "dense")
    old, new = keys(config, tmp_path), keys(config.replace(llm_model="another-model"), tmp_path)
    assert (old["candidates"] != new["candidates"]) == moved == (old["candidates cache"] != new["candidates cache"])
    assert old["index"] == new["index"] and old["store"] == new["store"] and old["answer"] != new["answer"]


def test_chunks_counted_in_tokens_bring_the_embedding_model_into_the_chunking():
    words, tokens = RagConfig(embed_model="packaged:minilm"), RagConfig(chunk_unit="tokens", embed_model="packaged:minilm")
    assert keys(words)["chunking"] == keys(RagConfig())["chunking"]  # counted in words: the model is not part of it
    assert keys(tokens)["chunking"] != keys(tokens.replace(embed_model="BAAI/bge-small-en-v1.5"))["chunking"]


def test_the_dense_index_key_holds_the_dense_retrievers_settings_up_to_its_index():
    config = RagConfig(mode="hybrid")
    assert dense_index_key(config) == dense_index_key(config.replace(bm25_k1=1.0, mode="dense", k=3, fusion="mnz"))
    assert dense_index_key(config) != dense_index_key(config.replace(dense_stride=64))
    assert dense_index_key(config) != dense_index_key(config.replace(chunk_context="title"))


@pytest.mark.parametrize("setting", built_in_settings(), ids=lambda setting: setting.name)
def test_the_stage_agrees_with_the_keys_the_components_keep(setting, second_components):
    """Independent of the stage column: a chosen component's own key (its name and settings) moves only
    for settings no later than the stage of the setting that chooses it (a retriever's search settings:
    candidates)."""
    base = base_for(setting)
    before, after = RagConfig.from_dict(base), changed(setting, base)
    stage = STAGES.index(setting.stage)
    for registry in REGISTRIES.values():
        if registry.setting is None or registry.setting == setting.name:
            continue
        latest = "candidates" if registry.kind == "retriever" else SETTINGS[registry.setting].stage
        for name in registry.chosen(before):
            if name in registry.names() and registry.get(name).key(before) != registry.get(name).key(after):
                assert stage <= STAGES.index(latest), (setting.name, registry.kind)


# --- reads: the common chunking settings a chunker reads -----------------------------------------
COMMON_CHANGES = {"chunk_size": 256, "overlap": 0, "chunk_unit": "tokens", "per_page": True}


@pytest.mark.parametrize("common", list(COMMON_CHANGES))
def test_a_common_setting_the_chunker_does_not_read_moves_no_key(common, isolated_components, tmp_path):
    """Issue 51: a chunker registered with reads=(...) is not re-chunked (nor its points told apart) when a
    common setting it ignores changes; one that reads it is."""
    CHUNKERS.register("blind", RecursiveChunker, reads=[name for name in COMMON_CHANGES if name != common])
    CHUNKERS.register("sighted", RecursiveChunker, reads=tuple(COMMON_CHANGES))
    for chunker, moved in (("blind", False), ("sighted", True)):
        before = RagConfig(chunker=chunker, embed_model="packaged:minilm")
        old, new = keys(before, tmp_path), keys(before.replace(**{common: COMMON_CHANGES[common]}), tmp_path)
        for key in ("chunking", "index", "candidates", "evaluation", "chunks folder", "store", "candidates cache"):
            assert (old[key] != new[key]) == moved, (chunker, key)


@pytest.mark.parametrize("chunker", CHUNKERS.names())
@pytest.mark.parametrize("common", list(COMMON_CHANGES))
def test_each_built_in_chunkers_keys_move_for_the_common_settings_it_reads_only(chunker, common, tmp_path):
    before = RagConfig(chunker=chunker, embed_model="packaged:minilm")
    old, new = keys(before, tmp_path), keys(before.replace(**{common: COMMON_CHANGES[common]}), tmp_path)
    moved = common in CHUNKERS.reads(chunker)
    assert (old["chunking"] != new["chunking"]) == moved == (old["chunks folder"] != new["chunks folder"])
    assert (old["evaluation"] != new["evaluation"]) == moved and (old["store"] != new["store"]) == moved


def test_a_chunker_that_does_not_say_reads_every_common_setting(isolated_components):
    CHUNKERS.register("plain", RecursiveChunker)
    assert CHUNKERS.reads("plain") == CHUNKERS.reads("recursive") == ("chunk_size", "overlap", "chunk_unit", "per_page")
    with pytest.raises(ValueError, match="reads='child_size' is not a common setting of chunkers"):
        CHUNKERS.register("odd", RecursiveChunker, reads=("chunk_size", "child_size"))


def test_children_count_in_the_unit_whatever_the_chunker_reads(isolated_components, tmp_path):
    """child_size brings chunk_unit: the children of a chunker that ignores the unit are still counted in it."""
    CHUNKERS.register("blind", RecursiveChunker, reads=())
    alone = RagConfig(chunker="blind", embed_model="packaged:minilm")
    assert keys(alone, tmp_path)["chunks folder"] == keys(alone.replace(chunk_unit="tokens"), tmp_path)["chunks folder"]
    parents = alone.replace(child_size=64)
    old, new = keys(parents, tmp_path), keys(parents.replace(chunk_unit="tokens"), tmp_path)
    assert old["chunks folder"] != new["chunks folder"] and old["ingest"] != new["ingest"]
    assert old["chunking"] == new["chunking"]  # the chunks themselves do not move
    assert ("embed_model", "packaged:minilm") in dict(zip(STAGES, new["evaluation"]))["ingest"]  # its tokenizer counts


def test_overlap_below_chunk_size_only_where_the_chunker_reads_both(isolated_components):
    CHUNKERS.register("blind", RecursiveChunker, reads=("chunk_size", "per_page"))
    assert RagConfig(chunker="blind", chunk_size=32, overlap=64).overlap == 64  # ignored: not refused
    with pytest.raises(ConfigError, match="overlap must be >= 0 and < chunk_size"):
        RagConfig(chunk_size=32, overlap=64)
    with pytest.raises(ConfigError, match="overlap must be >= 0"):
        RagConfig(chunker="blind", overlap=-1)


# --- code versions: a component's code is in the key of its stage ------------------------------------
class Scorer(Retriever):
    def build(self, chunks):
        return None

    def search(self, query, depth, allowed_doc_ids=None):
        raise NotImplementedError


VERSIONED = {  # kind -> (how to register one, the config that chooses it, the stage its code acts at)
    "chunker": (lambda version: CHUNKERS.register("mine", RecursiveChunker, version=version), {"chunker": "mine"},
                "chunking"),
    "retriever": (lambda version: RETRIEVERS.register("mine", Scorer, version=version), {"mode": "bm25,mine"}, "index"),
    "reranker": (lambda version: REGISTRIES["reranker"].register("mine", Scorer, version=version), {"reranker": "mine"},
                 "rerank"),
}


@pytest.mark.parametrize("kind", list(VERSIONED))
def test_a_components_code_version_moves_the_keys_of_its_stage_and_later_ones(kind, isolated_components, tmp_path):
    register, choose, stage = VERSIONED[kind]
    register("1")
    old = keys(RagConfig.from_dict(choose), tmp_path)
    register("1")  # the same code registered again: the same keys
    assert keys(RagConfig.from_dict(choose), tmp_path) == old
    register("2")
    new = keys(RagConfig.from_dict(choose), tmp_path)
    held = {"cost": "index", "chunks folder": "ingest", "store": "index",
            "candidates cache": "candidates"}  # the last stage whose components' code each key holds
    for key in old:
        if key in ("cost", "rerank lock"):  # the dense retriever's index; the chunks and the re-ranker's scores
            assert (old[key] != new[key]) == (kind in ("chunker", "reranker" if key == "rerank lock" else "chunker"))
            continue
        assert (old[key] != new[key]) == (STAGES.index(stage) <= STAGES.index(held.get(key, key))), key


def test_a_built_in_has_no_code_version_unless_it_declares_one(isolated_components):
    assert CHUNKERS.get("recursive").version is None and RETRIEVERS.get("bm25").version is None
    CHUNKERS.register("declared", RecursiveChunker, version="7")
    assert CHUNKERS.get("declared").version == "7"
    assert keys(RagConfig())["chunking"] == keys(RagConfig(chunker="recursive"))["chunking"]  # format 1's: no version
    with pytest.raises(ValueError, match="version must be a non-empty string"):
        CHUNKERS.register("bad", RecursiveChunker, version=3)


# --- uses: a setting a chosen chunker uses is part of its chunking ---------------------------------
class LoadedAs(StandInModel):
    def __init__(self, config: RagConfig, loaded: str) -> None:
        super().__init__(config)
        self.name_used = loaded


def folder(config: RagConfig, loaded: str, store) -> str:
    return UnbuiltIndex(store, CORPUS, config, embedder=LoadedAs(config, loaded)).chunking_key


def test_a_chunker_that_embeds_is_keyed_by_the_model_as_loaded(isolated_components, tmp_path):
    """Offline, BAAI/bge-small-en-v1.5 loads as the packaged MiniLM: the chunks of a chunker that embeds are
    those of the model that loaded, whatever name asked for it."""
    CHUNKERS.register("embedding", RecursiveChunker, uses=("embed_model",))
    bge, minilm = (RagConfig(chunker="embedding", embed_model=name) for name in ("BAAI/bge-small-en-v1.5", "packaged:minilm"))
    assert folder(bge, "MiniLM", tmp_path) == folder(minilm, "MiniLM", tmp_path)  # the same model loaded
    assert folder(bge, "MiniLM", tmp_path) != folder(bge, "BGE", tmp_path)  # another model loaded: other chunks
    plain = RagConfig()
    assert folder(plain, "MiniLM", tmp_path) == folder(plain, "BGE", tmp_path)  # recursive embeds nothing
    assert ("embed_model", bge.embed_model) in SweepPoint(1, {}, bge).chunking_key
    assert "embed_model" not in dict(SweepPoint(1, {}, plain).chunking_key)


# --- the store: a chunking is reused by what its chunker reads, made again when its code changed ---------
def built(config: RagConfig, store) -> Index:
    index = Index(store, CORPUS, config, embedder=StandInModel(config))
    index.chunks
    return index


def test_a_chunker_that_ignores_overlap_reuses_its_chunks_when_overlap_changes(isolated_components, tmp_path):
    CHUNKERS.register("blind", RecursiveChunker, reads=("chunk_size", "per_page"), version="1")
    first = built(RagConfig(chunker="blind", chunk_size=8, overlap=0), tmp_path)
    again = built(RagConfig(chunker="blind", chunk_size=8, overlap=4), tmp_path)
    assert (first.stats.chunkings_built, again.stats.chunkings_built) == (1, 0) and first.dir == again.dir
    recursive = built(RagConfig(chunk_size=8, overlap=4), tmp_path)  # recursive reads overlap: its own chunks
    assert recursive.stats.chunkings_built == 1 and recursive.dir != first.dir


def test_a_changed_chunker_chunks_again_and_says_why(isolated_components, tmp_path, caplog):
    CHUNKERS.register("mine", RecursiveChunker, version="1")
    config = RagConfig(chunker="mine", chunk_size=8, overlap=0)
    first = built(config, tmp_path)
    assert first.stats.chunkings_built == 1
    first = first.dir
    assert built(config, tmp_path).stats.chunkings_built == 0  # unchanged: reused
    assert not [message for message in caplog.messages if "chunking again" in message]
    CHUNKERS.register("mine", RecursiveChunker, version="2")
    index = built(config, tmp_path)
    assert index.stats.chunkings_built == 1
    [said] = [message for message in caplog.messages if "chunking again" in message]
    assert f"chunker 'mine': code version 1 -> 2 (the earlier code's chunks stay in chunks/{first.name})" in said
    recorded = json.loads((index.dir / "chunking.json").read_text())
    assert recorded["settings"]["code version of chunker mine"] == "2"
