"""Issue 43 item 5: what a sweep does, before and after the store's names and the candidates cache's key
were derived from the settings' stage column, on the sample corpus.

Runs one small sweep (default ``benchmarks/settings_keys_sweep.yaml``: points that share candidates and
points that do not, page units, two re-ranked points) point by point in one process, in the sweep's
order, as one sweep worker does, with the code of two trees: BEFORE (a git worktree at ``--before``) and
AFTER (``--after``: a commit, or this checkout). Three runs: BEFORE on a new store, then BEFORE and AFTER
each on a copy of that store. It compares:

- the store's names (the chunking folder, each retriever's index and its cache key) of every point and
  of a change of every built-in setting up to ``candidates``, over the sample corpus: the same names
  mean that every store built before keeps its indexes;
- per point, AFTER against BEFORE on the copies: every metric but timings (quality, what the store built,
  vectors embedded, candidates reused, re-rank pairs scored and cache hits), which queries reused their
  candidates, and each query's final ranking (chunk ids);
- the sweep table: the points ranked on the sweep's primary metric, with their values; and the quality
  metrics of the copies against those of the new store (they must not depend on what was cached).
Exit 1 on any difference. Results: ``benchmarks/results/settings_keys_behaviour.json``.

    .venv/bin/python benchmarks/settings_keys_behaviour.py --before REF [--after REF] [--sweep FILE]

Left out: the notebooks and MLflow (the sweep's runner and its records: the table is made here with the
sweep's own ``comparison_table`` from the points' metrics, without bootstrap intervals).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TIMING = re.compile(r"seconds|_ms\b|latency|per_second|startup|load_|import_|throughput")
VALUES = {"mode": ["bm25", "dense", "page_bm25", "bm25,page_dense"], "embed_model": ["packaged:minilm"],
          "vector_store": ["qdrant:qdrant"], "metadata_pattern": ["(?P<company>[^_-]+)[_-]"]}


# --- the probe: runs inside one tree (its rag_core on PYTHONPATH) ---------------------------------
class StandInModel:
    """The configured embedding model as if loaded (its name and backend); words as its tokens."""

    def __init__(self, config: Any) -> None:
        self.name_used = config.embed_model  # what a chunker that embeds is keyed by (Index.embed_model_used)
        self.cache_name = f"{config.embed_model} [{config.embed_backend}]"

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def stored_name(retriever: Any, chunks: Any) -> str:
    """What a retriever's index is stored under, as both trees' code names it."""
    if hasattr(retriever, "page_set"):
        pages = retriever.page_set(chunks)
        return f"{pages.folder.name}/{stored_name(retriever._inner(), pages)}"
    if hasattr(retriever, "collection_name"):
        return f"{retriever.collection_name(chunks)}/{retriever.manifest_name(chunks)}"
    return retriever.cache_key(chunks)


def store_names(config: Any, corpus: Any, store: Path) -> dict[str, Any]:
    from rag_core.retrieve.index import Index
    from rag_core.retrieve.retrievers import RETRIEVERS, retriever_choices

    index = Index(store, corpus, config, embedder=StandInModel(config))
    names: dict[str, Any] = {"chunks": index.chunking_key}
    for choice in retriever_choices(config):
        chunks = index.retriever_chunks(choice.name) if hasattr(index, "retriever_chunks") else index.chunk_set
        retriever = RETRIEVERS.load(choice.name)(choice.name, config, index.resources)
        names[choice.name] = [stored_name(retriever, chunks), retriever.cache_key(chunks)]
    return names


def setting_changes() -> dict[str, Any]:
    """label -> config: a change of each built-in setting up to ``candidates``, its component chosen."""
    from rag_core.catalog import built_in_settings
    from rag_core.components import REGISTRIES
    from rag_core.config import ConfigError, RagConfig

    configs = {"default": RagConfig()}
    for setting in built_in_settings():
        if setting.stage in ("rerank", "answer", "evaluation"):
            continue
        kind, _, owner = setting.owner.partition(" ")
        base = {REGISTRIES[kind].setting: owner} if owner else {}
        values = VALUES.get(setting.name) or [c for c in setting.valid_choices() if c != setting.default][:3]
        if not values:
            values = [not setting.default] if setting.type is bool else [setting.default * 2 or 1] \
                if setting.type in (int, float) else []
        for value in values:
            try:
                configs[f"{setting.name}={value}"] = RagConfig.from_dict({**base, setting.name: value})
            except ConfigError:
                pass
    return configs


def point_record(point: Any, report: Any) -> dict[str, Any]:
    retrievals = report.retrievals
    metrics = {name: value for name, value in sorted(report.metrics.items()) if not TIMING.search(name)}
    metrics["index/bm25_built"] = float(report.metrics.get("index/bm25_seconds", 0.0) > 0)  # its time: whether built
    return {"label": point.label, "metrics": metrics,
            "reused": sorted(qid for qid, found in retrievals.items() if found.work.get("candidates_reused")),
            "rankings": {qid: [hit.chunk.id for hit in found.ranking] for qid, found in sorted(retrievals.items())}}


def probe(sweep: Path, store: Path, out: Path) -> None:
    from rag_core.evaluate.evaluator import evaluate_config
    from rag_core.evaluate.golden import load_golden
    from rag_core.ingest.corpus import Corpus
    from rag_core.ingest.files import read_documents
    from rag_core.workbench import load_sweep

    spec = load_sweep(sweep)
    points, _ = spec.points()
    corpus = Corpus.of(read_documents(spec.input_dir).documents)
    queries = load_golden(spec.golden, doc_ids=corpus.by_id)[: spec.max_queries]
    with tempfile.TemporaryDirectory() as names_store:
        configs = {f"point {point.number}": point.config for point in points} | setting_changes()
        names = {label: store_names(config, corpus, Path(names_store)) for label, config in configs.items()}
    runs = [point_record(point, evaluate_config(point.config, corpus, queries, store)) for point in points]
    out.write_text(json.dumps({"primary_metric": spec.primary_metric, "names": names, "points": runs,
                               "table": sweep_table(points, runs, spec.primary_metric)}, indent=1))


def sweep_table(points: list[Any], runs: list[dict[str, Any]], primary: str) -> list[dict[str, Any]]:
    """The sweep's comparison table (``comparison_table``: swept settings, metrics, best first) of the
    points as finished runs, every quality metric a column (no intervals: those need MLflow's records)."""
    import pandas as pd

    from rag_core.workbench.reports.compare import comparison_table
    from rag_core.workbench.tracking.tracker import RunStatus

    rows = [{**point.config.as_params(), **run["metrics"], "status": RunStatus.FINISHED, "run_id": run["label"]}
            for point, run in zip(points, runs)]
    metrics = sorted({name for run in runs for name in quality(run)})
    return json.loads(comparison_table(pd.DataFrame(rows), primary, metrics=metrics).to_json(orient="records"))


# --- the comparison: runs here -------------------------------------------------------------------
def tree_at(ref: str, folder: Path) -> Path:
    """A worktree of `ref` in `folder` ("." : this checkout)."""
    if ref == ".":
        return ROOT
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), ref], check=True,
                   capture_output=True)
    return folder


