"""Fine-tuning on SciFact (issue 19's targets): a re-ranker and an embedder trained on part of the train
claims, scored on claims never trained on.

The claims of a BEIR split (SciFact's train split: 809 claims over 5,183 abstracts) are split once,
by a seeded hash of their normalised texts (``rag_core.finetune.data.split_by_text``, so that
claims with the same text stay together): ``--test-share`` (0.3) of
them are test claims, never trained on; of the rest, ``--validation-share`` (1/7, so 60/10/30 overall)
validate and stop the training. Both models are trained by ``rag_core.finetune.run.run_finetune``,
exactly what ``rag-pipeline finetune`` runs, and scored on the test claims by it:

- re-ranker: BM25 top ``--rerank-depth`` (100) re-ranked by the fine-tuned cross-encoder, alone and
  fused with BM25's order by RRF (``rerank_fusion: rrf``), against BM25 alone (targets: nDCG@10 >= 0.70);
- embedder: exact dense search with the fine-tuned model against the packaged MiniLM (target >= 0.68);
- each gain with its paired significance (paired t-test and bootstrap over the test claims);
- training time and peak memory (resident; GPU memory on a GPU); re-rank pairs/s per backend (torch,
  onnx, onnx-int8) over ``--backend-queries`` test claims' BM25 top 20, and issue 7's int8 agreement:
  the share of those claims whose top-5 set is the same as torch's (target >= 90%), measured with
  ``benchmarks/rerank_backends.py``'s code on the trained model.

``--reuse`` scores models already in ``--models`` instead of training them again (their
``finetune.json`` holds the training time and memory). Figures measured on a busy shared machine are
provisional: timing depends on the load (the JSON records the load average).
Usage: python benchmarks/finetune.py --beir ../shared/datasets/scifact-train --models /work/models/scifact
       [--only reranker|embedder] [--reuse] [--rerank-depth 100] [--reranker-setting KEY=VALUE ...]
       [--base-model DIR] [--out FILE]
A smoke run (seconds, figures meaningless): a tiny BEIR folder, ``--base-model`` a tiny BERT,
``--reranker-setting max_steps=1 --embedder-setting max_steps=1``, ``--out`` a scratch file.
Left out: hyper-parameter search (the recipe and what else was tried are in docs/fine-tuning.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.config import RagConfig  # noqa: E402
from rag_core.finetune.data import split_by_text  # noqa: E402
from rag_core.finetune.run import FinetuneJob, run_finetune  # noqa: E402
from rag_core.finetune.settings import TrainSettings  # noqa: E402
from rag_core.evaluate.beir import load_beir  # noqa: E402
from rag_core.ingest.corpus import Corpus  # noqa: E402
from rag_core.retrieve.models import load_cross_encoder, load_embedder  # noqa: E402
from rerank_backends import compare_backends  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

TARGETS = {"reranker": 0.70, "reranker + rrf": 0.70, "embedder": 0.68, "int8_top5_identical": 0.90}
EMBED_MODEL = "packaged:minilm"  # the packaged all-MiniLM-L6-v2: the base of both models offline


def parse_settings(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs for TrainSettings, values typed by the field's default."""
    defaults = {name: value for name, value in vars(TrainSettings(loss="x")).items()}
    settings = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in defaults:
            raise SystemExit(f"error: unknown training setting {key!r}; valid: {', '.join(defaults)}")
        settings[key] = type(defaults[key])(value) if not isinstance(defaults[key], str) else value
    return settings


