"""Self-supervised adaptation on a BEIR corpus (issue 30, item 3): the embedder trained by
``rag-pipeline finetune embedder --self-supervised --beir DIR`` (which reads ``corpus.jsonl`` only)
against the packaged MiniLM, exact dense search, on the split's claims.

Training never sees a claim, so every claim could be a test claim; still, the claims are split once
by a seeded hash of their normalised texts (``split_by_text``, ``--claims-seed``) into a *tuning*
half, the only one looked at while choosing the recipe, and a *held-out* half, reported as the
result: page (= document) nDCG@10 of each model, the mean gain with its bootstrap 95% interval and
the paired t-test / bootstrap p-values (``rag_core.finetune.significance``).

Steps: (1) with ``--train``, run the CLI (a subprocess, as a user does) with ``TRAIN_ARGS`` into
``--model`` and time it; (2) embed the corpus with the base model (cached in ``--store``: ``--embed-only base``
and ``--embed-only adapted`` likewise, so that they can run beside another step) and with the adapted
one, and rank the claims. The adapted model searches at its base's ``max_seq_length`` (``--self-supervised``
keeps it, whatever ``--max-length`` training used), so the two differ in their weights only.
Usage: python benchmarks/self_supervised.py --beir ../shared/datasets/scifact-train \\
       --model /tmp/ss-models/scifact-embedder --store /tmp/ss-store [--train] [--embed-only base|adapted] [--out FILE]
Left out: the re-ranker (no real cross-encoder offline: nothing to claim), several seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_core.config import RagConfig  # noqa: E402
from rag_core.evaluate.beir import load_beir  # noqa: E402
from rag_core.finetune.data import split_by_text  # noqa: E402
from rag_core.finetune.significance import paired_comparison  # noqa: E402
from rag_core.ingest.corpus import Corpus  # noqa: E402
from results_file import RESULTS, write_results  # noqa: E402

EMBED_MODEL = "packaged:minilm"
METRIC = "page/ndcg@10"
# The recipe measured (docs/self-supervised.md), sized for 2 busy shared cores: a sample of 1,200 pseudo-queries
# of which 14 steps of 32 are trained, passages cut to 128 tokens (MiniLM's own training length), validation
# on 30 pseudo-queries of held-out documents before and after.
TRAIN_ARGS = ["--max-pseudo-queries", "1200", "--max-length", "128", "--learning-rate", "3e-5", "--max-steps", "14",
              "--eval-steps", "14", "--validation-depth", "10", "--max-validation", "30"]


def train(args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "rag_core.cli", "finetune", "embedder", "--self-supervised", "--beir", args.beir,
               "--out", args.model, "--store", args.store, "--embed-model", EMBED_MODEL, "--json", *TRAIN_ARGS]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"error: training failed (exit {done.returncode})")
    return {"command": " ".join(command[1:]), "wall_seconds": time.perf_counter() - started}


def cached_embedder(model: str, config: RagConfig, store: Path) -> Any:
    """An ``Embedder`` of `model` with a cache in `store`: the store's own for a named model, one per
    weights fingerprint for a folder (the cache keys a model by its name; a folder may be trained again)."""
    from rag_core.finetune.fingerprints import weights_fingerprint
    from rag_core.retrieve.cache import ScoreCache
    from rag_core.retrieve.embedding.embedder import Embedder

    weights = weights_fingerprint(model)
    cache = ScoreCache(store / (f"cache-{weights}.sqlite" if weights else "cache.sqlite"))
    return Embedder(model, config.embed_batch_size, cache, fallback=False, progress=True)


def score(args: argparse.Namespace, corpus: Corpus, claims: list, config: RagConfig) -> dict[str, Any]:
    """Both models over every claim, then each half's comparison."""
    from rag_core.finetune.heldout import embed_heldout

    base, adapted = (cached_embedder(model, config, Path(args.store)) for model in (EMBED_MODEL, args.model))
    lengths = {"base": base.loaded.model.max_seq_length, "adapted": adapted.loaded.model.max_seq_length}
    started = time.perf_counter()
    report = embed_heldout(base.loaded.model, adapted.loaded.model, claims, corpus, args.store, config,
                           show_progress=True, base_embedder=base, model_embedder=adapted)
    tuning, held_out = split_by_text(claims, 0.5, args.claims_seed, lambda query: query.query)
    halves = {}
    for name, part in (("tuning", tuning), ("held_out", held_out)):
        ids = {query.id for query in part}
        values = {system: {qid: row[METRIC] for qid, row in rows.items() if qid in ids}
                  for system, rows in report.per_query.items()}
        halves[name] = paired_comparison(values["base embedder"], values["fine-tuned embedder"]).as_dict()
    return {"claims": len(claims), "halves": halves, "all_claims": report.as_dict(),
            "max_seq_length": lengths, "scoring_seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="BEIR folder (SciFact's train split)")
    parser.add_argument("--model", required=True, help="the adapted model's folder (outside git)")
    parser.add_argument("--store", default=str(RESULTS / "self-supervised-store"), help="index store")
    parser.add_argument("--train", action="store_true", help="train the model first (with the CLI)")
    parser.add_argument("--embed-only", choices=("base", "adapted"),
                        help="only embed the corpus with this model into the store's cache (to run beside another step)")
    parser.add_argument("--claims-seed", type=int, default=13, help="seed of the tuning / held-out claims")
    parser.add_argument("--out", default=str(RESULTS / "self_supervised.json"), help="the JSON results file")
    args = parser.parse_args()
    config = RagConfig(mode="dense", rerank_depth=0, embed_model=EMBED_MODEL, tracing=False)
    if args.embed_only:
        from rag_core.retrieve.pipeline import Pipeline

        documents = load_beir(args.beir, "train")[0]
        texts = Pipeline(config, Corpus.of(documents), Path(args.store)).index.indexed_texts()
        cached_embedder(EMBED_MODEL if args.embed_only == "base" else args.model, config,
                        Path(args.store)).embed_documents(texts)
        return
    results: dict[str, Any] = {"dataset": str(Path(args.beir).resolve()), "model": args.model,
                               "claims_seed": args.claims_seed}
    if args.train:  # else the model was trained elsewhere: its finetune.json (below) says how
        results["train_args"] = TRAIN_ARGS
        results["training_run"] = train(args)
    recorded = json.loads((Path(args.model) / "finetune.json").read_text())
    results["training"] = {key: recorded.get(key) for key in (
        "source", "golden_queries_used", "documents", "pseudo_queries_by_kind", "train_queries", "validation_queries",
        "steps", "best_step", "initial_validation_ndcg@10", "best_validation_ndcg@10", "train_seconds",
        "peak_memory_mb", "device", "precision", "curve")}
    documents, claims = load_beir(args.beir, "train")  # the claims score the models; training never read them
    results.update(score(args, Corpus.of(documents), claims, config))
    print(format_table(results))
    write_results(results, args.out)


def format_table(results: dict[str, Any]) -> str:
    training = results["training"]
    lines = [f"{Path(results['dataset']).name}: embedder adapted on corpus.jsonl alone "
             f"({training['train_queries']} pseudo-queries, {training['steps']} steps, "
             f"{training['train_seconds']:.0f} s of training, golden queries used: {training['golden_queries_used']})",
             f"dense {METRIC}, {results['claims']} claims split by seed {results['claims_seed']}", "",
             f"{'claims':<12}{'n':>5}{'MiniLM':>9}{'adapted':>9}{'gain':>9}{'95% CI':>20}{'p (t)':>9}{'p (boot)':>10}"]
    for name, row in results["halves"].items():
        interval = f"[{row['low']:+.4f}, {row['high']:+.4f}]"
        lines.append(f"{name:<12}{row['queries']:>5}{row['baseline']:>9.4f}{row['candidate']:>9.4f}"
                     f"{row['difference']:>+9.4f}{interval:>20}{row['p_ttest']:>9.3g}{row['p_bootstrap']:>10.3g}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
