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
