"""Windows through approximate search (issue 35): with ``dense_search: approximate`` the store's HNSW graph is
asked for ``WINDOW_DEPTH`` windows per unit wanted and those are pooled (exact search scores every window). A
unit whose only matching text lies in its second window is found with ``mean_top2`` and ``max`` on that path,
and missed with ``first``; on the packaged MiniLM (the corpus and question of ``test_dense_windows.py``)."""

from __future__ import annotations

import pytest
from test_dense_windows import NEEDLE, _index, _ranking, corpus, embedder  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("pooling", ["max", "mean_top2"])
def test_the_second_window_is_found_through_approximate_search(tmp_path, corpus, embedder, pooling):  # noqa: F811
    windowed = _index(tmp_path / pooling, corpus, pooling, embedder, dense_search="approximate")
    windowed.build()
    retriever = windowed.retriever("dense")
    assert retriever.mode == "approximate" and retriever.exact is None  # the store's index, not the matrix
    garden = next(chunk for chunk in windowed.chunks if chunk.doc_id == "garden.txt")
    windows = sorted((w for w in retriever.windows.values() if w.unit_id == garden.id), key=lambda w: w.index)
    assert len(windows) >= 2 and windows[0].char_end <= garden.text.index(NEEDLE)  # not in the first window
    assert [hit for hit, _ in _ranking(windowed)][0] == garden.id


def test_first_misses_it_through_approximate_search(tmp_path, corpus, embedder):  # noqa: F811
    first = _index(tmp_path / "first", corpus, "first", embedder, dense_search="approximate")
    first.build()
    assert first.retriever("dense").mode == "approximate"
    garden = next(chunk for chunk in first.chunks if chunk.doc_id == "garden.txt")
    assert [hit for hit, _ in _ranking(first)][0] != garden.id
