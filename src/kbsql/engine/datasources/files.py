"""`ENGINE = 'files'`: CSV, Parquet and JSON files; one file or a folder, each file a table.

The folder is listed again on every lookup, so a file dropped in later is a new table and
an edited file is read fresh: DuckDB reads the file itself (`read_csv_auto`, `read_parquet`,
`read_json_auto`) at query time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbsql.engine.datasources.scans import FileScan, Scan, match_name
from kbsql.interface.errors import SqlError

READERS = {
    ".csv": "read_csv_auto", ".tsv": "read_csv_auto", ".txt": "read_csv_auto",
    ".parquet": "read_parquet", ".pq": "read_parquet",
    ".json": "read_json_auto", ".jsonl": "read_json_auto", ".ndjson": "read_json_auto",
}


class FilesSource:
    """PARAMETERS: `path` (a file or a folder of files)."""

    engine = "files"

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.path = Path(self.normalize(parameters)["path"])

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        value = parameters.get("path")
        if not isinstance(value, str) or not value:
            raise SqlError("ENGINE = 'files' needs PARAMETERS = {\"path\": \"/a/folder/or/file.csv\"}")
        path = Path(value).expanduser().resolve()
        if not path.exists():
            raise SqlError(f"The path {value!r} of the files data source does not exist")
        if path.is_file() and path.suffix.lower() not in READERS:
            raise SqlError(f"{value!r} is not a CSV, Parquet or JSON file "
                           f"(known extensions: {', '.join(sorted(READERS))})")
        return {**parameters, "path": str(path)}

    def files(self) -> dict[str, Path]:
        """Table name -> file. A name taken twice (a.csv, a.json) keeps the extension."""
        candidates = [self.path] if self.path.is_file() else sorted(
            p for p in self.path.iterdir() if p.is_file() and p.suffix.lower() in READERS)
        out: dict[str, Path] = {}
        for path in candidates:
            name = path.stem if path.stem.lower() not in {k.lower() for k in out} \
                else f"{path.stem}_{path.suffix.lstrip('.').lower()}"
            out[name] = path
        return out

    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def tables(self, con: Any = None) -> list[str]:
        return list(self.files())

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        if len(parts) != 1:
            return None
        files = self.files()
        name = match_name(parts[0], list(files))
        if name is None:
            return None
        path = files[name]
        return FileScan(READERS[path.suffix.lower()], str(path))
