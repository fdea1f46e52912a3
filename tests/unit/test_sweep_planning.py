"""Planning a large sweep (issue 33): a 10,000-point grid took 40 s to check before its first line
(every point's settings were listed with a quadratic sort comparing dataclasses), and showed nothing
meanwhile. Now listing the settings compares none, and a large grid shows a bar while it is checked."""

from __future__ import annotations

import yaml

import rag_core.workbench.plans.sweep_file as sweep_file
from rag_core.components import SETTINGS, Setting
from rag_core.components.settings import GROUPS
from rag_core.config import load_config


def test_listing_the_settings_compares_no_two_of_them(monkeypatch):
    expected = sorted(SETTINGS._settings.values(), key=lambda s: GROUPS.index(s.group) if s.group in GROUPS else len(GROUPS))
    compared = []
    monkeypatch.setattr(Setting, "__eq__", lambda self, other: compared.append(self) or self is other)
    listed = list(SETTINGS)
    load_config(None, {"chunk_size": 256, "k": 3})
    assert compared == []  # was 504 comparisons per point of a sweep (84 settings, listed 9 times a point)
    assert [s.name for s in listed] == [s.name for s in expected]  # by group, then in declaration order


def test_a_large_grid_shows_a_bar_while_its_points_are_checked(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep_file, "PROGRESS_MIN_POINTS", 6)
    path = tmp_path / "sweep.yaml"

    def points_of(grid):
        path.write_text(yaml.safe_dump({"name": "big", "input": str(tmp_path), "golden": str(tmp_path / "g.jsonl"),
                                        "grid": grid}))
        return sweep_file.load_sweep(path).points()

    points, skipped = points_of({"k": [1, 2, 3], "chunk_size": [128, 256]})
    assert (len(points), skipped) == (6, [])
    err = capsys.readouterr().err
    assert "Checking sweep points" in err and "6/6" in err
    assert len(points_of({"k": [1, 2], "chunk_size": [128, 256]})[0]) == 4  # below the threshold: no bar
    assert "Checking sweep points" not in capsys.readouterr().err
