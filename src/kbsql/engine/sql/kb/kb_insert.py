"""`INSERT INTO kb SELECT ... USING ...` options (docs/mindsdb_sql/knowledge_bases/insert_data.mdx).

- `batch_size` (default 1000): rows per batch; each batch is stored in its own transaction,
  so a failure keeps the batches before it (as the reference's partitions do);
- `track_column`: the rows are sorted by it before they are split into batches;
- `threads`: a whole number 1..MAX_THREADS, or true (DEFAULT_THREADS) / false (1): how many
  batches are embedded at once (engine/knowledge/batch_insert.py). Batches are still stored
  one at a time in row order, so the result is the one of `threads = 1`; a larger number is
  an error, not a silent cap;
- `error = 'raise' | 'skip'`: with 'raise' the first failing batch (in row order) stops the
  insert, the batches before it stay stored and none after it is; with 'skip' a failing
  batch is retried row by row and the rows that still fail are left out (counted and logged,
  never silently: the affected rows are the rows stored);
- `kb_skip_existing = true`: rows whose id is already stored are not embedded again;
- `kb_no_upsert = true`: no duplicate check; it is meant for loading an empty knowledge base,
  so an id that is already stored is an error here rather than a second copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from kbsql.interface.errors import SqlError

OPTIONS = {"batch_size", "threads", "track_column", "error", "kb_no_upsert", "kb_skip_existing"}
DEFAULT_BATCH = 1000
DEFAULT_THREADS = 4
"""`threads = true`: enough to hide a remote provider's latency without flooding it."""
MAX_THREADS = 64
"""More threads than this would only queue at the provider (and each holds a batch)."""


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise SqlError(f"{name} must be true or false, not {value!r}")


def _threads(value: Any) -> int:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if isinstance(value, bool):
        return DEFAULT_THREADS if value else 1
    if not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise SqlError(f"threads must be a whole number from 1 to {MAX_THREADS}, or true/false, "
                       f"not {value!r}")
    return value


def options_of(using: dict[str, Any] | None) -> dict[str, Any]:
    """The checked options of a `USING` clause (names case-insensitive)."""
    raw = {str(k).lower(): v for k, v in (using or {}).items()}
    unknown = set(raw) - OPTIONS
    if unknown:
        raise SqlError(f"INSERT INTO a knowledge base does not know {sorted(unknown)}: use {sorted(OPTIONS)}")
    out: dict[str, Any] = {"batch_size": DEFAULT_BATCH, "error": "raise", "kb_no_upsert": False,
                           "kb_skip_existing": False, "track_column": None, "threads": 1}
    if "batch_size" in raw:
        size = raw["batch_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SqlError(f"batch_size must be a whole number >= 1, not {size!r}")
        out["batch_size"] = size
    if "threads" in raw:
        out["threads"] = _threads(raw["threads"])
    if "error" in raw:
        error = str(raw["error"]).lower()
        if error not in ("raise", "skip"):
            raise SqlError(f"error must be 'raise' or 'skip', not {raw['error']!r}")
        out["error"] = error
    if "track_column" in raw:
        value = raw["track_column"]
        out["track_column"] = str(value.parts[-1]) if hasattr(value, "parts") else str(value)
    for name in ("kb_no_upsert", "kb_skip_existing"):
        if name in raw:
            out[name] = _flag(raw[name], name)
    return out


class FrameBatches(Sequence[list[dict[str, Any]]]):
    """A frame's rows as batches of `size` row dicts, each built when it is read: a large
    `INSERT ... SELECT` holds as dicts (~5x the frame's own size) only the batches in
    flight, not the whole frame."""

    def __init__(self, frame: Any, size: int):
        self.frame = frame
        self.size = size
        self.rows = len(frame)

    def __len__(self) -> int:
        return (self.rows + self.size - 1) // self.size

    @overload
    def __getitem__(self, index: int) -> list[dict[str, Any]]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[dict[str, Any]]]: ...

    def __getitem__(self, index: int | slice) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        start = index * self.size
        return self.frame.iloc[start:start + self.size].to_dict("records")


InsertBatches = Callable[[FrameBatches, int, bool], int]
"""(batches of row dicts, threads, skip failing rows) -> rows stored."""


def insert_frame(frame: Any, options: dict[str, Any], insert_batches: InsertBatches,
                 doc_ids: Callable[[Any], list[str | None]], stored: Callable[[list[str]], set[str]]) -> int:
    """Insert a DataFrame with the options; returns the rows stored."""
    track = options["track_column"]
    if track is not None:
        columns = {str(c).lower(): c for c in frame.columns}
        if track.lower() not in columns:
            raise SqlError(f"track_column {track!r} is not a column of the inserted rows "
                           f"{list(frame.columns)}")
        frame = frame.sort_values(columns[track.lower()], kind="stable").reset_index(drop=True)
    if options["kb_skip_existing"] or options["kb_no_upsert"]:
        ids = doc_ids(frame)
        present = stored(sorted({i for i in ids if i is not None}))
        if present and options["kb_no_upsert"]:
            raise SqlError(f"kb_no_upsert = true is for loading new ids, and {len(present)} are already "
                           f"stored (e.g. {sorted(present)[:3]}): leave it out to replace them, or use "
                           "kb_skip_existing = true to keep them")
        if present:
            frame = frame[[i not in present for i in ids]].reset_index(drop=True)
    batches = FrameBatches(frame, options["batch_size"])
    return insert_batches(batches, options["threads"], options["error"] == "skip")
