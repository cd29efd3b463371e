"""Uploaded files as tables, read the way MindsDB's file handler reads them.

MindsDB's `FileReader` (mindsdb/integrations/utilities/files/file_reader.py) decides the
format by the file name's extension, else by the content (Parquet's magic bytes, the
signature of an xlsx or PDF, then JSON, then CSV), and turns each format into rows:

- csv / tsv: a table; the delimiter is sniffed from the header line among `,`, tab and `;`
  (a .tsv is tab-separated); the text is decoded from UTF-8 (a BOM is dropped), else from
  the encoding `charset_normalizer` finds;
- json: `pandas.json_normalize(document, max_level=0)`: a list of objects is one row each;
- parquet: the table as stored (decoding bounded: see `interface.frames`);
- xlsx: one table per sheet; with several sheets the file's table lists them (`Tables`)
  and each sheet is `files.<name>.<sheet>`;
- txt and pdf: the text cut into chunks of at most 500 characters with 250 overlapping,
  one row per chunk, columns `content` and `metadata` (`{"source_file", "file_format"}`),
  ready for `INSERT INTO kb SELECT content FROM files.<name>`. The chunks come from kbsql's
  own recursive splitter (engine/knowledge/chunking.py) with MindsDB's sizes and separators,
  so they break at the same kinds of places, not necessarily at the same characters.

Column names lose surrounding spaces and tabs and must then be unique and non-empty.
Anything else (xls, an archive holding more than one file, a file that does not parse) is
a 400 titled "Error", as MindsDB answers it. openpyxl (xlsx) and pypdf (pdf) are small
pure-Python dependencies, imported only when such a file arrives.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from kbsql.interface.errors import BadRequest
from kbsql.interface.frames import MAX_UPLOADED_TABLE_BYTES, read_parquet_bounded

TEXT_CHUNK_SIZE = 500
TEXT_CHUNK_OVERLAP = 250
TEXT_SEPARATORS = ("\n\n", "\n", ". ", " ", "")
FORMATS = ("csv", "tsv", "json", "parquet", "xlsx", "txt", "pdf")
MAIN_PAGE = "main"

Pages = dict[str, Any]
"""Page name -> table (pandas DataFrame or Arrow table); one page named `main` for a
single-table file, else the sheets in workbook order."""


class FileProcessingError(BadRequest):
    """400 "Error": the file cannot be read as a table (MindsDB's FileProcessingError)."""

    default_title = "Error"


def read_pages(raw: bytes, filename: str, max_bytes: int = MAX_UPLOADED_TABLE_BYTES) -> Pages:
    """The tables of an uploaded file named `filename` (its extension decides the format;
    without one, the content does). A `.zip` or `.tar.gz` holding exactly one file is
    unpacked first, as MindsDB does; `max_bytes` bounds what any file may decode to."""
    lowered = filename.lower()
    if lowered.endswith((".zip", ".tar.gz")):
        filename, raw = _unpack(raw, lowered, max_bytes)
    fmt = format_of(raw, filename)
    reader = _READERS.get(fmt)
    if reader is None:
        raise FileProcessingError(f"Not supported format: {fmt} (kbsql reads {', '.join(FORMATS)})")
    pages = reader(raw, PurePosixPath(filename).name, max_bytes)
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
    raise FileProcessingError(f"Unable to detect format: {filename}")


def _unpack(raw: bytes, lowered: str, max_bytes: int) -> tuple[str, bytes]:
    """The one file of a zip or tar.gz archive (its name and bytes); its unpacked size is
    checked before it is read, so an archive bomb costs nothing."""
    try:
        if lowered.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                members = [m for m in archive.infolist() if not m.is_dir()]
                _one_member([m.filename for m in members])
                if members[0].file_size > max_bytes:
                    raise FileProcessingError(f"The archive's file unpacks to more than "
                                              f"{max_bytes // 2**20} MB")
                return members[0].filename, archive.read(members[0])
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as archive:
            files = [m for m in archive.getmembers() if m.isfile()]
            _one_member([m.name for m in files])
            if files[0].size > max_bytes:
                raise FileProcessingError(f"The archive's file unpacks to more than {max_bytes // 2**20} MB")
            extracted = archive.extractfile(files[0])
            assert extracted is not None
            return files[0].name, extracted.read()
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise FileProcessingError(f"The archive cannot be read: {exc}") from None


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


def _read_csv(raw: bytes, name: str, max_bytes: int, delimiter: str | None = None) -> Pages:
    import pandas as pd

    text = _decode(raw)
    header = text.splitlines()[0] if text else ""
    try:
        sep = csv.Sniffer().sniff(header, delimiters=delimiter or ",\t;").delimiter
    except csv.Error:
        sep = delimiter or ","
    try:
        return {MAIN_PAGE: pd.read_csv(io.StringIO(text), sep=sep, index_col=False)}
    except (ValueError, pd.errors.ParserError) as exc:  # EmptyDataError is a ValueError
        raise FileProcessingError(f"The file cannot be read as CSV: {exc}") from None


def _read_tsv(raw: bytes, name: str, max_bytes: int) -> Pages:
    return _read_csv(raw, name, max_bytes, "\t")


def _read_json(raw: bytes, name: str, max_bytes: int) -> Pages:
    import pandas as pd

    try:
        document = json.loads(_decode(raw))
    except ValueError as exc:
        raise FileProcessingError(f"The file is not valid JSON: {exc}") from None
    try:
        return {MAIN_PAGE: pd.json_normalize(document, max_level=0)}
    except (ValueError, TypeError, AttributeError, NotImplementedError) as exc:
        raise FileProcessingError(f"The JSON document cannot be read as rows: {exc}") from None


def _read_parquet(raw: bytes, name: str, max_bytes: int) -> Pages:
    import pyarrow as pa

    try:
        return {MAIN_PAGE: read_parquet_bounded(io.BytesIO(raw), max_bytes)}
    except (pa.ArrowException, OSError) as exc:
        raise FileProcessingError(f"The file cannot be read as Parquet: {exc}") from None


def _read_xlsx(raw: bytes, name: str, max_bytes: int) -> Pages:
    import pandas as pd

    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:  # the sheets' XML, before parsing it
            unpacked = sum(m.file_size for m in archive.infolist())
    except zipfile.BadZipFile:
        raise FileProcessingError("The file is not an xlsx workbook") from None
    if unpacked > max_bytes:
        raise FileProcessingError(f"The workbook unpacks to more than {max_bytes // 2**20} MB")
    try:
        with pd.ExcelFile(io.BytesIO(raw), engine="openpyxl") as book:
            return {str(sheet): pd.read_excel(book, sheet_name=sheet) for sheet in book.sheet_names}
    except ImportError:
        raise FileProcessingError("Reading xlsx needs openpyxl (pip install openpyxl)") from None
    except Exception as exc:  # openpyxl raises many kinds for a damaged workbook
        raise FileProcessingError(f"The workbook cannot be read: {type(exc).__name__}: {exc}") from None


def _read_txt(raw: bytes, name: str, max_bytes: int) -> Pages:
    return {MAIN_PAGE: _text_rows(_decode(raw), name, "txt")}


def _read_pdf(raw: bytes, name: str, max_bytes: int) -> Pages:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise FileProcessingError("Reading pdf needs pypdf (pip install pypdf)") from None
    pages: list[str] = []
    size = 0
    try:  # pypdf bounds each stream it inflates (ZLIB_MAX_OUTPUT_LENGTH); the text is bounded here
        for page in PdfReader(io.BytesIO(raw)).pages:
            pages.append(page.extract_text() or "")
            size += len(pages[-1])
            if size > max_bytes:
                raise FileProcessingError(f"The PDF's text is longer than {max_bytes // 2**20} MB")
    except (PyPdfError, ValueError, KeyError, OSError, RecursionError) as exc:
        raise FileProcessingError(f"The PDF cannot be read: {type(exc).__name__}: {exc}") from None
    return {MAIN_PAGE: _text_rows(chr(12).join(pages), name, "pdf")}  # pages joined by \f


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


_READERS: dict[str, Callable[[bytes, str, int], Pages]] = {
    "csv": _read_csv, "tsv": _read_tsv, "json": _read_json, "parquet": _read_parquet,
    "xlsx": _read_xlsx, "txt": _read_txt, "pdf": _read_pdf,
}
