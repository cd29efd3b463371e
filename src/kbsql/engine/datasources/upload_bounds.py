"""What one uploaded file may cost (settings max_upload_decoded_mb, max_upload_columns,
max_upload_cells, pdf_timeout, pdf_workers, pdf_cpu_per_mb, upload_processes, upload_timeout),
and the error a file that cannot be read as a table is (upload_formats.py reads them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kbsql.engine.fair_slots import FairSlots
from kbsql.interface.errors import BadRequest


class FileProcessingError(BadRequest):
    """400 "Error": the file cannot be read as a table (MindsDB's FileProcessingError)."""

    default_title = "Error"


def _config_note(key: str) -> str:
    return f"{key} in config.json"


@dataclass(frozen=True)
class UploadBounds:
    """What one uploaded file may cost (the engine fills it from its settings). `note`
    names where a user raises a bound (`kbsql serve --flag` or a config.json key)."""

    decoded: int = 64 * 1024 * 1024
    """Bytes an archive's file, a workbook's XML or cell values, or a PDF's text decode to."""
    columns: int = 4096
    cells: int = 10_000_000
    pdf_seconds: float = 60.0
    """Longest a PDF's text extraction may take (a process of its own, killed then), its wait
    for a slot included."""
    pdf_slots: FairSlots | None = None
    """The engine's PDF extractions at once (`pdf_workers`), shared fairly between owners;
    None: no bound."""
    pdf_cpu_per_mb: float = 60.0
    """CPU-seconds a PDF's text extraction may take per MB of the file (pdf_text.cpu_budget)."""
    parse_slots: FairSlots | None = None
    """The engine's uploads parsed at once in processes of their own (`upload_processes`,
    parse_process.py), shared fairly between owners; None: no bound."""
    parse_seconds: float = 60.0
    """Longest the parse of a file in its process may take (killed then), its wait for a slot
    included."""
    note: Callable[[str], str] = _config_note

    def refuse(self, what: str, key: str) -> FileProcessingError:
        return FileProcessingError(f"{what}: over this server's bound ({self.note(key)})")

    def refuse_decoded(self, what: str) -> FileProcessingError:
        return self.refuse(f"{what} more than {self.decoded // 2**20} MB", "max_upload_decoded_mb")

    def check_shape(self, columns: int, cells: int) -> None:
        if columns > self.columns:
            raise self.refuse(f"The table has {columns} columns, more than {self.columns}",
                              "max_upload_columns")
        if cells > self.cells:
            raise self.refuse(f"The table has {cells} cells, more than {self.cells}", "max_upload_cells")
