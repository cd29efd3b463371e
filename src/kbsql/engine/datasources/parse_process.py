"""Uploaded files parsed in a process of their own: a fork of an interpreter that has
imported the readers once.

Why: parsing an upload is Python holding the interpreter lock (openpyxl's XML, the objects
pandas builds from a CSV or JSON), and on a shared server the event loop waits for that lock
at every step of every other user's request: xlsx bombs sent back to back lifted a
neighbour's `SELECT 1` p99 from 3.4 ms to 15-18 ms. A thread cannot be stopped either: a
parse went on to its end after its client had left.

How: multiprocessing's forkserver, started at the first upload, imports pandas, pyarrow and
openpyxl once (~0.4 s); each upload is a fork of it (single-threaded, so forking it is safe
where forking the server, with DuckDB's threads and locks, is not). The child reads the file
with `upload_formats.parse_file` under a CPU limit, lowered in priority after its first
CPU-second (child_limits.py), and sends back an Arrow IPC stream per page, one line of error,
or the PDF to be read under the PDF bounds (pdf_text.py). Nothing is unpickled from a
process that has read a stranger's file: the answer is JSON and Arrow. The child is killed at
the parse deadline (`upload_timeout`) or at once when the work is stopped (the uploading
client left), and the children at once are `upload_processes` slots shared fairly between
users (engine/fair_slots.py).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from contextlib import nullcontext
from typing import Any

from kbsql.engine.datasources.child_limits import limit_this_process
from kbsql.engine.datasources.upload_formats import (
    FileProcessingError,
    Pages,
    PdfFile,
    UploadBounds,
    parse_file,
)
from kbsql.engine.fair_slots import slot_within
from kbsql.interface.control import Stopped
from kbsql.interface.control import current as current_control
from kbsql.interface.errors import ServiceError

PRELOAD = ["kbsql.cli", "kbsql.engine.datasources.parse_process", "pandas", "pyarrow.parquet",
           "openpyxl", "pandas.io.excel._openpyxl", "charset_normalizer"]
"""What the forkserver imports once, so that no child pays for it (`kbsql.cli`: each child
runs the `kbsql` script as `__mp_main__`, multiprocessing's way of finding its functions)."""
NOTED = ("max_upload_decoded_mb", "max_upload_columns", "max_upload_cells", "upload_timeout")
"""The settings a child's refusal may name (`UploadBounds.note` cannot cross to it)."""

_lock = threading.Lock()
_context: Any = None


def parse_apart(raw: bytes, filename: str, max_bytes: int, bounds: UploadBounds) -> Pages | PdfFile:
    """`upload_formats.parse_file` in a child process, within `bounds.parse_seconds` (the wait
    for one of `bounds.parse_slots` included)."""
    busy = f"parsing as many uploaded files as it may at once ({bounds.note('upload_processes')})"
    with slot_within(bounds.parse_slots, bounds.parse_seconds, busy) as left:
        return _run(raw, filename, max_bytes, bounds, left)


def _run(raw: bytes, filename: str, max_bytes: int, bounds: UploadBounds, left: float) -> Pages | PdfFile:
    control = current_control()
    deadline = time.monotonic() + left
    plain = dataclasses.replace(bounds, pdf_slots=None, parse_slots=None,
                                note=_Notes(tuple((key, bounds.note(key)) for key in NOTED)))
    ours, theirs = _forkserver().Pipe()
    child = _forkserver().Process(target=_child, args=(theirs, filename, max_bytes, plain, int(left) + 1),
                                  name="kbsql-upload-parse", daemon=True)
    try:
        child.start()
        theirs.close()
        with control.stoppable(child.kill) if control is not None else nullcontext():
            ours.send_bytes(raw)
            header = json.loads(_receive(ours, deadline, bounds))
            if "error" in header:
                raise _error(header)
            if "pdf" in header:
                return PdfFile(header["pdf"], _receive(ours, deadline, bounds))
            return {page: _table(_receive(ours, deadline, bounds)) for page in header["pages"]}
    except (EOFError, OSError):
        if control is not None and control.stopped:
            raise Stopped(control.reason or "stopped") from None
        child.join(1)
        raise _gone(child.exitcode, bounds) from None
    finally:
        ours.close()
        if child.is_alive():
            child.kill()
        if child.pid is not None:
            child.join()


def _receive(conn: Any, deadline: float, bounds: UploadBounds) -> bytes:
    if not conn.poll(max(0.0, deadline - time.monotonic())):
        raise bounds.refuse(f"Parsing the file took more than {bounds.parse_seconds:g} s", "upload_timeout")
    data: bytes = conn.recv_bytes()
    return data


def _gone(exitcode: int | None, bounds: UploadBounds) -> FileProcessingError:
    """The child ended without an answer: its CPU limit (the deadline's seconds) or a crash."""
    from kbsql.engine.datasources.child_limits import CPU_KILLED

    if exitcode in CPU_KILLED:
        return bounds.refuse(f"Parsing the file took more than {bounds.parse_seconds:g} s", "upload_timeout")
    return FileProcessingError(f"The file cannot be read (its parser ended with code {exitcode})")


def _error(problem: dict[str, Any]) -> ServiceError:
    """The child's refusal as the class it raised (MindsDB's "Error" or kbsql's own)."""
    if problem["file"]:
        return FileProcessingError(problem["detail"], problem["title"])
    return ServiceError.from_problem(problem["status"], problem, problem["type"])


def _problem(exc: ServiceError) -> bytes:
    return json.dumps({"error": True, "status": exc.status, "type": exc.problem_type,
                       "file": isinstance(exc, FileProcessingError), **exc.to_problem()}).encode()


def _table(stream: bytes) -> Any:
    import pyarrow as pa

    with pa.ipc.open_stream(pa.py_buffer(stream)) as reader:
        return reader.read_all()


def _forkserver() -> Any:
    global _context
    with _lock:
        if _context is None:
            import multiprocessing

            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _context = context
        return _context


@dataclasses.dataclass(frozen=True)
class _Notes:
    """`UploadBounds.note` for a child: where each bound is raised, said by the parent."""

    notes: tuple[tuple[str, str], ...]

    def __call__(self, key: str) -> str:
        return dict(self.notes).get(key, key)


def _child(conn: Any, filename: str, max_bytes: int, bounds: UploadBounds, cpu_seconds: int) -> None:
    """In the forked child: read the file from `conn`, answer on it (see the module's docstring)."""
    limit_this_process(cpu_seconds)
    try:
        raw = conn.recv_bytes()
        try:
            parsed = parse_file(raw, filename, max_bytes, bounds)
            del raw
            if isinstance(parsed, PdfFile):
                conn.send_bytes(json.dumps({"pdf": parsed.name}).encode())
                conn.send_bytes(parsed.raw)
                return
            streams = [_stream(table) for table in parsed.values()]
        except ServiceError as exc:
            conn.send_bytes(_problem(exc))
            return
        except MemoryError:
            too_big = FileProcessingError("The file takes more memory to read than a parse may use")
            conn.send_bytes(_problem(too_big))
            return
        conn.send_bytes(json.dumps({"pages": list(parsed)}).encode())
        for stream in streams:
            conn.send_bytes(stream)
    except (BrokenPipeError, EOFError):  # the parent stopped waiting
        pass
    finally:
        conn.close()


def _stream(table: Any) -> Any:
    """A page as one Arrow IPC stream (what the upload store keeps is Arrow anyway)."""
    import pyarrow as pa

    from kbsql.interface.frames import to_arrow

    arrow = to_arrow(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, arrow.schema) as writer:
        writer.write_table(arrow)
    return sink.getvalue()  # a pyarrow Buffer: sent without a copy
