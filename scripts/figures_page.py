"""Write docs/figures.md, the page of measured figures, from the JSON results the benchmarks write
(``benchmarks/results/*.json``, one file per script): one table per result file, headed by the date and
the machine it was measured on.

The date and machine come from the file's ``measured`` record (``benchmarks/results_file.py`` writes one:
``date``, ``machine``); a file without it is dated by its last git commit (or, never committed, by its
modification time) and its machine is "not recorded" (a ``cpus`` or ``load_average_1_5_15`` field is
still shown). Each table lists the file's values by their path in the JSON; a list of records is
summarised field by field (counts of each value, or the median and range of numbers).

``benchmarks/results/earlier.json`` is not a script's result: it holds the figures measured before results
files were kept, as the prose of docs/benchmarks.md quoted them (``at_a_glance``: what, figure, date,
machine, detail link; ``records``: script, what, figures, command, date, machine). Its at-a-glance table
heads the page and its records close it, one table per script; a date, machine or command it does not
give reads "not recorded".

usage: python scripts/figures_page.py [--results DIR] [--out FILE] [--check]
  --check: write nothing; exit 1 when FILE is not what would be written (a benchmark ran since).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "figures.md"
MAX_ROWS = 80  # rows per table; the rest are counted, and are in the JSON
LIST_INLINE = 8  # a list of numbers or words longer than this is summarised
LABEL_KEYS = ("name", "corpus", "system", "backend", "store", "strategy", "run", "id")
MACHINE_FIELDS = ("cpus", "load_average_1_5_15", "threads")
EARLIER = "earlier"  # the stem of the file of figures measured before results files were kept
NOT_RECORDED = "not recorded"
EARLIER_TITLE = "Figures measured before results files were kept"

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Result:
    name: str  # the file's stem, which is the benchmark script's name
    data: Any
    date: str
    machine: str
    script: str | None = None  # the benchmark that wrote it, when one is found by name


def script_for(stem: str, scripts: set[str]) -> str | None:
    """The benchmark script a result file is named after: `pages.json` and `pages_financebench_bm25.json`
    both come from `pages.py` (the longest script name the file's name starts with)."""
    found = [name for name in scripts if stem == name or stem.startswith(name + "_")]
    return max(found, key=len) if found else None


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def fmt(value: Scalar) -> str:
    """A value as a table cell: floats to 4 significant digits, long text cut, pipes escaped."""
    if isinstance(value, bool) or value is None:
        text = str(value).lower() if isinstance(value, bool) else "null"
    elif isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value)
    text = " ".join(text.split()) or "(empty)"
    if len(text) > 90:
        text = text[:87] + "..."
    return text.replace("|", "\\|")


def _code(path: str) -> str:
    """A value's path as code (so `*` and `_` in it stay literal), unless it holds a pipe or a backtick."""
    text = fmt(path)
    return text if "|" in text or "`" in text else f"`{text}`"


def _label(item: dict, index: int) -> str:
    for key in LABEL_KEYS:
        if _is_scalar(item.get(key)) and item.get(key) is not None:
            return f"{key}={item[key]}"
    return str(index)


def _summary(items: list[dict]) -> list[tuple[str, str]]:
    """One (field, summary) row per scalar field shared by every record of a long list."""
    rows = []
    shared = [k for k in items[0] if all(k in item and _is_scalar(item[k]) for item in items)]
    for key in shared:
        values = [item[key] for item in items]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(values):
            rows.append((key, f"median {fmt(statistics.median(numbers))} "
                              f"(min {fmt(min(numbers))}, max {fmt(max(numbers))})"))
        elif len(set(map(str, values))) <= 6:
            counts = Counter(fmt(v) for v in values)
            rows.append((key, ", ".join(f"{v}: {n}" for v, n in counts.most_common())))
    return rows


