"""Where every benchmark writes its results: indented JSON under ``benchmarks/results/``, one file per
script, stamped with when and where it was measured (``measured``: date, machine, load average); the
scripts print their tables themselves. ``scripts/figures_page.py`` turns the committed files into
docs/figures.md.

Left out: keeping history (a run overwrites the script's previous file; pass another path to keep one).
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> str:
    """This machine in a few words: host name, CPU model and count."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.node() or 'unknown host'}: {model or platform.machine()}, {os.cpu_count()} CPUs"


def measured() -> dict[str, Any]:
    """When and where a result is being measured (the load average says how busy the machine was)."""
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
            "load_average_1_5_15": load}


def interval_text(estimate: float, low: float, high: float, paired: dict[str, Any] | None = None) -> str:
    """A mean with its 95% interval, and a paired comparison's difference, interval and t-test p when
    given (``paired_comparison(...).as_dict()``), as the benchmarks' Markdown tables show them."""
    text = f"{estimate:.3f} [{low:.3f}, {high:.3f}]"
    if paired:
        text += f" d={paired['difference']:+.3f} [{paired['low']:+.3f}, {paired['high']:+.3f}] p={paired['p_ttest']:.2g}"
    return text


def write_results(data: Any, out: Path | str) -> Path:
    """Write `data` as JSON to `out` (folders created; a mapping gets a `measured` stamp, replacing the
    one of a result read back and extended), print where, and return the path."""
    if isinstance(data, dict):
        data = {**data, "measured": measured()}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2))
    print(f"wrote {out}")
    return out
