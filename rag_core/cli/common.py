"""What every subcommand shares: the common options (``--config``, ``--store``, ``--json``), a flag per
setting of ``RagConfig``, reading them back (``config_from_args``, ``store_from_args``), printing text or
JSON (``emit``), and the exit code of a known failure (``known_failure``).

Exit codes: 0 ok, 1 a failure while running (``rag_core.errors.RunFailure``: a model, the LLM API, a
store that cannot be written), 2 bad input (``rag_core.errors.BadInput``: settings, paths, golden sets,
an empty store). Left out: the subcommands themselves (one module each, beside this one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping

from rag_core.api_keys import redact
from rag_core.components import SETTINGS
from rag_core.config import RagConfig, load_config
from rag_core.doc_ids import escape_terminal
from rag_core.errors import BadInput, RunFailure
from rag_core.paths import default_store_dir
from rag_core.terminal_text import fit

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
    with its control characters escaped (a NUL or ANSI escape from a document is shown, not obeyed) and
    its long lines wrapped to the terminal's width (``rag_core.terminal_text.fit``)."""
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(fit(escape_terminal(text)))


def known_failure(exc: Exception) -> tuple[str, int] | None:
    """(one-line message, exit code) for failures the user can act on; None for bugs (tracebacks). The
    parameters the library's message names (```store_dir```) are shown as their flags (``--store``)."""
    if isinstance(exc, BadInput):
        return as_flags(str(exc)), EXIT_BAD_INPUT
    if isinstance(exc, RunFailure):
        return as_flags(redact(str(exc))), EXIT_FAILURE
    return None


# --- parameters as flags ----------------------------------------------------------------------------
# A library error names a parameter in backquotes (`input_dir`); the terminal shows its flag. Settings
# are their own flags (`rerank_depth` -> --rerank-depth); these are the parameters whose flag differs
# or that are no setting.
PARAMETER_FLAGS = {
    "input_dir": "--input", "store_dir": "--store", "golden": "--golden", "beir": "--beir",
    "max_queries": "--max-queries", "workers": "--workers", "executor": "--executor", "alpha": "--alpha",
    "margin": "--margin", "where": "--where", "self_supervised": "--self-supervised",
}
_NAMED = re.compile(r"`([a-z][a-z0-9_]*)`")


def flag_of(parameter: str) -> str | None:
    """The command-line flag of a library parameter or setting (None: it has none)."""
    if parameter in PARAMETER_FLAGS:
        return PARAMETER_FLAGS[parameter]
    return "--" + parameter.replace("_", "-") if parameter in SETTINGS.names() else None


def as_flags(message: str, flags: Mapping[str, str] | None = None) -> str:
    """`message` with each backquoted parameter it names (`store_dir`) written as its flag (--store)."""
    def flag(match: re.Match) -> str:
        found = flags.get(match.group(1)) if flags is not None else flag_of(match.group(1))
        return found or match.group(0)
    return _NAMED.sub(flag, message)


# --- what the terminal shows of the library's logging ------------------------------------------------
QUIET_LOGGERS = {  # logger -> the least level shown on the terminal
    "rag_core": logging.INFO,  # notes (INFO) and warnings of the library
    "rag_core.ingest.files": logging.ERROR,  # skipped files: the ingest summary lists them
    "rag_core.ingest.files.pool": logging.WARNING,  # a broken extraction pool is not in that summary
    "rag_core.evaluate.judge": logging.WARNING,  # its retries are notes for a log file, not the terminal
    "rag_core.retrieve.onnx_export": logging.WARNING,  # which exporter ran: likewise
}
TAGGED = "[rag] "  # a message that carries its own tag is shown as it is


class TerminalFormat(logging.Formatter):
    """``warning: <message>`` for a warning or worse, the bare message for a note (INFO), a tagged
    message (``[rag] ...``) as it is; wrapped at word boundaries to the terminal's width (``fit``)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = as_flags(record.message)
        if record.levelno >= logging.WARNING and not message.startswith(TAGGED):
            return fit(f"warning: {message}")
        return fit(message)


class StderrHandler(logging.StreamHandler):
    """A handler writing to ``sys.stderr`` as it is at each record (a test's capture, a redirection)."""

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@contextlib.contextmanager
def terminal_logging() -> Iterator[None]:
    """While a command runs, the library's log records are shown on stderr as they always were (the
    terminal's format, ``QUIET_LOGGERS``' levels); the handler and levels are put back after."""
    root = logging.getLogger()
    handler = StderrHandler()
    handler.setFormatter(TerminalFormat())
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    root.addHandler(handler)
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
