"""``rag-pipeline repair --store DIR``: check every file of a store, and rebuild what is derived.

The work is ``rag_core.service.repair_indexes``: the checks of ``rag_core.retrieve.store_check`` (the
documents, Chroma's database, the embedding cache, dense manifests, ONNX exports), then the repair
every ingest also runs and a rebuild of the current settings' indexes from the stored documents, so
no input folder is read. ``--check`` only reports, and exits 1 when a file is damaged.
"""

from __future__ import annotations

import argparse

from rag_core.cli.common import EXIT_FAILURE, EXIT_OK, config_from_args, emit, store_from_args

NAME = "repair"
HELP = "check every store file and rebuild what is derived (no input folder needed)"
DESCRIPTION = ("Check every file of the store (registry and documents, chroma.sqlite3, cache.sqlite, dense "
               "manifests, ONNX exports) and repair the damaged ones: derived files are set aside and rebuilt "
               "from the stored documents, chunks and embedding cache (nothing is re-embedded) for the current "
               "settings. Documents whose stored file is damaged are dropped: ingest their folder again. "
               "--check only reports (exit 1 when something is damaged).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="only report what is damaged (exit 1 if anything is)")


def run(args: argparse.Namespace) -> int:
    from rag_core.service import repair_indexes

    config = config_from_args(args)
    store = store_from_args(args)
    report = repair_indexes(store, config, check_only=args.check, progress=not args.json)
    damaged = report["damaged"]
    lines = [f"Store {store}: " + (f"{len(damaged)} damaged file(s)" if damaged else "every file is intact")]
    lines += [f"  damaged: {line}" for line in damaged]
    if args.check:
        emit(args, report, "\n".join(lines))
        return EXIT_FAILURE if damaged else EXIT_OK
    if report.get("registry_rebuilt"):
        lines.append("Repaired: the registry was rebuilt from the intact document files "
                     "(the damaged one is kept as documents/registry.json.damaged)")
    if report.get("dropped_damaged"):
        lines.append(f"Dropped {len(report['dropped_damaged'])} document(s) whose stored file was damaged (ingest "
                     "their folder again): " + ", ".join(report["dropped_damaged"][:10]))
    lines += [f"  repaired: {line}" for line in report["repaired"]]
    lines.append(f"Rebuilt the indexes of the current settings: {report['documents']} document(s), "
                 f"{report['chunks']} chunks, {report['embedded']} embedded (the rest from the cache)")
    lines += [f"  still damaged: {line}" for line in report["remaining"]]
    emit(args, report, "\n".join(lines))
    return EXIT_FAILURE if report["remaining"] else EXIT_OK
