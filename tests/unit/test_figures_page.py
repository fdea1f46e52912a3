"""scripts/figures_page.py: the page of measured figures, from tiny fake results (no git, no process), and the
figures measured before results files were kept (benchmarks/results/earlier.json)."""

from __future__ import annotations

import importlib.util
import json
import re
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
    lines = figures_page.render([result]).split("\n")
    assert lines[lines.index("## tiny"):] == [
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


def _stamped(path: Path, value: float) -> None:
    path.write_text(json.dumps({"wall_s": value, "measured": {"date": "2026-12-03 10:00 UTC", "machine": "vm"}}))


EARLIER = {
    "about": "Quoted from the prose.",
    "at_a_glance": [{"what": "warm grid", "figure": "8.6 s", "machine": "2 cores", "detail": "[sweep.py](#sweeppy)"}],
    "records": [
        {"script": "sweep.py", "what": "warm grid", "figures": "8.6 s | 3.1 s", "command": "python benchmarks/sweep.py",
         "date": "2026-12-02", "machine": "quiet machine"},
        {"script": "sweep.py", "what": "cold grid", "figures": "435 s"},
        {"script": "soak.py", "what": "queries", "figures": "6,537 in 60 s", "date": "", "machine": "2 cores"}]}


def test_earlier_figures_head_and_close_the_page_with_not_recorded_where_none_was_given(tmp_path):
    (tmp_path / "earlier.json").write_text(json.dumps(EARLIER))
    lines = figures_page.render([], earlier=figures_page.read_earlier(tmp_path / "earlier.json")).split("\n")
    glance = lines.index("## At a glance")
    assert lines[glance + 4:glance + 6] == [
        "| what | figure | date | machine | detail |",
        "| --- | --- | --- | --- | --- |"]
    assert lines[glance + 6] == "| warm grid | 8.6 s | not recorded | 2 cores | [sweep.py](#sweeppy) |"
    assert lines.index("## At a glance") < lines.index("No results yet.") \
        < lines.index("## Figures measured before results files were kept")
    sweep = lines.index("### sweep.py")
    assert lines[sweep + 4:sweep + 6] == [
        "| warm grid | 8.6 s \\| 3.1 s | 2026-12-02 | quiet machine | python benchmarks/sweep.py |",
        "| cold grid | 435 s | not recorded | not recorded | not recorded |"]
    soak = lines.index("### soak.py")
    assert lines[soak + 4] == "| queries | 6,537 in 60 s | not recorded | 2 cores | not recorded |"


def test_check_fails_when_an_earlier_record_changes_and_earlier_json_is_no_result_table(tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "figures.md"
    results.mkdir()
    _stamped(results / "tiny.json", 1.5)
    (results / "earlier.json").write_text(json.dumps(EARLIER))
    args = ["--results", str(results), "--out", str(out)]
    assert figures_page.main(args) == 0
    page = out.read_text()
    assert "## earlier" not in page and "## tiny" in page and "| cold grid | 435 s |" in page
    assert figures_page.main(args + ["--check"]) == 0
    changed = json.loads(json.dumps(EARLIER))
    changed["records"][1]["date"] = "2026-12-01"
    (results / "earlier.json").write_text(json.dumps(changed))
    assert figures_page.main(args + ["--check"]) == 1
    assert "stale" in capsys.readouterr().out
    assert out.read_text() == page  # --check writes nothing


def test_a_malformed_earlier_file_is_one_error_line(tmp_path, capsys):
    (tmp_path / "earlier.json").write_text(json.dumps({"records": {"not": "a list"}}))
    assert figures_page.main(["--results", str(tmp_path), "--out", str(tmp_path / "f.md")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_kept_earlier_file_is_complete_and_its_links_resolve_on_the_page():
    root = Path(__file__).resolve().parents[2]
    hooks_spec = importlib.util.spec_from_file_location("mkdocs_hooks", root / "scripts" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(hooks_spec)
    hooks_spec.loader.exec_module(hooks)
    earlier = figures_page.read_earlier(root / "benchmarks" / "results" / "earlier.json")
    for record in earlier["records"]:
        assert record["script"] and record["what"] and record["figures"], record
        assert all(record.get(key) for key in ("date", "machine", "command")), record  # "not recorded", said
    page = figures_page.render([], earlier=earlier)
    anchors = {hooks.github_slug(h.replace("`", "")) for h in re.findall(r"^#{1,6} +(.+?) *$", page, re.M)}
    for row in earlier["at_a_glance"]:
        assert all(row.get(key) for key in ("what", "figure", "date", "machine", "detail")), row
        target = re.fullmatch(r"\[.+\]\((.+)\)", row["detail"]).group(1)
        assert not target.startswith("#") or target[1:] in anchors, target
