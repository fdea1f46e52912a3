"""``rag-pipeline components``: every registered component by kind (retrievers, chunkers, fusions,
re-rankers, query expansions, backends, vector stores, ...), with the settings each declares and
where it comes from (built-in, a plugin module, an installed package's entry point); ``--json`` for
machines. Also the settings that belong to no component (the pipeline's own). The kinds come from
``rag_core.catalog`` (the built-in registries in pipeline order, then any a plugin created).

``plugins_on_command_line`` names the plugins a command line asks for (``--plugins``, the ``plugins:``
of ``--config FILE`` and of a sweep file): ``rag_core.cli.main`` loads them once, before parsing, so
that their settings are flags like any other.
Left out: describing a component's implementation beyond its help line (read its module).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from rag_core.cli.common import config_from_args, emit

from rag_core.catalog import SETTINGS, registries
from rag_core.config import file_plugins, read_yaml_mapping

NAME = "components"
HELP = "list the registered components, their settings and origin"
DESCRIPTION = ("List every registered component by kind (retrievers, chunkers, fusions, re-rankers, query expansions, "
               "embedding and re-rank backends, vector stores, ...) with the settings it declares (type, default, "
               "range or choices) and its origin: built-in, a plugin module (--plugins, or plugins: in --config FILE) "
               "or an installed package's rag_core.components entry point.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """None of its own: ``--plugins`` and ``--config`` (common options) name what to load first."""


def plugins_on_command_line(argv: Sequence[str]) -> list[str]:
    """The plugins `argv` names: ``--plugins`` values, and the ``plugins`` of ``--config FILE`` and of a
    sweep file (``sweep FILE``; its ``base`` too), files made absolute against the file naming them. Read
    before the command line is parsed: their settings must be flags by then."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    pre.add_argument("--plugins", action="append", default=[])
    known, rest = pre.parse_known_args(list(argv))
    entries: list[str] = []
    files = [known.config] if known.config else []
    if rest and rest[0] == "sweep":
        files += [arg for arg in rest[1:] if not arg.startswith("-")][:1]
    for path in files:
        if Path(path).is_file():  # a missing file is reported when the command reads it
            data = read_yaml_mapping(path)
            entries += file_plugins(data.get("plugins"), path)
            entries += file_plugins((data.get("base") or {}).get("plugins") if isinstance(data.get("base"), dict)
                                    else None, path)
    for value in known.plugins:
        entries += [entry.strip() for entry in value.split(",") if entry.strip()]
    return entries


def run(args: argparse.Namespace) -> int:
    """Print the registries (the config is made first: it checks the plugins, loaded by ``main``)."""
    config_from_args(args)
    listing = components_listing()
    emit(args, listing, format_listing(listing))
    return 0


def components_listing() -> dict[str, Any]:
    """kind -> its setting and components (each with settings and origin); and the other settings."""
    kinds = registries()
    owned = {setting.name for registry in kinds.values() for component in registry.components()
             for setting in component.settings}
    return {
        "kinds": {kind: {"setting": registry.setting,
                         "components": [component.describe() for component in registry.components()]}
                  for kind, registry in kinds.items()},
        "settings": [setting.describe() for setting in SETTINGS if setting.name not in owned],
    }


def format_listing(listing: dict[str, Any]) -> str:
    lines = []
    for kind, entry in listing["kinds"].items():
        lines.append(f"{kind}" + (f" (setting {entry['setting']})" if entry["setting"] else ""))
        for component in entry["components"]:
            lines.append(f"  {component['name']:<14} {component['origin']:<12} {component['help']}")
            lines += [f"      {_setting_line(setting)}" for setting in component["settings"]]
            uses = component.get("options", {}).get("uses")
            if uses:
                lines.append(f"      also reads {', '.join(uses)}")
        lines.append("")
    lines.append("other settings (the pipeline's own, and those choosing a component)")
    lines += [f"  {_setting_line(setting)}" for setting in listing["settings"]]
    return "\n".join(lines)


def _setting_line(setting: dict[str, Any]) -> str:
    default = ",".join(map(str, setting["default"])) if isinstance(setting["default"], list) else setting["default"]
    limits = setting["range"] or (f"one of {', '.join(setting['choices'])}" if setting["choices"] else "")
    return f"{setting['name']:<24} {setting['type']:<13} [{default}]" + (f" {limits}" if limits else "") + \
        f"  {setting['help']}"
