"""What every subcommand shares: the common options (``--config``, ``--store``, ``--json``), a flag per
setting of ``RagConfig``, reading them back (``config_from_args``, ``store_from_args``), printing text or
JSON (``emit``), and the exit code of a known failure (``known_failure``).

Exit codes: 0 ok, 1 a failure while running (``rag_core.errors.RunFailure``: a model, the LLM API, a
store that cannot be written), 2 bad input (``rag_core.errors.BadInput``: settings, paths, golden sets,
an empty store). Left out: the subcommands themselves (one module each, beside this one).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rag_core.api_keys import redact
from rag_core.components import SETTINGS
from rag_core.config import RagConfig, load_config
from rag_core.doc_ids import escape_terminal
from rag_core.errors import BadInput, RunFailure
from rag_core.paths import default_store_dir

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


# --- arguments ------------------------------------------------------------------------------------
def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--store``, ``--json`` and one flag per setting (``--chunk-size``, ``--per-page`` /
    ``--no-per-page``), each left None unless given, so the config file's value stays."""
    common = parser.add_argument_group("common options")
    common.add_argument("--config", metavar="FILE", help="YAML file of settings (see experiments/*.yaml)")
    common.add_argument("--store", metavar="DIR", default=None,
                        help="where indexes live (default: $RAG_STORE or ./.rag_store)")
    common.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
    settings = parser.add_argument_group("settings (override the config file; defaults in brackets)")
    for setting in SETTINGS:  # built-in and plugin settings alike
        flag = "--" + setting.name.replace("_", "-")
        default = setting.default
        if setting.type is bool:
            settings.add_argument(flag, dest=setting.name, action=argparse.BooleanOptionalAction, default=None,
                                  help=f"{setting.help} [{default}]")
        else:
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            settings.add_argument(flag, dest=setting.name, default=None, metavar=_metavar(setting.type_name),
                                  help=f"{setting.help} [{shown}]")


def add_where_argument(parser: argparse.ArgumentParser, note: str = "") -> None:
    parser.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                        help="retrieve only from documents whose metadata match, before ranking; repeatable, "
                             "a key given twice means any of its values (keys: doc_id, title, pages and the "
                             "metadata.jsonl / --metadata-pattern keys)" + note)


def _metavar(kind: object) -> str:
    return {"int": "N", "float": "X"}.get(str(kind), "LIST" if str(kind).startswith("list") else "NAME")


def setting_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags (name -> value); the others are None and left out."""
    return {name: value for name in SETTINGS.names() if (value := getattr(args, name, None)) is not None}


def config_from_args(args: argparse.Namespace) -> RagConfig:
    overrides = {name: getattr(args, name, None) for name in SETTINGS.names()}
    return load_config(args.config, overrides)


def store_from_args(args: argparse.Namespace) -> Path:
    return Path(args.store) if args.store else default_store_dir()


# --- output ---------------------------------------------------------------------------------------
def emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    """`payload` as JSON with ``--json`` (exact: JSON escapes control characters itself), else `text`
    with its control characters escaped (a NUL or ANSI escape from a document is shown, not obeyed)."""
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(escape_terminal(text))


def known_failure(exc: Exception) -> tuple[str, int] | None:
    """(one-line message, exit code) for failures the user can act on; None for bugs (tracebacks)."""
    if isinstance(exc, BadInput):
        return str(exc), EXIT_BAD_INPUT
    if isinstance(exc, RunFailure):
        return redact(str(exc)), EXIT_FAILURE
    return None
