"""Issue 51: grid points that differ only in settings their chosen components do not read are one point: run
once, listed as merged, ranked once; the dry run counts them once; a search tells a repeated identity the
earlier trial's value without running it; a holdout sweep whose grid holds the default configuration under
another value of a setting that does not apply adds no extra point 0."""

from __future__ import annotations

import json

import pytest
import yaml

from rag_core.config import RagConfig, load_config
from rag_core.ingest.chunkers import CHUNKERS
from rag_core.ingest.chunkers.recursive import RecursiveChunker
from rag_core.workbench.plans.holdout_plan import extra_default_point
from rag_core.workbench.plans.sweep_file import digest, load_sweep, point_identity
from rag_core.workbench.search.driver import REPEAT, SearchDriver, TrialScore, open_study


def sweep(tmp_path, **sections):
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q", "query": "cats", "evidence": [{"source": "a.txt", "text": "cats"}]}) + "\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "merging", "input": str(tmp_path), "golden": str(golden), **sections},
                                   sort_keys=False))
    return load_sweep(path)


@pytest.fixture
def blind(isolated_components):
    """A chunker that reads chunk_size only (overlap, chunk_unit and per_page change nothing it makes)."""
    CHUNKERS.register("blind", RecursiveChunker, reads=("chunk_size",))


def test_points_that_differ_only_in_a_setting_the_chunker_ignores_are_one(blind, tmp_path):
    spec = sweep(tmp_path, grid={"chunker": ["recursive", "blind"], "overlap": [0, 64]})
    points, skipped = spec.points()
    assert skipped == [] and len(points) == 3
    assert sorted(point.label for point in points) == ["chunker=blind", "chunker=recursive overlap=0",
                                                       "chunker=recursive overlap=64"]
    [group] = spec.merged()
    assert [point.number for point in group.merged] == [3, 4] and group.kept.number == 3
    assert group.describe() == "merged: chunker=blind x overlap=0/64 -> 1 point (overlap does not apply)"
    assert len({point.identity for point in points}) == 3


def test_a_retrievers_setting_without_that_retriever_merges_and_a_grid_without_such_points_merges_none(tmp_path):
    spec = sweep(tmp_path, grid={"mode": ["bm25", "dense"], "bm25_k1": [0.9, 1.5]})
    assert sorted(point.label for point in spec.points()[0]) == ["mode=bm25 bm25_k1=0.9", "mode=bm25 bm25_k1=1.5",
                                                                  "mode=dense"]
    [group] = spec.merged()
    assert group.describe() == "merged: mode=dense x bm25_k1=0.9/1.5 -> 1 point (bm25_k1 does not apply)"
    plain = sweep(tmp_path, grid={"chunk_size": [128, 256], "k": [3, 5]})
    assert len(plain.points()[0]) == 4 and plain.merged() == []


def test_the_identity_holds_what_applies_and_nothing_else(blind):
    config = RagConfig(chunker="blind", chunk_size=128)
    assert point_identity(config) == point_identity(config.replace(overlap=0, per_page=True, chunk_unit="tokens"))
    assert point_identity(config) != point_identity(config.replace(chunk_size=256))
    assert point_identity(config) != point_identity(config.replace(bm25_k1=0.5))  # hybrid: BM25 is chosen
    assert point_identity(RagConfig(overlap=0)) != point_identity(RagConfig(overlap=32))  # recursive reads it


def test_a_holdout_grid_that_holds_the_default_adds_no_extra_point(tmp_path):
    spec = sweep(tmp_path, base={"mode": "bm25"}, grid={"fusion": ["mnz"]}, holdout=0.5)  # one retriever: nothing fused
    assert spec.merged() == [] and extra_default_point(spec, spec.points()[0]) is None
    other = sweep(tmp_path, base={"mode": "bm25"}, grid={"bm25_k1": [0.9]}, holdout=0.5)
    assert extra_default_point(other, other.points()[0]) is not None  # bm25_k1 applies: not the default


class Table:
    """A TrialEvaluator whose metric is the chunk size: counts what it evaluates."""

    def __init__(self) -> None:
        self.evaluated: list[dict] = []

    def evaluate(self, point):
        self.evaluated.append(dict(point.changes))
        return TrialScore(point.config.chunk_size / 1000, 1.0)

    def embedding_needed(self, config):
        return None

    def cold_estimate(self, config):
        return None

    def unavailable(self, config):
        return None

    def build(self, config):
        return 0.0


def test_a_search_tells_a_repeated_identity_the_earlier_value_without_running_it(blind, tmp_path):
    spec = sweep(tmp_path, grid={"chunker": ["blind"], "overlap": [0, 16, 32, 48, 64]}, strategy="tpe", budget=5)
    evaluator = Table()
    study = open_study(None, "merging", spec.search, 1)
    driver = SearchDriver(study, spec.space, spec.base, spec.search, evaluator, ["q"], metric="evidence/recall@1024",
                          echo=lambda line: None)
    history = driver.run()
    assert len(evaluator.evaluated) == 1  # five overlaps, one configuration: evaluated once
    statuses = [trial.status for trial in history.trials]
    assert len(statuses) > 1 and statuses[0] == "complete" and set(statuses[1:]) == {REPEAT}
    assert {trial.value for trial in history.trials} == {0.512}
    assert {trial.config_key for trial in history.trials} == {digest(point_identity(load_config(None, {"chunker": "blind"})))}



def test_the_comparison_table_leaves_a_setting_the_point_does_not_read_empty(blind, tmp_path):
    """The run of a merged point logged one value of overlap, which its chunker never read: the table shows none."""
    import pandas as pd

    from rag_core.workbench.plans.results import PointOutcome
    from rag_core.workbench.reports.sweep_report import without_unread

    spec = sweep(tmp_path, grid={"chunker": ["recursive", "blind"], "overlap": [0, 64]},
                 base={"mode": "dense", "bm25_k1": 1.5})
    points, _ = spec.points()
    outcomes = [PointOutcome(point, "FINISHED", f"run{point.number}") for point in points]
    runs = pd.DataFrame({"run_id": [o.run_id for o in outcomes],
                         "chunker": [o.point.config.chunker for o in outcomes],
                         "overlap": [str(o.point.config.overlap) for o in outcomes],
                         "bm25_k1": ["1.5"] * len(outcomes)})
    table = without_unread(runs, [*spec.axes, "bm25_k1"], outcomes).set_index("chunker", drop=False)
    assert list(table.loc["blind", ["chunker", "overlap", "bm25_k1"]].isna()) == [False, True, True]
    recursive = table[table["chunker"] == "recursive"]
    assert sorted(recursive["overlap"]) == ["0", "64"] and recursive["bm25_k1"].isna().all()  # dense: no BM25
