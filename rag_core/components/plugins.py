"""Plugins: modules of the researcher's own that register components, imported before any setting
is checked (their settings must be known by then).

A plugin is named in the ``plugins`` setting (``plugins: [...]`` in a config or sweep file, the
``--plugins`` flag, a notebook's ``plugins`` parameter) in one of two forms:

- a module name (``my_package.retrievers``), imported from ``sys.path`` like any module;
- a Python file (``my_retriever.py``, ``plugins/chunkers.py``: anything ending in ``.py`` or
  holding a ``/``), relative to the file that lists it (the config or sweep file; the working
  directory for a flag or a notebook parameter). So a sweep file next to its plugin files works
  without installing anything. Files are resolved to absolute paths when read, which is what runs
  record and what a sweep hands to its notebooks.

Installed packages register through the ``rag_core.components`` entry-point group instead
(``rag_core.components.registry.load_entry_points``).

``load_plugins`` is the one function that imports them. Each entry point calls it once, before any
setting is read: the CLI with the plugins its command line names (``rag_core.cli.main``, before
parsing, so their settings are flags), a notebook with its ``plugins`` parameter
(``config_from_parameters``), a sweep file when it is loaded (``load_sweep``). ``RagConfig`` calls it
too, for a config made directly in Python or unpickled in another process; after an entry point that
call finds everything recorded and does nothing. ``loaded_plugins()`` is the record: what was
imported in this process, each plugin once.
Left out: reloading a plugin that changed while the process runs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterable, Sequence

from rag_core.components.registry import loading
from rag_core.components.settings import ConfigError


def is_plugin_file(entry: str) -> bool:
    return entry.endswith(".py") or "/" in entry


def resolve_plugins(entries: Iterable[str], base_dir: str | Path | None) -> tuple[str, ...]:
    """`entries` with each plugin file made absolute against `base_dir` (default: the working folder;
    module names unchanged)."""
    entries = tuple(map(str, entries))
    if base_dir is None and any(is_plugin_file(entry) and not Path(entry).is_absolute() for entry in entries):
        try:
            base_dir = Path.cwd()
        except FileNotFoundError:
            raise ConfigError("the working folder no longer exists: give plugin files as absolute paths, or cd into "
                              "an existing folder") from None
    base = Path(base_dir) if base_dir is not None else Path("/")
    return tuple(str((base / entry).resolve()) if is_plugin_file(entry) else entry for entry in entries)


_LOADED: dict[str, str] = {}  # plugin (module name, or absolute .py file) -> the module it was imported as


def loaded_plugins() -> tuple[str, ...]:
    """The plugins imported in this process (module names and absolute files), in the order loaded."""
    return tuple(entry for entry, module in _LOADED.items() if module in sys.modules)


def load_plugins(entries: Sequence[str], base_dir: str | Path | None = None) -> None:
    """Import each plugin (module name or file, see the module docstring) not imported yet, so that it
    registers its components; a plugin already loaded is skipped, so a second call with the same
    entries does nothing. ``ConfigError`` naming the plugin when one cannot be imported."""
    for entry in resolve_plugins(entries, base_dir):
        if _LOADED.get(entry) not in sys.modules:
            _LOADED[entry] = _import_file(Path(entry)) if is_plugin_file(entry) else _import_module(entry)


def _import_module(entry: str) -> str:
    if entry in sys.modules:  # imported already (by the researcher's own code): registered then
        return entry
    with loading(f"module {entry}"):
        try:
            importlib.import_module(entry)
        except ModuleNotFoundError as exc:
            if exc.name and entry.startswith(exc.name):
                raise ConfigError(f"plugin {entry!r}: no module named {exc.name!r} (a module name is imported "
                                  f"from sys.path; give a file as path/to/file.py)") from None
            raise ConfigError(f"plugin {entry!r} failed to import: {type(exc).__name__}: {exc}") from exc
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken plugin is named, whatever it raised
            raise ConfigError(f"plugin {entry!r} failed to import: {type(exc).__name__}: {exc}") from exc
    return entry


def _import_file(path: Path) -> str:
    if not path.is_file():
        raise ConfigError(f"plugin file not found: {path}")
    name = f"rag_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickling look their module up
    with loading(f"module {path.name} ({path})"):
        try:
            spec.loader.exec_module(module)
        except ConfigError:
            del sys.modules[name]
            raise
        except Exception as exc:  # noqa: BLE001 - a broken plugin is named, whatever it raised
            del sys.modules[name]
            raise ConfigError(f"plugin {path} failed to import: {type(exc).__name__}: {exc}") from exc
    return name
