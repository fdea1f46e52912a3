"""Issue 43 item 5: the sweep's reuse keys before and after they were derived from the settings' stages.

For every point of the given sweep files (default: experiments/grid.yaml and experiments/holdout.yaml),
computes the hand-written keys of before (copied here from sweep_file.py, cost.py and search/run.py as
they were at 819bcfe) and the derived ones (``rag_core.components.stages``), and compares what decides
behaviour: which points share each key (the groupings: chunkings, builds, candidate groups, re-rank
locks, dense indexes to embed), the order the points run in, and the cost estimate's counts (build
configurations, chunkings, models). Exit 1 on any difference, 0 when all agree.

    .venv/bin/python benchmarks/settings_keys_compare.py [SWEEP.yaml ...]

Left out: the store's names and the candidates cache's key, and the metrics themselves:
``benchmarks/settings_keys_behaviour.py`` runs a small sweep with the code of before and of after and
compares them (store names, metrics, cache hits, the sweep table).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from rag_core.components import SETTINGS, stages
from rag_core.config import ConfigError, load_config
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.retrieve.rerank import RERANKERS
from rag_core.retrieve.retrievers import RETRIEVERS, retriever_choices
from rag_core.workbench.execution.search_run import NotebookTrials
from rag_core.workbench.plans import cost
from rag_core.workbench.plans.sweep_file import SweepPoint, load_sweep

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = ("experiments/grid.yaml", "experiments/holdout.yaml")

# --- the hand-written keys of before (819bcfe) ----------------------------------------------------
OLD_BUILD_SETTINGS = ("chunk_size", "overlap", "per_page", "chunk_unit", "child_size", "chunk_context", "extract_tables",
                      "table_text", "metadata_pattern", "embed_model", "embed_backend", "vector_store", "dense_pooling",
                      "dense_stride", "mode")


def chunker_key(cfg: Any) -> dict[str, Any]:
    """``rag_core.ingest.chunkers.chunker_key`` as it was (a chunker's own settings now join by stage)."""
    key: dict[str, Any] = {"chunk_size": cfg.chunk_size, "overlap": cfg.overlap, "per_page": cfg.per_page}
    if cfg.chunk_unit == "tokens":
        key.update(chunk_unit="tokens", tokenizer=cfg.embed_model)
    if cfg.chunker != "recursive":
        key["chunker"] = cfg.chunker
        key.update((setting.name, getattr(cfg, setting.name)) for setting in CHUNKERS.get(cfg.chunker).settings)
    return key


def old_chunking_key(cfg: Any) -> tuple:
    extra = {key: value for key, value in chunker_key(cfg).items() if key not in ("chunk_size", "overlap", "per_page")}
    return (cfg.chunk_size, cfg.overlap, cfg.per_page, *sorted((key, str(value)) for key, value in extra.items()))


def old_build_key(cfg: Any) -> tuple:
    retrievers = tuple(RETRIEVERS.get(choice.name).key(cfg) for choice in retriever_choices(cfg))
    ingest = (cfg.extract_tables, cfg.table_text, cfg.metadata_pattern, cfg.chunk_context, cfg.child_size)
    return (old_chunking_key(cfg), retrievers, ingest)


def old_candidates_key(cfg: Any) -> tuple:
    return old_build_key(cfg) + (cfg.mode, cfg.retrieve_depth, cfg.rrf_k, cfg.route_docs, cfg.route_when)


def old_rerank_key(cfg: Any) -> tuple | None:
    return (old_chunking_key(cfg), RERANKERS.get(cfg.reranker).key(cfg)) if cfg.rerank_depth > 0 else None


def old_order_key(cfg: Any) -> tuple:
    chunking = old_chunking_key(cfg)
    return chunking[:3] + (str(chunking[3:]), str(old_candidates_key(cfg)[1:]))


def old_cost_chunking(cfg: Any) -> tuple:
    return (cfg.chunk_size, cfg.overlap, cfg.per_page, cfg.child_size, cfg.extract_tables, cfg.table_text,
            cfg.metadata_pattern)


def old_dense_key(cfg: Any) -> tuple:
    return tuple(getattr(cfg, name) for name in OLD_BUILD_SETTINGS if name != "mode")


def old_search_key(cfg: Any) -> tuple:
    return (tuple(sorted(chunker_key(cfg).items())), cfg.child_size, cfg.chunk_context, cfg.extract_tables,
            cfg.table_text, cfg.metadata_pattern, cfg.embed_model, cfg.embed_backend, cfg.vector_store,
            cfg.dense_pooling == "first", cfg.dense_stride)


def old_build_configs(spec: Any, extra: tuple[str, ...] = ()) -> list[Any]:
    """The enumeration with the old list (and `extra` settings, the named fixes, added to it)."""
    names = OLD_BUILD_SETTINGS + tuple(name for name in extra if name in SETTINGS)  # a plugin's: once loaded
    return cost._build_configs(spec, names) or []


NAMED = {"run order": "within a chunking, points now run in the grid's order of their candidate groups, as the "
                      "sort's comment always said; before, in the order of the hand-written key's text (hybrid before "
                      "dense, as ' ' sorts before ')'). Same groups, same points, same metrics"}
# The bug fixes: settings that change a key's results but were missing from its hand-written list. A
# difference is accepted only where the old key with these settings added groups exactly as the new one.
FIXES = {
    # (llm_provider, llm_model: the LLM that writes multi_query's and HyDE's queries, which the stage keys
    # also missed until a used setting counted at its user's stage)
    "candidate groups": ("fusion", "fusion_norm", "fusion_weights", "query_expansion", "rm3_docs", "rm3_terms",
                         "rm3_weight", "multi_query_n", "doc_evidence", "doc_evidence_weight", "doc_evidence_docs",
                         "llm_provider", "llm_model"),
    "chunkings (cost)": ("plugins", "chunk_unit", "chunker", "chunk_context"),
    # the dense index of a plugin chunker's chunks is its own (the old list missed chunker and its settings)
    "dense indexes (cost)": ("plugins", "chunker", "sentence_overlap", "model_fallback"),
}
FIXES["cost"] = tuple(dict.fromkeys(FIXES["chunkings (cost)"] + FIXES["dense indexes (cost)"]))


def fixed(name: str, old: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`old` with the named fixes of `name` added (those that apply to the config)."""
    def key(cfg: Any) -> Any:
        applying = stages.applying(cfg)
        return (old(cfg), tuple((setting, getattr(cfg, setting)) for setting in FIXES.get(name, ())
                                if setting in applying))
    return key


# --- the comparison -------------------------------------------------------------------------------
def groups(points: Iterable[SweepPoint], key: Callable[[SweepPoint], Any]) -> set[frozenset[int]]:
    """The partition of the points (by number) that `key` makes."""
    found: dict[str, set[int]] = {}
    for point in points:
        found.setdefault(repr(key(point)), set()).add(point.number)
    return {frozenset(numbers) for numbers in found.values()}


def compare(path: Path) -> list[str]:
    try:
        spec = load_sweep(path)
        points, _ = spec.points()
    except ConfigError as exc:
        print(f"  skipped: {exc}")
        return []
    differences = []
    checks = {
        "chunkings": (old_chunking_key, lambda p: p.chunking_key),
        "builds": (old_build_key, lambda p: p.build_key),
        "candidate groups": (old_candidates_key, lambda p: p.candidates_key),
        "re-rank locks": (old_rerank_key, lambda p: p.rerank_key),
        "dense indexes (cost)": (old_dense_key, lambda p: cost.dense_index_key(p.config)),
        "dense indexes (search)": (old_search_key, lambda p: cost.dense_index_key(p.config)),
        "chunkings (cost)": (old_cost_chunking, lambda p: cost._chunking(p.config)),
    }
    for name, (old, new) in checks.items():
        before, after = groups(points, lambda p: old(p.config)), groups(points, new)
        if before == after:
            print(f"  {name}: {len(before)} groups before and after, same")
            continue
        with_fixes = groups(points, lambda p: fixed(name, old)(p.config))
        verdict = "the named fixes" if with_fixes == after else "DIFFERENT"
        print(f"  {name}: {len(before)} groups before, {len(after)} after: {verdict} ({', '.join(FIXES.get(name, ()))})")
        if with_fixes != after:
            differences.append(f"{path.name}: {name}")
    old_order = [p.number for p in sorted(points, key=lambda p: (old_order_key(p.config),))]
    new_order = [p.number for p in points]
    print(f"  run order: {'same' if old_order == new_order else 'DIFFERENT'} ({new_order})")
    if old_order != new_order:  # named (NAMED), not a failure: groups and hits are compared above
        print(f"    named difference: {NAMED['run order']} (before: {old_order})")
    old_configs, new_configs = old_build_configs(spec), cost._build_configs(spec) or []
    counts = {"build configurations": (len(old_configs), len(new_configs)),
              "chunkings": (len({old_cost_chunking(c) for c in old_configs}), len({cost._chunking(c) for c in new_configs})),
              "models": (len({c.embed_model for c in old_configs}), len({c.embed_model for c in new_configs})),
              "dense indexes": (len({old_dense_key(c) for c in old_configs}), len({cost.dense_index_key(c) for c in new_configs}))}
    fixed_configs = old_build_configs(spec, FIXES["cost"])
    with_fixes = {"build configurations": len(fixed_configs),
                  "chunkings": len({fixed("cost", old_cost_chunking)(c) for c in fixed_configs}),
                  "models": len({c.embed_model for c in fixed_configs}),
                  "dense indexes": len({fixed("cost", old_dense_key)(c) for c in fixed_configs})}
    for name, (before, after) in counts.items():
        verdict = "same" if before == after else "the named fixes" if with_fixes[name] == after else "DIFFERENT"
        print(f"  cost estimate {name}: {before} before, {after} after, {verdict}")
        if verdict == "DIFFERENT":
            differences.append(f"{path.name}: cost {name}")
    return differences


def main(argv: list[str]) -> int:
    files = [Path(arg) for arg in argv] or [ROOT / name for name in DEFAULT_FILES]
    differences = []
    for path in files:
        print(path)
        differences += compare(path)
    print("all keys agree" if not differences else f"differences: {'; '.join(differences)}")
    return 1 if differences else 0


if __name__ == "__main__":
    assert NotebookTrials  # execution/search_run.py's key is cost.dense_index_key now
    sys.exit(main(sys.argv[1:]))
