"""The package's layers point one way, every subcommand registers the same way, and each error type
maps to the exit code its family promises (rag_core/__init__.py, rag_core/cli/__init__.py, rag_core/errors.py)."""

from __future__ import annotations

import argparse
import ast
import graphlib
import importlib
from pathlib import Path

import pytest

import rag_core
from rag_core.cli import COMMANDS, build_parser
from rag_core.cli.common import EXIT_BAD_INPUT, EXIT_FAILURE, known_failure
from rag_core.config import ConfigError
from rag_core.errors import BadInput, EmptyStore, RunFailure, StoreError
from rag_core.evaluate.golden import GoldenSetError
from rag_core.evaluate.judge_labels import LabelsError
from rag_core.ingest.extraction import ExtractionError
from rag_core.ingest.metadata import MetadataError
from rag_core.jsonl import read_jsonl
from rag_core.llm import InvalidAPIKey, MissingAPIKey, RateLimited
from rag_core.retrieve.filters import FilterError

PACKAGE = Path(rag_core.__file__).parent


def import_graph() -> dict[str, set[str]]:
    """module -> the rag_core modules it imports, anywhere in the file (inside functions and
    TYPE_CHECKING blocks too); a package's __init__ is not an edge of its own modules."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("rag_core", *path.relative_to(PACKAGE).with_suffix("").parts))
        modules[name.removesuffix(".__init__")] = path

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = module.split(".")[: None if path.name == "__init__.py" else -1]  # the importing package
                base = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])]) \
                    if node.level else node.module
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in targets:
                found = resolve(target) if target.startswith("rag_core.") else None
                if found and found not in (module, "rag_core") and not module.startswith(found + "."):
                    graph[module].add(found)
    return graph


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert "rag_core.workbench.reports.text" in graph and "rag_core.llm.client" in graph  # the walk sees the tree
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


# A layer may import the layers listed after it here, never those before it. ``config`` builds RagConfig from
# the whole settings table, which ``catalog`` fills by importing every registry kept beside its implementations
# (STYLE: registries): both stand above those implementations, which annotate with ``ConfigFields``
# (``components``, the table itself, imports no component).
LAYERS = ("cli", "demo", "finetune", "workbench", "service", "evaluate", "generate", "config", "catalog", "retrieve",
          "llm", "ingest", "components")


def layer(module: str) -> str | None:
    part = module.split(".")[1] if "." in module else ""
    return part if part in LAYERS else None


def test_layers_import_only_downwards():
    upward = [f"{module} -> {target}" for module, targets in import_graph().items() for target in targets
              if layer(module) and layer(target) and layer(target) != layer(module)
              and LAYERS.index(layer(target)) < LAYERS.index(layer(module))]
    assert sorted(upward) == []


# The workbench's subpackages, top first; each may import those listed after it. A grid or a search ends by
# writing its report (sweep_report, search_report) onto its parent run and an evaluation's run carries its
# plots, so execution stands on reports; reports read runs back (tracking), judge them (statistics) and show
# the records running returns (plans.results); a sweep file names statistics' rules (select, holdout).
WORKBENCH_LAYERS = ("execution", "reports", "search", "plans", "statistics", "tracking")


def subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "workbench" else None


def test_every_workbench_subpackage_has_its_layer():
    found = {path.name for path in (PACKAGE / "workbench").iterdir() if (path / "__init__.py").exists()}
    assert found == set(WORKBENCH_LAYERS)  # (no module sits loose beside them: test_workbench_layout.py)


def test_workbench_subpackages_import_only_downwards_and_never_both_ways():
    arrows: dict[tuple[str, str], list[str]] = {}  # (importing subpackage, imported one) -> its module arrows
    for module, targets in import_graph().items():
        for target in targets:
            pair = (subpackage(module), subpackage(target))
            if None not in pair and pair[0] != pair[1]:
                arrows.setdefault(pair, []).append(f"{module} -> {target}")
    assert ("execution", "tracking") in arrows  # the walk sees the subpackages
    assert sorted(arrow for pair, found in arrows.items() if pair[::-1] in arrows for arrow in found) == []
    assert sorted(arrow for (importing, imported), found in arrows.items() for arrow in found
                  if WORKBENCH_LAYERS.index(imported) < WORKBENCH_LAYERS.index(importing)) == []


def test_the_floor_imports_nothing_above_it():
    floor = {"rag_core.records", "rag_core.errors", "rag_core.jsonl", "rag_core.progress", "rag_core.paths",
             "rag_core.api_keys", "rag_core.doc_ids", "rag_core._compat", "rag_core._lazy"}
    graph = import_graph()
    assert {module: graph[module] - floor for module in floor if graph[module] - floor} == {}


def test_every_subcommand_module_registers_the_same_way():
    modules = {path.stem for path in (PACKAGE / "cli").glob("*.py")} - {"__init__", "__main__", "common"}
    registered = {command.__name__.rpartition(".")[2] for command in COMMANDS}
    assert registered == modules  # one module per subcommand, every one in the table
    for command in COMMANDS:
        assert isinstance(command.NAME, str) and isinstance(command.HELP, str) and callable(command.run)
        assert command.__name__.endswith("." + command.NAME.replace("-", "_"))  # named after its command
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
    names = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001 - argparse keeps them there
    assert list(names) == [command.NAME for command in COMMANDS]


@pytest.mark.parametrize("error, code", [
    (ConfigError("chunk_size must be > 0"), EXIT_BAD_INPUT), (EmptyStore("no documents"), EXIT_BAD_INPUT),
    (GoldenSetError("golden.jsonl:3: malformed"), EXIT_BAD_INPUT), (LabelsError("labels.jsonl:1"), EXIT_BAD_INPUT),
    (MetadataError("metadata.jsonl:2"), EXIT_BAD_INPUT), (ExtractionError("a.pdf is gone"), EXIT_BAD_INPUT),
    (FilterError("unknown key"), EXIT_BAD_INPUT), (StoreError("read-only"), EXIT_FAILURE),
    (MissingAPIKey("no key"), EXIT_FAILURE), (RateLimited("429", retry_after_s=1.0), EXIT_FAILURE),
])
def test_each_error_family_has_its_exit_code(error, code):
    assert known_failure(error) == (str(error), code)


def test_a_bug_is_not_a_known_failure():
    assert known_failure(ValueError("a bug")) is None
    assert known_failure(KeyError("x")) is None


def test_llm_errors_are_run_failures_and_stay_runtime_errors():
    assert issubclass(InvalidAPIKey, RunFailure) and issubclass(InvalidAPIKey, RuntimeError)
    assert not issubclass(RunFailure, BadInput) and not issubclass(BadInput, RunFailure)


def test_read_jsonl_skips_blank_lines_and_a_bom_and_names_the_bad_line(tmp_path):
    class OwnError(Exception):
        pass

    path = tmp_path / "set.jsonl"
    path.write_text('\ufeff{"id": 1}\n\n{"id": 2}\n', encoding="utf-8")
    assert [(number, record) for number, _, record in read_jsonl(path, OwnError)] == [(1, {"id": 1}), (3, {"id": 2})]
    path.write_text('{"id": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(OwnError, match=rf"{path.name}:2: expected a JSON object, got list"):
        list(read_jsonl(path, OwnError))
    path.write_text('{"id": \n', encoding="utf-8")
    with pytest.raises(OwnError, match=rf"{path.name}:1: malformed JSON"):
        list(read_jsonl(path, OwnError))


def test_enum_values_are_the_recorded_strings():
    answer = importlib.import_module("rag_core.generate.answer")
    tracking = importlib.import_module("rag_core.workbench.tracking.tracker")
    assert [str(mode) for mode in answer.AnswerMode] == ["llm", "extractive", "no_answer"]
    assert f"{answer.AnswerMode.NO_ANSWER}" == "no_answer" and answer.AnswerMode.LLM == "llm"
    assert f"{tracking.RunStatus.FINISHED}" == "FINISHED" and tracking.RunStatus.SKIPPED == "SKIPPED"
