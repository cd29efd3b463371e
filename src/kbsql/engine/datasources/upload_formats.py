"""Uploaded files as tables, read the way MindsDB's file handler reads them.

MindsDB's `FileReader` (mindsdb/integrations/utilities/files/file_reader.py) decides the
format by the file name's extension, else by the content (Parquet's magic bytes, the
signature of an xlsx or PDF, then JSON, then CSV), and turns each format into rows:

- csv / tsv: a table; the delimiter is sniffed from the header line among `,`, tab and `;`
  (a .tsv is tab-separated; a printable header with none of them is one column); the text
  is decoded from UTF-8 (a BOM is dropped), else from the encoding `charset_normalizer` finds;
- json: `pandas.json_normalize(document, max_level=0)`: a list of objects is one row each;
- parquet: the table as stored (decoding bounded: see `interface.frames`);
- xlsx: one table per sheet; with several sheets the file's table lists them (`Tables`)
  and each sheet is `files.<name>.<sheet>`;
- txt and pdf: the text cut into chunks of at most 500 characters with 250 overlapping,
  one row per chunk, columns `content` and `metadata` (`{"source_file", "file_format"}`),
  ready for `INSERT INTO kb SELECT content FROM files.<name>`. The chunks come from kbsql's
  own recursive splitter (engine/knowledge/chunking.py) with MindsDB's sizes and separators,
  so they break at the same kinds of places, not necessarily at the same characters.

Every file is read under bounds (`UploadBounds`, settings `max_upload_decoded_mb`,
`max_upload_columns`, `max_upload_cells`): what an archive, a workbook's XML, its cell
values or a PDF's text decode to, and the columns and cells of a table, each checked before
the work it would cost is done (a 3.5 KB workbook of one 1 MB string in 150 cells, or 85 KB
of zipped CSV, would otherwise take hundreds of MB). A PDF's text is extracted under a
deadline (`pdf_timeout`) and a CPU budget proportional to the file (`pdf_cpu_per_mb`), a few
at once (`pdf_workers`, shared fairly between users): datasources/pdf_text.py. Under `kbsql
serve` every other file is parsed in a process of its own too (`upload_processes`,
`upload_timeout`: datasources/parse_process.py), so no upload's Python holds the server's
interpreter lock.
A refusal is one line naming the bound and where to raise it.

Column names lose surrounding spaces and tabs and must then be unique and non-empty.
Anything else (xls, an archive holding more than one file, a file that does not parse) is
a 400 titled "Error", as MindsDB answers it. openpyxl (xlsx) and pypdf (pdf) are small
pure-Python dependencies, imported only when such a file arrives.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kbsql.engine.datasources.upload_bounds import FileProcessingError, UploadBounds
from kbsql.interface.frames import MAX_UPLOADED_TABLE_BYTES, read_parquet_bounded

TEXT_CHUNK_SIZE = 500
TEXT_CHUNK_OVERLAP = 250
TEXT_SEPARATORS = ("\n\n", "\n", ". ", " ", "")
FORMATS = ("csv", "tsv", "json", "parquet", "xlsx", "txt", "pdf")
MAIN_PAGE = "main"

Pages = dict[str, Any]
"""Page name -> table (pandas DataFrame or Arrow table); one page named `main` for a
single-table file, else the sheets in workbook order."""


Parse = Callable[[bytes, str, int, "UploadBounds"], "Pages | PdfFile"]
"""`parse_file`, or a function running it elsewhere: (raw, filename, max_bytes, bounds)."""


_BOUNDS = UploadBounds()


@dataclass(frozen=True)
class PdfFile:
    """What `parse_file` gives for a PDF: its text is read in a process of its own
    (pdf_text.py) under the PDF bounds, after the parse."""

    name: str
    raw: bytes


def read_pages(raw: bytes, filename: str, max_bytes: int = MAX_UPLOADED_TABLE_BYTES,
               bounds: UploadBounds = _BOUNDS, parse: Parse | None = None) -> Pages:
    """The tables of an uploaded file named `filename` (its extension decides the format;
    without one, the content does). A `.zip` or `.tar.gz` holding exactly one file is
    unpacked first, as MindsDB does; `max_bytes` bounds what a Parquet file may decode to,
    `bounds` everything else. `parse` runs `parse_file` where it should (in this thread by
    default; parse_process.parse_apart: in a process of its own)."""
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix == ".pdf" or (not suffix and raw[:5] == b"%PDF-"):  # format_of's answer, at no cost
        parsed: Pages | PdfFile = PdfFile(PurePosixPath(filename).name, raw)
    else:
        parsed = (parse or parse_file)(raw, filename, max_bytes, bounds)
    if isinstance(parsed, PdfFile):
        return _checked({MAIN_PAGE: _read_pdf(parsed.raw, parsed.name, bounds)}, bounds)
    return parsed


def parse_file(raw: bytes, filename: str, max_bytes: int, bounds: UploadBounds) -> Pages | PdfFile:
    """`read_pages` but for a PDF's text, wherever it runs."""
    lowered = filename.lower()
    if lowered.endswith((".zip", ".tar.gz", ".tgz")):
        filename, raw = _unpack(raw, lowered, bounds)
    fmt = format_of(raw, filename)
    if fmt == "pdf":
        return PdfFile(PurePosixPath(filename).name, raw)
    reader = _READERS.get(fmt)
    if reader is None:
        raise FileProcessingError(f"Not supported format: {fmt} (kbsql reads {', '.join(FORMATS)})")
    return _checked(reader(raw, PurePosixPath(filename).name, max_bytes, bounds), bounds)


