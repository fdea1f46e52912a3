"""Where every benchmark writes its results: indented JSON under ``benchmarks/results/`` (ignored by
git), one file per script; the scripts print their tables themselves.

Left out: keeping history (a run overwrites the script's previous file; pass another path to keep one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write_results(data: Any, out: Path | str) -> Path:
    """Write `data` as JSON to `out` (folders created), print where, and return the path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2))
    print(f"wrote {out}")
    return out
