"""``make demo`` (``python -m rag_core.demo``): the workbench on the sample corpus, start to finish.

1. ingest ``data/documents`` into the default store (``.rag_store``), with progress;
2. answer three sample questions with ``[Source: document, page N]`` citations (Claude or OpenAI
   with an API key; extractive, and labelled so, without one);
3. run the sweep of ``experiments/grid.yaml`` (24 points; papermill executes the evaluation notebook
   once per point in a warm kernel, each point one MLflow run) and print the comparison table, best
   first, and what was not run and why (offline, the re-ranked points: no cross-encoder can be loaded);
4. say how to open the MLflow UI and where the executed notebooks are.

Everything is cached in the store, so a second run is quick (a finished sweep is not run again).
Left out: generating answers for the sweep's queries (``rag-pipeline eval --judge`` does that).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from rag_core.config import load_config  # noqa: E402
from rag_core.paths import EXPERIMENTS_DIR, PROJECT_ROOT, SAMPLE_DOCUMENTS_DIR, default_store_dir  # noqa: E402
from rag_core.terminal_text import fit, fitted_warnings  # noqa: E402

# One question of each kind in the golden set: an exact identifier, a paraphrase, a mix of both.
SAMPLE_QUESTIONS = (
    "What does error code QS-4021 mean and what still works while it is returned?",
    "Why would a worker be handed a job that another worker has already finished?",
    "How many requests per minute may one API key send on the Growth plan?",
)
DEMO_SWEEP = EXPERIMENTS_DIR / "grid.yaml"
MLFLOW_UI = ("mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db --default-artifact-root ./mlruns/artifacts "
             "--host 127.0.0.1 --port 5000")


def main(argv: list[str] | None = None) -> int:
    with fitted_warnings():  # no line over 120 characters, the library's warnings included
        return _demo(argv)


def _demo(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag_core.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(DEMO_SWEEP), help="sweep file [experiments/grid.yaml]")
    parser.add_argument("--workers", type=int, default=1, help="sweep points run in parallel [1]")
    parser.add_argument("--store", default=None, help="index store [$RAG_STORE or .rag_store]")
    args = parser.parse_args(argv)
    store = Path(args.store) if args.store else default_store_dir()
    config = load_config()
    started = time.perf_counter()

    from rag_core.service import answer_query, ingest_directory
    from rag_core.workbench.reports.text import format_answer, format_sweep

    _heading(f"1. Ingesting the sample corpus ({SAMPLE_DOCUMENTS_DIR.relative_to(PROJECT_ROOT)}) into {store}")
    report = ingest_directory(SAMPLE_DOCUMENTS_DIR, store, config, progress=True)
    print(f"{report['documents']} documents, {report['chunks']} chunks ({report['added']} new in this run)")
    for skipped in report["skipped"]:
        print(fit(f"  skipped {skipped['path']}: {skipped['reason']}"))

    _heading("2. Three sample questions")
    for number, question in enumerate(SAMPLE_QUESTIONS, start=1):
        print(f"\nQ{number}: {question}\n")
        print(fit(_shortened(format_answer(answer_query(question, store, config)))))

    from rag_core.workbench import load_sweep, run_sweep

    spec = load_sweep(args.sweep)
    _heading(f"3. Sweep {spec.name!r} ({Path(args.sweep).name}): papermill runs notebooks/02-evaluate.ipynb "
             f"once per point, each point one MLflow run")
    result = run_sweep(spec, store, workers=args.workers)
    print("\n" + format_sweep(result))

    _heading("4. Where to look")
    uri = result.tracking_uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        print(fit(f"MLflow UI:   mlflow ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000"))
    else:
        print(fit(f"MLflow UI:   make mlflow-ui\n             (runs: {MLFLOW_UI})", indent="       "))
    from rag_core.workbench.tracking.experiment_view import runs_view_url
    from rag_core.workbench.tracking.tracker import Tracker

    experiment_id = Tracker(uri).experiment_id(result.experiment)
    print("             then open the runs view:")  # a URL is not wrapped: on a line of its own, it fits
    print(f"  {runs_view_url('http://127.0.0.1:5000', experiment_id)}")
    print(fit(f"             (experiment {result.experiment!r}, parent run {spec.name!r}; each point's Traces tab "
              "shows its queries stage by stage)"))
    print(f"Notebooks:   executed ones in {_shown(result.output_dir)}")
    print("             compare runs, plots and a significance test: notebooks/03-compare.ipynb (make lab)")
    print(f"\nDemo finished in {time.perf_counter() - started:.0f} s.")
    return 1 if result.failed else 0


def _shortened(text: str, max_lines: int = 25) -> str:
    """An extractive answer quotes whole passages: show its start and say how to see all of it."""
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    sources = next((i for i, line in enumerate(lines) if line == "Sources:" or line.startswith("note: ")), len(lines))
    kept = min(max_lines, sources)
    return "\n".join([*lines[:kept], f"[... {sources - kept} more lines: rag-pipeline query \"...\" shows them all]",
                      "", *lines[sources:]])


def _heading(text: str) -> None:
    print(f"\n{'=' * 100}\n{fit(text)}\n{'=' * 100}", flush=True)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
