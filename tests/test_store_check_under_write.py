"""The store check reads a Chroma or cache database's bytes without SQLite's locks; a file that another
process is writing (an ingest beside a query: ``tests/test_soak.py``) can show a header counting pages not yet
written. That is not damage: ``check_sqlite`` looks again under a read transaction, which waits for the writer,
and only a file still short then is "truncated". Here the writer is a real second process holding SQLite's
exclusive lock while the file's header counts pages that are not there, as a commit in progress shows it."""

import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from rag_core.errors import DamagedStore
from rag_core.retrieve.store_check import CACHE_TABLES, check_sqlite

WRITER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
connection.execute("ROLLBACK")
connection.close()
"""


def _database(tmp_path):
    path = tmp_path / "cache.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=DELETE")
    connection.execute("CREATE TABLE embeddings (model TEXT, sha1 TEXT, vector BLOB)")
    connection.executemany("INSERT INTO embeddings VALUES (?, ?, ?)", [("m", str(i), b"x" * 500) for i in range(50)])
    connection.commit()
    connection.close()
    return path


def _count_more_pages(path, more):
    data = bytearray(path.read_bytes())
    data[28:32] = (int.from_bytes(data[28:32], "big") + more).to_bytes(4, "big")
    path.write_bytes(bytes(data))


def test_a_file_mid_commit_in_another_process_is_not_damage(tmp_path):
    path = _database(tmp_path)
    intact = path.read_bytes()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert writer.stdout.readline().strip() == "locked"
        _count_more_pages(path, 5)  # the header of a commit in progress: pages counted, not yet written
        outcome: list[BaseException | None] = []

        def check() -> None:
            try:
                check_sqlite(path, tmp_path, CACHE_TABLES, "cache")
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                outcome.append(exc)

        checking = threading.Thread(target=check)
        checking.start()
        time.sleep(1.0)
        assert not outcome, f"decided while the writer held its lock: {outcome}"
        path.write_bytes(intact)  # the commit completes...
        writer.stdin.write("\n")  # ...and the writer lets go
        writer.stdin.flush()
        checking.join(60)
        assert outcome == [None]
    finally:
        writer.kill()
        writer.wait()


def test_a_file_still_short_under_the_read_lock_is_truncated(tmp_path):
    path = _database(tmp_path)
    _count_more_pages(path, 5)
    with pytest.raises(DamagedStore, match=r"is damaged \(truncated: \d+ bytes, its header says \d+\)"):
        check_sqlite(path, tmp_path, CACHE_TABLES, "cache")
