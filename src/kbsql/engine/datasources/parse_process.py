"""Uploaded files parsed in a process of their own: a fork of a zygote that has imported the
readers once.

Why: parsing an upload is Python holding the interpreter lock (openpyxl's XML, the objects
pandas builds from a CSV or JSON), and on a shared server the event loop waits for that lock
at every step of every other user's request: an ordinary workbook uploaded back to back lifted
a neighbour's `SELECT 1` p99 from ~2 ms to 48 ms (benchmarks/bench_uploads.py). A thread
cannot be stopped either: a parse went on to its end after its client had left.

How: the zygote (`python -m kbsql.engine.datasources.parse_process FD`, started at the first
upload) imports pandas, pyarrow and openpyxl once (~0.5 s), then forks a child per upload
(~10 ms), single-threaded as it is (forking the server, with DuckDB's threads and locks, would
not be safe). The zygote passes back a pidfd of the child, so the server kills the child it
started and no other process, even after the zygote is gone. The child reads the file from a
socket of its own, parses it with `upload_formats.parse_file` under a CPU limit, lowered in
priority after its first CPU-second (child_limits.py), and answers in JSON and Arrow IPC
streams, never pickle: a table per page, one line of refusal, or the PDF to be read under the
PDF bounds (pdf_text.py). Every wait on the zygote and the child is bounded by the upload's
deadline (`upload_timeout`); the child is killed then, or at once when the work is stopped
(its client left, the server stopping). A zygote that does not answer in time is killed and
started anew at the next upload. The zygote's environment holds no secret of the server's
(no token, no API key): only what Python needs to start.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from typing import Any

from kbsql.engine.datasources.child_limits import child_env, limit_this_process
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

PRELOAD = ("pandas", "pyarrow", "pyarrow.parquet", "pyarrow.ipc", "openpyxl",
           "pandas.io.excel._openpyxl", "charset_normalizer")
"""What the zygote imports once, so that no child pays for it."""
NOTED = ("max_upload_decoded_mb", "max_upload_columns", "max_upload_cells", "upload_timeout")
"""The settings a child's refusal may name (`UploadBounds.note` cannot cross to it)."""
HEADER_LIMIT = 1 << 20
_FRAME = struct.Struct("!Q")

_lock = threading.Lock()
_zygote: _Zygote | None = None


def parse_apart(raw: bytes, filename: str, max_bytes: int, bounds: UploadBounds) -> Pages | PdfFile:
    """`upload_formats.parse_file` in a child process, within `bounds.parse_seconds` (the wait
    for one of `bounds.parse_slots` included)."""
    busy = f"parsing as many uploaded files as it may at once ({bounds.note('upload_processes')})"
    with slot_within(bounds.parse_slots, bounds.parse_seconds, busy) as left:
        return _run(raw, filename, max_bytes, bounds, time.monotonic() + left)


def _run(raw: bytes, filename: str, max_bytes: int, bounds: UploadBounds, deadline: float) -> Pages | PdfFile:
    control = current_control()
    child: list[tuple[socket.socket, int]] = []  # our end of the child's socket, its pidfd

    def kill() -> None:  # from any thread: the child dies, our socket's waits end at once
        for sock, pidfd in child:
            _kill(pidfd)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    try:
        with control.stoppable(kill) if control is not None else nullcontext():
            child.append(_fork(deadline))
            ours = child[0][0]
            job = {"filename": filename, "max_bytes": max_bytes, "size": len(raw),
                   "cpu": int(deadline - time.monotonic()) + 1, "bounds": _plain(bounds)}
            _send(ours, json.dumps(job).encode(), deadline)
            _send(ours, raw, deadline)
            answer = json.loads(_receive(ours, deadline, HEADER_LIMIT))
            if "error" in answer:
                raise _error(answer)
            if "pdf" in answer:
                return PdfFile(answer["pdf"], bytes(_receive(ours, deadline, len(raw))))
            most = max(max_bytes, 8 * bounds.decoded)  # a page's Arrow stream, told before it is read
            return {page: _table(_receive(ours, deadline, most)) for page in answer["pages"]}
    except TimeoutError:
        raise bounds.refuse(f"Parsing the file took more than {bounds.parse_seconds:g} s", "upload_timeout") \
            from None
    except (OSError, EOFError, ValueError):
        if control is not None and control.stopped:
            raise Stopped(control.reason or "stopped") from None
        raise FileProcessingError("The file cannot be read: its parser ended without an answer (it may "
                                  "have run out of memory)") from None
    finally:
        for sock, pidfd in child:
            _kill(pidfd)
            _ended(pidfd, 1.0)
            os.close(pidfd)
            sock.close()


