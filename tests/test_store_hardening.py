"""The store and the operating system, third round (issue 33): two folders with a file of the same
name, ``repair`` and ``ingest`` pointed at a folder that is not a store, a file name that is not
UTF-8, a file-size limit, a reader that closes the pipe and a working folder that was deleted. Each
keeps every document, touches nothing it does not own, and ends in one ``error:`` line or none."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rag_core.cli import main as cli_main
from rag_core.ingest.corpus import DocumentStore

BM25 = ["--mode", "bm25", "--rerank-depth", "0", "--chunk-size", "64", "--overlap", "8"]
ALPHA_A = "Alpha: the zorblat reactor runs on flux crystals."
ALPHA_B = "Alpha, second edition: the quintessence drive needs warp coils."


def ingest(capsys, folder: Path, store: Path, *flags: str) -> tuple[int, dict, list[str]]:
    code = cli_main(["ingest", "--input", str(folder), "--store", str(store), "--json", *BM25, *flags])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err.strip().splitlines()


def sources(capsys, store: Path, question: str) -> list[str]:
    assert cli_main(["query", question, "--json", "--no-llm", "--store", str(store), *BM25]) == 0
    return [passage["source"] for passage in json.loads(capsys.readouterr().out)["passages"]]


@pytest.fixture
def two_folders(tmp_path):
    for name, text in (("A", ALPHA_A), ("B", ALPHA_B)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "alpha.txt").write_text(text)
    return tmp_path / "A", tmp_path / "B"


# --- one store, two folders ---------------------------------------------------------------------
def test_a_file_of_the_same_name_in_another_folder_never_replaces_the_first(two_folders, tmp_path, capsys):
    a, b = two_folders
    store = tmp_path / "store"
    assert ingest(capsys, a, store)[0] == 0
    code, report, err = ingest(capsys, b, store)
    assert code == 2  # nothing of B could be ingested: said in one line
    assert err[-1] == (f"error: nothing could be ingested from {b} (alpha.txt: the store already holds alpha.txt "
                       f"from another folder ({a.resolve() / 'alpha.txt'}); not replaced: ingest the two folders into "
                       "different --store folders, or their common parent folder (ids then keep the folder))")
    assert report["skipped"] == [{"path": "alpha.txt", "reason": err[-1].split("(alpha.txt: ")[1][:-1]}]
    assert DocumentStore(store).corpus().by_id["alpha.txt"].text == ALPHA_A  # A's document, as it was
    assert sources(capsys, store, "zorblat reactor flux crystals") == ["alpha.txt"]


def test_the_other_files_of_the_second_folder_are_ingested(two_folders, tmp_path, capsys):
    a, b = two_folders
    (b / "bravo.txt").write_text("Bravo: the gravitron lens bends starlight.")
    store = tmp_path / "store"
    ingest(capsys, a, store)
    code, report, _ = ingest(capsys, b, store)
    assert (code, report["documents_read"], report["documents"]) == (0, 1, 2)
    assert [item["path"] for item in report["skipped"]] == ["alpha.txt"]
    assert DocumentStore(store).corpus().by_id["alpha.txt"].text == ALPHA_A
    assert sources(capsys, store, "gravitron lens starlight") == ["bravo.txt"]


def test_a_folder_that_was_moved_replaces_its_documents(two_folders, tmp_path, capsys):
    a, _ = two_folders
    store = tmp_path / "store"
    ingest(capsys, a, store)
    (a / "alpha.txt").write_text(ALPHA_B)
    moved = a.rename(tmp_path / "A-moved")  # the stored file is gone: no clash, the new version replaces it
    code, report, _ = ingest(capsys, moved, store)
    assert (code, report["skipped"], report["documents"]) == (0, [], 1)
    assert DocumentStore(store).corpus().by_id["alpha.txt"].text == ALPHA_B


def test_a_copy_of_the_folder_and_its_store_ingests_as_before(two_folders, tmp_path, capsys):
    import shutil

    a, _ = two_folders
    (a / "bravo.txt").write_text("Bravo: the gravitron lens bends starlight.")
    ingest(capsys, a, tmp_path / "store")
    copy, store = shutil.copytree(a, tmp_path / "A-copy"), shutil.copytree(tmp_path / "store", tmp_path / "store-copy")
    (copy / "bravo.txt").unlink()  # the same bytes in alpha.txt: the same document, not a clash
    code, report, _ = ingest(capsys, copy, store)
    assert (code, report["skipped"], report["documents"]) == (0, [], 2)
    (copy / "alpha.txt").write_text(ALPHA_B)  # now different bytes, and the original still exists: refused
    assert ingest(capsys, copy, store)[0] == 2
    assert DocumentStore(store).corpus().by_id["alpha.txt"].text == ALPHA_A


# --- a folder that is not a store ---------------------------------------------------------------
@pytest.fixture
def users_folder(tmp_path):
    """A folder of the user's own that happens to hold files of a store's names."""
    folder = tmp_path / "mine"
    (folder / "documents").mkdir(parents=True)
    (folder / "documents" / "registry.json").write_text('{"tax": "2024 receipts"}')
    connection = sqlite3.connect(folder / "cache.sqlite")
    connection.execute("CREATE TABLE contacts (name TEXT)")
    connection.commit()
    connection.close()
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else b"<dir>"
            for path in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("command", [["repair"], ["repair", "--check"], ["ingest", "--input", "{docs}"]])
def test_repair_and_ingest_touch_nothing_in_a_folder_that_is_not_a_store(users_folder, two_folders, capsys, command):
    before = snapshot(users_folder)
    argv = [part.format(docs=two_folders[0]) for part in command]
    assert cli_main([*argv, "--store", str(users_folder), *BM25]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "nothing was changed" in err[-1], err
    assert snapshot(users_folder) == before  # no *.damaged, no new file


def test_repair_still_repairs_a_store_an_ingest_wrote(two_folders, tmp_path, capsys):
    store = tmp_path / "store"
    ingest(capsys, two_folders[0], store)
    (store / "documents" / "registry.json").write_text("{")  # damaged
    assert cli_main(["repair", "--store", str(store), *BM25]) == 0
    assert "the registry was rebuilt" in capsys.readouterr().out
    assert sources(capsys, store, "zorblat reactor flux crystals") == ["alpha.txt"]


# --- names, limits, pipes, the working folder ---------------------------------------------------
def test_a_file_name_that_is_not_utf8_is_ingested_with_an_escaped_id(tmp_path, capsys):
    folder = tmp_path / "latin"
    folder.mkdir()
    (folder / "good.txt").write_text("Good: the chronoton field decays slowly.")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as handle:  # Latin-1 name, invalid UTF-8
        handle.write(b"Cafe: the zorblat reactor runs on flux crystals.")
    code, report, _ = ingest(capsys, folder, tmp_path / "store")
    assert (code, report["documents_read"], report["skipped"]) == (0, 2, [])
    assert sources(capsys, tmp_path / "store", "zorblat reactor flux crystals")[0] == "caf\\udce9.txt"


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("rag-pipeline")  # the console script: no module search in the cwd
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, **kwargs)


def test_a_file_size_limit_is_one_line_and_the_store_stays_as_it_was(two_folders, tmp_path, capsys):
    store, big = tmp_path / "store", tmp_path / "big"
    ingest(capsys, two_folders[0], store)
    big.mkdir()
    (big / "long.txt").write_text(" ".join(f"word{number}" for number in range(40_000)))  # a 350 KB document
    limit = 100_000  # bytes any file may grow to
    done = cli("ingest", "--input", str(big), "--store", str(store), *BM25,
               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: cannot use the store {store}: ")
    assert "File too large (over the file-size limit: see ulimit -f)" in done.stderr
    assert sorted(DocumentStore(store).registry()) == ["alpha.txt"]
    assert sources(capsys, store, "zorblat reactor flux crystals") == ["alpha.txt"]


@pytest.mark.parametrize("command", [["components", "--json"], ["--help"]])  # the help is flushed at exit only
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(command):
    script = Path(sys.executable).with_name("rag-pipeline")
    process = subprocess.Popen([str(script), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # `| head -c 0`: gone before the command writes
    err = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert code == 141 or (command == ["--help"] and code == 0)  # 128 + SIGPIPE (argparse drops some write errors)
    assert err == "", err  # no BrokenPipeError traceback, no "Exception ignored"


def test_a_deleted_working_folder_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    script = Path(sys.executable).with_name("rag-pipeline")
    done = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "{script}" query anything --store '
                                       f'"{tmp_path / "store"}" --plugins plugin.py'],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["error: the current working folder no longer exists (deleted or moved "
                                                "away); cd into an existing folder and run the command again"]


def test_a_cache_whose_header_gives_page_size_0_is_damage_not_a_crash(two_folders, tmp_path, capsys):
    store = tmp_path / "store"
    # in a process of its own: an ingest here would hold the cache open until the garbage collector closes it,
    # and closing checkpoints the write-ahead log into the file, header included (a full run failed that way)
    assert cli("ingest", "--input", str(two_folders[0]), "--store", str(store), *BM25).returncode == 0
    (store / "cache.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 4080)  # page size 0: was a ZeroDivisionError
    done = cli("ingest", "--input", str(two_folders[0]), "--store", str(store), "--json", *BM25)  # a process that
    code, report = done.returncode, json.loads(done.stdout)  # has not opened the cache (this one has: not checked)
    assert code == 0 and report["repaired"][0].startswith(f"the store's file {store / 'cache.sqlite'} is damaged "
                                                          "(not an SQLite database (its header's page size is 0))")
    assert (store / "cache.sqlite.damaged").exists()


def test_an_ingest_may_start_from_a_seeded_embedding_cache(two_folders, tmp_path, capsys):
    seeded, store = tmp_path / "seeded", tmp_path / "store"
    ingest(capsys, two_folders[0], store)
    seeded.mkdir()
    with sqlite3.connect(store / "cache.sqlite") as source, sqlite3.connect(seeded / "cache.sqlite") as target:
        source.backup(target)  # a cache of the store's kind: not the user's own file
    code, report, _ = ingest(capsys, two_folders[0], seeded)
    assert (code, report["documents"], report["repaired"]) == (0, 1, [])
