"""The library logs and names parameters; the CLI decides what the terminal shows (issue 32 item 4):
``warning: <message>`` for a warning, the bare line for a note, a ``[rag]`` line as it is, and each
backquoted parameter (```max_queries```) as its flag (``--max-queries``)."""

from __future__ import annotations

import logging

import pytest

from rag_core.cli import main
from rag_core.cli.common import QUIET_LOGGERS, TerminalFormat, as_flags, flag_of, known_failure, terminal_logging
from rag_core.errors import BadInput
from rag_core.service import store_access
from rag_core.workbench.execution.evaluation import load_eval_inputs


def _record(level: int, message: str, *args) -> logging.LogRecord:
    return logging.LogRecord("rag_core.test", level, __file__, 1, message, args, None)


def test_the_terminal_format_of_a_warning_a_note_and_a_tagged_line():
    shown = TerminalFormat()
    assert shown.format(_record(logging.WARNING, "the index %s was damaged", "x")) == "warning: the index x was damaged"
    assert shown.format(_record(logging.ERROR, "worse")) == "warning: worse"  # as basicConfig's format showed it
    assert shown.format(_record(logging.INFO, "waiting for another ingest ...")) == "waiting for another ingest ..."
    assert shown.format(_record(logging.WARNING, "[rag] re-ranking is off: use `rerank_depth` 0.")) == \
        "[rag] re-ranking is off: use --rerank-depth 0."


def test_parameters_become_flags_and_nothing_else_changes():
    assert as_flags("`max_queries` must be at least 1, got 0") == "--max-queries must be at least 1, got 0"
    assert as_flags("`beir` brings its own corpus: leave out `input_dir` and `golden`") == \
        "--beir brings its own corpus: leave out --input and --golden"
    assert as_flags("raise RAG_LLM_TIMEOUT_S / `llm_timeout_s` for long answers") == \
        "raise RAG_LLM_TIMEOUT_S / --llm-timeout-s for long answers"  # a setting is its own flag
    unchanged = "is `ray start --head` running? `no_such_parameter`, input_dir and max_queries unquoted"
    assert as_flags(unchanged) == unchanged
    assert flag_of("store_dir") == "--store" and flag_of("vector_store") == "--vector-store" and flag_of("nope") is None


def test_a_library_error_names_the_parameter_and_the_cli_prints_the_flag(tmp_path):
    with pytest.raises(BadInput) as raised:
        load_eval_inputs(golden=tmp_path / "golden.jsonl", max_queries=0)
    assert str(raised.value) == "`max_queries` must be at least 1, got 0" and "--" not in str(raised.value)
    assert known_failure(raised.value) == ("--max-queries must be at least 1, got 0", 2)
    a_file = tmp_path / "store.txt"
    a_file.write_text("")
    with pytest.raises(BadInput) as raised, store_access(a_file):
        pass
    assert str(raised.value).startswith(f"`store_dir` {a_file} is a file, not a folder")
    assert known_failure(raised.value)[0].startswith(f"--store {a_file} is a file, not a folder")


def test_the_cli_prints_the_flag_of_a_bad_parameter(tmp_path, capsys):
    code = main(["eval", "--golden", str(tmp_path / "golden.jsonl"), "--max-queries", "0", "--store", str(tmp_path)])
    assert code == 2 and capsys.readouterr().err.strip() == "error: --max-queries must be at least 1, got 0"


def test_while_a_command_runs_the_library_log_is_shown_as_the_terminal_always_showed_it(capsys):
    before = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    with terminal_logging():
        logging.getLogger("rag_core.retrieve.somewhere").warning("dense search never reads %d%%", 55)
        logging.getLogger("rag_core.ingest.corpus").info("waiting for another ingest into s ...")
        logging.getLogger("rag_core.ingest.files").warning("skipped a.pdf: unreadable")  # the summary lists it
        logging.getLogger("rag_core.ingest.files.pool").warning("parallel extraction stopped (x)")
        logging.getLogger("rag_core.evaluate.judge").info("judge call failed; retry 1/3")  # for a log file only
        logging.getLogger("somebody_else").info("a library's note")  # other libraries: warnings only
    logging.getLogger("rag_core.retrieve.somewhere").warning("after the command")  # the handler is gone
    assert capsys.readouterr().err.splitlines() == [
        "warning: dense search never reads 55%", "waiting for another ingest into s ...",
        "warning: parallel extraction stopped (x)"]
    assert {name: logging.getLogger(name).level for name in QUIET_LOGGERS} == before
    assert not any(type(handler).__name__ == "StderrHandler" for handler in logging.getLogger().handlers)
