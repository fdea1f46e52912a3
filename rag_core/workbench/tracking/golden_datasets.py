"""Golden sets kept as MLflow evaluation datasets (``mlflow.genai.datasets``), in numbered versions.

MLflow 3.17 versions an evaluation dataset only on Databricks: on its own tracking store (SQLite,
a server) ``get_dataset(version=...)`` and ``list_versions()`` raise ``NotImplementedError`` and a
dataset's records change in place (``merge_records`` upserts by inputs). So a version here is one
MLflow evaluation dataset that is never written again after it is made: every write (``rag-pipeline
golden import``, ``feedback export --to-dataset``) creates a new dataset of the same name with the tag
``rag.golden.version`` one higher, holding the previous version's records plus the new ones. The UI's
Datasets tab lists them (same name, the version in the tags); ``mlflow:NAME`` means the newest,
``mlflow:NAME@3`` version 3. Records are ``rag_core.evaluate.golden_records``'s (lossless both ways).

An evaluation of a version logs it as the run's dataset input named ``NAME@v3``, with the dataset's id
as its source (``rag_core.workbench.tracking.datasets``), and links the dataset to the run's experiment.
Left out: two writers making the same version number at the same moment (the second write is a
second dataset with that number: ``versions`` keeps the older), deleting versions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from rag_core.errors import BadInput
from rag_core.evaluate.golden import GoldenQuery, parse_golden
from rag_core.evaluate.golden_records import (DatasetRef, dataset_record, duplicate_inputs, golden_line,
                                              parse_dataset_ref, record_position)
from rag_core.workbench.tracking.tracker import Tracker, global_tracking_uri, tracking_errors

if TYPE_CHECKING:
    from mlflow.entities import EvaluationDataset

VERSION_TAG, ORIGIN_TAG, LINES_TAG = "rag.golden.version", "rag.golden.origin", "rag.golden.lines"
PAGE_SIZE = 100


@dataclass(frozen=True)
class GoldenVersion:
    name: str
    version: int
    dataset_id: str
    lines: int
    origin: str  # "import data/golden/golden.jsonl", "feedback export of experiment 'queries'"
    created_ms: int

    @property
    def ref(self) -> str:
        return f"mlflow:{self.name}@{self.version}"

    @property
    def input_name(self) -> str:
        """The run's dataset input name: ``golden@v3``."""
        return f"{self.name}@v{self.version}"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "ref": self.ref, "dataset_id": self.dataset_id,
                "lines": self.lines, "origin": self.origin, "created_ms": self.created_ms}



def versions(name: str, tracking_uri: str | None = None) -> list[GoldenVersion]:
    """The versions of golden dataset `name`, oldest first."""
    tracker = Tracker.at(tracking_uri)
    with tracking_errors(tracker.uri):
        return [_version(dataset) for dataset in _datasets(tracker, name)]


def _datasets(tracker: Tracker, name: str) -> list["EvaluationDataset"]:
    quoted = name.replace("'", "''")
    found, token = [], None
    while True:
        page = tracker.client.search_datasets(filter_string=f"name = '{quoted}'", max_results=PAGE_SIZE,
                                              page_token=token)
        found.extend(dataset for dataset in page if (dataset.tags or {}).get(VERSION_TAG, "").isdigit())
        token = page.token
        if not token:
            break
    by_version: dict[int, Any] = {}
    for dataset in sorted(found, key=lambda dataset: (dataset.created_time, dataset.dataset_id)):
        by_version.setdefault(int(dataset.tags[VERSION_TAG]), dataset)  # the older of a race's two
    return [by_version[version] for version in sorted(by_version)]


def _version(dataset: "EvaluationDataset") -> GoldenVersion:
    tags = dataset.tags or {}
    return GoldenVersion(dataset.name, int(tags[VERSION_TAG]), dataset.dataset_id, int(tags.get(LINES_TAG, "0") or 0),
                         tags.get(ORIGIN_TAG, ""), int(dataset.created_time or 0))


