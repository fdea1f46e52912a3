"""Build the bundled sample corpus and its golden question set.

Step 1 renders every ``data/source/**/*.md`` file into
``data/documents/<same relative path>.pdf``: A4 pages with real, extractable
text and bold, larger headings.  Lines are laid out here and drawn with
``page.insert_text`` in the PDF base-14 fonts (Helvetica, Helvetica-Bold,
Courier).  MuPDF's HTML/``Story`` engine is not used because it always applies
font ligatures, so "fi" would come back from ``get_text()`` as U+FB01.

Left out on purpose: only a Markdown subset is understood (``#``..``###``
headings, blank-line separated paragraphs, ``- `` and ``1. `` list items,
fenced code blocks, inline ``**bold**`` and ```code```); tables, links,
images, nested lists, page numbers, headers/footers and bookmarks are not
rendered; lines break only at spaces (no hyphenation); sources must be ASCII.
Metadata is fixed and no new file id is generated, so a rebuild with the same
PyMuPDF version is byte-identical.

Step 2 reads ``data/golden/queries.yaml`` (needs PyYAML), finds every evidence
text in the extracted text of its PDF (case-insensitive, whitespace-normalised)
and writes ``data/golden/golden.jsonl`` with the 1-based page on which the
evidence starts.  An evidence text that is not found is an error (exit 1).

Usage, from any directory:
    python scripts/build_sample_corpus.py           # render PDFs, write golden set
    python scripts/build_sample_corpus.py --check   # verify only, write nothing:
        # PDFs must extract to the same text as a fresh render, golden.jsonl must
        # match what would be generated, and all evidence must be found
"""

import argparse
import json
import re
import sys
from pathlib import Path

import pymupdf
import yaml  # only used to read queries.yaml

ROOT = Path(__file__).resolve().parent.parent
SRC_DIR = ROOT / "data" / "source"
PDF_DIR = ROOT / "data" / "documents"
GOLDEN_DIR = ROOT / "data" / "golden"

PAGE = pymupdf.paper_rect("a4")
MARGIN = 72  # points on every side
BODY = 11.5  # body font size; headings are larger, see STYLE
# block kind -> (font for plain words, font size, space before, space after)
STYLE = {"h1": ("hebo", 20, 0, 12), "h2": ("hebo", 15, 14, 6), "h3": ("hebo", 12.5, 10, 4),
         "p": ("helv", BODY, 0, 7), "li": ("helv", BODY, 0, 4), "code": ("cour", 10, 0, 7)}
INDENT = {"li": 16, "code": 14}
METADATA = {"producer": "RAG workbench sample corpus builder", "creator": "scripts/build_sample_corpus.py",
            "author": "Quayside Labs (fictional)", "creationDate": "", "modDate": "",
            "subject": "Fictional product documentation for retrieval testing"}


def parse_blocks(md: str) -> list[tuple[str, str]]:
    """Split the Markdown subset into (kind, text) blocks; kind is a STYLE key."""
    blocks, para, code, in_item = [], [], None, False

    def flush():
        if para:
            blocks.append(("p", " ".join(para)))
            para.clear()

    for line in md.splitlines():
        stripped = line.strip()
        in_item = in_item and bool(stripped) and code is None
        if code is not None:  # inside a fenced code block
            if stripped.startswith("```"):
                blocks.append(("code", "\n".join(code)))
                code = None
            else:
                code.append(line.rstrip())
        elif stripped.startswith("```"):
            flush()
            code = []
        elif m := re.match(r"^(#{1,3})\s+(.*)$", stripped):
            flush()
            blocks.append((f"h{len(m.group(1))}", m.group(2)))
        elif m := re.match(r"^(-|\d+\.)\s+(.*)$", stripped):
            flush()
            number = "" if m.group(1) == "-" else m.group(1) + " "
            blocks.append(("li", number + m.group(2)))
            in_item = True
        elif stripped and in_item:
            blocks[-1] = ("li", blocks[-1][1] + " " + stripped)  # list item continues
        elif stripped:
            para.append(stripped)
        else:
            flush()
    flush()
    return blocks


def words_with_fonts(kind: str, text: str) -> list[list[tuple[str, str]]]:
    """Words as lists of (piece, base-14 font); **bold** -> Helvetica-Bold,
    `code` -> Courier.  Pieces not separated by whitespace form one word."""
    words, glue = [], False  # glue: the previous piece ended inside a word
    for part in re.split(r"(\*\*.+?\*\*|`[^`]+`)", text):
        font = STYLE[kind][0]
        if part.startswith("**"):
            part, font = part[2:-2], "hebo"
        elif part.startswith("`"):
            part, font = part[1:-1], "cour"
        for m in re.finditer(r"\S+", part):
            if glue and m.start() == 0 and words:
                words[-1].append((m.group(), font))
            else:
                words.append([(m.group(), font)])
        if part:
            glue = not part[-1].isspace()
    return words


