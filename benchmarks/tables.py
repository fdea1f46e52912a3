"""The cold cost of table_text's extraction (``find_tables`` and the row lines) against plain text
extraction, per page, on a folder of PDFs; how many tables and row lines it finds; a few lines to read.

    nice -n 10 .venv/bin/python benchmarks/tables.py data/documents [--max-pages N] [--show 5]

CPU time (``time.process_time``) of ``read_pdf`` without and with ``rows`` for every PDF (or the first
``--max-pages`` pages of each, sampled evenly over the files); nothing is cached. Prints a JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pymupdf

from rag_core.ingest.pdf_extract import extract_pdf


def measure(folder: Path, max_pages: int = 0, show: int = 0) -> dict:
    files = sorted(folder.rglob("*.pdf"))
    plain_s = rows_s = 0.0
    pages = tables_pages = lines = 0
    examples: list[str] = []
    for path in files:
        with pymupdf.open(path) as pdf:
            if max_pages and len(pdf) > max_pages:
                step = len(pdf) / max_pages
                pdf.select(sorted({int(i * step) for i in range(max_pages)}))
            started = time.process_time()
            plain = extract_pdf(pdf, path.name)
            plain_s += time.process_time() - started
            started = time.process_time()
            with_rows = extract_pdf(pdf, path.name, rows=True)
            rows_s += time.process_time() - started
        assert with_rows.pages == plain.pages  # table_text never changes the shown text
        pages += len(plain.pages)
        tables_pages += len({page for page, _, _ in with_rows.table_rows})
        lines += len(with_rows.table_rows)
        examples += [f"{path.name} p{page}: {line}" for page, _, line in with_rows.table_rows[:show]]
    return {"files": len(files), "pages": pages, "pages_with_rows": tables_pages, "row_lines": lines,
            "plain_ms_per_page": round(1000 * plain_s / max(pages, 1), 2),
            "table_text_ms_per_page": round(1000 * rows_s / max(pages, 1), 2),
            "table_text_share_of_extraction": round(rows_s / (plain_s + rows_s), 3) if plain_s + rows_s else 0.0,
            "examples": examples[:show * 4]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--max-pages", type=int, default=0, help="pages per file, sampled evenly (0: all)")
    parser.add_argument("--show", type=int, default=3, help="row lines shown per file")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    print(json.dumps(measure(args.folder, args.max_pages, args.show), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