def run_probe(tree: Path, sweep: Path, store: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run([sys.executable, __file__, "--probe", str(out), "--store", str(store), "--sweep", str(sweep)],
                   check=True, env=env, cwd=tree)
    return json.loads(out.read_text())


def table(run: dict[str, Any]) -> list[tuple[str, float]]:
    """The sweep table's rows in short: (point, primary metric), best first."""
    return [(row["run_id"], row[run["primary_metric"]]) for row in run["table"]]


def quality(point: dict[str, Any]) -> dict[str, float]:
    """The metrics that measure the result (not what the store or the caches did)."""
    return {name: value for name, value in point["metrics"].items()
            if not name.startswith(("index/", "retrieval/candidates", "rerank/", "embed/", "sweep/"))}


def compare(fresh: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    differences = [f"store names: {label}" for label in before["names"]
                   if before["names"][label] != after["names"].get(label)]
    for old, new, first in zip(before["points"], after["points"], fresh["points"]):
        for part in ("metrics", "reused", "rankings"):
            if old[part] != new[part]:
                changed = [key for key in old[part] if old[part][key] != new[part].get(key)] \
                    if isinstance(old[part], dict) else old[part]
                differences.append(f"{old['label']}: {part} ({', '.join(map(str, changed))[:200]})")
        if quality(first) != quality(new):
            differences.append(f"{old['label']}: quality on the new store")
    if before["table"] != after["table"]:
        differences.append("sweep table")
    return differences


def summary(fresh: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point: primary metric, candidates reused, re-rank cache hits, what the store built."""
    metric = before["primary_metric"]
    rows = []
    for first, old, new in zip(fresh["points"], before["points"], after["points"]):
        row = {"point": new["label"], metric: new["metrics"].get(metric)}
        for name in ("retrieval/candidates_reused", "rerank/cache_hits", "index/chunkings_built", "index/embedded",
                     "index/upserted", "index/bm25_built"):
            row[name] = [run["metrics"].get(name) for run in (first, old, new)]  # new store, BEFORE, AFTER
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="the commit of the keys of before")
    parser.add_argument("--after", default=".", help="the commit of the derived keys ('.': this checkout)")
    parser.add_argument("--sweep", type=Path, default=ROOT / "benchmarks" / "settings_keys_sweep.yaml")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        probe(args.sweep.resolve(), args.store, args.probe)
        return 0
    if not args.before:
        parser.error("--before REF is needed (the last commit with the keys of before)")
    return run(args.before, args.after, args.sweep.resolve())


def run(before_ref: str, after_ref: str, sweep: Path) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from results_file import RESULTS, measured

    with tempfile.TemporaryDirectory(prefix="settings-keys-") as work:
        work_dir = Path(work)
        trees = {"before": tree_at(before_ref, work_dir / "before"), "after": tree_at(after_ref, work_dir / "after")}
        try:
            fresh = run_probe(trees["before"], sweep, work_dir / "store", work_dir / "fresh.json")
            for copy in ("before", "after"):
                shutil.copytree(work_dir / "store", work_dir / f"store-{copy}")
            before = run_probe(trees["before"], sweep, work_dir / "store-before", work_dir / "before.json")
            after = run_probe(trees["after"], sweep, work_dir / "store-after", work_dir / "after.json")
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    differences = compare(fresh, before, after)
    rows = summary(fresh, before, after)
    print(f"{len(before['names'])} configurations' store names: "
          f"{'the same' if not any('store names' in d for d in differences) else 'DIFFERENT'}")
    print(" | ".join(rows[0]) + "   (lists: new store, BEFORE on its copy, AFTER on its copy)")
    for row in rows:
        print(" | ".join(str(value) for value in row.values()))
    print(f"sweep table ({len(after['table'])} rows x {len(after['table'][0])} columns): "
          f"{'the same' if before['table'] == after['table'] else 'DIFFERENT'}; best first:")
    for rank, (point, value) in enumerate(table(after), start=1):
        print(f"  {rank}. {point}: {value:.3f}")
    print("identical" if not differences else f"differences: {'; '.join(differences)}")
    (RESULTS / "settings_keys_behaviour.json").write_text(json.dumps({
        "measured": measured(), "before": before_ref, "after": after_ref, "sweep": str(sweep.relative_to(ROOT)),
        "store_names_compared": len(before["names"]), "points": rows, "table": after["table"],
        "differences": differences, "identical": not differences}, indent=1) + "\n")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