def _plain(bounds: UploadBounds) -> dict[str, Any]:
    return {"decoded": bounds.decoded, "columns": bounds.columns, "cells": bounds.cells,
            "parse_seconds": bounds.parse_seconds, "notes": {key: bounds.note(key) for key in NOTED}}


def _kill(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:  # it has ended
        pass


def _ended(pidfd: int, seconds: float) -> None:
    """Wait until the process has ended (a pidfd reads as ready then), `seconds` at most."""
    import select

    waiting = select.poll()
    waiting.register(pidfd, select.POLLIN)
    waiting.poll(seconds * 1000)


def _error(problem: dict[str, Any]) -> ServiceError:
    """The child's refusal as the class it raised (MindsDB's "Error" or kbsql's own)."""
    if problem.get("file"):
        return FileProcessingError(str(problem["detail"]), str(problem["title"]))
    return ServiceError.from_problem(int(problem["status"]), problem, problem.get("type"))


def _table(stream: bytearray) -> Any:
    import pyarrow as pa

    with pa.ipc.open_stream(pa.py_buffer(stream)) as reader:
        return reader.read_all()


# framing: an 8-byte length, then the bytes ----------------------------------------------------
def _send(sock: socket.socket, payload: Any, deadline: float | None = None) -> None:
    view = memoryview(payload).cast("B")
    _timeout(sock, deadline)
    sock.sendall(_FRAME.pack(len(view)))
    while view:  # sendall has no deadline of its own across the whole buffer
        _timeout(sock, deadline)
        sent = sock.send(view[:1 << 20])
        view = view[sent:]


def _receive(sock: socket.socket, deadline: float | None, limit: int) -> bytearray:
    (size,) = _FRAME.unpack(_exactly(sock, _FRAME.size, deadline))
    if size > limit:
        raise ValueError(f"a message of {size} bytes, more than {limit}")
    return _exactly(sock, size, deadline)


def _exactly(sock: socket.socket, size: int, deadline: float | None) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        _timeout(sock, deadline)
        count = sock.recv_into(view[got:], min(size - got, 1 << 20))
        if count == 0:
            raise EOFError("the other side closed")
        got += count
    return buffer


def _timeout(sock: socket.socket, deadline: float | None) -> None:
    if deadline is None:
        sock.settimeout(None)
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    sock.settimeout(left)


# the zygote, seen from the server ---------------------------------------------------------------
class _Zygote:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        env = child_env(ARROW_DEFAULT_MEMORY_POOL="system",  # no allocator thread in a process that forks
                        OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.process = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL)
        theirs.close()
        self.channel = ours
        self.lock = threading.Lock()

    def fork(self, sock: socket.socket, deadline: float) -> int:
        with self.lock:
            _timeout(self.channel, deadline)
            socket.send_fds(self.channel, [b"F"], [sock.fileno()])
            _timeout(self.channel, deadline)
            message, fds, _, _ = socket.recv_fds(self.channel, 1, 1)
        if message != b"P" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise EOFError("the zygote forked no child")
        return fds[0]

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.channel.close()


def _fork(deadline: float) -> tuple[socket.socket, int]:
    """Our end of a new child's socket and the child's pidfd, from the running zygote
    (started if none is). A zygote found gone is replaced once; one too slow (stopped) is
    killed, and the next upload starts another. Each attempt has a socket of its own: a child
    forked by a zygote that died before answering reads the end of its socket and ends."""
    for attempt in (1, 2):
        ours, theirs = socket.socketpair()
        zygote = _running()
        try:
            return ours, zygote.fork(theirs, deadline)
        except (OSError, EOFError) as exc:
            ours.close()
            _forget(zygote)
            if attempt == 2 or isinstance(exc, TimeoutError):
                raise
        finally:
            theirs.close()
    raise AssertionError("unreachable")


def _running() -> _Zygote:
    global _zygote
    with _lock:
        if _zygote is None or _zygote.process.poll() is not None:
            if _zygote is not None:
                _zygote.close()
            _zygote = _Zygote()
        return _zygote


def _forget(zygote: _Zygote) -> None:
    global _zygote
    with _lock:
        if _zygote is zygote:
            _zygote = None
    zygote.close()


# the zygote and its children ---------------------------------------------------------------------
def _zygote_main(fd: int) -> None:
    """Import the readers, then fork a child for each socket the server sends; hand back the
    child's pidfd. Ends when the server's end of the channel closes."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional reader (openpyxl, charset_normalizer) not installed
            pass
    signal.signal(signal.SIGCHLD, _reap)  # reaped here, so their CPU time counts as this one's
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the server's to handle
    channel = socket.socket(fileno=fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 1, 1)
        except OSError:
            return
        if not message:
            return
        if len(fds) != 1:
            for extra in fds:
                os.close(extra)
            channel.send(b"E")
            continue
        pid = os.fork()
        if pid == 0:
            channel.close()
            code = 0
            try:
                _child(socket.socket(fileno=fds[0]))
            except BaseException:  # its one line is sent already, or the server left
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # it ended already (its server left)
            channel.send(b"E")
            continue
        socket.send_fds(channel, [b"P"], [pidfd])
        os.close(pidfd)


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _child(sock: socket.socket) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    job = json.loads(_receive(sock, None, HEADER_LIMIT))
    limit_this_process(int(job["cpu"]))
    plain = job["bounds"]
    notes = plain.pop("notes")
    bounds = UploadBounds(**plain, note=lambda key: notes.get(key, key))
    raw = bytes(_receive(sock, None, int(job["size"])))
    try:
        parsed = parse_file(raw, job["filename"], int(job["max_bytes"]), bounds)
        del raw
        if isinstance(parsed, PdfFile):
            _send(sock, json.dumps({"pdf": parsed.name}).encode())
            _send(sock, parsed.raw)
            return
        streams = [_stream(table) for table in parsed.values()]
    except ServiceError as exc:
        _send(sock, _problem(exc))
        return
    except MemoryError:
        _send(sock, _problem(FileProcessingError("The file takes more memory to read than a parse may use")))
        return
    except Exception as exc:  # a reader's own failure on a damaged file: one line
        failed = FileProcessingError(f"The file cannot be read: {type(exc).__name__}: {str(exc)[:300]}")
        _send(sock, _problem(failed))
        return
    _send(sock, json.dumps({"pages": list(parsed)}).encode())
    for stream in streams:
        _send(sock, stream)


def _problem(exc: ServiceError) -> bytes:
    return json.dumps({"error": True, "status": exc.status, "type": exc.problem_type,
                       "file": isinstance(exc, FileProcessingError), **exc.to_problem()}).encode()


def _stream(table: Any) -> Any:
    """A page as one Arrow IPC stream (what the upload store keeps is Arrow anyway)."""
    import pyarrow as pa

    from kbsql.interface.frames import to_arrow

    arrow = to_arrow(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, arrow.schema) as writer:
        writer.write_table(arrow)
    return sink.getvalue()  # a pyarrow Buffer: sent without a copy


if __name__ == "__main__":
    _zygote_main(int(sys.argv[1]))
