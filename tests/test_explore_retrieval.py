"""The exploration notebook with the retrieval techniques on: RM3 expansion, parent-child chunks and a
ranx fusion method, each shown in its own table and recorded."""

from __future__ import annotations

import nbformat
import papermill
import pytest
from sweep_fixtures import tiny_corpus  # noqa: F401 - fixture

from rag_core.paths import NOTEBOOKS_DIR

pytestmark = pytest.mark.slow


def test_explore_notebook_shows_expansion_children_and_fusion(tiny_corpus, tmp_path):  # noqa: F811
    output = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS_DIR / "01-explore.ipynb"), str(output), progress_bar=False, cwd=str(NOTEBOOKS_DIR),
        kernel_name="python3",
        parameters=dict(input_dir=str(tiny_corpus.documents), store=str(tmp_path / "store"),
                        query="How often should a sourdough starter be fed?", document="sourdough.md",
                        chunk_size=40, overlap=8, k=2, rerank_depth=0, query_expansion="rm3", rm3_docs=2,
                        child_size=10, fusion="wsum", fusion_weights="0.3,0.7"))
    executed = nbformat.read(str(output), as_version=4)
    last = [cell for cell in executed.cells if cell.cell_type == "code"][-1]
    summary = next(o["data"]["application/json"] for o in last.outputs if "application/json" in o.get("data", {}))
    assert summary["expansion"]["method"] == "rm3" and summary["expansion"]["terms"]
    assert summary["children_ranked"] > 0
    assert summary["stages"] == ["dense", "bm25", "fused"]
    html = "".join(o.get("data", {}).get("text/html", "") for cell in executed.cells for o in cell.get("outputs", []))
    assert "rm3 term" in html and "child rank" in html and "parent rank" in html
