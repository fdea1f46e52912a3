"""Real PDFs for tests, written with PyMuPDF: text pages, encrypted, image-only, corrupt."""

from __future__ import annotations

from pathlib import Path

import pymupdf


def write_pdf(path: Path, pages: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = pymupdf.open()
    for text in pages:
        page = pdf.new_page()
        page.insert_textbox(pymupdf.Rect(56, 56, 540, 790), text, fontsize=10)
    pdf.save(path)
    return path


def write_encrypted_pdf(path: Path) -> Path:
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "Confidential: the vault code is 0451.")
    pdf.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="user")
    return path


def write_image_only_pdf(path: Path) -> Path:
    pdf = pymupdf.open()
    page = pdf.new_page()
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 64), False)
    pixmap.clear_with(200)
    page.insert_image(page.rect, pixmap=pixmap)
    pdf.save(path)
    return path


def write_bad_input_folder(root: Path) -> dict[str, str]:
    """A folder of good and bad files; returns relative path -> expected reason keyword ('' = good)."""
    write_pdf(root / "manuals" / "report.pdf", ["The flux capacitor needs 1.21 gigawatts.", "Page two: time circuits."])
    write_pdf(root / "archive" / "report.pdf", ["Archived report: the DeLorean reaches 88 miles per hour."])
    (root / "notes.txt").write_text("Plain-text note about the hoverboard.\n")
    write_encrypted_pdf(root / "locked.pdf")
    write_image_only_pdf(root / "scan.pdf")
    (root / "empty.pdf").write_bytes(b"")
    (root / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not really a PDF \x00\x01")
    (root / "slides.pptx").write_bytes(b"PK\x03\x04 not supported")
    return {
        "manuals/report.pdf": "", "archive/report.pdf": "", "notes.txt": "",
        "locked.pdf": "encrypted", "scan.pdf": "no extractable text", "empty.pdf": "empty",
        "broken.pdf": "corrupt", "slides.pptx": "unsupported",
    }


def write_table_pdf(path: Path, before: str, header: list[str], rows: list[list[str]], after: str,
                    title: str | None = None) -> Path:
    """One page: a paragraph, a ruled table (header row first), a paragraph; optional metadata title."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((56, 70), before, fontsize=10)
    x0, y0, width, height = 56, 100, 120, 20
    for r, cells in enumerate([header, *rows]):
        for c, cell in enumerate(cells):
            rect = pymupdf.Rect(x0 + c * width, y0 + r * height, x0 + (c + 1) * width, y0 + (r + 1) * height)
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            page.insert_text((rect.x0 + 4, rect.y1 - 6), cell, fontsize=10)
    page.insert_text((56, y0 + (len(rows) + 1) * height + 30), after, fontsize=10)
    if title:
        pdf.set_metadata({"title": title})
    pdf.save(path)
    return path


def write_headed_pdf(path: Path, sections: list[tuple[str, str]], title: str | None = None) -> Path:
    """One page per (heading, body): the heading in 16 pt, the body in 10 pt."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = pymupdf.open()
    for heading, body in sections:
        page = pdf.new_page()
        page.insert_text((56, 70), heading, fontsize=16)
        page.insert_textbox(pymupdf.Rect(56, 90, 540, 790), body, fontsize=10)
    if title:
        pdf.set_metadata({"title": title})
    pdf.save(path)
    return path
