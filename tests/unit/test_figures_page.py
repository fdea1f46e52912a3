"""scripts/figures_page.py: the page of measured figures, from a tiny fake result (no git, no process)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "figures_page.py"
spec = importlib.util.spec_from_file_location("figures_page", SCRIPT)
figures_page = importlib.util.module_from_spec(spec)
sys.modules["figures_page"] = figures_page  # dataclasses look their module up there
spec.loader.exec_module(figures_page)


def test_a_stamped_result_is_one_table_with_its_date_and_machine(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({
        "wall_s": 12.3456, "ok": True, "sizes": [1, 2], "per_store": [{"store": "chroma", "p50_ms": 2.7}],
        "measured": {"date": "2026-12-03 10:00 UTC", "machine": "vm: AMD EPYC, 2 CPUs",
                     "load_average_1_5_15": [1.5, 2, 3]}}))
    result = figures_page.read_result(path, date_of=lambda p: "never called", scripts={"tiny", "other"})
    assert figures_page.render([result]).split("\n")[7:] == [
        "## tiny", "",
        "`benchmarks/tiny.py`; measured 2026-12-03 10:00 UTC; vm: AMD EPYC, 2 CPUs (load average 1.5/2/3).", "",
        "| value | figure |", "| --- | --- |",
        "| `wall_s` | 12.35 |",
        "| `ok` | true |",
        "| `sizes` | 1, 2 |",
        "| `per_store[store=chroma].store` | chroma |",
        "| `per_store[store=chroma].p50_ms` | 2.7 |",
        ""]


def test_an_unstamped_result_is_dated_by_the_fallback_and_its_machine_not_recorded(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"cpus": 2, "total_s": 7}))
    result = figures_page.read_result(path, date_of=lambda p: f"2026-12-01 (git commit of {p.name})", scripts={"old"})
    assert result.date == "2026-12-01 (git commit of old.json)"
    assert result.machine == "machine not recorded (cpus 2)"
    assert "`benchmarks/old.py`; measured 2026-12-01 (git commit of old.json); machine not recorded (cpus 2)." \
        in figures_page.render([result])


def test_a_long_list_of_records_is_summarised_field_by_field():
    probes = [{"name": f"p{i}", "status": "PASS" if i < 9 else "FAIL", "seconds": float(i)} for i in range(10)]
    assert figures_page.flatten({"probes": probes}) == [
        ("probes (10 records): status", "PASS: 9, FAIL: 1"),
        ("probes (10 records): seconds", "median 4.5 (min 0, max 9)")]


def test_cells_escape_pipes_and_cut_long_text():
    assert figures_page.fmt("a|b") == "a\\|b"
    assert figures_page.fmt("x" * 100) == "x" * 87 + "..."
    assert figures_page.fmt(None) == "null"


def test_a_result_is_credited_to_the_script_its_name_starts_with():
    scripts = {"pages", "pages_extra", "search"}
    assert figures_page.script_for("pages", scripts) == "pages"
    assert figures_page.script_for("pages_financebench_bm25", scripts) == "pages"
    assert figures_page.script_for("pages_extra_run", scripts) == "pages_extra"
    assert figures_page.script_for("pagesx", scripts) is None
    result = figures_page.Result("orphan", {"x": 1}, "2026-12-01", "machine not recorded")
    assert "script not recorded; measured 2026-12-01; machine not recorded." in figures_page.render([result])