def render_pdf(md_path: Path) -> bytes:
    """Lay the blocks out line by line with base-14 fonts (no shaping, no ligatures)."""
    md = md_path.read_text("utf-8")
    if not md.isascii():
        raise SystemExit(f"{md_path}: non-ASCII text cannot be drawn with base-14 fonts")
    doc = pymupdf.open()
    page, y = None, 0.0
    bottom, width = PAGE.height - MARGIN, PAGE.width - 2 * MARGIN
    blocks = parse_blocks(md)
    for kind, text in blocks:
        _, size, before, after = STYLE[kind]
        leading, x0 = size * 1.4, MARGIN + INDENT.get(kind, 0)
        if kind == "code":
            lines = [[[(ln, "cour")]] for ln in text.split("\n")]  # drawn as-is, never wrapped
        else:
            lines, line, used = [], [], 0.0
            for word in words_with_fonts(kind, text):
                w = sum(pymupdf.get_text_length(s, f, size) for s, f in word[:-1])
                w += pymupdf.get_text_length(word[-1][0] + " ", word[-1][1], size)
                if line and used + w > width - INDENT.get(kind, 0):
                    lines.append(line)
                    line, used = [], 0.0
                line.append(word)
                used += w
            lines.append(line)
        if page is not None and y > MARGIN:
            y += before
        # start a new page if the document has none yet, or to keep a heading
        # together with (at least) two lines of the text that follows it
        if page is None or (kind[0] == "h" and y + leading + 2 * BODY * 1.4 > bottom):
            page, y = doc.new_page(width=PAGE.width, height=PAGE.height), MARGIN
        for n, line in enumerate(lines):
            if y + leading > bottom:
                page, y = doc.new_page(width=PAGE.width, height=PAGE.height), MARGIN
            baseline, x = y + size, x0
            if kind == "li" and n == 0 and not re.match(r"\d+\. ", text):
                page.draw_circle((x0 - 8, baseline - size * 0.33), 1.8, color=None, fill=(0, 0, 0))
            for word in line:
                for n_piece, (piece, font) in enumerate(word, 1):
                    piece += " " if n_piece == len(word) else ""
                    page.insert_text((x, baseline), piece, fontname=font, fontsize=size)
                    x += pymupdf.get_text_length(piece, font, size)
            y += leading
        y += after
    doc.set_metadata({**METADATA, "title": blocks[0][1]})
    return doc.tobytes(garbage=4, deflate=True, clean=True, no_new_id=True)


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def page_texts(pdf: Path | bytes) -> list[str]:
    with pymupdf.open(pdf) if isinstance(pdf, Path) else pymupdf.open("pdf", pdf) as doc:
        return [page.get_text() for page in doc]


def locate(pages: list[str], needle: str) -> int | None:
    """1-based page where `needle` starts; matches may run onto the next page."""
    full, starts = "", []
    for text in map(normalise, pages):
        starts.append(len(full))
        full += text + " "
    pos = full.find(normalise(needle))
    if pos < 0:
        return None
    return max(i for i, start in enumerate(starts) if start <= pos) + 1


def build_golden(check: bool) -> int:
    queries = yaml.safe_load((GOLDEN_DIR / "queries.yaml").read_text("utf-8"))
    cache, lines, errors, ids = {}, [], [], set()
    for q in queries:
        if q["id"] in ids:
            errors.append(f"{q['id']}: duplicate query id")
        ids.add(q["id"])
        evidence = []
        for ev in q["evidence"]:
            pdf = PDF_DIR / ev["source"]
            if not pdf.exists():
                errors.append(f"{q['id']}: no such document {ev['source']}")
                continue
            pages = cache.setdefault(ev["source"], page_texts(pdf))
            page = locate(pages, ev["text"])
            if page is None:
                errors.append(f"{q['id']}: evidence not found in {ev['source']}: {ev['text']!r}")
                continue
            n_words = len(ev["text"].split())
            if not 8 <= n_words <= 45:
                print(f"warning: {q['id']}: evidence is {n_words} words long", file=sys.stderr)
            evidence.append({"source": ev["source"], "page": page, "text": ev["text"]})
        record = {"id": q["id"], "type": q["type"], "query": q["query"],
                  "answer": q["answer"], "evidence": evidence}
        lines.append(json.dumps(record, ensure_ascii=False))
    if errors:
        print("\n".join(["golden set errors:", *errors]), file=sys.stderr)
        return 1
    text = "\n".join(lines) + "\n"
    target = GOLDEN_DIR / "golden.jsonl"
    if check:
        if not target.exists() or target.read_text("utf-8") != text:
            print("golden.jsonl is stale: rerun without --check", file=sys.stderr)
            return 1
    else:
        target.write_text(text, "utf-8")
    print(f"golden set: {len(lines)} queries ok")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="verify PDFs and golden.jsonl are up to date; write nothing")
    args = parser.parse_args()
    stale = []
    for md in sorted(SRC_DIR.rglob("*.md")):
        rel = md.relative_to(SRC_DIR).with_suffix(".pdf")
        target, data = PDF_DIR / rel, render_pdf(md)
        if args.check:
            if not target.exists() or page_texts(target) != page_texts(data):
                stale.append(str(rel))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        pages = page_texts(data)
        print(f"{rel}: {len(pages)} pages, {sum(len(p.split()) for p in pages)} words")
    if stale:
        print("stale PDFs (rerun without --check): " + ", ".join(stale), file=sys.stderr)
        return 1
    return build_golden(args.check)


if __name__ == "__main__":
    sys.exit(main())
