"""Printable document ids: control characters escaped, ordinary paths unchanged, no two paths alike."""

from __future__ import annotations

import pytest

from rag_core.doc_ids import escape_controls, printable_doc_id


@pytest.mark.parametrize("path", ["guides/api-reference.pdf", "Jahresbericht ü 2024.pdf", "a b/c,d (1).md", "数据.txt"])
def test_ordinary_paths_are_unchanged(path):
    assert printable_doc_id(path) == path


@pytest.mark.parametrize("path, expected", [
    ("a\nb.txt", "a\\nb.txt"), ("a\rb\tc.txt", "a\\rb\\tc.txt"), ("bell\x07.pdf", "bell\\x07.pdf"),
    ("rtl\u202eFDP.exe.pdf", "rtl\\u202eFDP.exe.pdf"), ("line\u2028sep.md", "line\\u2028sep.md"),
    ("del\x7f.txt", "del\\x7f.txt"),
])
def test_control_characters_are_escaped(path, expected):
    assert printable_doc_id(path) == expected
    assert printable_doc_id(path).isprintable()


def test_different_paths_never_share_an_id():
    # a real newline, and a file whose name holds a backslash and an "n"
    assert printable_doc_id("a\nb.txt") != printable_doc_id("a\\nb.txt")


def test_escape_controls_leaves_printable_ids_alone():
    printable = printable_doc_id("x\ny\\z.txt")
    assert escape_controls(printable) == printable
    assert escape_controls("x\ny") == "x\\ny"


def test_a_file_name_that_is_not_utf8_gets_an_id_that_is():
    # os.listdir gives each byte that is not UTF-8 as a lone surrogate (surrogateescape)
    path = b"caf\xe9 \xff.txt".decode("utf-8", "surrogateescape")
    assert path == "caf\udce9 \udcff.txt"
    doc_id = printable_doc_id(path)
    assert doc_id == "caf\\udce9 \\udcff.txt"
    assert doc_id.encode("utf-8").decode() == doc_id  # UTF-8 text, JSON and terminals can hold it
    assert doc_id != printable_doc_id("café \xff.txt")  # the same name in Latin-1 read right is another file
