"""The one wrapping helper (rag_core/terminal_text.py): long lines wrap at word boundaries to 120
characters, with their indentation kept; short lines, tables and long words stay as they are."""

from __future__ import annotations

import logging

from rag_core.cli.common import TerminalFormat
from rag_core.terminal_text import TERMINAL_WIDTH, FittedFormat, fit, fitted


def test_a_long_line_wraps_at_the_last_space_that_fits():
    words = " ".join(f"w{n:02d}" for n in range(40))  # 40 words of 3 characters: 159 characters
    assert fit(words, width=20) == "\n".join([
        "w00 w01 w02 w03 w04",  # 19 characters: a 6th word would make 23
        *("  " + " ".join(f"w{n:02d}" for n in range(start, start + 4)) for start in range(5, 37, 4)),
        "  w37 w38 w39",
    ])
    assert fit(words) == words[:119] + "\n  " + words[120:]  # 30 words fill 119 characters; the rest follow


def test_short_lines_blank_lines_and_indentation():
    table = "rank  point          page/ndcg@10\n   1  chunk_size=512        0.760\n\nend"
    assert fit(table) == table  # nothing over the width: unchanged, blank line and all
    indented = "    " + "alpha beta " * 3
    # 4 + 16 = 20 characters fit; continuations are indented 6 (its 4 and 2 more), so "beta alpha beta" (21) does not
    assert fit(indented.rstrip(), width=20) == "    alpha beta alpha\n      beta alpha\n      beta"


def test_a_word_longer_than_the_width_is_not_cut():
    url = "http://127.0.0.1:5000/#/experiments/1/runs?" + "x" * 100
    assert fit(f"then open {url}") == f"then open\n  {url}"  # a URL stays whole, so it can be copied


def test_log_messages_and_echoed_lines_are_fitted():
    message = "re-ranking is off: " + "cannot load the model " * 10
    record = logging.LogRecord("rag_core.test", logging.WARNING, __file__, 1, message, None, None)
    for shown in (FittedFormat().format(record), TerminalFormat().format(record)):  # 238 and 247 characters
        assert max(len(line) for line in shown.splitlines()) <= TERMINAL_WIDTH and shown.split()[-43:] == message.split()
    assert TerminalFormat().format(record).startswith("warning: re-ranking is off")
    echoed: list[str] = []
    fitted(echoed.append)("x " * 100)
    assert echoed == [fit("x " * 100)] and "\n" in echoed[0]