def resolve(ref: DatasetRef, tracking_uri: str | None = None) -> GoldenVersion:
    """The version `ref` names (its newest when it names none); bad input when there is none."""
    found = versions(ref.name, tracking_uri)
    if not found:
        raise BadInput(f"no golden dataset {ref.name!r} in MLflow at {Tracker.at(tracking_uri).uri} "
                       "(`rag-pipeline golden import FILE --name NAME` makes one)")
    if ref.version is None:
        return found[-1]
    chosen = [version for version in found if version.version == ref.version]
    if not chosen:
        raise BadInput(f"golden dataset {ref.name!r} has no version {ref.version}; versions: "
                       f"{', '.join(str(version.version) for version in found)}")
    return chosen[0]


def read_lines(version: GoldenVersion, tracking_uri: str | None = None) -> list[dict[str, Any]]:
    """The golden-set lines of `version`, in their order."""
    tracker = Tracker.at(tracking_uri)
    with tracking_errors(tracker.uri), global_tracking_uri(tracker.uri):
        records = tracker.client.get_dataset(version.dataset_id).records
    ordered = sorted(records, key=lambda record: (record_position(record.tags), record.created_time))
    return [golden_line(record.inputs, record.expectations, record.tags) for record in ordered]


def write_version(name: str, lines: Sequence[Mapping[str, Any]], *, origin: str, experiment_ids: Sequence[str] = (),
                  tracking_uri: str | None = None) -> GoldenVersion:
    """A new version of `name` holding `lines` (all of them: the caller adds the previous version's)."""
    if not lines:
        raise BadInput(f"golden dataset {name!r}: no lines to write")
    clashes = duplicate_inputs(lines)
    if clashes:
        first, second = clashes[0]
        raise BadInput(f"golden dataset {name!r}: lines {first + 1} and {second + 1} have the same query and id; "
                       "MLflow would keep one record for both (give each line its own id)")
    tracker = Tracker.at(tracking_uri)
    with tracking_errors(tracker.uri), global_tracking_uri(tracker.uri):
        existing = _datasets(tracker, name)
        number = int(existing[-1].tags[VERSION_TAG]) + 1 if existing else 1
        tags = {VERSION_TAG: str(number), ORIGIN_TAG: origin, LINES_TAG: str(len(lines))}
        dataset = tracker.client.create_dataset(name, experiment_id=list(experiment_ids) or None, tags=tags)
        dataset.merge_records([dataset_record(line, position) for position, line in enumerate(lines)])
    return GoldenVersion(name, number, dataset.dataset_id, len(lines), origin, int(time.time() * 1000))


def link_to_experiment(version: GoldenVersion, experiment_id: str, tracking_uri: str | None = None) -> None:
    """List `version` in the experiment's Datasets tab (nothing when it is listed already)."""
    tracker = Tracker.at(tracking_uri)
    with tracking_errors(tracker.uri), global_tracking_uri(tracker.uri):
        dataset = tracker.client.get_dataset(version.dataset_id)
        if experiment_id not in dataset.experiment_ids:
            tracker.client.add_dataset_to_experiments(version.dataset_id, [experiment_id])


def load_golden_dataset(text: str, doc_ids: Collection[str] | None = None,
                        tracking_uri: str | None = None) -> tuple[GoldenVersion, list[GoldenQuery]]:
    """The version ``mlflow:NAME[@VERSION]`` names and its queries, checked as a golden file is
    (``rag_core.evaluate.golden.parse_golden``; messages name ``mlflow:NAME@3:LINE``)."""
    version = resolve(parse_dataset_ref(text), tracking_uri)
    lines = read_lines(version, tracking_uri)
    records = ((number, f"{version.ref}:{number}", line) for number, line in enumerate(lines, start=1))
    return version, parse_golden(records, version.ref, doc_ids)
