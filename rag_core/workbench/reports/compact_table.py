"""A sweep's comparison table cut to a terminal's width (120 columns by default).

The full table (``sweep_report.compare_sweep``: every metric with its interval, the run ids) is about
330 characters wide; in a terminal each row wraps into several lines. ``compact_table`` keeps what a
reader needs to choose a point: ``rank``, a ``verdict`` (the point's role and its test against the
best: ``winner: best``, ``same p=0.155``, ``default: worse p=0.003``), the swept settings, the
ranking metric with its interval, the held-out score (with a holdout) and the latency. When that is
still too wide (many swept settings, a narrow terminal), it gives up, in this order: the held-out
interval, one-line setting headers (``chunk_size`` becomes ``chunk`` over ``size``), the ranking
metric's interval, and finally the settings' own columns (one ``settings`` column,
``chunk_size=256 overlap=64``, cut with ``...``). Other metrics join as columns when a sweep file's
``table_metrics`` names them (its default, ``latency/total_p50_ms``, is the latency column); their intervals go
first of all.

Left out: every other metric and the run ids (``sweep --wide``, the parent run's ``comparison.csv``
and MLflow keep them), colour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from rag_core.workbench.statistics.intervals import HIGH, LOW
from rag_core.workbench.statistics.selection import BEST, WITHIN_ONE_SE

if TYPE_CHECKING:
    import pandas as pd

WIDTH = 120
GAP = "  "
SELECTION_COLUMNS = ("rank", "role", "vs best", "p vs best")
ROLES = {"winner": "winner", "winner, default": "winner=default", "default": "default",
         "default (extra point)": "default"}  # the holdout report below the table says "extra point"


@dataclass(frozen=True)
class Column:
    header: tuple[str, ...]  # one line, or two for a setting name split at "_"
    cells: tuple[str, ...]
    left: bool = False  # left-aligned (text), else right-aligned (numbers)

    @property
    def width(self) -> int:
        return max(len(text) for text in (*self.header, *self.cells))


def compact_table(table: "pd.DataFrame", ranked_by: str, held_out: str | None = None,
                  shown: Sequence[str] | str = ("latency/total_p50_ms",), width: int = WIDTH) -> str:
    """`table` (``compare_sweep``'s, best first, with ``ci_low``/``ci_high`` columns) as text at most
    `width` characters wide: rank, verdict, swept settings, `ranked_by` with its interval, `held_out`
    (None: no holdout) and each metric of `shown` (a sweep file's ``table_metrics``: with its interval while
    there is room; a latency in milliseconds); a metric the table lacks is left out."""
    rows = [row for _, row in table.iterrows()]
    shown = [shown] if isinstance(shown, str) else [name for name in shown if name in table and name != ranked_by]
    settings = swept_columns(table, ranked_by)
    fixed = [Column(("rank",), tuple(_rank(row.get("rank")) for row in rows)),
             Column(("verdict",), tuple(_verdict(row) for row in rows), left=True)]
    one_line = [Column((name,), tuple(_setting(row[name]) for row in rows)) for name in settings]
    two_lines = [_split_header(column) for column in one_line]

    def metrics(ranked_interval: bool, held_interval: bool, shown_interval: bool = False) -> list[Column]:
        columns = [Column((ranked_by,), tuple(_shown(row, ranked_by, ranked_interval) for row in rows))]
        if held_out:
            columns.append(Column((held_out if held_interval else "held-out",),
                                  tuple(_shown(row, held_out, held_interval) for row in rows)))
        return [*columns, *(Column((_latency_header(name),), tuple(_milliseconds(row, name) for row in rows))
                            if _is_latency(name) else Column((name,), tuple(_shown(row, name, shown_interval)
                                                                           for row in rows)) for name in shown)]

    attempts = [[*fixed, *one_line, *metrics(True, True, True)], [*fixed, *one_line, *metrics(True, True)],
                [*fixed, *one_line, *metrics(True, False)], [*fixed, *two_lines, *metrics(True, False)],
                [*fixed, *two_lines, *map(_split_header, metrics(False, False))]]
    for columns in attempts:
        lines = _render(columns)
        if max(len(line) for line in lines) <= width:
            return "\n".join(lines)
    others = [*fixed, *metrics(False, False)]
    room = width - sum(column.width for column in others) - len(GAP) * len(others)
    joined = [" ".join(f"{name}={_setting(row[name])}" for name in settings) for row in rows]
    combined = Column(("settings",), tuple(_clipped(text, max(room, 3)) for text in joined), left=True)
    return "\n".join(line[:width].rstrip() for line in _render([*fixed, combined, *others[len(fixed):]]))


def _is_latency(name: str) -> bool:
    return name.split("/")[-2:-1] == ["latency"]


def swept_columns(table: "pd.DataFrame", ranked_by: str) -> list[str]:
    """The settings columns of a comparison table: those between the selection columns and the metric
    the table is ranked by (``comparison_table`` puts them there)."""
    columns = list(table.columns)
    end = columns.index(ranked_by)
    start = max((columns.index(name) + 1 for name in SELECTION_COLUMNS if name in columns[:end]), default=0)
    return columns[start:end]


def _render(columns: Sequence[Column]) -> list[str]:
    height = max(len(column.header) for column in columns)
    headers = [("",) * (height - len(column.header)) + column.header for column in columns]  # bottom-aligned
    header = [[lines[line] for lines in headers] for line in range(height)]
    body = [[column.cells[row] for column in columns] for row in range(len(columns[0].cells))]
    widths = [column.width for column in columns]
    return [GAP.join(cell.ljust(size) if column.left else cell.rjust(size)
                     for cell, size, column in zip(line, widths, columns)).rstrip()
            for line in [*header, *body]]


def _split_header(column: Column) -> Column:
    """A header over two lines, cut at the "_" or "/" nearest its middle: ``rerank_depth`` -> ``rerank`` /
    ``depth``; ``tune/page/ndcg@10`` -> ``tune/`` / ``page/ndcg@10`` (a "/" stays, a "_" goes)."""
    name = column.header[0]
    cuts = [i for i, char in enumerate(name) if char in "_/"]
    if not cuts:
        return column
    cut = min(cuts, key=lambda i: abs(len(name) - 2 * i))
    first = name[:cut + 1] if name[cut] == "/" else name[:cut]
    return Column((first, name[cut + 1:]), column.cells, column.left)


def _verdict(row: "pd.Series") -> str:
    """``winner: best``, ``within 1 SE``, ``same p=0.155``, ``default: worse p=0.003``; a failed point its status."""
    if str(row.get("status", "FINISHED")) != "FINISHED":
        return str(row.get("status", "")).lower()
    role = ROLES.get(str(row.get("role") or ""), str(row.get("role") or ""))
    verdict = str(row.get("vs best") or "")
    p_value = row.get("p vs best")
    if verdict not in ("", BEST, WITHIN_ONE_SE) and p_value is not None and not _missing(p_value):
        verdict += f" p={float(p_value):.3f}" if float(p_value) >= 0.001 else " p<0.001"
    return ": ".join(part for part in (role, verdict) if part)


def _shown(row: "pd.Series", metric: str, interval: bool, digits: int = 3) -> str:
    """``0.720 [0.621, 0.807]`` (with `interval`, when the table has one), else ``0.720``; empty when missing."""
    value, low, high = row.get(metric), row.get(metric + LOW), row.get(metric + HIGH)
    if _missing(value):
        return ""
    if not interval or _missing(low) or _missing(high):
        return f"{float(value):.{digits}f}"
    return f"{float(value):.{digits}f} [{float(low):.{digits}f}, {float(high):.{digits}f}]"


def _milliseconds(row: "pd.Series", latency: str) -> str:
    """``52.4``; below 10 ms two decimals (BM25 alone takes ``0.31``)."""
    value = row.get(latency)
    return "" if _missing(value) else f"{float(value):.2f}" if abs(float(value)) < 10 else f"{float(value):.1f}"


def _latency_header(latency: str) -> str:
    """``latency/total_p50_ms`` -> ``p50 ms``; any other name as it is."""
    prefix, suffix = "latency/total_", "_ms"
    if latency.startswith(prefix) and latency.endswith(suffix):
        return f"{latency[len(prefix):-len(suffix)]} ms"
    return latency


def _rank(value) -> str:
    return "" if _missing(value) else str(int(value))


def _setting(value) -> str:
    if _missing(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _clipped(text: str, room: int) -> str:
    return text if len(text) <= room else text[:max(0, room - 3)] + "..."


def _missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(math.isnan(float(value)))
    except (TypeError, ValueError):
        return str(value) in ("", "<NA>", "nan")


__all__ = ["WIDTH", "compact_table", "swept_columns"]
