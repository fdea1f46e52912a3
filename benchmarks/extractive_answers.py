"""Do extractive answers show the answer? For each golden question, whether its evidence text is among
the words an answer without an LLM shows: at least 0.8 of the evidence's distinct words (lower-cased
letters and digits) appear in what is shown. A question counts when one of its evidence texts does.

What is shown, per question (default settings, offline: the packaged MiniLM, no re-ranker):
- ``head 60 words``: the first 60 words of the top passage (the sentences' word budget, as a chunk head);
- ``demo 25 lines``: what ``make demo`` showed before issue 36 (the passages quoted whole, cut at 25 lines);
- ``sentences``: the answer now (``rag_core.generate.sentences``: at most 3 sentences, about 60 words);
- ``all k passages``: every passage given (what ``--explain`` and ``--json`` hold): the ceiling.
Corpora: the sample (``data/golden/golden.jsonl``, the store ``make demo`` fills) and the FinanceBench
dev split (ingested into ``--financebench-store`` on first use: minutes). Prints a table, writes
benchmarks/results/extractive_answers.json.
Usage: python benchmarks/extractive_answers.py [--corpus sample|financebench|both]
       [--financebench-store DIR] [--financebench-config FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rag_core.config import load_config  # noqa: E402
from rag_core.evaluate.golden import load_golden  # noqa: E402
from rag_core.generate.answer import EXTRACTIVE_LABEL, answer_question, quote_passages  # noqa: E402
from rag_core.generate.sentences import pipeline_scorer  # noqa: E402
from rag_core.paths import PROJECT_ROOT, SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE, default_store_dir  # noqa: E402
from rag_core.service import ingest_directory, open_pipeline  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

FINANCEBENCH = Path("/work/shared/datasets/financebench-dev")
MIN_OVERLAP = 0.8
HEAD_WORDS = 60
DEMO_LINES = 25
VIEWS = ("head 60 words", "demo 25 lines", "sentences", "all k passages")


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def overlap(evidence: str, shown: str) -> float:
    """Share of the evidence's distinct words that `shown` holds."""
    wanted = words(evidence)
    return len(wanted & words(shown)) / len(wanted) if wanted else 0.0


def views(answer_text: str, passages) -> dict[str, str]:
    old = "\n\n".join([EXTRACTIVE_LABEL.format(reason="no LLM configured"), quote_passages(passages)])
    top = passages[0].chunk.text if passages else ""
    return {"head 60 words": " ".join(top.split()[:HEAD_WORDS]),
            "demo 25 lines": "\n".join(old.splitlines()[:DEMO_LINES]),
            "sentences": answer_text, "all k passages": quote_passages(passages)}


def measure(name: str, documents: Path, golden: Path, store: Path, config_file: str | None) -> dict:
    config = load_config(config_file)
    if not (store / "documents").exists():
        print(f"ingesting {documents} into {store} (once) ...", file=sys.stderr)
        ingest_directory(documents, store, config, progress=True)
    pipeline = open_pipeline(store, config)
    rows, seconds = [], []
    for query in load_golden(golden):
        retrieval = pipeline.retrieve(query.query)
        started = time.perf_counter()
        answer = answer_question(query.query, retrieval.hits, config, use_llm=False,
                                 sentence_scorer=pipeline_scorer(pipeline), documents=pipeline.corpus.by_id)
        seconds.append(time.perf_counter() - started)
        shown = views(answer.text, answer.passages)
        texts = [item.text for item in query.evidence if item.text]
        best = {view: max((overlap(text, shown[view]) for text in texts), default=0.0) for view in VIEWS}
        rows.append({"id": query.id, "overlap": best, "shown": {view: best[view] >= MIN_OVERLAP for view in VIEWS},
                     "answer_words": len(answer.text.split()) - len(EXTRACTIVE_LABEL.split()) + 1})
    share = {view: sum(row["shown"][view] for row in rows) / len(rows) for view in VIEWS}
    mean_overlap = {view: sum(row["overlap"][view] for row in rows) / len(rows) for view in VIEWS}
    seconds.sort()
    return {"corpus": name, "questions": len(rows), "share_shown": share, "mean_overlap": mean_overlap,
            "answer_words_median": sorted(row["answer_words"] for row in rows)[len(rows) // 2],
            "selection_ms_median": 1000 * seconds[len(seconds) // 2], "per_query": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("sample", "financebench", "both"), default="both")
    parser.add_argument("--store", default=str(default_store_dir()), help="the sample corpus's store [.rag_store]")
    parser.add_argument("--financebench-store", default=str(PROJECT_ROOT / ".rag_store" / "financebench-dev"),
                        help="the FinanceBench dev split's store [.rag_store/financebench-dev]")
    parser.add_argument("--financebench-config", default=None,
                        help="settings (YAML) for FinanceBench other than the defaults (to reuse a store built with them)")
    parser.add_argument("--out", default=str(RESULTS / "extractive_answers.json"))
    args = parser.parse_args()
    results = []
    if args.corpus in ("sample", "both"):
        results.append(measure("sample", SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE, Path(args.store), None))
    if args.corpus in ("financebench", "both"):
        results.append(measure("financebench-dev", FINANCEBENCH / "documents", FINANCEBENCH / "golden.jsonl",
                               Path(args.financebench_store), args.financebench_config))
    print(f"\nShare of questions whose evidence text is shown (word overlap >= {MIN_OVERLAP}):\n")
    print(f"{'corpus':<18}{'questions':>10}" + "".join(f"{view:>16}" for view in VIEWS) + f"{'words':>7}{'ms':>7}")
    for result in results:
        print(f"{result['corpus']:<18}{result['questions']:>10}"
              + "".join(f"{result['share_shown'][view]:>16.2f}" for view in VIEWS)
              + f"{result['answer_words_median']:>7}{result['selection_ms_median']:>7.0f}")
    print("\nMean share of the evidence's words shown:\n")
    for result in results:
        print(f"{result['corpus']:<18}{result['questions']:>10}"
              + "".join(f"{result['mean_overlap'][view]:>16.2f}" for view in VIEWS))
    print("\n(words: median words of the answer shown, citations included; ms: median time to choose the sentences)")
    write_results({"min_overlap": MIN_OVERLAP, "results": results}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
