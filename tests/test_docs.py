"""The documentation: a README short enough to read in minutes, every relative link in it and in docs/
pointing at a file that exists, and the MkDocs site building with --strict (broken links and anchors, or a
page left out of the nav, fail it), as `make docs` builds it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def relative_links(path: Path) -> list[str]:
    """The link targets of a Markdown file that are paths (no scheme, no bare anchor), code blocks left out."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


def test_the_readme_is_at_most_300_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move the detail to a page under docs/"


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_points_to_a_file_that_exists(path):
    missing = [target for target in relative_links(path)
               if not (path.parent / target.split("#")[0]).exists()]
    assert not missing, f"{path.name} links to files that do not exist: {missing}"


def anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown file, made as GitHub and the site (scripts/mkdocs_hooks.py) make them."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from mkdocs_hooks import github_slug
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {github_slug(re.sub(r"[`*]", "", heading)) for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M)}


def test_the_readme_links_into_the_docs_name_anchors_that_exist():
    readme = ROOT / "README.md"
    broken = []
    for target in relative_links(readme):
        page, _, anchor = target.partition("#")
        if anchor and page.endswith(".md") and anchor not in anchors(ROOT / page):
            broken.append(target)
    assert not broken, f"README.md links to anchors that do not exist: {broken}"


def test_anchors_are_made_as_github_makes_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n## `--dry-run`\n```\n# not a heading\n```\n### Measured: searches, in brief\n")
    assert anchors(page) == {"title", "--dry-run", "measured-searches-in-brief"}


def test_the_link_finder_finds_paths_and_skips_code_addresses_and_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('See [a](docs/a.md#x), [b](b.md "title"), [web](https://example.org), [here](#top),\n'
                    '`[code](not/a/link.md)` and\n```\n[fenced](fenced.md)\n```\n[c](../c/)\n')
    assert relative_links(page) == ["docs/a.md#x", "b.md", "../c/"]


def test_the_documentation_site_builds_with_no_broken_link(tmp_path):
    pytest.importorskip("mkdocs", reason="MkDocs is not installed: pip install -e '.[docs]' (the test extra has it)")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_readme_links_every_documentation_page():
    linked = {Path(target.split("#")[0]).name for target in relative_links(ROOT / "README.md")
              if target.startswith("docs/")}
    unlinked = [page.name for page in PAGES if page.name != "index.md" and page.name not in linked]
    assert not unlinked, f"pages the README's Documentation table does not link: {unlinked}"


def test_every_built_in_setting_is_in_the_configuration_page():
    from rag_core.components.settings import SETTINGS
    import rag_core.config  # noqa: F401  (the catalog: every built-in setting declared)

    names = SETTINGS if isinstance(SETTINGS, dict) else {setting.name: setting for setting in SETTINGS}
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = "\n".join(line for line in text.splitlines() if line.startswith("| `"))  # a setting's row names it
    documented = set(re.findall(r"`([a-z0-9_]+)`", rows))
    missing = sorted(set(names) - documented)
    assert not missing, f"settings missing from docs/configuration.md's table: {missing}"
