"""Components: the generic registry every kind of component uses, the setting declarations they make,
and plugin loading (modules named in ``plugins``, installed packages' ``rag_core.components`` entry
points). The registries themselves live beside their implementations (``rag_core.retrieve.retrievers``,
``rag_core.ingest.chunkers``, ...); ``rag_core.catalog`` imports every built-in one by name;
``REGISTRIES`` lists those created so far, by kind (plugins' kinds included)."""

from rag_core.components.plugins import load_plugins, loaded_plugins, resolve_plugins
from rag_core.components.registry import (ENTRY_POINT_GROUP, REGISTRIES, Component, Registry, UnknownComponent,
                                          load_entry_points)
from rag_core.components.settings import SETTINGS, ConfigError, Rule, Setting, SettingsTable, did_you_mean

__all__ = ["ENTRY_POINT_GROUP", "REGISTRIES", "SETTINGS", "Component", "ConfigError", "Registry", "Rule", "Setting",
           "SettingsTable", "UnknownComponent", "did_you_mean", "load_entry_points", "load_plugins", "loaded_plugins",
           "resolve_plugins"]
