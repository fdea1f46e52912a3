"""Golden-set lines as records of an MLflow evaluation dataset, and back, without loss.

A golden-set line (``rag_core.evaluate.golden``) becomes one record of ``mlflow.genai.datasets``:

    inputs        {"query": ..., "query_id": <id>}        (query_id only when the line has an id)
    expectations  {"expected_response": <answer>, "evidence": [...], <every other key but provenance>}
    source        TRACE {"trace_id"} when the line came from a labelled trace (its provenance says
                  which), else HUMAN {} (a golden set written by people)
    tags          rag.golden.position (the line's place in the file), rag.golden.keys (its keys in order,
                  JSON), rag.golden.provenance (JSON, when the line has one)

``expected_response`` is the name MLflow's judges read a reference answer under. Reading records back
(``golden_lines``) restores each line's keys in their order, so JSONL -> MLflow -> JSONL writes the same
bytes (``json.dumps(line, ensure_ascii=False)``, as ``feedback export`` writes lines). A record added
by hand in the UI has no position (it goes last) and no key order (id, query, answer, evidence, then
the rest by name).
A dataset is named on the command line as ``mlflow:NAME`` (its newest version) or ``mlflow:NAME@3``
(``parse_dataset_ref``). One rule for NAME (``NAME_RULE``, ``check_dataset_name``) holds where a name is
written (``golden import``, ``feedback export --to-dataset``) and where it is read (``mlflow:NAME@V``,
``golden versions NAME``), so every printed ``mlflow:NAME@V`` reads back: no ``@`` (it starts the
version), no quotes (MLflow's dataset search cannot match a name holding both kinds), no space at either
end (a spec is stripped). Left out: session records (conversations), outputs (a golden set has none).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from rag_core.errors import BadInput

SCHEME = "mlflow:"
REF = re.compile(r"mlflow:(?P<name>.+?)(?:@v?(?P<version>\d+))?", re.DOTALL)
NAME_PATTERN = re.compile(r"\w(?:[\w .-]{0,98}\w)?")  # \w: letters and digits of any script, and _
NAME_RULE = ("a golden dataset name is 1 to 100 letters, digits and '_', with spaces, '.' and '-' allowed between "
             "them (no '@', quotes, ':' or '/', nor a space at either end)")
POSITION_TAG, KEYS_TAG, PROVENANCE_TAG = "rag.golden.position", "rag.golden.keys", "rag.golden.provenance"
DEFAULT_ORDER = ("id", "query", "answer", "evidence")
RENAMED = {"answer": "expected_response"}  # golden key -> expectation name


@dataclass(frozen=True)
class DatasetRef:
    name: str
    version: int | None  # None: the newest

    def __str__(self) -> str:
        return f"{SCHEME}{self.name}" + (f"@{self.version}" if self.version is not None else "")


def is_dataset_ref(value: object) -> bool:
    return isinstance(value, str) and value.startswith(SCHEME)


def check_dataset_name(name: str) -> str:
    """`name` when it follows ``NAME_RULE``; else ``BadInput`` naming the rule."""
    if not NAME_PATTERN.fullmatch(name):
        raise BadInput(f"{name!r}: {NAME_RULE}")
    return name


def parse_dataset_ref(text: str) -> DatasetRef:
    """``mlflow:NAME`` or ``mlflow:NAME@VERSION`` (a version number >= 1, ``@v3`` too); NAME follows ``NAME_RULE``."""
    match = REF.fullmatch(text.strip())
    if not match or (match["version"] is not None and int(match["version"]) < 1):
        raise BadInput(f"{text!r} is not an MLflow golden dataset: write mlflow:NAME or mlflow:NAME@VERSION "
                       "(a version number from `rag-pipeline golden versions NAME`)")
    if not NAME_PATTERN.fullmatch(match["name"]):
        raise BadInput(f"{text!r} is not an MLflow golden dataset (mlflow:NAME@VERSION): {NAME_RULE}")
    return DatasetRef(match["name"], int(match["version"]) if match["version"] else None)


def dataset_record(line: Mapping[str, Any], position: int) -> dict[str, Any]:
    """One golden-set line as an MLflow dataset record (see the module docstring)."""
    inputs: dict[str, Any] = {"query": line.get("query")}
    if "id" in line:
        inputs["query_id"] = line["id"]
    expectations = {RENAMED.get(key, key): value for key, value in line.items()
                    if key not in ("id", "query", "provenance")}
    tags = {POSITION_TAG: str(position), KEYS_TAG: json.dumps(list(line))}
    provenance = line.get("provenance")
    if provenance is not None:
        tags[PROVENANCE_TAG] = json.dumps(provenance, ensure_ascii=False)
    trace_id = provenance.get("trace_id") if isinstance(provenance, dict) else None
    source = ({"source_type": "TRACE", "source_data": {"trace_id": trace_id}} if isinstance(trace_id, str) and trace_id
              else {"source_type": "HUMAN", "source_data": {}})
    return {"inputs": inputs, "expectations": expectations, "tags": tags, "source": source}


def golden_line(inputs: Mapping[str, Any], expectations: Mapping[str, Any] | None,
                tags: Mapping[str, str] | None) -> dict[str, Any]:
    """A dataset record (its inputs, expectations and tags) as the golden-set line it was made from."""
    expectations, tags = dict(expectations or {}), dict(tags or {})
    values: dict[str, Any] = {key: value for key, value in expectations.items() if key not in RENAMED.values()}
    values.update({golden: expectations[name] for golden, name in RENAMED.items() if name in expectations})
    if "query_id" in inputs:
        values["id"] = inputs["query_id"]
    values["query"] = inputs.get("query")
    if PROVENANCE_TAG in tags:
        values["provenance"] = json.loads(tags[PROVENANCE_TAG])
    keys = json.loads(tags[KEYS_TAG]) if KEYS_TAG in tags else []
    order = [key for key in keys if key in values]
    order += [key for key in DEFAULT_ORDER if key in values and key not in order]
    order += sorted(key for key in values if key not in order)
    return {key: values[key] for key in order}


def record_position(tags: Mapping[str, str] | None) -> float:
    """Where a record's line goes (records without a position, added in the UI, go last)."""
    text = (tags or {}).get(POSITION_TAG, "")
    return int(text) if text.isdigit() else float("inf")


def duplicate_inputs(lines: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Pairs of line indexes whose records would have equal inputs (MLflow merges such records into one)."""
    first: dict[str, int] = {}
    pairs = []
    for index, line in enumerate(lines):
        key = json.dumps(dataset_record(line, index)["inputs"], sort_keys=True)
        if key in first:
            pairs.append((first[key], index))
        else:
            first[key] = index
    return pairs
