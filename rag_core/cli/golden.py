"""``rag-pipeline golden``: golden sets as versioned MLflow evaluation datasets, and back to JSONL.

- ``import FILE --name NAME``: a JSONL golden set (checked as evaluation reads it) becomes a new version
  of MLflow dataset NAME; with ``--append``, the newest version's lines first, then the file's lines whose
  questions are not there yet.
- ``export mlflow:NAME[@VERSION] --out FILE``: a version as a JSONL golden set (a new file: an existing
  one is refused), the same bytes as the file it was imported from.
- ``versions NAME``: each version with its number, lines, origin and dataset id, then the unfinished writes
  (being written, or killed before they completed: no version, never read).
Versions, records, the name rule and what concurrent and interrupted writes do are
``rag_core.workbench.tracking.golden_datasets``'s; ``eval``, ``sweep`` and ``gate`` read a version with
``--golden mlflow:NAME[@VERSION]``.
Left out: deleting versions (the UI's Datasets tab deletes a dataset).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rag_core.cli.common import EXIT_OK, emit

NAME = "golden"
HELP = "golden sets as versioned MLflow evaluation datasets: import a JSONL file, export a version, list versions"
DESCRIPTION = (
    "import: a JSONL golden set becomes a new version of MLflow evaluation dataset --name (shown in the experiment's "
    "Datasets tab; with --append, added to the newest version's lines). export: a version (mlflow:NAME or "
    "mlflow:NAME@VERSION) written as a JSONL golden set, line for line as it was imported. versions: the versions of "
    "NAME. eval, sweep and gate read a version with --golden mlflow:NAME[@VERSION] and record it as the run's dataset.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["import", "export", "versions"],
                        help="import FILE --name NAME | export mlflow:NAME[@VERSION] --out FILE | versions NAME")
    parser.add_argument("target", metavar="FILE|REF|NAME",
                        help="import: the JSONL file; export: mlflow:NAME[@VERSION]; versions: the dataset name")
    parser.add_argument("--name", metavar="NAME", help="import: the MLflow dataset to add a version to (letters, "
                                                       "digits and '_', with spaces, '.' and '-' between them)")
    parser.add_argument("--append", action="store_true",
                        help="import: keep the newest version's lines and add the file's new questions after them")
    parser.add_argument("--experiment", metavar="NAME",
                        help="import: also list the dataset in this MLflow experiment's Datasets tab")
    parser.add_argument("--out", metavar="FILE", help="export: the JSONL file to write (must not exist)")


def run(args: argparse.Namespace) -> int:
    from rag_core.errors import BadInput
    from rag_core.evaluate.golden_records import check_dataset_name

    if args.action == "import":
        if not args.name:
            raise BadInput("golden import needs --name NAME (the MLflow dataset)")
        check_dataset_name(args.name)  # before the file is read
        payload = _import(Path(args.target), args.name, args.append, args.experiment)
        text = (f"{payload['lines']} line(s) -> {payload['ref']} (dataset {payload['dataset_id']}; "
                f"{payload['added']} from {args.target})")
    elif args.action == "export":
        if not args.out:
            raise BadInput("golden export needs --out FILE")
        payload = _export(args.target, Path(args.out))
        text = f"{payload['ref']}: {payload['lines']} line(s) -> {payload['out']}"
    else:
        from rag_core.workbench.tracking.golden_datasets import listing

        found = listing(args.target)
        if not found.versions and not found.unfinished:
            raise BadInput(f"no golden dataset {args.target!r} (golden import FILE --name NAME makes one)")
        payload = {"name": args.target, "versions": [version.as_json() for version in found.versions],
                   "unfinished": [write.as_json() for write in found.unfinished]}
        text = "\n".join([*(f"{item['ref']:<30} {item['lines']:>5} line(s)  {item['origin']}  ({item['dataset_id']})"
                             for item in payload["versions"]),
                           *(f"{'unfinished, no version':<30} {item['lines']:>5} line(s)  {item['origin']}  "
                             f"({item['dataset_id']}): being written, or interrupted; never read"
                             for item in payload["unfinished"])])
    emit(args, payload, text)
    return EXIT_OK


def _import(path: Path, name: str, append: bool, experiment: str | None) -> dict[str, Any]:
    from rag_core.evaluate.golden import GoldenSetError, load_golden
    from rag_core.jsonl import read_jsonl
    from rag_core.workbench.tracking.golden_datasets import write_version
    from rag_core.workbench.tracking.tracker import Tracker

    load_golden(path)  # checked as evaluation reads it (GoldenSetError: exit 2)
    lines = [record for _, _, record in read_jsonl(path, GoldenSetError)]
    experiments = [Tracker.at().experiment_id(experiment)] if experiment else []
    written = write_version(name, lines, origin=f"import {path}", append=append, experiment_ids=experiments)
    return {**written.version.as_json(), "added": written.added, "file": str(path)}


def _export(ref: str, out: Path) -> dict[str, Any]:
    from rag_core.errors import BadInput
    from rag_core.evaluate.golden_records import parse_dataset_ref
    from rag_core.workbench.tracking.golden_datasets import read_lines, resolve
    from rag_core.writes import check_output_file, jsonl_text, not_unicode, write_atomic

    check_output_file(out, "--out")  # a folder or a path under a file: before MLflow is read
    if out.exists():
        raise BadInput(f"{out} exists: golden export writes a new file (name another --out)")
    version = resolve(parse_dataset_ref(ref))
    lines = read_lines(version)
    for number, line in enumerate(lines, start=1):  # stored before imports refused them: no UTF-8 file holds it
        if problem := not_unicode(line):
            raise BadInput(f"{version.ref}:{number}: {problem}; this version cannot be written as UTF-8 (import a "
                           "corrected file as a new version)")
    write_atomic(out, jsonl_text(lines))  # whole or not at all
    return {**version.as_json(), "out": str(out)}
