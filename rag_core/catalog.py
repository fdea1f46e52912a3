"""The catalog: every built-in registry, imported by name, and the settings table they fill.

Each registry lives beside its implementations and declares, when its module is imported, the
settings of its kind and of its built-in components. This module imports each of them explicitly,
so that whoever needs the whole table (``rag_core.config``, ``rag-pipeline components``) depends on
one named list rather than on the side effects of unrelated imports:

- ``BUILT_IN_REGISTRIES``: kind -> registry, in the order of the pipeline (what the components
  command lists first);
- ``registries()``: those, then any kind a plugin created (``Registry("my_kind")``), after
  loading the installed packages' entry points;
- ``SETTINGS``: the settings table, holding every built-in component's settings once this module is
  imported (the pipeline's own are added by ``rag_core.config``; plugins' when they are loaded);
- ``built_in_settings()``: the settings rag_core itself declares (not a plugin's), which
  ``RagConfig``'s typed attributes mirror.

A new built-in kind is one registry beside its implementations plus one line here.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from rag_core.components import REGISTRIES, SETTINGS, Registry, Setting, load_entry_points
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.retrieve.doc_evidence import DOC_EVIDENCE
from rag_core.retrieve.embedding import EMBED_BACKENDS
from rag_core.retrieve.expansion import QUERY_EXPANSIONS
from rag_core.retrieve.fusion import FUSIONS
from rag_core.retrieve.rerank import RERANK_BACKENDS, RERANKERS
from rag_core.retrieve.retrievers import BM25_BACKENDS, RETRIEVERS
from rag_core.retrieve.tokenizer import TOKENIZERS
from rag_core.retrieve.vector_stores import VECTOR_STORES

__all__ = ["BUILT_IN_REGISTRIES", "SETTINGS", "built_in_settings", "registries"]

# kind -> registry, in pipeline order (the components command lists them so)
BUILT_IN_REGISTRIES: Mapping[str, Registry] = MappingProxyType({registry.kind: registry for registry in (
    CHUNKERS, RETRIEVERS, FUSIONS, QUERY_EXPANSIONS, RERANKERS, BM25_BACKENDS, TOKENIZERS, EMBED_BACKENDS,
    RERANK_BACKENDS, VECTOR_STORES, DOC_EVIDENCE)})


def registries() -> dict[str, Registry]:
    """kind -> registry: the built-in kinds in pipeline order, then the kinds plugins created."""
    load_entry_points()
    return {**BUILT_IN_REGISTRIES, **{kind: registry for kind, registry in REGISTRIES.items()
                                      if kind not in BUILT_IN_REGISTRIES}}


def built_in_settings() -> list[Setting]:
    """The settings rag_core declares (the pipeline's own, its kinds' and its built-in components'), in
    the table's order; a plugin's are left out."""
    return [setting for setting in SETTINGS if SETTINGS.origin(setting.name) == "built-in"]
