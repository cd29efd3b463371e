"""Upload test files of every format MindsDB's file handler reads, made here (offline)."""

from __future__ import annotations

import io
import zipfile

import pandas as pd

ROWS = [{"order_id": "A1B", "product": "Wireless Mouse", "notes": "Request color: black"},
        {"order_id": "3XZ", "product": "Bluetooth Speaker", "notes": "Gift wrap requested"},
        {"order_id": "Q7P", "product": "Aluminum Laptop Stand", "notes": "Prefer aluminum finish"}]


def frame() -> pd.DataFrame:
    return pd.DataFrame(ROWS)


def csv_bytes(sep: str = ",") -> bytes:
    return frame().to_csv(index=False, sep=sep).encode()


def json_bytes() -> bytes:
    return frame().to_json(orient="records").encode()


def parquet_bytes() -> bytes:
    buffer = io.BytesIO()
    frame().to_parquet(buffer, index=False)
    return buffer.getvalue()


def xlsx_bytes(sheets: dict[str, pd.DataFrame] | None = None) -> bytes:
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        for name, sheet in (sheets or {"orders": frame()}).items():
            sheet.to_excel(writer, sheet_name=name, index=False)
    return buffer.getvalue()


def text(paragraphs: int = 6) -> str:
    """A few paragraphs of plain English (more than one 500-character chunk)."""
    return "\n\n".join(
        f"Paragraph {i}. Refunds for order {i} take five business days once the parcel is back. "
        f"Exchanges of item {i} are free within thirty days, and gift wrap is offered at checkout. "
        f"Support answers questions about colour, size and delivery of product {i} every weekday."
        for i in range(paragraphs))


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A minimal PDF (standard Helvetica, one text line per entry) whose text pypdf reads."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    font = 3 + 2 * len(pages)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    for i, lines in enumerate(pages):
        shown = [line.replace(chr(92), "").replace("(", "").replace(")", "") for line in lines]
        body = "BT /F1 11 Tf 14 TL 50 760 Td " + " ".join(f"({line}) Tj T*" for line in shown) + " ET"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
                       f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode())
        objects.append(f"<< /Length {len(body)} >>\nstream\n{body}\nendstream".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_file(objects)


def pdf_file(objects: list[bytes]) -> bytes:
    """A PDF file of these numbered objects (1 is the catalog), with its xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write(b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets))
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def zipped(name: str, raw: bytes, extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, raw)
        for other, data in (extra or {}).items():
            archive.writestr(other, data)
    return buffer.getvalue()


def workbook(rows: int) -> bytes:
    """An ordinary xlsx of `rows` x 5 cells, one sheet (openpyxl reads ~100,000 cells a CPU-second
    here, twice: the bounds' scan, then pandas)."""
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("orders")
    sheet.append(["order_id", "product", "price", "notes", "qty"])
    for i in range(rows):
        sheet.append([i, f"product {i}", i * 0.5, "gift wrap" if i % 7 == 0 else "none", i % 9])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()
