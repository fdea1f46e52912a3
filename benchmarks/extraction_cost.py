"""Cost per page of PDF extraction: plain text, headings (font sizes), and tables as Markdown rows
(``page.find_tables()``); prints a table, writes JSON under benchmarks/results/.

Pages are sampled evenly from every PDF of a folder (``--pages`` per file), so long filings cost no
more than short ones. Each step is timed on its own, per page, in this process (CPU time and wall
time; on a busy machine wall time is longer).

Usage: python benchmarks/extraction_cost.py --input DIR [--pages 6]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pymupdf

from rag_core.ingest.pdf_extract import _font_headings, _page_with_tables
from results_file import RESULTS, write_results



def timed(step) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--pages", type=int, default=6, help="pages sampled per file")
    parser.add_argument("--out", default=str(RESULTS / "extraction_cost.json"))
    args = parser.parse_args()
    flags = (pymupdf.TEXTFLAGS_TEXT | pymupdf.TEXT_DEHYPHENATE) & ~pymupdf.TEXT_PRESERVE_LIGATURES
    samples: dict[str, list[tuple[float, float]]] = {"text": [], "headings": [], "tables": []}
    tables_found = 0
    files = sorted(Path(args.input).rglob("*.pdf"))
    for path in files:
        with pymupdf.open(path) as pdf:
            step = max(1, len(pdf) // args.pages)
            for number in range(0, len(pdf), step)[: args.pages]:
                page = pdf[number]
                wall, cpu, _ = timed(lambda: page.get_text("text", flags=flags))
                samples["text"].append((wall, cpu))
                wall, cpu, _ = timed(lambda: _font_headings(page, flags))
                samples["headings"].append((wall, cpu))
                wall, cpu, (_, found) = timed(lambda: _page_with_tables(page, flags))
                samples["tables"].append((wall, cpu))
                tables_found += found
    rows = {step: {"pages": len(values), "wall_ms_p50": statistics.median(w for w, _ in values),
                   "wall_ms_mean": statistics.fmean(w for w, _ in values),
                   "cpu_ms_mean": statistics.fmean(c for _, c in values)} for step, values in samples.items()}
    print(f"{'step':<10}{'pages':>7}{'wall p50 ms':>13}{'wall mean ms':>14}{'cpu mean ms':>13}")
    for step, row in rows.items():
        print(f"{step:<10}{row['pages']:>7}{row['wall_ms_p50']:>13.1f}{row['wall_ms_mean']:>14.1f}{row['cpu_ms_mean']:>13.1f}")
    print(f"tables found on the sampled pages: {tables_found}")
    write_results({"input": args.input, "files": len(files), "pages_per_file": args.pages,
                   "tables_found": tables_found, "steps": rows}, args.out)


if __name__ == "__main__":
    main()
