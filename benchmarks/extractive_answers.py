"""Do extractive answers show the answer? For each golden question, whether an answer without an LLM
shows its evidence, in two ways: **quotes** (the answer holds 8 consecutive words of an evidence text,
lower-cased letters and digits; all of it when shorter: the target of issue 44 is >= 30 of the 36
sample questions and >= 9 of the 13 of type ``paraphrase``) and **shown** (at least 0.8 of the
evidence's distinct words appear in what is shown). A question counts when one of its evidence texts does.

What is shown, per question (default settings, offline: the packaged MiniLM, no re-ranker):
- ``head 60 words``: the first 60 words of the top passage (the sentences' word budget, as a chunk head);
- ``demo 25 lines``: what ``make demo`` showed before issue 36 (the passages quoted whole, cut at 25 lines);
- ``sentences``: the answer now (``rag_core.generate.sentences``: at most 3 sentences, about 60 words,
  72 with their citations);
- ``all k passages``: every passage given (what ``--explain`` and ``--json`` hold): the ceiling.
Counts are given by the golden set's ``type`` (exact, mixed, paraphrase), with the longest answer in words.
``--grid``: the sentence choice at each pair of BM25 weight (``LEXICAL_WEIGHT``) and rank penalty
(``RANK_PENALTY``) of a small grid, and a leave-one-question-out estimate of choosing the pair on this
set (the pair best on the other 35 questions, scored on the one left out): what tuning the weights
here would be worth on a question not seen.
``--rules``: the answer under other rules of choice, on the same passages (issue 44: few principled
variants, all reported): ``shipped`` (the weighted mean above), ``equal weights`` (0.5 each),
``BM25 weights alone``, ``embedding alone``, ``rank fusion k=60`` and ``k=10`` (reciprocal rank fusion of
the two rankings instead of the mean: ``rank_fused_scorer``), ``every sentence embedded`` (no shortlist of
``EMBEDDED_SENTENCES``) and ``four sentences`` (``max_sentences`` 4, the same 72-word cap); each against
``shipped`` question by question (wins, losses, the two-sided exact sign test), and left one out as the grid.
Corpora: the sample (``data/golden/golden.jsonl``, the store ``make demo`` fills) and the FinanceBench
dev split (ingested into ``--financebench-store`` on first use: minutes). Prints a table, writes
benchmarks/results/extractive_answers.json.
Usage: python benchmarks/extractive_answers.py [--corpus sample|financebench|both] [--grid] [--rules]
       [--financebench-store DIR] [--financebench-config FILE]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rag_core.config import load_config  # noqa: E402
from rag_core.evaluate.golden import load_golden  # noqa: E402
from rag_core.generate.answer import EXTRACTIVE_LABEL, answer_question, quote_passages  # noqa: E402
from rag_core.generate.sentences import (LEXICAL_WEIGHT, RANK_PENALTY, combined_scorer, pipeline_scorer,  # noqa: E402
                                         pipeline_scorers, rank_fused_scorer, select_sentences)
from rag_core.jsonl import read_jsonl  # noqa: E402
from rag_core.paths import PROJECT_ROOT, SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE, default_store_dir  # noqa: E402
from rag_core.service import ingest_directory, open_pipeline  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

FINANCEBENCH = Path("/work/shared/datasets/financebench-dev")
MIN_OVERLAP = 0.8
QUOTE_WORDS = 8  # consecutive words of the evidence an answer must hold to quote it (issue 44)
GRID_LEXICAL = (0.0, 0.15, 0.3, 0.5)
GRID_RANK_PENALTY = (0.0, 0.01, 0.05, 0.1)
HEAD_WORDS = 60
DEMO_LINES = 25
VIEWS = ("head 60 words", "demo 25 lines", "sentences", "all k passages")


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def words(text: str) -> set[str]:
    return set(tokens(text))


def quotes(evidence: str, shown: str, length: int = QUOTE_WORDS) -> bool:
    """Does `shown` hold `length` consecutive words of `evidence` (all of them when it is shorter)?"""
    wanted, held = tokens(evidence), tokens(shown)
    length = min(length, len(wanted))
    if not length:
        return False
    runs = {tuple(held[i:i + length]) for i in range(len(held) - length + 1)}
    return any(tuple(wanted[i:i + length]) in runs for i in range(len(wanted) - length + 1))


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


def answer_body(answer_text: str) -> str:
    """The answer without its label (its first paragraph): the sentences and their citations."""
    return answer_text.split("\n\n", 1)[1] if "\n\n" in answer_text else ""


def measure(name: str, documents: Path, golden: Path, store: Path, config_file: str | None, grid: bool,
            rules: bool = False) -> dict:
    config = load_config(config_file)
    if not (store / "documents").exists():
        print(f"ingesting {documents} into {store} (once) ...", file=sys.stderr)
        ingest_directory(documents, store, config, progress=True)
    pipeline = open_pipeline(store, config)
    types = {record.get("id"): record.get("type", "untyped") for _, _, record in read_jsonl(golden, ValueError)}
    choices = {"rules": rule_choices(pipeline) if rules else {}, "grid": grid_choices(pipeline) if grid else {}}
    rows, seconds, cells = [], [], {kind: {} for kind, chosen in choices.items() if chosen}
    for query in load_golden(golden):
        retrieval = pipeline.retrieve(query.query)
        started = time.perf_counter()
        answer = answer_question(query.query, retrieval.hits, config, use_llm=False,
                                 sentence_scorer=pipeline_scorer(pipeline), documents=pipeline.corpus.by_id)
        seconds.append(time.perf_counter() - started)
        shown = views(answer.text, answer.passages)
        texts = [item.text for item in query.evidence if item.text]
        best = {view: max((overlap(text, shown[view]) for text in texts), default=0.0) for view in VIEWS}
        rows.append({"id": query.id, "type": types.get(query.id, "untyped"), "overlap": best,
                     "shown": {view: best[view] >= MIN_OVERLAP for view in VIEWS},
                     "quotes": {view: any(quotes(text, shown[view]) for text in texts) for view in VIEWS},
                     "answer_words": len(answer_body(answer.text).split())})
        for kind in cells:
            cells[kind][query.id] = choice_cells(pipeline, query.query, answer.passages, texts, choices[kind])
    seconds.sort()
    result = {"corpus": name, "questions": len(rows), "quote_words": QUOTE_WORDS,
              "quotes": {view: sum(row["quotes"][view] for row in rows) for view in VIEWS},
              "quotes_by_type": {kind: {"questions": sum(row["type"] == kind for row in rows),
                                        **{view: sum(row["quotes"][view] for row in rows if row["type"] == kind)
                                           for view in VIEWS}} for kind in sorted(set(types.values()))},
              "share_shown": {view: sum(row["shown"][view] for row in rows) / len(rows) for view in VIEWS},
              "mean_overlap": {view: sum(row["overlap"][view] for row in rows) / len(rows) for view in VIEWS},
              "answer_words_median": sorted(row["answer_words"] for row in rows)[len(rows) // 2],
              "answer_words_max": max(row["answer_words"] for row in rows),
              "selection_ms_median": 1000 * seconds[len(seconds) // 2], "per_query": rows}
    for kind, by_question in cells.items():  # a question answered "no answer" has no passages: quoted under none
        default = f"{LEXICAL_WEIGHT}/{RANK_PENALTY}" if kind == "grid" else "shipped"
        result[kind] = {"cells": "lexical_weight/rank_penalty" if kind == "grid" else "rule",
                        **choice_summary(by_question, {row["id"]: row["type"] for row in rows}, default)}
    return result


def grid_choices(pipeline) -> dict[str, tuple]:
    """(BM25 weight)/(rank penalty) -> (scorer, select_sentences options), for each pair of the grid."""
    return {f"{lexical}/{penalty}": (pipeline_scorer(pipeline, lexical_weight=lexical), {"rank_penalty": penalty})
            for lexical in GRID_LEXICAL for penalty in GRID_RANK_PENALTY}


def rule_choices(pipeline) -> dict[str, tuple]:
    """Rule -> (scorer, select_sentences options): the rules of ``--rules`` (the module docstring); only
    ``shipped`` without an embedding model (BM25 mode), whose choice is BM25's weights alone."""
    lexical, dense = pipeline_scorers(pipeline)
    if dense is None:
        return {"shipped": (lexical, {})}
    _, every = pipeline_scorers(pipeline, embedded=None)
    return {"shipped": (pipeline_scorer(pipeline), {}),
            "equal weights": (combined_scorer((lexical, 0.5), (dense, 0.5)), {}),
            "BM25 weights alone": (lexical, {}), "embedding alone": (dense, {}),
            "rank fusion k=60": (rank_fused_scorer(lexical, dense, k=60), {}),
            "rank fusion k=10": (rank_fused_scorer(lexical, dense, k=10), {}),
            "every sentence embedded": (combined_scorer((lexical, LEXICAL_WEIGHT), (every, 1 - LEXICAL_WEIGHT)), {}),
            "four sentences": (pipeline_scorer(pipeline), {"max_sentences": 4})}