def _checked(pages: Pages, bounds: UploadBounds) -> Pages:
    for table in pages.values():  # the formats not checked while reading (json, parquet)
        columns = len(table.column_names if hasattr(table, "column_names") else table.columns)
        bounds.check_shape(columns, columns * len(table))
    return {page: _clean_columns(table) for page, table in pages.items()}


def format_of(raw: bytes, filename: str) -> str:
    suffix = PurePosixPath(filename).suffix.lower().lstrip(".")
    if suffix:
        return suffix
    if raw[:4] == b"PAR1" and raw[-4:] == b"PAR1":
        return "parquet"
    if raw[:5] == b"%PDF-":
        return "pdf"
    if raw[:4] == b"PK\x03\x04" and b"xl/" in raw[:4096]:
        return "xlsx"
    text = _decode(raw[:65536])
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(_decode(raw))
            return "json"
        except ValueError:
            pass
    first = text.splitlines()[0] if text else ""
    try:
        csv.Sniffer().sniff(first, delimiters=",\t;")
        return "csv"
    except csv.Error:
        pass
    if first.strip() and first.isprintable():  # one column: no delimiter to find (mindsdb_sdk
        return "csv"  # uploads a one-column DataFrame so; MindsDB's is_csv takes it, read with ',')
    raise FileProcessingError(f"Unable to detect format: {filename}")


def _unpack(raw: bytes, lowered: str, bounds: UploadBounds) -> tuple[str, bytes]:
    """The one file of a zip or tar.gz archive (its name and bytes). A zip's file is
    checked against `bounds.decoded` before it is read (zipfile stops at the size it
    declares); a tar.gz is inflated only up to the bound, so a bomb costs what the bound
    allows, not what it unpacks to."""
    try:
        if lowered.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                if any(_escapes(m.filename) for m in archive.infolist()):
                    raise FileProcessingError("Attempted Path Traversal in Zip File")
                members = [m for m in archive.infolist() if not m.is_dir()]
                _one_member([m.filename for m in members])
                if members[0].file_size > bounds.decoded:
                    raise bounds.refuse_decoded("The archive's file unpacks to")
                return members[0].filename, archive.read(members[0])
        tar = _gunzip_bounded(raw, bounds.decoded + 64 * 1024, bounds)  # headers and padding
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as archive:
            files = [m for m in archive.getmembers() if m.isfile()]
            _one_member([m.name for m in files])
            if files[0].size > bounds.decoded:
                raise bounds.refuse_decoded("The archive's file unpacks to")
            extracted = archive.extractfile(files[0])
            assert extracted is not None
            return files[0].name, extracted.read()
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise FileProcessingError(f"The archive cannot be read: {exc}") from None


