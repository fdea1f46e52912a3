"""Table rows as matchable lines (``table_text``): the row builder, where lines are anchored, and the
indexed text of chunks, against hand-written expected strings."""

from __future__ import annotations

from rag_core.ingest.corpus import Corpus
from rag_core.ingest.table_text import clean_cell, locate_rows, row_lines, split_header
from rag_core.records import Chunk, Document
from rag_core.retrieve.context import indexed_texts, table_lines


def test_rows_carry_caption_label_and_headers():
    lines = row_lines(["Region", "2019", "2018"], [["Americas", "$1,234", "(1,100)"], ["Europe", "980", "870"]],
                      "Segment revenue (in millions)")
    assert lines == [(0, "Segment revenue (in millions) | Americas | 2019: $1,234 | 2018: (1,100)"),
                     (1, "Segment revenue (in millions) | Europe | 2019: 980 | 2018: 870")]


def test_header_row_repeated_as_first_row_is_dropped_and_no_caption_leaves_no_field():
    assert row_lines(["Item", "Cost"], [["Item", "Cost"], ["Rent", "10"]]) == [(1, "Rent | Cost: 10")]


def test_two_row_header_without_label_is_joined_column_wise():
    header = ["", "Year ended", "Year ended"]
    rows = [["", "FY2019", "2018"], ["Net sales", "5,000", "4,100"]]
    assert split_header(header, rows) == (["", "Year ended FY2019", "Year ended 2018"], [["Net sales", "5,000", "4,100"]])
    assert row_lines(header, rows) == [(1, "Net sales | Year ended FY2019: 5,000 | Year ended 2018: 4,100")]


def test_a_row_of_amounts_is_not_taken_for_a_header():
    names, body = split_header(["", "2019"], [["", "1,234"], ["Sales", "9"]])
    assert names == ["", "2019"] and len(body) == 2


def test_symbol_cells_join_their_neighbours_under_either_header():
    # Filings set "$" and ")" in columns of their own, often with the header over the "$" column.
    header = ["", "2019", "", "", "2018", ""]
    row = ["Net loss", "$", "(1,234", ")", "(900", ")"]
    assert row_lines(header, [row]) == [(0, "Net loss | 2019: $(1,234) | 2018: (900)")]


def test_section_rows_without_values_give_no_line_and_empty_cells_are_left_out():
    rows = [["Current assets:", "", ""], ["Cash", "", "12"]]
    assert row_lines(["", "2019", "2018"], rows) == [(1, "Cash | 2018: 12")]


def test_rows_wider_than_the_header_keep_their_values():
    assert row_lines(["Item"], [["Rent", "10", "11"]]) == [(0, "Rent | 10 | 11")]


def test_clean_cell():
    assert clean_cell("Total revenue . . . . . .  1|2\n**x**") == "Total revenue 1/2 x"
    assert clean_cell(None) == ""


def test_rows_are_anchored_where_their_first_cell_is():
    page = "Intro text.\nRegion\n2019\nAmericas\n$1,234\nNorth\nAmerica\n7\nTotal\n9"
    rows = [["Region", "2019"], ["Americas", "$1,234"], ["North America", "7"], ["Missing", "8"], ["Total", "9"]]
    lines = [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    located = locate_rows(page, rows, lines, start=page.index("Region"))
    assert located == [(page.index("Americas"), "a"), (page.index("North"), "b"),  # words across line breaks
                       (page.index("North"), "c"),  # not found: the previous row's offset
                       (page.index("Total"), "d")]
    assert locate_rows(page, [["Zzz", "1"]], [(0, "z")], start=5) == [(5, "z")]


def _document() -> Document:
    text = "Intro paragraph here. Table follows: Americas 1,234 Europe 980. After the table."
    rows = ((text.index("Americas"), "Revenue | Americas | 2019: 1,234"),
            (text.index("Europe"), "Revenue | Europe | 2019: 980"))
    return Document("d.pdf", text, (0,), "h", table_rows=rows, extraction="table_text")


def _chunk(document: Document, start: int, end: int) -> Chunk:
    text = document.text[start:end]
    return Chunk(Chunk.make_id(document.doc_id, start, end, text), document.doc_id, text, start, end, 1, 1)


def test_a_chunk_is_indexed_with_the_lines_anchored_inside_it_and_shown_unchanged():
    document = _document()
    split = document.text.index("Europe")
    first, second, before = _chunk(document, 0, split), _chunk(document, split, len(document.text)), _chunk(document, 0, 10)
    assert table_lines(document, first.char_start, first.char_end) == ["Revenue | Americas | 2019: 1,234"]
    texts = indexed_texts([first, second, before], Corpus.of([document]), "none")
    assert texts == [first.text + "\n\nRevenue | Americas | 2019: 1,234",
                     second.text + "\n\nRevenue | Europe | 2019: 980",
                     before.text]
    assert first.text == document.text[:split]  # the shown text is the document's span
    titled = indexed_texts([second], Corpus.of([document]), "title")
    assert titled == ["d\n\n" + second.text + "\n\nRevenue | Europe | 2019: 980"]


def test_without_table_rows_the_indexed_text_is_the_chunk_text():
    document = Document("d.pdf", "Plain text only.", (0,), "h")
    chunk = _chunk(document, 0, len(document.text))
    assert indexed_texts([chunk], Corpus.of([document]), "none") == ["Plain text only."]


def test_page_table_rows_become_document_offsets_in_order():
    document = Document.from_pages("d.pdf", ["one two", "three four"], "h",
                                   page_table_rows=[(2, 6, "b"), (1, 4, "a"), (2, 0, "c")])
    assert document.table_rows == ((4, "a"), (9, "c"), (15, "b"))
    assert document.text[9:14] == "three" and document.text[15:] == "four"
    assert Document.from_pages("d.pdf", ["x"], "h").table_rows == ()


def test_dense_windows_map_to_the_shown_text_when_table_lines_follow_it(tmp_path):
    from types import SimpleNamespace

    from rag_core.retrieve.retrievers.base import ChunkSet
    from rag_core.retrieve.retrievers.dense import DenseRetriever
    from rag_core.retrieve.windows import Window

    unit = Chunk("u", "d.pdf", "alpha beta gamma", 100, 116, 1, 1)
    indexed = "Title\n\n" + unit.text + "\n\nRevenue | Americas | 2019: 1,234"  # prefix 7 characters
    retriever = DenseRetriever("dense", SimpleNamespace(dense_pooling="max"), None)
    windows = [Window("u#w0", "u", 0, 3, 0, 14, 0, 4), Window("u#w1", "u", 1, 3, 14, 30, 4, 8),
               Window("u#w2", "u", 2, 3, 30, len(indexed), 8, 12)]
    searched = retriever._searched(ChunkSet([unit], tmp_path, "k", (), lambda: [indexed]), windows)
    spans = [(record.char_start, record.char_end, record.text) for record in searched.chunks]
    assert spans == [(100, 107, "alpha b"), (107, 116, "eta gamma"), (116, 116, "")]  # the last: table lines only
    assert searched.texts == [indexed[0:14], indexed[14:30], indexed[30:]]