def flatten(value: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, cell) rows for every value in `value`, dicts and short lists of records walked."""
    if _is_scalar(value):
        return [(path or "value", fmt(value))]
    if isinstance(value, dict):
        rows = []
        for key, inner in value.items():
            rows += flatten(inner, f"{path}.{key}" if path else str(key))
        return rows
    if not value:
        return [(path, "(empty)")]
    if all(_is_scalar(v) for v in value):
        if len(value) <= LIST_INLINE:
            return [(path, ", ".join(fmt(v) for v in value))]
        numbers = [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(value):
            return [(path, f"{len(value)} values: median {fmt(statistics.median(numbers))} "
                           f"(min {fmt(min(numbers))}, max {fmt(max(numbers))})")]
        return [(path, f"{len(value)} values: {', '.join(fmt(v) for v in value[:LIST_INLINE])}, ...")]
    if all(isinstance(v, dict) for v in value) and len(value) > LIST_INLINE:
        return [(f"{path} ({len(value)} records): {key}", cell) for key, cell in _summary(value)]
    rows = []
    for index, item in enumerate(value):
        label = _label(item, index) if isinstance(item, dict) else str(index)
        rows += flatten(item, f"{path}[{label}]")
    return rows


def machine_of(data: Any) -> str:
    """The machine a result names (its `measured.machine`), else what it recorded of it, else 'not recorded'."""
    measured = data.get("measured") if isinstance(data, dict) else None
    if isinstance(measured, dict) and measured.get("machine"):
        load = measured.get("load_average_1_5_15")
        return str(measured["machine"]) + (f" (load average {'/'.join(map(fmt, load))})" if load else "")
    found = [f"{key} {fmt(data[key]) if _is_scalar(data[key]) else ', '.join(map(fmt, data[key]))}"
             for key in MACHINE_FIELDS if isinstance(data, dict) and key in data]
    return "machine not recorded" + (f" ({'; '.join(found)})" if found else "")


def git_date(path: Path) -> str:
    """The date of the last commit that touched `path`, else its modification time (said so)."""
    try:
        done = subprocess.run(["git", "log", "-1", "--format=%cs", "--", path.name], cwd=path.parent,
                              capture_output=True, text=True, timeout=30)
        committed = done.stdout.strip() if done.returncode == 0 else ""
    except OSError:
        committed = ""
    if committed:
        return f"{committed} (git commit of the file; the run's own date not recorded)"
    changed = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d")
    return f"{changed} (file modified; not committed, the run's own date not recorded)"


def read_result(path: Path, date_of: Callable[[Path], str] = git_date, scripts: set[str] | None = None) -> Result:
    data = json.loads(path.read_text(encoding="utf-8"))
    measured = data.get("measured") if isinstance(data, dict) else None
    date = str(measured["date"]) if isinstance(measured, dict) and measured.get("date") else date_of(path)
    if scripts is None:
        scripts = {script.stem for script in (ROOT / "benchmarks").glob("*.py")}
    return Result(path.stem, data, date, machine_of(data), script_for(path.stem, scripts))


def cell(value: Any) -> str:
    """Quoted prose as a table cell, whole: whitespace folded, pipes escaped; empty or missing: not recorded."""
    text = " ".join(str(value).split()) if value is not None else ""
    return (text or NOT_RECORDED).replace("|", "\\|")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and the site make it (scripts/mkdocs_hooks.py), backticks dropped."""
    text = heading.replace("`", "").replace("*", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def read_earlier(path: Path) -> dict[str, list[dict]]:
    """The figures measured before results were kept: its `at_a_glance` rows and its `records`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
            isinstance(data.get(key, []), list) and all(isinstance(row, dict) for row in data.get(key, []))
            for key in ("at_a_glance", "records")):
        raise ValueError("it needs `at_a_glance` and `records`, each a list of records")
    return {"about": data.get("about", ""), "at_a_glance": data.get("at_a_glance", []),
            "records": data.get("records", [])}


def render_glance(rows: list[dict]) -> list[str]:
    lines = ["## At a glance", "",
             f"The headline figures, measured before results files were kept (details in [{EARLIER_TITLE}]"
             f"(#{slug(EARLIER_TITLE)}) or on the page linked).", "",
             "| what | figure | date | machine | detail |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {cell(row.get('what'))} | {cell(row.get('figure'))} | {cell(row.get('date'))} | "
              f"{cell(row.get('machine'))} | {cell(row.get('detail'))} |" for row in rows]
    return lines + [""]


def render_earlier(earlier: dict) -> list[str]:
    """One table per script, in the records' order (the order the prose gave them)."""
    lines = [f"## {EARLIER_TITLE}", ""]
    if earlier["about"]:
        lines += [cell(earlier["about"]), ""]
    lines += [f"From `benchmarks/results/{EARLIER}.json`: each figure as it was quoted, with the date, machine "
              f"and command quoted with it (\"{NOT_RECORDED}\" where none was).", ""]
    by_script: dict[str, list[dict]] = {}
    for record in earlier["records"]:
        by_script.setdefault(cell(record.get("script")), []).append(record)
    for script, records in by_script.items():
        lines += [f"### {script}", "", "| what | figures | date | machine | command |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {cell(r.get('what'))} | {cell(r.get('figures'))} | {cell(r.get('date'))} | "
                  f"{cell(r.get('machine'))} | {cell(r.get('command'))} |" for r in records]
        lines.append("")
    return lines


def render(results: list[Result], source: str = "benchmarks/results", earlier: dict | None = None) -> str:
    """The page: a header, the earlier figures at a glance, one table per result in name order, then the
    figures measured before results files were kept."""
    lines = ["# Measured figures", "",
             f"Generated by `python scripts/figures_page.py` from the JSON the benchmarks write to `{source}/`",
             "(one file per script; run a benchmark, then the generator, and commit both). Each table gives the",
             "date and machine of its run. How to run each benchmark: [Benchmarks](benchmarks.md).", ""]
    if earlier and earlier["at_a_glance"]:
        lines += render_glance(earlier["at_a_glance"])
    if not results:
        lines += ["No results yet.", ""]
    for result in sorted(results, key=lambda r: r.name):
        rows = [row for row in flatten(result.data) if not row[0].startswith("measured")]
        lines += [f"## {result.name}", "",
                  f"{f'`benchmarks/{result.script}.py`' if result.script else 'script not recorded'}; "
                  f"measured {result.date}; {result.machine}.", "",
                  "| value | figure |", "| --- | --- |"]
        lines += [f"| {_code(path)} | {cell} |" for path, cell in rows[:MAX_ROWS]]
        if len(rows) > MAX_ROWS:
            lines.append(f"| ... | {len(rows) - MAX_ROWS} more values in `{source}/{result.name}.json` |")
        lines.append("")
    if earlier and earlier["records"]:
        lines += render_earlier(earlier)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="exit 1 when --out is stale; write nothing")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"error: no results folder {args.results}", file=sys.stderr)
        return 2
    results, earlier = [], None
    for path in sorted(args.results.glob("*.json")):
        try:
            if path.stem == EARLIER:
                earlier = read_earlier(path)
            else:
                results.append(read_result(path))
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as error:
            print(f"error: {path} is not a JSON result ({error})", file=sys.stderr)
            return 2
    try:
        source = args.results.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        source = str(args.results)
    page = render(results, source, earlier)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        print(f"{args.out}: {'up to date' if current == page else 'stale: run scripts/figures_page.py'}")
        return 0 if current == page else 1
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out} ({len(results)} results)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
