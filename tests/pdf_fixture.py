"""Tiny PDF files written by hand for tests: text lines per page (Helvetica), or blank pages
(what a scan without OCR looks like to a text extractor); optionally with ligature glyphs (as
TeX and InDesign set "ff", "fi": the font's encoding names the glyphs /ff, /fi, ...), printed page
labels (roman front matter) and full-page images (a scan)."""

from __future__ import annotations

from pathlib import Path

# Ligature characters in a page's lines are drawn as these glyphs (codes 1-7 of the font).
LIGATURES = {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "longst", "ﬆ": "st"}
_LIGATURE_CODES = {char: chr(code) for code, char in enumerate(LIGATURES, start=1)}
_DIFFERENCES = " ".join(f"{code} /{name}" for code, name in enumerate(LIGATURES.values(), 1))


def _escape(text: str) -> str:
    text = "".join(_LIGATURE_CODES.get(char, char) for char in text)
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(
    path: Path,
    pages: list[list[str]],
    title: str | None = None,
    *,
    page_labels: str | None = None,
    scanned: frozenset[int] = frozenset(),
) -> Path:
    """A PDF with one page per item of `pages`, each a list of text lines (empty: no text).
    `page_labels`: the catalog's /PageLabels number tree, e.g. `0 << /S /r >> 2 << /S /D >>`
    (pages i, ii, then 1, 2, ...). `scanned`: indexes of pages drawn as a full-page image (their
    lines, if any, drawn over it, as a scanner's label)."""
    objects: list[bytes] = []
    page_ids = [5 + 2 * index for index in range(len(pages))]
    labels = f" /PageLabels << /Nums [{page_labels}] >>" if page_labels else ""
    objects.append(f"<< /Type /Catalog /Pages 2 0 R{labels} >>".encode())
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding "
        b"/BaseEncoding /WinAnsiEncoding /Differences [" + _DIFFERENCES.encode() + b"] >> >>"
    )
    objects.append(  # a 1x1 grey image, stretched over a page: what a scan is to an extractor
        b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Length 1 >>\nstream\n\x80\nendstream"
    )
    for index, lines in enumerate(pages):
        content_id = page_ids[index] + 1
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >> >>".encode()
        )
        ops = ["q 612 0 0 792 0 0 cm /Im1 Do Q"] if index in scanned else []
        if lines:
            ops.append("BT /F1 12 Tf 72 720 Td 16 TL")
            ops += [f"({_escape(line)}) Tj T*" for line in lines]
            ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"
        )
    info_id = None
    if title is not None:
        objects.append(f"<< /Title ({_escape(title)}) >>".encode("latin-1"))
        info_id = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    info = f" /Info {info_id} 0 R" if info_id else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path
