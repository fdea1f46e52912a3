"""Held-out queries (rag_core.workbench.statistics.holdout): the split is seeded, deterministic, disjoint and of the
right size; per-part metrics are the means over each part; sweep files check the two keys."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest
import yaml
from sweep_fixtures import tiny_corpus  # noqa: F401 - fixture

from rag_core.config import ConfigError
from rag_core.workbench import load_sweep
from rag_core.workbench.statistics.holdout import part_metrics, split_queries

IDS = [f"q{number:02d}" for number in range(1, 37)]


def test_split_is_deterministic_disjoint_and_sized():
    split = split_queries(IDS, 0.3, seed=7)
    assert len(split.held_out) == 11 and len(split.tuning) == 25  # round(0.3 * 36) = 11
    assert set(split.held_out).isdisjoint(split.tuning) and set(split.held_out) | set(split.tuning) == set(IDS)
    assert split == split_queries(IDS, 0.3, seed=7)
    assert set(split_queries(list(reversed(IDS)), 0.3, seed=7).held_out) == set(split.held_out)  # order does not matter
    assert set(split_queries(IDS, 0.3, seed=8).held_out) != set(split.held_out)
    # the held-out queries are those with the smallest sha256("<seed>:<id>"), computed independently here
    by_hash = sorted(IDS, key=lambda q: hashlib.sha256(f"7:{q}".encode()).hexdigest())
    assert set(split.held_out) == set(by_hash[:11])
    assert list(split.tuning) == [q for q in IDS if q in split.tuning]  # golden-set order kept


@pytest.mark.parametrize(("n", "fraction", "held_out"), [(4, 0.3, 1), (4, 0.5, 2), (2, 0.9, 1), (10, 0.01, 1), (10, 0.99, 9)])
def test_both_parts_keep_at_least_one_query(n, fraction, held_out):
    split = split_queries([f"q{i}" for i in range(n)], fraction)
    assert len(split.held_out) == held_out and len(split.tuning) == n - held_out


def test_one_query_cannot_be_split():
    with pytest.raises(ConfigError, match="at least 2 queries"):
        split_queries(["q1"], 0.5)


def test_part_metrics_are_the_means_over_each_part():
    split = split_queries(["a", "b", "c", "d"], 0.5, seed=1)
    values = {"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.25}
    per_query = pd.DataFrame({"query_id": list(values), "page/ndcg@10": list(values.values()),
                              "context/words": [10.0, 20.0, 30.0, 40.0], "outcome": ["found"] * 4,
                              "first_relevant_final": [1, 2, None, 3]})
    metrics = part_metrics(per_query, split)
    for part, ids in (("tune", split.tuning), ("holdout", split.held_out)):
        assert metrics[f"{part}/page/ndcg@10"] == pytest.approx(sum(values[q] for q in ids) / 2)
    assert set(metrics) == {f"{part}/{name}" for part in ("tune", "holdout") for name in ("page/ndcg@10", "context/words")}


def test_sweep_files_check_holdout_and_its_seed(tmp_path, tiny_corpus):  # noqa: F811
    data = {"name": "h", "input": str(tiny_corpus.documents), "golden": str(tiny_corpus.golden), "grid": {"k": [3]}}

    def sweep(**extra):
        path = tmp_path / "h.yaml"
        path.write_text(yaml.safe_dump({**data, **extra}))
        return load_sweep(path)

    plain, held = sweep(), sweep(holdout=0.3, holdout_seed=5)
    assert (plain.holdout, held.holdout, held.holdout_seed) == (None, 0.3, 5)
    assert sweep(holdout=0.3).holdout_seed == 0
    assert len({plain.hash, held.hash, sweep(holdout=0.3, holdout_seed=6).hash}) == 3  # another split: another sweep
    for bad in (0, 1, 1.5, -0.2, "a third", True):
        with pytest.raises(ConfigError, match="holdout must be a share"):
            sweep(holdout=bad)
    with pytest.raises(ConfigError, match="holdout_seed must be an integer"):
        sweep(holdout=0.3, holdout_seed=1.5)
    with pytest.raises(ConfigError, match="without holdout"):
        sweep(holdout_seed=3)
