"""Issue 43: every reuse key is derived from the settings' stage column.

The property: for every built-in setting, changing it (to another valid value) changes exactly the keys
of its stage and of the stages after it, and no earlier one: the sweep's chunking, build and candidate
keys, and the derived keys of the re-rank, answer and evaluation stages. Settings that do not apply to a
config (bm25's with mode dense, fusion's with one retriever) change no key at all. The derived keys follow
the column by construction, so the column itself is checked against keys kept independently of it: the
store's chunk key and each chosen component's own key.
"""

from __future__ import annotations

import pytest

from rag_core.catalog import built_in_settings
from rag_core.components import REGISTRIES, SETTINGS, Component, Setting
from rag_core.components.settings import STAGES
from rag_core.components.stages import applying, key_through
from rag_core.config import ConfigError, RagConfig
from rag_core.workbench.plans.cost import dense_index_key
from rag_core.workbench.plans.sweep_file import SweepPoint

# values to try beyond the generic ones, for settings whose valid values cannot be guessed from the type
TRIES = {"mode": ["bm25,dense", "bm25"], "metadata_pattern": ["(?P<company>[^_]+)_"], "embed_model": ["packaged:minilm"],
         "plugins": [["rag_core.retrieve.fusion"]], "fusion_weights": [[0.7, 0.3]],
         "rerank_model": ["cross-encoder/other"], "llm_model": ["another-model"], "vector_store": ["qdrant:qdrant"]}
# what a setting needs around it to apply (or to take another value): besides choosing its component
CONTEXT = {"fusion_weights": {"fusion": "wsum"}, "child_size": {"chunk_size": 512}}


def keys(config: RagConfig) -> dict[str, tuple]:
    """Every derived key, by the stage it belongs to."""
    point = SweepPoint(1, {}, config)
    found = {"chunking": point.chunking_key, "index": point.build_key, "candidates": point.candidates_key}
    found.update((stage, key_through(config, stage)) for stage in ("ingest", "rerank", "answer", "evaluation"))
    return found


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


@pytest.mark.parametrize("setting", built_in_settings(), ids=lambda setting: setting.name)
def test_a_change_changes_the_keys_of_its_stage_and_later_ones_only(setting, monkeypatch):
    chooser = next((registry for registry in REGISTRIES.values() if registry.setting == setting.name), None)
    if chooser is not None and len(chooser.names()) == 1:  # one built-in (chunker, reranker): a second, for the test
        monkeypatch.setitem(chooser._components, "other", Component(chooser.kind, "other", None))
    base = base_for(setting)
    before, config = RagConfig.from_dict(base), changed(setting, base)
    assert setting.name in applying(before)
    old, new = keys(before), keys(config)
    first = STAGES.index(setting.stage)
    for stage in old:
        assert (old[stage] != new[stage]) == (STAGES.index(stage) >= first), (setting.name, stage)


def test_every_built_in_setting_says_its_stage():
    stages = {setting.name: setting.stage for setting in built_in_settings()}
    assert set(stages.values()) == set(STAGES)
    assert stages["chunk_size"] == "chunking" and stages["table_text"] == "ingest" and stages["bm25_k1"] == "index"
    assert stages["fusion"] == "candidates" and stages["rerank_model"] == "rerank" and stages["k"] == "answer"
    assert stages["page_credit"] == "evaluation"


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
def test_a_setting_that_does_not_apply_changes_no_key(base, change):
    assert keys(RagConfig.from_dict(base)) == keys(RagConfig.from_dict({**base, **change}))


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
def test_the_stage_agrees_with_the_keys_the_store_and_the_components_keep(setting, monkeypatch):
    """Independent of the stage column: the store's chunk key (``chunking_settings``) holds exactly the
    chunking settings (and some of ingest's), and a chosen component's own key (its name and settings)
    moves only for settings no later than the stage of the setting that chooses it (a retriever's search
    settings: candidates)."""
    from rag_core.retrieve.index import chunking_settings

    chooser = next((registry for registry in REGISTRIES.values() if registry.setting == setting.name), None)
    if chooser is not None and len(chooser.names()) == 1:
        monkeypatch.setitem(chooser._components, "other", Component(chooser.kind, "other", None))
    base = base_for(setting)
    before, after = RagConfig.from_dict(base), changed(setting, base)
    stage = STAGES.index(setting.stage)
    moved = chunking_settings(before) != chunking_settings(after)
    if setting.name != "plugins":  # what plugins load is not a chunk setting; its stage is the safe default
        assert moved == (setting.stage == "chunking") or (moved and setting.stage == "ingest"), setting.name
    for registry in REGISTRIES.values():
        if registry.setting is None or registry.setting == setting.name:
            continue
        latest = "candidates" if registry.kind == "retriever" else SETTINGS[registry.setting].stage
        for name in registry.chosen(before):
            if name in registry.names() and registry.get(name).key(before) != registry.get(name).key(after):
                assert stage <= STAGES.index(latest), (setting.name, registry.kind)