def train_or_reuse(kind: str, args: argparse.Namespace, queries: tuple, tests: tuple, corpus: Corpus,
                   config: RagConfig, settings: dict[str, Any]) -> dict[str, Any]:
    """Train `kind` into <models>/<kind> (or, with --reuse, score the model there) and return its figures."""
    from rag_core.finetune.heldout import embed_heldout, rerank_heldout

    out = Path(args.models) / kind
    job = FinetuneJob(kind, queries, corpus, f"{Path(args.beir).name} {args.split} (test share {args.test_share})",
                      out, TrainSettings.for_kind(kind, **settings), args.negatives_from, args.negatives_depth,
                      args.validation_share, base_model=args.base_model, test_queries=tests,
                      test_name="the test claims")
    if args.reuse and (out / "finetune.json").is_file():
        recorded = json.loads((out / "finetune.json").read_text())
        if kind == "reranker":
            heldout = rerank_heldout(load_cross_encoder(str(out)).model, tests, corpus, args.store, config,
                                     show_progress=True)
        else:
            heldout = embed_heldout(load_embedder(EMBED_MODEL).model, load_embedder(str(out), fallback=False).model,
                                    tests, corpus, args.store, config, show_progress=True)
        return {"model": str(out), "reused": True, "training": {k: recorded.get(k) for k in (
            "train_seconds", "peak_memory_mb", "steps", "best_step", "best_validation_ndcg@10",
            "initial_validation_ndcg@10", "curve", "device", "precision")}, "settings": {
            k[len("finetune_"):]: v for k, v in recorded.items() if k.startswith("finetune_")},
            "heldout": heldout.as_dict()}
    outcome = run_finetune(job, config, args.store, log_to_mlflow=not args.no_mlflow, show_progress=True)
    return {"model": str(out), "reused": False, "training": outcome.result.summary(),
            "settings": vars(job.settings), "heldout": outcome.heldout.as_dict(),
            "train_queries": len(outcome.data.train), "validation_queries": len(outcome.data.validation),
            "mlflow_run": outcome.run_id}


