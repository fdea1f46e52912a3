"""Lines that fit a terminal: the one helper that wraps what the workbench prints (notes, warnings,
answers, progress lines) at word boundaries to ``TERMINAL_WIDTH`` characters (issue 44 item 4).

``fit`` wraps each line longer than the width and leaves the others as they are (a table that fits
stays a table); a wrapped line's continuation lines keep its indentation plus ``indent``.
``fitted`` wraps a progress callback (``run_sweep``'s `echo`) so that its lines fit too;
``FittedFormat`` is a logging formatter whose messages are fitted, and ``fitted_warnings`` prints the
library's warnings with it while a block runs (``make demo``; the CLI's ``TerminalFormat`` fits its own).
Left out: the terminal's own width (a fixed width keeps output the same in a log file and in CI),
words longer than the width (a path or URL is not cut, so it can still be copied), text with ANSI
escapes (counted as characters).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import textwrap
from typing import Callable, Iterator

TERMINAL_WIDTH = 120  # no line the workbench prints is longer (issue 44)


def fit(text: str, width: int = TERMINAL_WIDTH, indent: str = "  ") -> str:
    """`text` with each line longer than `width` wrapped at word boundaries; continuation lines are
    indented as the line was, plus `indent`. Shorter lines and blank lines are unchanged."""
    return "\n".join(_fit_line(line, width, indent) for line in text.split("\n"))


def _fit_line(line: str, width: int, indent: str) -> str:
    if len(line) <= width:
        return line
    lead = line[: len(line) - len(line.lstrip())]
    return textwrap.fill(line.strip(), width=width, initial_indent=lead, subsequent_indent=lead + indent,
                         break_long_words=False, break_on_hyphens=False)


def fitted(echo: Callable[[str], None]) -> Callable[[str], None]:
    """`echo` (a progress callback: ``print``, the CLI's own) called with each line fitted."""
    def fitted_echo(line: str) -> None:
        echo(fit(line))
    return fitted_echo


class FittedFormat(logging.Formatter):
    """A log record's message, fitted to the terminal (``fit``)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return fit(super().formatMessage(record))


@contextlib.contextmanager
def fitted_warnings() -> Iterator[None]:
    """While the block runs, the warnings the library logs go to stderr fitted (with no handler
    configured, Python's last-resort handler prints them as they are); the handler is removed after."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(FittedFormat())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
