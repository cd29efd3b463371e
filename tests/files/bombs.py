"""Small files that cost a reader far more than their size (issue 39's upload bombs), for
tests/test_server_files.py and benchmarks/bench_isolation.py. Built in pieces: the maker
never holds what the file unpacks to."""

from __future__ import annotations

import gzip
import io
import zipfile

from tests.files.makers import pdf_file


def shared_string_workbook() -> bytes:
    """~3.5 KB of xlsx: one 1 MB shared string referenced by 150 cells (150 MB of values),
    written by hand (openpyxl cuts a cell at 32,767 characters and writes strings inline)."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    parts = {
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        '<Override PartName="/xl/sharedStrings.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
        "_rels/.rels": f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f'<Relationship Id="r1" Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>'
        '<sheet name="s" sheetId="1" r:id="r1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        f'relationships"><Relationship Id="r1" Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/>'
        f'<Relationship Id="r2" Type="{rel}/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
        "xl/sharedStrings.xml": f'<sst xmlns="{main}" count="1" uniqueCount="1"><si><t>{"x" * 2**20}'
        "</t></si></sst>",
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{main}"><sheetData>' + "".join(
            f'<row r="{r}"><c r="A{r}" t="s"><v>0</v></c></row>' for r in range(1, 151))
        + "</sheetData></worksheet>",
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return out.getvalue()


def zipped_csv(mb: int) -> bytes:
    """`mb` MB of CSV rows zipped (written in pieces: the test never holds them)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("big.csv", "w") as f:
        f.write(b"id,product,notes\n")
        for _ in range(mb):
            f.write(b"1,Wireless Mouse,Request color black\n" * (2**20 // 37))
    return out.getvalue()


def gzipped_zeros(mb: int) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as f:
        for _ in range(mb):
            f.write(bytes(2**20))
    return out.getvalue()


def shared_stream_pdf(pages: int = 12, operators: int = 90_000, padding: int = 0) -> bytes:
    """A few KB of PDF: `pages` pages sharing one compressed content stream of `operators`
    text operators (the finding: ~2 CPU-s a page, going on after the client left).
    `padding`: bytes of random data in an object no page uses, so the file is that much
    larger (its CPU budget, `--pdf-cpu-per-mb`, grows with it) but parses as long."""
    import os
    import zlib

    stream = zlib.compress(b"BT /F1 1 Tf " + b"(a) Tj " * operators + b"ET", 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
               f"<< /Length {len(stream)} /Filter /FlateDecode >>\nstream\n".encode() + stream
               + b"\nendstream"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources "
                b"<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"] * pages
    if padding:
        objects.append(f"<< /Length {padding} >>\nstream\n".encode() + os.urandom(padding) + b"\nendstream")
    return pdf_file(objects)
