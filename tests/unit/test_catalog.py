"""The catalog (``rag_core.catalog``) and ``RagConfig``'s typed attributes (``ConfigFields``).

The catalog must name every registry rag_core creates: checked against the ``Registry(...)`` calls
found by reading the sources (ast), not against the catalog itself. The typed attributes must be the
built-in settings, each with its declared type, consistent with its default: a setting added, removed
or retyped without its annotation fails here, with the line to paste.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from rag_core.catalog import BUILT_IN_REGISTRIES, built_in_settings, registries
from rag_core.components import SETTINGS, Registry, Setting
from rag_core.components.config_fields import ConfigFields
from rag_core.components.settings import ITEM_TYPE
from rag_core.config import RagConfig

RAG_CORE = Path(__file__).resolve().parents[2] / "rag_core"


def _registry_kinds_in_sources() -> set[str]:
    """The kind of every ``Registry("kind", ...)`` call in rag_core's sources."""
    kinds = set()
    for path in RAG_CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Registry" and node.args:
                kinds.add(node.args[0].value)
    return kinds


def test_the_catalog_names_every_registry_rag_core_creates():
    found = _registry_kinds_in_sources()
    assert len(found) >= 11  # retrievers, chunkers, fusions, ... (the scan itself works)
    assert set(BUILT_IN_REGISTRIES) == found
    assert all(registry.kind == kind for kind, registry in BUILT_IN_REGISTRIES.items())


def test_config_imports_the_catalog_not_registries_for_their_side_effects():
    source = (RAG_CORE / "config.py").read_text(encoding="utf-8")
    assert "noqa: F401" not in source
    assert "from rag_core.catalog import SETTINGS" in source


def test_registries_lists_the_built_in_kinds_in_pipeline_order_then_a_plugins_kind(isolated_components):
    assert list(registries())[:5] == ["chunker", "retriever", "fusion", "query_expansion", "reranker"]
    Registry("test_gadget")
    assert list(registries())[-1] == "test_gadget"
    assert "test_gadget" not in BUILT_IN_REGISTRIES


def _annotation_line(setting: Setting) -> str:
    item = ITEM_TYPE.get(setting.type)
    return f"    {setting.name}: {f'tuple[{item.__name__}, ...]' if item else setting.type.__name__}"


def test_the_typed_attributes_are_the_built_in_settings_with_their_types():
    hints = typing.get_type_hints(RagConfig)
    declared = {setting.name: setting.type for setting in built_in_settings()}
    missing = [_annotation_line(SETTINGS[name]) for name in declared if name not in hints]
    assert not missing, "add to rag_core/components/config_fields.py:\n" + "\n".join(missing)
    assert not set(hints) - set(declared), f"not a built-in setting: {sorted(set(hints) - set(declared))}"
    wrong = [_annotation_line(SETTINGS[name]) for name, kind in declared.items() if hints[name] != kind]
    assert not wrong, "retype in rag_core/components/config_fields.py:\n" + "\n".join(wrong)
    assert len(hints) >= 60  # the built-ins as this was written: 61


@pytest.mark.parametrize("setting", built_in_settings(), ids=lambda setting: setting.name)
def test_each_annotation_holds_the_settings_default_and_a_configs_value(setting):
    kind = typing.get_type_hints(ConfigFields)[setting.name]
    item = ITEM_TYPE.get(kind)
    for value in (setting.default, getattr(RagConfig(), setting.name)):
        if item is None:
            assert type(value) is kind, (setting.name, value)
        else:
            assert type(value) is tuple and all(type(element) is item for element in value), (setting.name, value)


def test_the_annotations_are_types_only_and_a_plugins_setting_is_read_as_before(isolated_components):
    assert not [name for name in typing.get_type_hints(ConfigFields) if name in vars(ConfigFields)]
    config = RagConfig(chunk_size=100, overlap=10)
    assert (config.chunk_size, config.overlap, config.mode) == (100, 10, "hybrid")
    with pytest.raises(AttributeError, match="immutable"):
        config.chunk_size = 3
    from rag_core.retrieve.retrievers import RETRIEVERS, Retriever

    RETRIEVERS.register("test_typed", type("T", (Retriever,), {}),
                        settings=[Setting("test_typed_depth", int, 4, "how deep")])
    assert RagConfig(test_typed_depth=6).test_typed_depth == 6
    assert config.test_typed_depth == 4  # declared after the config was made: its default
    assert "test_typed_depth" not in [setting.name for setting in built_in_settings()]
    assert SETTINGS.origin("test_typed_depth").startswith("module ")
    assert "test_typed_depth" not in typing.get_type_hints(RagConfig)