def _gunzip_bounded(raw: bytes, limit: int, bounds: UploadBounds) -> bytes:
    """`raw` inflated, refused as soon as it passes `limit` bytes."""
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
        out = stream.read(limit + 1)
    if len(out) > limit:
        raise bounds.refuse_decoded("The archive unpacks to")
    return out


def _escapes(member: str) -> bool:
    """`../x`, `/x`: nothing is unpacked to disk here, but the archive is hostile; MindsDB
    names it so (files_test.py::test_zipfile_traversal), not as a file in a subfolder."""
    return member.startswith(("/", "\\")) or ".." in PurePosixPath(member.replace("\\", "/")).parts


def _one_member(names: list[str]) -> None:
    if len(names) != 1:
        raise FileProcessingError("Archive must contain only one data file.")
    if "/" in names[0].strip("/"):
        raise FileProcessingError("Archive must contain data file in root.")


def _decode(raw: bytes) -> str:
    """Text as MindsDB decodes it: UTF-8 with a BOM dropped, else UTF-8, else the encoding
    charset_normalizer finds, else UTF-8 with replacement characters."""
    if raw.startswith(codecs.BOM_UTF8):
        return raw[len(codecs.BOM_UTF8):].decode("utf-8", "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(raw[:32 * 1024]).best()
        if best is not None:
            return raw.decode(best.encoding, "replace")
    except ImportError:  # an optional helper: without it, replacement characters
        pass
    return raw.decode("utf-8", "replace")


def _read_csv(raw: bytes, name: str, max_bytes: int, bounds: UploadBounds,
              delimiter: str | None = None) -> Pages:
    import pandas as pd

    text = _decode(raw)
    header = text.split("\n", 1)[0] if text else ""
    try:
        sep = csv.Sniffer().sniff(header[:65536], delimiters=delimiter or ",\t;").delimiter
    except csv.Error:
        sep = delimiter or ","
    # the shape before pandas builds it: columns from the header, cells from the lines (a
    # quoted value spanning lines counts more than once: a bound, never an undercount)
    columns = len(next(csv.reader([header.rstrip("\r")], delimiter=sep), []))
    bounds.check_shape(columns, columns * max(0, text.count("\n") + (not text.endswith("\n")) - 1))
    try:
        return {MAIN_PAGE: pd.read_csv(io.StringIO(text), sep=sep, index_col=False)}
    except (ValueError, pd.errors.ParserError) as exc:  # EmptyDataError is a ValueError
        raise FileProcessingError(f"The file cannot be read as CSV: {exc}") from None


def _read_tsv(raw: bytes, name: str, max_bytes: int, bounds: UploadBounds) -> Pages:
    return _read_csv(raw, name, max_bytes, bounds, "\t")


def _read_json(raw: bytes, name: str, max_bytes: int, bounds: UploadBounds) -> Pages:
    import pandas as pd

    try:
        document = json.loads(_decode(raw))
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
        raise FileProcessingError(f"The file is not valid JSON: {exc}") from None
    try:
        return {MAIN_PAGE: pd.json_normalize(document, max_level=0)}
    except (ValueError, TypeError, AttributeError, NotImplementedError, OverflowError, RecursionError) as exc:
        raise FileProcessingError(f"The JSON document cannot be read as rows: {exc}") from None


def _read_parquet(raw: bytes, name: str, max_bytes: int, bounds: UploadBounds) -> Pages:
    import pyarrow as pa

    try:
        return {MAIN_PAGE: read_parquet_bounded(io.BytesIO(raw), max_bytes)}
    except (pa.ArrowException, OSError) as exc:
        raise FileProcessingError(f"The file cannot be read as Parquet: {exc}") from None


def _read_xlsx(raw: bytes, name: str, max_bytes: int, bounds: UploadBounds) -> Pages:
    import pandas as pd

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:  # the sheets' XML, before parsing it
            unpacked = sum(m.file_size for m in archive.infolist())
    except zipfile.BadZipFile:
        raise FileProcessingError("The file is not an xlsx workbook") from None
    if unpacked > bounds.decoded:
        raise bounds.refuse_decoded("The workbook unpacks to")
    try:
        _scan_workbook(raw, bounds)
        with pd.ExcelFile(io.BytesIO(raw), engine="openpyxl") as book:
            return {str(sheet): pd.read_excel(book, sheet_name=sheet) for sheet in book.sheet_names}
    except ImportError:
        raise FileProcessingError("Reading xlsx needs openpyxl (pip install openpyxl)") from None
    except FileProcessingError:
        raise
    except Exception as exc:  # openpyxl raises many kinds for a damaged workbook
        raise FileProcessingError(f"The workbook cannot be read: {type(exc).__name__}: {exc}") from None


def _scan_workbook(raw: bytes, bounds: UploadBounds) -> None:
    """Count each sheet's cells and the text they hold before pandas copies them: one
    shared string may be referenced by every cell, so a few KB of XML can stand for
    GBs of values. openpyxl's read-only mode streams the rows and shares the strings."""
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    try:
        for sheet in book.worksheets:
            cells = text = width = 0
            for row in sheet.iter_rows(values_only=True):
                width = max(width, len(row))
                cells += len(row)
                text += sum(len(v) for v in row if isinstance(v, str))
                if text > bounds.decoded:
                    raise bounds.refuse_decoded(f"The sheet '{sheet.title}' holds text of")
                bounds.check_shape(width, cells)
    finally:
        book.close()


def _read_txt(raw: bytes, name: str, max_bytes: int, bounds: UploadBounds) -> Pages:
    return {MAIN_PAGE: _text_rows(_decode(raw), name, "txt")}


def _read_pdf(raw: bytes, name: str, bounds: UploadBounds) -> Any:
    from kbsql.engine.datasources.pdf_text import CPU_FLOOR_S, cpu_budget, page_texts

    def refuse(line: str) -> FileProcessingError:
        if line.startswith("TOO_LONG"):
            return bounds.refuse_decoded("The PDF's text is")
        if line.startswith("reading the PDF took"):
            return bounds.refuse(f"{line[0].upper()}{line[1:]}", "pdf_timeout")
        if line.startswith("CPU: "):
            return bounds.refuse(f"{line[5].upper()}{line[6:]} ({bounds.pdf_cpu_per_mb:g} per MB of "
                                 f"the file, at least {CPU_FLOOR_S})", "pdf_cpu_per_mb")
        return FileProcessingError(line)

    pages = page_texts(raw, bounds.pdf_seconds, bounds.decoded, refuse, bounds.pdf_slots,
                       bounds.note("pdf_workers"), cpu_budget(len(raw), bounds.pdf_cpu_per_mb))
    return _text_rows(chr(12).join(pages), name, "pdf")  # pages joined by \f


def _text_rows(text: str, name: str, fmt: str) -> Any:
    import pandas as pd

    from kbsql.engine.knowledge.chunking import ChunkingConfig, split_text

    config = ChunkingConfig(TEXT_CHUNK_SIZE, TEXT_CHUNK_OVERLAP, TEXT_SEPARATORS)
    chunks = [text[start:end] for start, end in split_text(text, config)]
    metadata = {"source_file": name, "file_format": fmt}
    return pd.DataFrame({"content": pd.Series(chunks, dtype=object),
                         "metadata": pd.Series([dict(metadata) for _ in chunks], dtype=object)})


def _clean_columns(table: Any) -> Any:
    """MindsDB's format_column_names: names lose surrounding spaces and tabs, and must be
    unique and non-empty."""
    arrow = hasattr(table, "rename_columns")
    names = [str(c).strip(" \t") for c in (table.column_names if arrow else table.columns)]
    if len(set(names)) != len(names) or any(not n for n in names):
        raise FileProcessingError("Each column should have a unique and non-empty name.")
    if arrow:
        return table.rename_columns(names)
    table.columns = names
    return table


_READERS: dict[str, Callable[[bytes, str, int, UploadBounds], Pages]] = {
    "csv": _read_csv, "tsv": _read_tsv, "json": _read_json, "parquet": _read_parquet,
    "xlsx": _read_xlsx, "txt": _read_txt,
}  # and pdf: `PdfFile`
