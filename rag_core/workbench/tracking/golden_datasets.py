"""Golden sets kept as MLflow evaluation datasets (``mlflow.genai.datasets``), in numbered versions.

MLflow 3.17 versions an evaluation dataset only on Databricks: on its own tracking store (SQLite,
a server) ``get_dataset(version=...)`` and ``list_versions()`` raise ``NotImplementedError`` and a
dataset's records change in place (``merge_records`` upserts by inputs). So a version here is one
MLflow evaluation dataset that is never written again after it is made: every write (``rag-pipeline
golden import``, ``feedback export --to-dataset``) creates a new dataset of the same name with the tag
``rag.golden.version`` one higher, holding its lines (an append: the previous version's, then the new ones). The UI's
Datasets tab lists them (same name, the version in the tags); ``mlflow:NAME`` means the newest,
``mlflow:NAME@3`` version 3. Records are ``rag_core.evaluate.golden_records``'s (lossless both ways), and
so is the rule a dataset name follows (``check_dataset_name``).

A write (``write_version``) is whole or not a version:

- the dataset is created tagged ``rag.golden.state: writing`` and without a number; only once every
  record is in does it get its number and ``complete`` (one tag update). A write that is killed leaves
  an *unfinished* dataset: listed as such by ``listing``, never resolved, read or built on;
- with ``append``, the newest complete version's lines are read inside the write, then the new lines
  whose questions are not there yet are added after them;
- on a SQLite store, writes of golden versions hold a lock beside the database
  (``Tracker.store_lock("golden")``, ``.mlflow.db.golden.lock``, the ``flock`` of ``rag_core.writes``), so
  two imports at once run one after the other and each version keeps every line of the one before;
- on a tracking server no file lock reaches the other writers, so each write checks its work before
  and after it takes its number: if a newer version was published while an append was writing, or
  another dataset took the same number, this write deletes its own dataset and starts again on the
  newest version (``PUBLISH_ATTEMPTS`` times, then ``RunFailure``: nothing written, run it again).

An evaluation of a version logs it as the run's dataset input named ``NAME@v3``, with the dataset's id
as its source (``rag_core.workbench.tracking.datasets``), and links the dataset to the run's experiment.
Left out: deleting versions or unfinished datasets (the UI's Datasets tab deletes a dataset); a server
writer killed between taking a number and checking it can leave two complete datasets with one number
(the older is read).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from rag_core.errors import BadInput, RunFailure
from rag_core.evaluate.feedback import normalised_query
from rag_core.evaluate.golden import GoldenQuery, parse_golden
from rag_core.evaluate.golden_records import (DatasetRef, check_dataset_name, dataset_record, duplicate_inputs,
                                              golden_line, parse_dataset_ref, record_position)
from rag_core.workbench.tracking.tracker import Tracker, global_tracking_uri, tracking_errors

if TYPE_CHECKING:
    from mlflow.entities import EvaluationDataset

log = logging.getLogger(__name__)
VERSION_TAG, ORIGIN_TAG, LINES_TAG = "rag.golden.version", "rag.golden.origin", "rag.golden.lines"
STATE_TAG, WRITING, COMPLETE = "rag.golden.state", "writing", "complete"  # no state tag: written before states
PAGE_SIZE = 100
PUBLISH_ATTEMPTS = 5
RECORDS_PER_CALL = 200  # a server took 16 s for 1,500 records in one request (RAG_TRACKING_TIMEOUT_S: 10 s)
LOCK = "golden"  # Tracker.store_lock(LOCK): .mlflow.db.golden.lock


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


@dataclass(frozen=True)
class Unfinished:
    """A dataset a write created and never completed (being written now, or its process was killed): no version."""

    name: str
    dataset_id: str
    lines: int  # how many it was to hold
    origin: str
    created_ms: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "dataset_id": self.dataset_id, "lines": self.lines, "origin": self.origin,
                "created_ms": self.created_ms}


@dataclass(frozen=True)
class Listing:
    versions: tuple[GoldenVersion, ...]  # oldest first
    unfinished: tuple[Unfinished, ...]


@dataclass(frozen=True)
class WrittenVersion:
    version: GoldenVersion
    added: int  # lines new in this version (with append: those not in the version it was built on)


class _Lost(Exception):
    """Another writer published while this one wrote (a tracking server: no lock); this write starts again."""


def listing(name: str, tracking_uri: str | None = None) -> Listing:
    """The versions of golden dataset `name` and its unfinished writes."""
    check_dataset_name(name)
    tracker = Tracker.at(tracking_uri, off_switch="")
    with tracking_errors(tracker.uri, tracker.off_switch):
        found = _datasets(tracker, name)
    return Listing(tuple(_version(dataset) for dataset in _published(found)),
                   tuple(_unfinished(dataset) for dataset in found if _state(dataset) == WRITING))


def versions(name: str, tracking_uri: str | None = None) -> list[GoldenVersion]:
    """The versions of golden dataset `name`, oldest first (unfinished writes are not versions)."""
    return list(listing(name, tracking_uri).versions)


def _datasets(tracker: Tracker, name: str) -> list["EvaluationDataset"]:
    """Every dataset named `name` (a name of ``NAME_RULE`` holds no quote to escape), oldest first."""
    found, token = [], None
    while True:
        page = tracker.client.search_datasets(filter_string=f"name = '{name}'", max_results=PAGE_SIZE,
                                              page_token=token)
        found.extend(dataset for dataset in page if dataset.name == name)
        token = page.token
        if not token:
            break
    return sorted(found, key=lambda dataset: (dataset.created_time or 0, dataset.dataset_id))


def _state(dataset: "EvaluationDataset") -> str:
    return (dataset.tags or {}).get(STATE_TAG, COMPLETE)


def _published(found: Sequence["EvaluationDataset"]) -> list["EvaluationDataset"]:
    """The complete versions among `found` (oldest first), one per number: the older of two with one number."""
    by_version: dict[int, Any] = {}
    for dataset in found:
        number = (dataset.tags or {}).get(VERSION_TAG, "")
        if number.isdigit() and _state(dataset) != WRITING:
            by_version.setdefault(int(number), dataset)
    return [by_version[version] for version in sorted(by_version)]


def _version(dataset: "EvaluationDataset") -> GoldenVersion:
    tags = dataset.tags or {}
    return GoldenVersion(dataset.name, int(tags[VERSION_TAG]), dataset.dataset_id, _lines_tag(tags),
                         tags.get(ORIGIN_TAG, ""), int(dataset.created_time or 0))


def _unfinished(dataset: "EvaluationDataset") -> Unfinished:
    tags = dataset.tags or {}
    return Unfinished(dataset.name, dataset.dataset_id, _lines_tag(tags), tags.get(ORIGIN_TAG, ""),
                      int(dataset.created_time or 0))


def _lines_tag(tags: Mapping[str, str]) -> int:
    text = tags.get(LINES_TAG, "")
    return int(text) if text.isdigit() else 0


def resolve(ref: DatasetRef, tracking_uri: str | None = None) -> GoldenVersion:
    """The version `ref` names (its newest when it names none); bad input when there is none."""
    found = listing(ref.name, tracking_uri)
    unfinished = (f" ({len(found.unfinished)} unfinished write(s), being written or interrupted, are no version: "
                  f"`rag-pipeline golden versions {ref.name}`)" if found.unfinished else "")
    if not found.versions:
        raise BadInput(f"no golden dataset {ref.name!r} in MLflow at {Tracker.at(tracking_uri).uri}{unfinished} "
                       "(`rag-pipeline golden import FILE --name NAME` makes one)")
    if ref.version is None:
        return found.versions[-1]
    chosen = [version for version in found.versions if version.version == ref.version]
    if not chosen:
        raise BadInput(f"golden dataset {ref.name!r} has no version {ref.version}; versions: "
                       f"{', '.join(str(version.version) for version in found.versions)}{unfinished}")
    return chosen[0]


def read_lines(version: GoldenVersion, tracking_uri: str | None = None) -> list[dict[str, Any]]:
    """The golden-set lines of `version`, in their order; bad input when it holds fewer than it was written with."""
    tracker = Tracker.at(tracking_uri, off_switch="")
    with tracking_errors(tracker.uri, tracker.off_switch), global_tracking_uri(tracker.uri):
        return _read_lines(tracker, version)


def _read_lines(tracker: Tracker, version: GoldenVersion) -> list[dict[str, Any]]:
    records = tracker.client.get_dataset(version.dataset_id).records
    if len(records) < version.lines:  # interrupted before versions had states, or records deleted in the UI
        raise BadInput(f"{version.ref} holds {len(records)} of the {version.lines} lines it was written with (an "
                       "interrupted write, or records deleted in the UI): it is not used; import the file again")
    ordered = sorted(records, key=lambda record: (record_position(record.tags), record.created_time))
    return [golden_line(record.inputs, record.expectations, record.tags) for record in ordered]


def write_version(name: str, lines: Sequence[Mapping[str, Any]], *, origin: str, append: bool = False,
                  experiment_ids: Sequence[str] = (), tracking_uri: str | None = None) -> WrittenVersion:
    """A new version of `name` holding `lines`; with `append`, the newest complete version's lines, then those
    of `lines` whose question is not among them. Complete or not a version (see the module docstring)."""
    check_dataset_name(name)
    tracker = Tracker.at(tracking_uri, off_switch="")
    tracker.check()  # a new store: created and migrated by one process
    with tracking_errors(tracker.uri, tracker.off_switch), global_tracking_uri(tracker.uri), tracker.store_lock(LOCK):
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                return _write_once(tracker, name, lines, origin, append, experiment_ids)
            except _Lost:
                if attempt == PUBLISH_ATTEMPTS:
                    break
                log.info("golden dataset %r: another writer published a version meanwhile; writing again on top "
                         "of it (attempt %d of %d)", name, attempt + 1, PUBLISH_ATTEMPTS)
                time.sleep(random.uniform(0.05, 0.25) * attempt)
    raise RunFailure(f"golden dataset {name!r}: other writers published a version while this one wrote, "
                     f"{PUBLISH_ATTEMPTS} times; nothing was written (run it again)")


def _write_once(tracker: Tracker, name: str, lines: Sequence[Mapping[str, Any]], origin: str, append: bool,
                experiment_ids: Sequence[str]) -> WrittenVersion:
    """One attempt of ``write_version``; ``_Lost`` (its dataset deleted) when another writer got in between."""
    published = _published(_datasets(tracker, name))
    base = _version(published[-1]) if append and published else None
    try:
        earlier = _read_lines(tracker, base) if base else []
    except Exception:
        if base is not None and base.dataset_id not in {dataset.dataset_id for dataset in
                                                        _published(_datasets(tracker, name))}:
            raise _Lost from None  # a rival's attempt, deleted while it was read
        raise
    known = {normalised_query(str(line.get("query", ""))) for line in earlier}
    added = [dict(line) for line in lines if not append or normalised_query(str(line.get("query", ""))) not in known]
    full = earlier + added
    _check_lines(name, full)
    dataset = tracker.client.create_dataset(name, experiment_id=list(experiment_ids) or None, tags={
        STATE_TAG: WRITING, ORIGIN_TAG: origin, LINES_TAG: str(len(full))})
    records = [dataset_record(line, position) for position, line in enumerate(full)]
    for start in range(0, len(records), RECORDS_PER_CALL):  # a server answers each within its timeout
        dataset.merge_records(records[start:start + RECORDS_PER_CALL])
    try:
        number = _publish(tracker, name, dataset.dataset_id, base, append)
    except _Lost:
        tracker.client.delete_dataset(dataset.dataset_id)  # nothing of this attempt stays
        raise
    version = GoldenVersion(name, number, dataset.dataset_id, len(full), origin, int(time.time() * 1000))
    return WrittenVersion(version, len(added))


def _check_lines(name: str, lines: Sequence[Mapping[str, Any]]) -> None:
    if not lines:
        raise BadInput(f"golden dataset {name!r}: no lines to write")
    clashes = duplicate_inputs(lines)
    if clashes:
        first, second = clashes[0]
        raise BadInput(f"golden dataset {name!r}: lines {first + 1} and {second + 1} have the same query and id; "
                       "MLflow would keep one record for both (give each line its own id)")


def _publish(tracker: Tracker, name: str, dataset_id: str, base: GoldenVersion | None, append: bool) -> int:
    """Number the complete dataset `dataset_id` one above the newest version and mark it complete; ``_Lost``
    when an append's base is no longer the newest version, or another dataset took that number."""
    published = _published(_datasets(tracker, name))
    if append and (published[-1].dataset_id if published else None) != (base.dataset_id if base else None):
        raise _Lost  # a version published meanwhile: this one would drop its lines
    number = int(published[-1].tags[VERSION_TAG]) + 1 if published else 1
    tracker.client.set_dataset_tags(dataset_id, {VERSION_TAG: str(number), STATE_TAG: COMPLETE})
    rivals = [dataset for dataset in _datasets(tracker, name) if dataset.dataset_id != dataset_id
              and (dataset.tags or {}).get(VERSION_TAG) == str(number) and _state(dataset) != WRITING]
    if rivals:
        raise _Lost
    return number


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