def backend_figures(model_dir: str, tests: tuple, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    """Pairs/s per backend and int8's top-5 agreement with torch, over test claims' BM25 top 20."""
    from rag_core.retrieve.bm25 import BM25Index

    texts = {document.doc_id: document.text for document in corpus.documents}
    index = BM25Index()
    index.index(list(texts), list(texts.values()))
    chosen = tests[: args.backend_queries]
    candidates = [[texts[hit.id] for hit in index.retrieve(query.query, 20)] for query in chosen]
    results = compare_backends(load_cross_encoder(model_dir).model, [query.query for query in chosen], candidates, RESULTS / "onnx-cache",
                               args.threads)
    by_name = {result.backend: vars(result) for result in results}
    return {"queries": len(chosen), "candidates": 20, "threads": args.threads, "backends": by_name,
            "int8_time_share_of_torch": by_name["onnx-int8"]["p50_ms"] / by_name["torch"]["p50_ms"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder (SciFact's train split)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--models", required=True, help="where the models go (outside git)")
    parser.add_argument("--store", default=str(RESULTS / "finetune-store"), help="index store")
    parser.add_argument("--only", choices=("reranker", "embedder"))
    parser.add_argument("--reuse", action="store_true", help="score the models in --models instead of training")
    parser.add_argument("--test-share", type=float, default=0.3)
    parser.add_argument("--validation-share", type=float, default=1 / 7)
    parser.add_argument("--seed", type=int, default=13, help="seed of the test split")
    parser.add_argument("--rerank-depth", type=int, default=100)
    parser.add_argument("--negatives-from", default="bm25")
    parser.add_argument("--negatives-depth", type=int, default=30)
    parser.add_argument("--reranker-setting", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--embedder-setting", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--backend-queries", type=int, default=50, help="test claims for the backend figures (0: skip)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-mlflow", action="store_true")
    parser.add_argument("--base-model", help="base of both models (default: the packaged MiniLM)")
    parser.add_argument("--out", default=str(RESULTS / "finetune.json"), help="the JSON results file")
    args = parser.parse_args()

    documents, queries = load_beir(args.beir, args.split)
    corpus = Corpus.of(documents)
    train, tests = map(tuple, split_by_text(queries, args.test_share, args.seed, lambda query: query.query))
    config = RagConfig(mode="bm25", retrieve_depth=args.rerank_depth, rerank_depth=args.rerank_depth,
                       embed_model=EMBED_MODEL, rerank_model=EMBED_MODEL, tracing=False)
    load = os.getloadavg()
    started = time.perf_counter()
    results: dict[str, Any] = {"dataset": str(Path(args.beir).resolve()), "split": args.split, "seed": args.seed,
                               "claims": len(queries), "train_pool": len(train), "test_claims": len(tests),
                               "rerank_depth": args.rerank_depth, "load_average_at_start": load, "targets": TARGETS}
    kinds = [args.only] if args.only else ["reranker", "embedder"]
    for kind in kinds:
        settings = parse_settings(args.reranker_setting if kind == "reranker" else args.embedder_setting)
        results[kind] = train_or_reuse(kind, args, train, tests, corpus, config, settings)
        print(json.dumps(results[kind]["heldout"], indent=1), file=sys.stderr)
    if "reranker" in kinds and args.backend_queries:
        results["backends"] = backend_figures(results["reranker"]["model"], tests, corpus, args)
    results["seconds"] = time.perf_counter() - started
    results["load_average_at_end"] = os.getloadavg()
    print(format_table(results))
    write_results(results, args.out)


def format_table(results: dict[str, Any]) -> str:
    metric = "page/ndcg@10"
    lines = [f"{Path(results['dataset']).name} {results['split']} claims: {results['train_pool']} to train and validate, "
             f"{results['test_claims']} test claims (seed {results['seed']}); nDCG@10 on the test claims", "",
             f"{'system':<34}{'nDCG@10':>9}{'gain':>9}{'95% CI':>20}{'p (t)':>9}{'p (boot)':>10}{'target':>8}"]
    for kind, names in (("reranker", {"first stage": f"BM25 top {results['rerank_depth']}",
                                      "re-ranked": "re-ranked (fine-tuned CE)",
                                      "re-ranked + rrf": "re-ranked + rrf with BM25"}),
                        ("embedder", {"base embedder": "dense, base embedder",
                                      "fine-tuned embedder": "dense, fine-tuned embedder"})):
        if kind not in results:
            continue
        heldout = results[kind]["heldout"]
        for system, label in names.items():
            value = heldout["systems"][system][metric]
            comparison = heldout["comparisons"].get(system)
            target = TARGETS.get({"re-ranked": "reranker", "re-ranked + rrf": "reranker + rrf",
                                  "fine-tuned embedder": "embedder"}.get(system, ""), None)
            row = f"{label:<34}{value:>9.4f}"
            if comparison:
                row += (f"{comparison['difference']:>+9.4f}{'[' + format(comparison['low'], '+.4f') + ', ' + format(comparison['high'], '+.4f') + ']':>20}"
                        f"{comparison['p_ttest']:>9.3g}{comparison['p_bootstrap']:>10.3g}")
            if target is not None:
                row += f"{'>=' + str(target) + (' ok' if value >= target else ' MISSED'):>14}"
            lines.append(row)
        training = results[kind]["training"]
        lines.append(f"  training: {training['train_seconds']:.0f} s, peak memory {training['peak_memory_mb']:.0f} MB, "
                     f"{training['steps']} steps, best validation nDCG@10 {training['best_validation_ndcg@10']:.4f} at "
                     f"step {training['best_step']} (before training {training['initial_validation_ndcg@10']:.4f})")
    if "backends" in results:
        backends = results["backends"]
        lines += ["", f"Re-ranking the trained model, {backends['queries']} test claims x 20 BM25 candidates, "
                      f"{backends['threads']} threads (provisional: machine load {results['load_average_at_start'][0]:.1f})"]
        for name, row in backends["backends"].items():
            lines.append(f"  {name:<10} {row['pairs_per_second']:>7.1f} pairs/s  p50 {row['p50_ms']:>7.0f} ms  "
                         f"tau {row['mean_kendall_tau']:.3f}  top-5 identical {row['top5_identical_share']:.0%}")
        lines.append(f"  int8 time share of torch {backends['int8_time_share_of_torch']:.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
