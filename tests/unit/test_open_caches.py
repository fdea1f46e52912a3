"""A store check never opens, with plain file I/O, a cache this process holds open through SQLite:
closing that file descriptor would drop the connection's POSIX locks (``rag_core.retrieve.cache.OPEN_HERE``)."""

from __future__ import annotations

import gc
from pathlib import Path

from rag_core.retrieve.cache import ScoreCache, open_in_this_process
from rag_core.retrieve.store_check import damaged_derived


def test_a_cache_open_here_is_not_read_by_the_store_check(tmp_path, monkeypatch):
    cache = ScoreCache(tmp_path / "cache.sqlite")
    assert open_in_this_process(tmp_path / "cache.sqlite")
    opened: list[str] = []
    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, *args, **kwargs: opened.append(self.name) or real_open(self, *args, **kwargs))
    assert list(damaged_derived(tmp_path)) == [] and "cache.sqlite" not in opened
    cache.close()
    assert not open_in_this_process(tmp_path / "cache.sqlite")
    assert list(damaged_derived(tmp_path)) == [] and "cache.sqlite" in opened  # closed: checked as before
    again = ScoreCache(tmp_path / "cache.sqlite")
    del again
    gc.collect()
    assert not open_in_this_process(tmp_path / "cache.sqlite")  # released when collected, too
