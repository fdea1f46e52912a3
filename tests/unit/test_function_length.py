"""No function or method in ``rag_core`` is longer than 80 lines (issue 32): a longer one is split into
named steps. Read with ``ast`` from the source files; nothing of rag_core is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rag_core"
MAX_LINES = 80


def long_functions(root: Path, limit: int) -> list[str]:
    """``path:line name (N lines)`` for each function of the .py files below `root` longer than `limit`
    lines, from its ``def`` line to its last line (decorators not counted)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_rag_core_is_over_80_lines():
    assert PACKAGE.is_dir()
    assert long_functions(PACKAGE, MAX_LINES) == []


def test_the_check_counts_def_to_last_line_and_finds_nested_functions(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(3))
    (package / "m.py").write_text(f"@decorator\ndef short():\n{body}\n\n\nclass C:\n    def method(self):\n"
                                  f"        def inner():\n            pass\n        return 1\n")
    assert long_functions(package, 4) == []  # short: 4 lines (def + 3), the decorator not counted
    assert long_functions(package, 3) == ["pkg/m.py:2 short (4 lines)", "pkg/m.py:9 method (4 lines)"]
    assert long_functions(package, 1) == ["pkg/m.py:2 short (4 lines)", "pkg/m.py:9 method (4 lines)",
                                          "pkg/m.py:10 inner (2 lines)"]
