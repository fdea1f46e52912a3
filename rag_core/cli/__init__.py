"""``rag-pipeline``: ingest documents, ask questions, evaluate against a golden set, run sweeps.

Every command takes ``--config FILE``, ``--store DIR`` and every setting of ``RagConfig`` as a flag
named after it (``--chunk-size 256``, ``--mode bm25``, ``--per-page`` / ``--no-per-page``), plus
``--json`` for machine-readable output. Exit codes: 0 ok, 1 a failure while running (a model or the
LLM API), 2 bad input (missing files, unknown settings, a bad golden set, an empty store), 141 when
the reader of the output went away (``| head``: quietly, as a shell tool).

How a subcommand is added (every one is registered the same way):
- one module per subcommand in this package, named after it (``make-golden`` -> ``make_golden.py``),
  with four names:
  ``NAME`` (the command, ``"make-golden"``), ``HELP`` (one line for ``rag-pipeline --help``),
  ``DESCRIPTION`` (the paragraph of ``rag-pipeline NAME --help``; None: none),
  ``add_arguments(parser)`` (its own arguments only), and ``run(args) -> int`` (the exit code);
- its entry in ``COMMANDS`` below, in the order ``--help`` lists them.
``build_parser`` adds the common options and setting flags (``rag_core.cli.common``) after a
command's own arguments. A module imports only argparse-level names at its top (``--help`` and a BM25
query must stay fast, ``tests/test_startup.py``); ``run`` imports the work it calls. ``run`` reads its
settings with ``common.config_from_args(args)`` first, prints text (``rag_core.workbench.reports.text``) or
JSON, and raises ``rag_core.errors.BadInput`` / ``RunFailure`` for what the user can fix: ``main``
prints them as one ``error:`` line with exit code 2 / 1 (``common.known_failure``), never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from types import ModuleType

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.cli import calibrate_judge, components, feedback, finetune, gate, ingest, make_golden, query, repair  # noqa: E402
from rag_core.cli import golden, sweep, tune_fusion  # noqa: E402
from rag_core.cli import eval as evaluate  # noqa: E402
from rag_core.cli.common import (EXIT_BAD_INPUT, EXIT_FAILURE, add_common_arguments, known_failure,  # noqa: E402
                                 terminal_logging)
from rag_core.components import load_entry_points, load_plugins  # noqa: E402
from rag_core.config import ConfigError  # noqa: E402
from rag_core.doc_ids import escape_terminal  # noqa: E402

# The subcommands, in the order `rag-pipeline --help` lists them.
COMMANDS: tuple[ModuleType, ...] = (ingest, query, evaluate, sweep, gate, feedback, golden, make_golden,
                                    calibrate_judge, tune_fusion, finetune, repair, components)

__all__ = ["COMMANDS", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-pipeline",
        description="RAG workbench: retrieval-augmented generation over PDFs, and the measurements to tune it.",
        epilog="Run 'rag-pipeline COMMAND --help' for a command's options.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        subparser = commands.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
        command.add_arguments(subparser)
        add_common_arguments(subparser)
        subparser.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command (its exit code). What it printed is flushed here, so that a reader that closed
    the pipe (``| head``) ends it quietly, as a shell tool (exit 141), not with a BrokenPipeError."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        _quiet_after_broken_pipe()
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    try:
        os.getcwd()
    except FileNotFoundError:  # relative paths, plugins and the default store all hang off it
        print("error: the current working folder no longer exists (deleted or moved away); cd into an existing "
              "folder and run the command again", file=sys.stderr)
        return EXIT_FAILURE
    # the CLI's one load of plugins, those its command line names, before parsing: their settings become
    # flags (the config the command makes finds them loaded)
    try:
        load_entry_points()
        load_plugins(components.plugins_on_command_line(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = build_parser().parse_args(argv)
    with terminal_logging():  # the library logs; the terminal shows its warnings and notes (common.QUIET_LOGGERS)
        try:
            return args.run(args)
        except FileNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            _quiet_after_interrupt()
            return 130
        except Exception as exc:  # known failures (settings, inputs, models, LLM API) carry a readable message
            failure = known_failure(exc)
            if failure is None:
                raise
            message, code = failure
            print(f"error: {escape_terminal(message)}", file=sys.stderr)
            return code


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe


def _quiet_after_broken_pipe() -> None:
    """Point stdout and stderr at /dev/null, so that flushing them at exit raises nothing more (Python
    would print "Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # a stream without a descriptor (captured in tests)
            pass


def _quiet_after_interrupt() -> None:
    """After Ctrl-C, what dies with the kernels (nbclient's DeadKernelError) is one line each, not a
    traceback after "interrupted": raised in a worker thread, or left in the cell's asyncio task, which
    asyncio logs with its traceback ("Task exception was never retrieved") when the task is collected
    (a sweep with one worker, Ctrl-C while a notebook runs)."""
    import threading

    def one_line(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not None and not issubclass(args.exc_type, SystemExit):
            print(f"interrupted: {args.exc_type.__name__} in a worker thread (ignored)", file=sys.stderr)

    def one_line_task(record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[0] is not None:
            print(f"interrupted: {record.exc_info[0].__name__} in a notebook task (ignored)", file=sys.stderr)
            return False
        if record.levelno >= logging.ERROR:  # "Task was destroyed but it is pending!" with the task's repr
            print("interrupted: a notebook task was still pending (ignored)", file=sys.stderr)
            return False
        return True

    threading.excepthook = one_line
    logging.getLogger("asyncio").addFilter(one_line_task)
    logging.raiseExceptions = False
    # the pending cell's coroutine, collected unawaited at exit, would add a RuntimeWarning and its source line
    warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)


if __name__ == "__main__":
    sys.exit(main())
