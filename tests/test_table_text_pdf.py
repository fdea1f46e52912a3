"""table_text on a real PDF (PyMuPDF draws a ruled table, ``find_tables`` finds it): rows are indexed
with their caption and column headers, a query naming a row label and the caption finds the row's
chunk only with table_text, the shown passage is the document's text, and keys change only when on."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf

from conftest import run_cli
from rag_core.config import RagConfig
from rag_core.evaluate.evaluator import evaluate_config
from rag_core.evaluate.golden import load_golden
from rag_core.ingest.corpus import Corpus
from rag_core.ingest.files import read_documents
from rag_core.ingest.pdf_extract import read_pdf
from rag_core.retrieve.index import Index
from rag_core.retrieve.pipeline import Pipeline

BM25 = dict(mode="bm25", rerank_depth=0, chunk_size=30, overlap=0)
LABELS = ["Aurora", "Boreal", "Cobalt", "Delta", "Ember", "Fjord", "Garnet", "Harbor", "Iris", "Zephyr"]


def write_long_table_pdf(path: Path) -> Path:
    """A caption line, a ruled table (header Product | Backlog | Churn, ten rows) and a paragraph."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((56, 80), "Subscriber metrics by product", fontsize=10)
    x0, y0, width, height = 56, 100, 120, 20
    rows = [["Product", "Backlog", "Churn"]] + [[label, f"{1000 + 7 * i:,}", f"{i + 1}.5%"] for i, label in enumerate(LABELS)]
    for r, cells in enumerate(rows):
        for c, cell in enumerate(cells):
            rect = pymupdf.Rect(x0 + c * width, y0 + r * height, x0 + (c + 1) * width, y0 + (r + 1) * height)
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            page.insert_text((rect.x0 + 4, rect.y1 - 6), cell, fontsize=10)
    page.insert_textbox(pymupdf.Rect(56, 360, 540, 780), "The remaining pages discuss staffing, offices and the "
                        "outlook for the coming year in general terms without figures. " * 3, fontsize=10)
    pdf.save(path)
    return path


def test_find_tables_gives_row_lines_anchored_in_the_plain_text(tmp_path):
    path = write_long_table_pdf(tmp_path / "docs" / "m.pdf")
    plain = read_pdf(path.read_bytes(), "m.pdf")
    pdf = read_pdf(path.read_bytes(), "m.pdf", rows=True)
    assert pdf.pages == plain.pages and plain.table_rows == ()  # the shown text does not change
    lines = [line for _, _, line in pdf.table_rows]
    assert lines[0] == "Subscriber metrics by product | Aurora | Backlog: 1,000 | Churn: 1.5%"
    assert lines[-1] == "Subscriber metrics by product | Zephyr | Backlog: 1,063 | Churn: 10.5%"
    assert len(lines) == len(LABELS)
    text = pdf.pages[0]
    assert [text[offset:offset + len(label)] for (_, offset, _), label in zip(pdf.table_rows, LABELS)] == LABELS
    with_markdown = read_pdf(path.read_bytes(), "m.pdf", tables=True, rows=True)
    assert [line for _, _, line in with_markdown.table_rows] == lines
    assert with_markdown.pages[0][with_markdown.table_rows[-1][1]:].startswith("Zephyr | 1,063 | 10.5% |")


def test_a_row_label_with_the_caption_finds_the_rows_chunk_only_with_table_text(tmp_path):
    write_long_table_pdf(tmp_path / "docs" / "m.pdf")
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    query = "subscriber metrics Zephyr"
    found = {}
    for table_text in (False, True):
        pipeline = Pipeline(RagConfig(table_text=table_text, **BM25), corpus, tmp_path / "store")
        top = pipeline.retrieve(query).hits[0].chunk
        found[table_text] = top
        document = pipeline.corpus.by_id[top.doc_id]
        assert top.text == document.text[top.char_start:top.char_end]  # shown: the document's own text
        assert " | " not in top.text
    assert "Zephyr" in found[True].text and "Subscriber" not in found[True].text  # the row's chunk, not the caption's
    assert "Zephyr" not in found[False].text  # without table text the caption's chunk wins


def test_keys_change_only_with_table_text_and_extraction_is_cached(tmp_path):
    write_long_table_pdf(tmp_path / "docs" / "m.pdf")
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    off = Index(tmp_path / "store", corpus, RagConfig(**BM25))
    on = Index(tmp_path / "store", corpus, RagConfig(table_text=True, **BM25))
    assert off.corpus is corpus  # off: nothing extracted again, the keys of before
    assert on.corpus.documents[0].extraction == "table_text" and on.chunking_key != off.chunking_key
    assert [chunk.text for chunk in on.chunks] == [chunk.text for chunk in off.chunks]
    changed = [a != b for a, b in zip(on.indexed_texts(), off.indexed_texts())]
    assert any(changed) and not all(changed)  # only the chunks with table rows
    assert len(list((tmp_path / "store" / "extracted").glob("*-text+rows-v*.json"))) == 1


def test_eval_with_table_text_keeps_chunk_relevance_exact(tmp_path):
    write_long_table_pdf(tmp_path / "docs" / "m.pdf")
    corpus = Corpus.of(read_documents(tmp_path / "docs").documents)
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"id": "q1", "query": "staffing offices outlook", "evidence": [
        {"source": "m.pdf", "page": 1, "text": "The remaining pages discuss staffing"}]}) + "\n")
    queries = load_golden(golden, doc_ids=corpus.by_id)
    off, on = (evaluate_config(RagConfig(table_text=table_text, **BM25), corpus, queries, tmp_path / "store")
               for table_text in (False, True))
    # The shown text is unchanged, so the evidence is still located in it: one relevant chunk, not the page's.
    assert on.qrels["chunk"] == off.qrels["chunk"] and len(on.qrels["chunk"]["q1"]) == 1
    assert on.metrics["chunk/recall@5"] == off.metrics["chunk/recall@5"] == 1.0


def test_cli_ingest_and_query_with_table_text(tmp_path):
    write_long_table_pdf(tmp_path / "docs" / "m.pdf")
    store = tmp_path / "store"
    flags = ("--mode", "bm25", "--rerank-depth", "0", "--chunk-size", "30", "--overlap", "0", "--table-text")
    done = run_cli("ingest", "--input", str(tmp_path / "docs"), *flags, store=store)
    assert done.returncode == 0, done.stderr
    found = run_cli("query", "subscriber metrics Zephyr", "--no-llm", "--json", *flags, store=store)
    assert found.returncode == 0, found.stderr
    top = json.loads(found.stdout)["passages"][0]
    assert "Zephyr" in top["text"] and " | " not in top["text"]  # the row's chunk, shown as the document's text
    (tmp_path / "docs" / "m.pdf").unlink()  # the extraction is cached: a query needs no PDF
    assert run_cli("query", "Zephyr churn", "--no-llm", *flags, store=store).returncode == 0
