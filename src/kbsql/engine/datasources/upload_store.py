"""The built-in data source `files`: uploaded files, as MindsDB's `files` database.

`PUT /api/files/{name}` (or mindsdb_sdk's `files.tables.create`) stores a file here and it
becomes the table `files.<name>`: SELECT, JOIN, `INSERT INTO kb SELECT ... FROM files.x`,
`SHOW TABLES FROM files`, `DROP TABLE files.x`, `CREATE TABLE files.x (SELECT ...)`. A
workbook with several sheets is the table `files.<name>` listing them (column `Tables`)
plus one table per sheet, `files.<name>.<sheet>` (MindsDB's pages).

Each file is one record in the catalog (`files` table: name, row count, columns, sheet
names) and its pages are Parquet in a `FrameStore` of its own (the data directory's
`uploads/` folder, or the shared catalog's `uploads` table), under a key made once per
upload: a new record never sees an older upload's pages, and a reader never sees a record
whose pages are not written yet. Registered DataFrames stay apart, as `df.<name>`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from kbsql.engine.catalog import Catalog, now
from kbsql.engine.datasources.frame_store import FrameStore
from kbsql.engine.datasources.scans import FrameScan, Scan, match_name
from kbsql.interface.errors import BadRequest, Conflict, NotFound
from kbsql.interface.frames import to_arrow

UPLOADS_SOURCE = "files"
TABLES_COLUMN = "Tables"  # the index table of a several-sheet workbook, as MindsDB names it


@dataclass(frozen=True)
class FileRecord:
    id: int
    name: str
    storage_key: str
    source_file: str | None
    row_count: int
    columns: list[str]
    pages: list[str]  # sheet names of a several-sheet workbook; [] for one table
    created_at: str

    def meta(self) -> dict[str, Any]:
        """`GET /api/files` item (rest/files/list.mdx): name, row_count, columns."""
        return {"name": self.name, "row_count": self.row_count, "columns": list(self.columns)}


def _record(row: Any) -> FileRecord:
    return FileRecord(int(row["id"]), row["name"], row["storage_key"], row["source_file"],
                      int(row["row_count"]), json.loads(row["columns"]), json.loads(row["pages"]),
                      row["created_at"])


class UploadStore:
    """The `files` data source (a `DataSource`, see base.py) and its records."""

    name = UPLOADS_SOURCE
    engine = "files"

    def __init__(self, catalog: Catalog, pages: FrameStore):
        self.catalog = catalog
        self.pages = pages

    def close(self) -> None:
        self.pages.close()

    # records ----------------------------------------------------------------------------
    def files(self) -> list[FileRecord]:
        return [_record(r) for r in self.catalog.read("SELECT * FROM files ORDER BY id")]

    def find(self, name: str) -> FileRecord | None:
        rows = self.catalog.read("SELECT * FROM files WHERE lower(name) = lower(?)", (name,))
        return _record(rows[0]) if rows else None

    def save(self, name: str, pages: dict[str, Any], source_file: str | None = None,
             replace: bool = False) -> FileRecord:
        """Store `pages` (see upload_formats.Pages) as the table `files.<name>`. A name in
        use is a Conflict unless `replace` (then the old file goes once the new one is in)."""
        from kbsql.engine.datasources.frame_store import frame_name

        frame_name(name)  # a plain SQL name
        if not pages:
            raise BadRequest("The file holds no table", title="Error")
        tables = {page: to_arrow(table) for page, table in pages.items()}
        if len(tables) == 1:  # one table, a one-sheet workbook too (MindsDB's get_file_pages)
            sheets, stored = [], list(tables.values())
        else:  # MindsDB's pages: an index table of the sheets, then each sheet
            import pyarrow as pa

            sheets = list(tables)
            stored = [pa.table({TABLES_COLUMN: pa.array(sheets, pa.string())}), *tables.values()]
        main = stored[0]
        key = f"u{uuid.uuid4().hex[:20]}"
        try:  # a page refused (no room, a full disk) takes the pages stored before it along
            for number, table in enumerate(stored):
                self.pages.register(f"{key}_{number}", table)
            old = self._insert(name, key, source_file, main, sheets, replace)
        except BaseException:
            self._drop_pages(key, len(stored))
            raise
        if old is not None:
            self._drop_pages(old.storage_key, len(old.pages) + 1)
        record = self.find(name)
        assert record is not None
        return record

    def _insert(self, name: str, key: str, source_file: str | None, main: Any, sheets: list[str],
                replace: bool) -> FileRecord | None:
        with self.catalog.transaction() as db:
            rows = db.execute("SELECT * FROM files WHERE lower(name) = lower(?)", (name,)).fetchall()
            old = _record(rows[0]) if rows else None
            if old is not None and not replace:
                raise Conflict(f"File with name '{old.name}' already exists", title="File already exists")
            if old is not None:
                db.execute("DELETE FROM files WHERE id = ?", (old.id,))
            db.execute("INSERT INTO files (name, storage_key, source_file, row_count, columns, pages, "
                       "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (name, key, source_file, main.num_rows, json.dumps(list(main.column_names)),
                        json.dumps(sheets), now()))
        return old

    def delete(self, name: str) -> FileRecord:
        """Remove `files.<name>` (NotFound when there is none)."""
        with self.catalog.transaction() as db:
            rows = db.execute("SELECT * FROM files WHERE lower(name) = lower(?)", (name,)).fetchall()
            if not rows:
                raise NotFound(f"File '{name}' does not exist", title="File not found")
            record = _record(rows[0])
            db.execute("DELETE FROM files WHERE id = ?", (record.id,))
        self._drop_pages(record.storage_key, len(record.pages) + 1)
        return record

    def _drop_pages(self, key: str, count: int) -> None:
        for number in range(count):
            self.pages.unregister(f"{key}_{number}")

    def table(self, name: str, page: int = 0) -> Any:
        """The Arrow table of a file (or of its page), None if there is none."""
        record = self.find(name)
        return None if record is None else self.pages.table(f"{record.storage_key}_{page}")

    # the DataSource protocol --------------------------------------------------------------
    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def tables(self, con: Any = None) -> list[str]:
        return [f.name for f in self.files()]

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        """`files.<name>` (the file, or a workbook's index of sheets) or `files.<name>.<sheet>`."""
        if len(parts) not in (1, 2):
            return None
        record = self.find(parts[0])
        if record is None:
            return None
        number = 0
        if len(parts) == 2:
            sheet = match_name(parts[1], record.pages)
            if sheet is None:
                return None
            number = record.pages.index(sheet) + 1
        key = f"{record.storage_key}_{number}"
        inner = self.pages.scan(con, [key])
        if isinstance(inner, FrameScan):  # pages in PostgreSQL (frame_store_pg.py)
            return FrameScan(inner.frame, cache_key=(UPLOADS_SOURCE, key, *(inner.cache_key or ())[2:]))
        return inner  # a stored Parquet file, or None
