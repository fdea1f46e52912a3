"""Does a re-ranker earn its place (issue 30, item 4)? For each corpus measurable here, its shipped first
stage with re-ranking off, then each re-ranker alone (``rerank_depth`` N, ``rerank_fusion: none``) and fused
with the first stage (``rerank_fusion: rrf``); per-query metrics from ``rag-pipeline eval --per-query``, each
mean with its 95% bootstrap interval (``rag_core.workbench.statistics.intervals``), each point against
re-ranking off by a paired comparison (``rag_core.finetune.significance.paired_comparison``: mean
difference, its bootstrap interval, paired t-test p), then the sweep's selection rules
(``rag_core.workbench.statistics.selection.select``, ``max`` and ``one_se``) over the points of a corpus
decide whether re-ranking is on.

Corpora and first stages: ``sample`` (data/documents, data/golden/golden.jsonl; the defaults),
``filings`` (FinanceBench dev, ``experiments/filings-best.yaml`` with ``mode: bm25``: its dense windows of the
current chunk text were in no store here and did not fit the time), ``scifact`` (SciFact's train split,
``docs/self-supervised.md``'s first stage: dense, packaged MiniLM, ``dense_pooling: first``; scored on the
*held-out* half of its claims, split as ``benchmarks/self_supervised.py`` splits them: ``split_by_text``
share 0.5, seed 13; the SciFact-trained re-ranker trains on the other half only).
Re-rankers: the packaged default (``cross-encoder/ms-marco-MiniLM-L6-v2``; when it cannot be loaded, the
reason is recorded and no figure is given: the random-head stand-in is never a quality figure), a
cross-encoder trained on SciFact's tuning claims (``--scifact-trained DIR``) and, per corpus, one trained
self-supervised on that corpus's documents (``--self-supervised CORPUS=DIR``). ``--train`` first runs the
``rag-pipeline finetune reranker`` commands of ``TRAINING`` into ``--work``/models (timed, wall and CPU).

Every eval is a subprocess (as a user runs it); a point whose per-query CSV is in ``--work`` is not run again.
The points of a corpus are compared on the queries they all have (a point scored with a smaller ``--max-claims``
restricts the others to its claims, the first N held-out ones).
Usage: python benchmarks/rerank_earns.py --work /tmp/rre [--train] [--scifact-trained DIR]
       [--self-supervised sample=DIR ...] [--store CORPUS=DIR ...] [--max-claims N] [--corpora sample,filings,scifact]
Left out: several training seeds; longer training (the budget was about 45 CPU-minutes for all models).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import RESULTS, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"
FILINGS = SHARED / "financebench-dev"
SCIFACT = SHARED / "scifact-train"
DEPTH = 20  # rerank_depth: the default
CLAIMS_SEED = 13  # benchmarks/self_supervised.py's split of SciFact's claims
PACKAGED = "cross-encoder/ms-marco-MiniLM-L6-v2"
CORPORA: dict[str, dict[str, Any]] = {
    "sample": {"config": None, "metrics": ("page/recall@5", "page/ndcg@10"), "primary": "page/ndcg@10"},
    # filings-best.yaml's chunking and document evidence with its BM25 retriever alone: its dense windows of the
    # current chunk text were in no store here, and embedding them (about 11,700 windows) did not fit the time
    "filings": {"config": ROOT / "experiments" / "filings-best.yaml", "metrics": ("page/recall@5", "page/ndcg@10"),
                "primary": "page/recall@5", "settings": ["--mode", "bm25"]},
    # docs/self-supervised.md's first stage: exact dense search with the packaged MiniLM, each abstract's first
    # 256 tokens (the store's embeddings of that benchmark are reused; the defaults' windows would embed 10,007)
    "scifact": {"config": None, "metrics": ("doc/ndcg@10",), "primary": "doc/ndcg@10",
                "settings": ["--mode", "dense", "--dense-pooling", "first", "--embed-model", "packaged:minilm"]},
}
# The training recipe, fixed beforehand by cost (about 45 CPU-minutes for all four on 2 shared cores):
# the golden-set re-ranker's learning rate (2e-4, docs/fine-tuning.md), 4 query groups of one positive and
# 3 BM25 negatives per step, 128 tokens, validation on 20 (pseudo-)queries x 10 candidates.
COMMON = ["--learning-rate", "2e-4", "--max-length", "128", "--batch-size", "4", "--negatives", "3",
          "--validation-depth", "10", "--no-mlflow", "--json"]
SS = ["--max-validation", "20"]  # validation pseudo-queries (golden-set training validates on --validation-share)
TRAINING = {  # label -> (corpus whose store it uses, arguments after `finetune reranker`)
    "ss-sample": ("sample", ["--self-supervised", "--input", str(ROOT / "data" / "documents"),
                             "--max-pseudo-queries", "400", "--max-steps", "20", "--eval-steps", "20", *SS]),
    "sup-scifact": ("scifact", ["--beir", "{tune}", "--split", "train", "--max-steps", "15", "--eval-steps", "15",
                              "--validation-share", "0.05"]),
    "ss-scifact": ("scifact", ["--self-supervised", "--beir", str(SCIFACT), "--max-pseudo-queries", "1200",
                               "--max-steps", "12", "--eval-steps", "12", *SS]),
    "ss-filings": ("filings", ["--self-supervised", "--input", str(FILINGS / "documents"), "--config",
                               str(ROOT / "experiments" / "filings-best.yaml"), "--max-pseudo-queries", "1200",
                               "--max-steps", "12", "--eval-steps", "12", *SS]),
}
SELF_SUPERVISED = {"ss-sample": "sample", "ss-scifact": "scifact", "ss-filings": "filings"}


def scifact_halves(work: Path) -> dict[str, Path]:
    """BEIR folders of SciFact's tuning and held-out claims (corpus and queries linked, qrels filtered)."""
    from rag_core.evaluate.beir import load_beir
    from rag_core.finetune.data import split_by_text

    claims = load_beir(SCIFACT, "train")[1]
    halves = dict(zip(("tune", "held"), split_by_text(claims, 0.5, CLAIMS_SEED, lambda query: query.query)))
    rows = (SCIFACT / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()
    folders = {}
    for name, part in halves.items():
        ids, folder = {query.id for query in part}, work / f"scifact-{name}"
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        for file in ("corpus.jsonl", "queries.jsonl"):
            if not (folder / file).exists():
                (folder / file).symlink_to(SCIFACT / file)
        kept = [rows[0], *(row for row in rows[1:] if row.split("\t")[0] in ids)]
        (folder / "qrels" / "train.tsv").write_text("\n".join(kept) + "\n", encoding="utf-8")
        folders[name] = folder
    return folders


def timed(command: list[str], out: Path) -> dict[str, Any]:
    """Run `command` at nice 10 (stdout to `out`, stderr beside it); wall and CPU seconds of the child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with out.open("w") as stdout, out.with_suffix(".err").open("w") as stderr:
        done = subprocess.run(["nice", "-n", "10", *command], stdout=stdout, stderr=stderr, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"error: {' '.join(command[2:5])} failed (exit {done.returncode}); "
                         f"see {out.with_suffix('.err')}")
    return {"wall_seconds": round(time.perf_counter() - started, 1),
            "cpu_seconds": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1)}


def train(work: Path, stores: dict[str, str], folders: dict[str, Path]) -> dict[str, dict[str, Any]]:
    runs = {}
    for label, (corpus, arguments) in TRAINING.items():
        model = work / "models" / label
        arguments = [argument.replace("{tune}", str(folders["tune"])) for argument in arguments]
        command = [sys.executable, "-m", "rag_core.cli", "finetune", "reranker", *arguments, "--out", str(model),
                   *COMMON, *(["--store", stores[corpus]] if corpus in stores else [])]
        model.parent.mkdir(parents=True, exist_ok=True)
        runs[label] = {"command": "rag-pipeline " + " ".join(command[3:]), **timed(command, model.with_suffix(".json"))}
    return runs


def eval_arguments(corpus: str, folders: dict[str, Path], max_claims: int) -> list[str]:
    if corpus == "sample":
        return ["--golden", str(ROOT / "data" / "golden" / "golden.jsonl"), "--input", str(ROOT / "data" / "documents")]
    if corpus == "filings":
        return ["--golden", str(FILINGS / "golden.jsonl"), "--input", str(FILINGS / "documents")]
    return ["--beir", str(folders["held"]), "--split", "train",
            *(["--max-queries", str(max_claims)] if max_claims else [])]


def points(corpus: str, models: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(label, settings) of the corpus's points in table order: off, then each model alone and fused."""
    found = [("off", ["--rerank-depth", "0"])]
    for label, model in models.items():
        if SELF_SUPERVISED.get(label, corpus) != corpus:
            continue  # a self-supervised model is scored on the corpus it adapted to
        for fusion in ("none", "rrf"):
            found.append((f"{label} {'alone' if fusion == 'none' else '+ rrf'}",
                          ["--rerank-depth", str(DEPTH), "--rerank-model", model, "--rerank-fusion", fusion]))
    return found


def run_point(corpus: str, label: str, settings: list[str], work: Path, stores: dict[str, str],
              folders: dict[str, Path], max_claims: int) -> dict[str, Any]:
    name = f"{corpus}-{label.replace(' + ', '-').replace(' ', '-')}"
    per_query, out = work / "eval" / f"{name}.csv", work / "eval" / f"{name}.json"
    cost: dict[str, Any] = {"cached": True}
    if not (per_query.is_file() and out.is_file()):
        out.parent.mkdir(parents=True, exist_ok=True)
        config = CORPORA[corpus]["config"]
        command = [sys.executable, "-m", "rag_core.cli", "eval", *eval_arguments(corpus, folders, max_claims),
                   *(["--config", str(config)] if config else []),
                   *(["--store", stores[corpus]] if corpus in stores else []),
                   *CORPORA[corpus].get("settings", []), *settings,
                   "--no-mlflow", "--json", "--per-query", str(per_query)]
        cost = timed(command, out)
    params = json.loads(out.read_text())["params"]
    used = params.get("rerank_model_used", "")
    if label != "off" and (not used or used.startswith("none")):
        raise SystemExit(f"error: {corpus} {label}: the re-ranker did not run (rerank_model_used = {used!r})")
    with per_query.open(encoding="utf-8") as rows:
        table = list(csv.DictReader(rows))
    values = {metric: {row["query_id"]: float(row[metric]) for row in table} for metric in CORPORA[corpus]["metrics"]}
    latency = sorted(float(row["latency/total_ms"]) for row in table)
    return {"settings": " ".join(settings), "rerank_model_used": used or "none", "values": values,
            "latency_p50_ms": latency[len(latency) // 2], **cost}


def summarise(corpus: str, found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Intervals, paired comparisons against off, and both selection rules on the corpus's primary metric."""
    import pandas as pd

    from rag_core.finetune.significance import paired_comparison
    from rag_core.workbench.statistics.intervals import bootstrap_interval
    from rag_core.workbench.statistics.selection import Cost, select

    common = set.intersection(*(set(point["values"][CORPORA[corpus]["primary"]]) for point in found.values()))
    found = {label: {**point, "values": {metric: {query: value for query, value in values.items() if query in common}
                                         for metric, values in point["values"].items()}}
             for label, point in found.items()}  # the queries every point has (a point run on fewer claims)
    rows = []
    for label, point in found.items():
        row: dict[str, Any] = {"point": label, "latency_p50_ms": round(point["latency_p50_ms"], 1)}
        for metric, values in point["values"].items():
            interval = bootstrap_interval(list(values.values()))
            row[metric] = [round(interval.estimate, 4), round(interval.low, 4), round(interval.high, 4)]
            if label != "off":
                test = paired_comparison(found["off"]["values"][metric], values)
                row[f"{metric} vs off"] = {"difference": round(test.difference, 4), "low": round(test.low, 4),
                                           "high": round(test.high, 4), "p_ttest": round(test.p_ttest, 4)}
        rows.append(row)
    primary = CORPORA[corpus]["primary"]
    scores = pd.DataFrame({label: pd.Series(point["values"][primary]) for label, point in found.items()})
    costs = {label: Cost(point["latency_p50_ms"], 0 if label == "off" else 1 + ("rrf" in label))
             for label, point in found.items()}
    rules = {rule: select(scores, rule, costs) for rule in ("max", "one_se")}
    return {"queries": len(scores), "primary": primary, "rows": rows,
            "selection": {rule: {**chosen.as_dict(), "means": {k: round(v, 4) for k, v in chosen.means.items()}}
                          for rule, chosen in rules.items()},
            "rerank_on": {rule: chosen.chosen != "off" for rule, chosen in rules.items()}}


def packaged_status() -> str:
    """Why the packaged cross-encoder cannot run here, or 'available'."""
    from rag_core.config import RagConfig
    from rag_core.retrieve.rerank.base import rerank_unavailable

    reason = rerank_unavailable(RagConfig(rerank_model=PACKAGED))
    return "available" if reason is None else f"not measurable: {reason}"


def format_tables(results: dict[str, Any]) -> str:
    lines = [f"packaged {PACKAGED}: {results['packaged']}"] if "packaged" in results else []
    for corpus, summary in results["corpora"].items():
        metrics = CORPORA[corpus]["metrics"]
        lines += ["", f"{corpus}: {summary['queries']} queries; mean [95% bootstrap]; vs off: difference "
                      f"[95% bootstrap] (paired t-test p)"]
        for row in summary["rows"]:
            cells = [f"{row['point']:<22}"]
            for metric in metrics:
                mean, low, high = row[metric]
                cell = f"{metric} {mean:.3f} [{low:.3f}, {high:.3f}]"
                if f"{metric} vs off" in row:
                    test = row[f"{metric} vs off"]
                    cell += (f" {test['difference']:+.3f} [{test['low']:+.3f}, {test['high']:+.3f}]"
                             f" (p={test['p_ttest']:.3g})")
                cells.append(cell)
            lines.append("  ".join(cells) + f"  p50 {row['latency_p50_ms']:.0f} ms")
        for rule, chosen in summary["selection"].items():
            lines.append(f"select: {rule} on {summary['primary']} -> {chosen['chosen']} "
                         f"(re-ranking {'on' if summary['rerank_on'][rule] else 'off'})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="models, split folders and per-query files")
    parser.add_argument("--train", action="store_true", help="train the re-rankers of TRAINING first")
    parser.add_argument("--scifact-trained", help="a cross-encoder trained on SciFact's tuning claims")
    parser.add_argument("--self-supervised", action="append", default=[], metavar="CORPUS=DIR",
                        help="a re-ranker trained self-supervised on CORPUS's documents")
    parser.add_argument("--store", action="append", default=[], metavar="CORPUS=DIR", help="index store per corpus")
    parser.add_argument("--corpora", default="sample,filings,scifact")
    parser.add_argument("--max-claims", type=int, default=0, help="score only the first N held-out claims (0 = all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "rerank_earns.json")
    args = parser.parse_args(argv)
    corpora = [name for name in args.corpora.split(",") if name]
    unknown = [name for name in corpora if name not in CORPORA]
    pairs = [item.split("=", 1) for item in (*args.self_supervised, *args.store)]
    if unknown or any(len(pair) != 2 or pair[0] not in CORPORA for pair in pairs):
        print(f"error: corpora are {', '.join(CORPORA)}; --self-supervised and --store take CORPUS=DIR",
              file=sys.stderr)
        return 2
    stores = dict(item.split("=", 1) for item in args.store)
    folders = scifact_halves(args.work)
    results: dict[str, Any] = {"packaged": packaged_status(), "rerank_depth": DEPTH, "claims_seed": CLAIMS_SEED,
                               "max_claims": args.max_claims, "training_args": COMMON, "corpora": {}}
    print(f"packaged {PACKAGED}: {results['packaged']}", flush=True)
    models = {}
    if args.train:
        results["training_runs"] = train(args.work, stores, folders)
        models = {label: str(args.work / "models" / label) for label in TRAINING}
    if args.scifact_trained:
        models["sup-scifact"] = args.scifact_trained
    models.update({f"ss-{corpus}": folder for corpus, folder in (item.split("=", 1) for item in args.self_supervised)})
    results["models"] = {}
    for label, folder in models.items():
        recorded = json.loads((Path(folder) / "finetune.json").read_text())
        results["models"][label] = {"folder": folder, **{key: recorded.get(key) for key in (
            "source", "golden_queries_used", "documents", "train_queries", "validation_queries", "steps", "best_step",
            "initial_validation_ndcg@10", "best_validation_ndcg@10", "train_seconds", "peak_memory_mb")}}
    for corpus in corpora:
        found = {label: run_point(corpus, label, settings, args.work, stores, folders, args.max_claims)
                 for label, settings in points(corpus, models)}
        results["corpora"][corpus] = {**summarise(corpus, found),
                                      "cost": {label: {k: point[k] for k in ("wall_seconds", "cpu_seconds", "cached")
                                                       if k in point} for label, point in found.items()}}
        print(format_tables({"corpora": {corpus: results["corpora"][corpus]}}), flush=True)
    write_results(results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
