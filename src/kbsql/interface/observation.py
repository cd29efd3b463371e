"""The text format of an agent step's observation: one writer, one parser.

A tool that returns rows answers `Output columns: 'a', 'b'`, optional note lines (a
summary such as "The query returned 120 rows; the first 30 are shown."), then CSV with a
header. The engine writes it (`agents/render.py`, for the model to read), the offline agent
reads its own observations back, and the notebook widgets show it as a table; all three use
this module, so the format cannot drift between writer and readers.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

PREFIX = "Output columns:"
MAX_NOTE_LINES = 5


def write_table(columns: list[str], cells: list[list[str]], note: str = "") -> str:
    """The observation of a table whose cells are already text; `note` goes before the CSV."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(cells)
    head = PREFIX + " " + ", ".join(f"'{c}'" for c in columns)
    return f"{head}\n{note + chr(10) if note else ''}{buffer.getvalue()}"


@dataclass
class ObservedTable:
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""

    def records(self) -> list[dict[str, str]]:
        return [dict(zip(self.columns, row, strict=False)) for row in self.rows]


def _fields(line: str) -> list[str]:
    """A line's CSV fields; [] for a line csv refuses (a multi-line cell's middle line holding
    a lone `\r`), which is then no header: parse_table answers None or a table, never raises."""
    try:
        return [f.strip() for f in next(csv.reader([line]), [])]
    except csv.Error:
        return []


def parse_table(text: str | None) -> ObservedTable | None:
    """The table in an observation, or None for anything else (free text, JSON lists, CSV
    that does not parse), which a reader shows verbatim. Note lines before the CSV header
    (the header is the first line naming the declared columns) are kept as `note`."""
    if not text or not text.lstrip().startswith(PREFIX):
        return None
    first, _, rest = text.lstrip().partition("\n")
    declared = [c.strip().strip("'\"") for c in first[len(PREFIX):].split(",") if c.strip()]
    lines = rest.split("\n")
    note: list[str] = []
    while lines and declared and _fields(lines[0]) != declared and len(note) < MAX_NOTE_LINES:
        note.append(lines.pop(0))
    if not lines or (declared and _fields(lines[0]) != declared):
        lines, note = rest.split("\n"), []
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    body = lines  # blank lines inside are a cell's own (a quoted paragraph break), kept
    if not body:
        return ObservedTable(columns=[], note="\n".join(note))
    try:
        parsed = list(csv.reader(io.StringIO("\n".join(body))))
    except csv.Error:
        return None
    header, rows = [str(c) for c in parsed[0]], parsed[1:]
    if any(len(r) > len(header) for r in rows):
        return None
    rows = [r + [""] * (len(header) - len(r)) for r in rows]
    return ObservedTable(columns=header, rows=rows, note="\n".join(note))