def choice_cells(pipeline, question: str, hits, evidence: list[str], choices: dict[str, tuple]) -> dict[str, bool]:
    """Whether the answer quotes the evidence under each choice (name -> (scorer, select_sentences
    options)); each sentence is embedded once (the encoder's answers are kept for the question)."""
    embedder = getattr(pipeline.index, "embedder", None)  # None in BM25 mode: nothing to embed
    encoder = embedder.query_encoder if embedder is not None else None
    encode, kept = (type(encoder).encode if encoder is not None else None), {}

    def remembered(texts, kind, batch_size):  # the same sentences under every choice: embedded once
        if (key := (tuple(texts), kind)) not in kept:
            kept[key] = encode(encoder, texts, kind, batch_size)
        return kept[key]

    if encoder is not None:
        encoder.encode = remembered
    try:
        cells = {}
        for name, (scorer, options) in choices.items():
            excerpts = select_sentences(question, hits, scorer, pipeline.corpus.by_id, **options)
            text = " ".join(f"{excerpt.text} {excerpt.citation()}" for excerpt in excerpts)
            cells[name] = any(quotes(item, text) for item in evidence)
        return cells
    finally:
        if encoder is not None:
            del encoder.encode  # the instance's own attribute: the class's method again


def choice_summary(cells: dict[str, dict[str, bool]], types: dict[str, str], default: str) -> dict:
    """Questions quoted under each choice; each against `default` question by question (wins, losses,
    ``sign_test``); and leave one question out: the choice best on the others (ties: the first), scored
    on the one left out, summed over the questions."""
    ids, names = list(cells), list(next(iter(cells.values())))
    totals = {name: sum(cells[qid][name] for qid in ids) for name in names}
    held_out, paraphrased, chosen = 0, 0, []
    for qid in ids:
        pick = max(names, key=lambda name: totals[name] - cells[qid][name])  # max keeps the first of ties
        chosen.append(pick)
        held_out += cells[qid][pick]
        paraphrased += cells[qid][pick] and types[qid] == "paraphrase"
    paired = {}
    for name in names:
        wins = [qid for qid in ids if cells[qid][name] and not cells[qid].get(default)]
        losses = [qid for qid in ids if cells[qid].get(default) and not cells[qid][name]]
        paired[name] = {"wins": len(wins), "losses": len(losses), "p_sign_test": sign_test(len(wins), len(losses)),
                        "won": wins, "lost": losses}
    paraphrase = {name: sum(cells[qid][name] for qid in ids if types[qid] == "paraphrase") for name in names}
    return {"quotes": totals, "quotes_paraphrase": paraphrase,
            "default": default, "default_quotes": totals.get(default), "best_in_sample": max(totals.values()),
            "leave_one_out_quotes": held_out, "leave_one_out_paraphrase_quotes": paraphrased,
            "leave_one_out_picks": {name: chosen.count(name) for name in dict.fromkeys(chosen)},
            "against_default": paired}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of `wins` against `losses` (ties left out): 2 P(X <= min) for X ~ Bin(n, 1/2)."""
    n = wins + losses
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n) if n else 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("sample", "financebench", "both"), default="both")
    parser.add_argument("--store", default=str(default_store_dir()), help="the sample corpus's store [.rag_store]")
    parser.add_argument("--financebench-store", default=str(PROJECT_ROOT / ".rag_store" / "financebench-dev"),
                        help="the FinanceBench dev split's store [.rag_store/financebench-dev]")
    parser.add_argument("--financebench-config", default=None,
                        help="settings (YAML) for FinanceBench other than the defaults (to reuse a store built with them)")
    parser.add_argument("--grid", action="store_true",
                        help="also the choice at each BM25 weight and rank penalty of a small grid, left one out")
    parser.add_argument("--rules", action="store_true",
                        help="also the choice under other rules (rank fusion, equal weights, ...), "
                             "question by question against the shipped one")
    parser.add_argument("--out", default=str(RESULTS / "extractive_answers.json"))
    args = parser.parse_args()
    results = []
    if args.corpus in ("sample", "both"):
        results.append(measure("sample", SAMPLE_DOCUMENTS_DIR, SAMPLE_GOLDEN_FILE, Path(args.store), None, args.grid,
                               args.rules))
    if args.corpus in ("financebench", "both"):
        results.append(measure("financebench-dev", FINANCEBENCH / "documents", FINANCEBENCH / "golden.jsonl",
                               Path(args.financebench_store), args.financebench_config, args.grid, args.rules))
    print_quotes(results)
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
    write_results({"min_overlap": MIN_OVERLAP, "quote_words": QUOTE_WORDS, "results": results}, args.out)
    return 0


def print_quotes(results: list[dict]) -> None:
    """Questions whose answer quotes the evidence, by type, and the grid when measured."""
    print(f"\nQuestions whose evidence is quoted ({QUOTE_WORDS} consecutive words or more), by type:\n")
    print(f"{'corpus':<18}{'type':<12}{'questions':>10}" + "".join(f"{view:>16}" for view in VIEWS))
    for result in results:
        groups = {"all": {"questions": result["questions"], **result["quotes"]}, **result["quotes_by_type"]}
        for kind, counts in groups.items():
            print(f"{result['corpus']:<18}{kind:<12}{counts['questions']:>10}"
                  + "".join(f"{counts[view]:>16}" for view in VIEWS))
        print(f"{'':<18}longest answer: {result['answer_words_max']} words (sentences and citations)")
        for kind in ("rules", "grid"):
            if kind in result:
                print_choices(result["corpus"], result[kind])


def print_choices(corpus: str, summary: dict) -> None:
    """Questions quoted under each choice, each against the default, and the leave-one-out estimate."""
    print(f"\n{corpus}: quoted under each {summary['cells']} (default {summary['default']}), "
          "paraphrased, wins and losses against the default (sign test p):")
    for name, count in summary["quotes"].items():
        paired = summary["against_default"][name]
        print(f"  {name:<26}{count:>4}{summary['quotes_paraphrase'][name]:>4}   +{paired['wins']} -{paired['losses']}"
              f" (p={paired['p_sign_test']:.2f})")
    print(f"best in sample {summary['best_in_sample']}; chosen on the other questions, left one out: "
          f"{summary['leave_one_out_quotes']} ({summary['leave_one_out_paraphrase_quotes']} paraphrased)")


if __name__ == "__main__":
    sys.exit(main())
