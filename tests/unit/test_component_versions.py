"""Issue 51: a component's code version (``Component.version``) is part of the key of its stage, so changed
code never reuses what the old code made and unchanged code always does. A plugin's is a hash of its source,
read when it registers: the file of its class's module and of its base classes outside rag_core; the same
source at another path is the same version, an edit of any of those files another. A declared ``version``
wins; a built-in has none unless it declares one (the store's format holds its code)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import types

import pytest

from rag_core.components import load_plugins
from rag_core.components.registry import loading, source_version
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.ingest.chunkers.recursive import RecursiveChunker

PLUGIN = '''
from rag_core.ingest.chunkers import CHUNKERS, Chunker, span_chunk

WINDOW = {window}


@CHUNKERS.register("{name}", help="fixed windows of characters"{options})
class WindowChunker(Chunker):
    def chunk(self, document):
        text = document.text
        return [span_chunk(document, start, min(start + WINDOW, len(text))) for start in range(0, len(text), WINDOW)]
'''


def plugin(path, name, window=400, options=""):
    path.write_text(textwrap.dedent(PLUGIN.format(name=name, window=window, options=options)))
    load_plugins([str(path)])
    return CHUNKERS.get(name)


def imported(path, name):
    """The module in file `path`, imported as `name` (no registration: a class only)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


CLASS_ONLY = "from rag_core.ingest.chunkers import Chunker\n\nclass Window(Chunker):\n    WINDOW = {window}\n"


def test_the_same_source_is_the_same_version_wherever_it_is_and_an_edit_another(tmp_path, monkeypatch):
    for folder, window in (("a", 400), ("b", 400), ("c", 900)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "window.py").write_text(CLASS_ONLY.format(window=window))
        monkeypatch.delitem(sys.modules, f"window_{folder}", raising=False)
    versions = {folder: source_version(imported(tmp_path / folder / "window.py", f"window_{folder}").Window)
                for folder in "abc"}
    assert versions["a"] == versions["b"] != versions["c"] and len(versions["a"]) == 12
    for folder in "abc":
        del sys.modules[f"window_{folder}"]


def test_a_plugin_file_is_hashed_when_it_registers(isolated_components, tmp_path):
    component = plugin(tmp_path / "window.py", "window")
    assert component.origin.startswith("module window.py") and component.source_version == component.version
    assert component.version == source_version(component.load())
    (tmp_path / "window.py").write_text("# edited after it was imported: the code that runs is the old one\n")
    assert CHUNKERS.get("window").version == component.version


def test_an_unchanged_file_keeps_its_version_across_loads(isolated_components, tmp_path, monkeypatch):
    """A second process (here: the module imported again) reads the same file: the same version."""
    from rag_core.components import plugins

    path = tmp_path / "window.py"
    version = plugin(path, "window").version
    monkeypatch.setattr(plugins, "_LOADED", {})
    for name in [name for name in sys.modules if name.startswith("rag_plugin_window")]:
        monkeypatch.delitem(sys.modules, name)
    assert plugin(path, "window").version == version
    monkeypatch.setattr(plugins, "_LOADED", {})
    for name in [name for name in sys.modules if name.startswith("rag_plugin_window")]:
        monkeypatch.delitem(sys.modules, name)
    assert plugin(path, "window", window=900).version != version  # the file edited between the two loads


def test_a_base_class_of_its_own_is_part_of_its_source(isolated_components, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_base.py").write_text("from rag_core.ingest.chunkers import Chunker\n\nclass Base(Chunker):\n"
                                        "    SIZE = 1\n")
    (tmp_path / "my_chunker.py").write_text("from my_base import Base\n\nclass Mine(Base):\n    pass\n")
    import my_chunker

    before = source_version(my_chunker.Mine)
    (tmp_path / "my_base.py").write_text((tmp_path / "my_base.py").read_text().replace("SIZE = 1", "SIZE = 2"))
    assert source_version(my_chunker.Mine) != before  # the file is read again: its base class's edit counts
    assert source_version(RecursiveChunker) is None  # rag_core's own code: versioned with the workbench


def test_a_lazily_registered_plugin_is_hashed_without_importing_it(isolated_components, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "lazy_chunker.py").write_text("raise RuntimeError('imported')\n")
    with loading("entry point lazy (lazy-dist)"):
        CHUNKERS.register("lazy", "lazy_chunker:Mine")
    version = CHUNKERS.get("lazy").version
    assert version and "lazy_chunker" not in sys.modules
    (tmp_path / "lazy_chunker.py").write_text("raise RuntimeError('imported, edited')\n")
    with loading("entry point lazy (lazy-dist)"):
        CHUNKERS.register("lazy", "lazy_chunker:Mine")
    assert CHUNKERS.get("lazy").version != version


def test_a_declared_version_wins_and_a_built_in_has_none(isolated_components, tmp_path):
    declared = plugin(tmp_path / "window.py", "window", options=', version="2.1"')
    assert declared.version == "2.1" and CHUNKERS.get("recursive").version is None


def test_code_without_a_readable_source_is_never_reused_across_processes(isolated_components, caplog):
    module = types.ModuleType("typed_in")  # a class typed into a prompt: no file, no source
    sys.modules["typed_in"] = module
    try:
        exec("from rag_core.ingest.chunkers import Chunker\nclass Typed(Chunker):\n    pass\n", module.__dict__)
        version = source_version(module.Typed)
    finally:
        del sys.modules["typed_in"]
    assert version.startswith("process-")
    assert any("register it with version=" in message for message in caplog.messages)
