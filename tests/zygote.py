"""A warm fork server for the `kbsql serve` processes tests start (~170 a run).

Each `kbsql serve` spends ~1.3 CPU-s before it answers its first statement: importing the
engine, Starlette/uvicorn, the MindsDB parser, sqlglot, DuckDB and pyarrow, and building the
parser's tables (measured on the 2-core machine: 1.0 CPU-s to the first `/api/status`, 0.28 more
for the first `SELECT 1`). On one run that was ~200 of the suite's ~1,150 CPU-s. This process
pays it once per pytest-xdist worker: it imports what a server imports up to its first
statement, then forks one child per server. The child is the same code the CLI runs: it sets
the environment, working directory, stdout and stderr it is given, resets signals, and calls
`kbsql.cli.main(["serve", ...])`, so it answers on its own loopback port exactly as a server
started from a shell does.

What a fork cannot give a server, the real command does (`launch` falls back to
`subprocess.Popen`): a command other than `python -m kbsql.cli serve` (a `prefix` such as
`unshare` or `prlimit`), or an environment that differs from this process's in a variable read
by the interpreter or a native library at import (PYTHON*, LD_*, *_NUM_THREADS, ...). The fork
happens only while this process runs no thread but its own and the BLAS pool it started
(checked before each), so no lock is copied held.

Protocol (a Unix socket): the test side connects, sends one JSON line with argv, env and cwd
plus the stdout and stderr descriptors (SCM_RIGHTS); the server answers `pid N`, and `exit C`
when it has reaped the child. `ForkedProcess` wraps that connection in the part of
`subprocess.Popen` that `kbsql.server.process.ServerProcess` and the tests use."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
IMPORT_TIME_ENV = ("PYTHON", "LD_", "MALLOC", "OMP_", "MKL_", "OPENBLAS_", "GOTO_")
"""Variables read at load time by the interpreter or a library the zygote has loaded (numpy's
OpenBLAS): a server asked with a different value of one of these is started for real. ONNX
Runtime's (ORT_*) and OpenMP's (KMP_*, faiss) are read when a server loads them, after the fork
(`_warm` refuses to serve if they were loaded), so they may differ: kbsql itself sets
ORT_DISABLE_TELEMETRY in a test worker that embeds in-process, and counting it sent ~90 of the
~140 servers of a run to the real command."""
NOT_LOADED = ("onnxruntime", "faiss")


def _differs_at_import(env: dict[str, str], base: dict[str, str]) -> bool:
    keys = {k for k in env.keys() | base.keys() if env.get(k) != base.get(k)}
    return any(k.startswith(IMPORT_TIME_ENV) or k.endswith("_NUM_THREADS") for k in keys)


# ---------------------------------------------------------------- the test side


class ForkedProcess:
    """A server forked by the zygote: pid, stdout, poll/wait/send_signal/terminate/kill, as on
    `subprocess.Popen` (exit codes: negative for a signal, as Popen's)."""

    def __init__(self, conn: socket.socket, pid: int, stdout: IO[str] | None, args: list[str]) -> None:
        self._conn = conn
        self._buffer = b""
        self.pid = pid
        self.stdout = stdout
        self.args = args
        self.returncode: int | None = None

    def _read_exit(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                if line.startswith(b"exit "):
                    self.returncode = int(line.split()[1])
                    self._conn.close()
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return
            data = self._conn.recv(4096)
            if not data:  # the zygote is gone: the child was its child, and went with it
                self.returncode = -signal.SIGKILL
                self._conn.close()
                return
            self._buffer += data

    def poll(self) -> int | None:
        self._read_exit(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._read_exit(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The test side: starts the fork server (once per worker) and launches servers through it."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="kbsql-zygote-")
        self.path = os.path.join(self._dir, "sock")
        self.env = dict(os.environ)
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT)
        ready = self.proc.stdout.readline() if self.proc.stdout else ""
        self.ok = ready.strip() == "ready"

    def launch(self, args: list[str], *, stdout: int, stderr: Any, text: bool, env: dict[str, str]) -> Any:
        """`subprocess.Popen(args, stdout=PIPE, stderr=log, text=True, env=env)`, forked when it can."""
        forkable = args[:4] == [sys.executable, "-m", "kbsql.cli", "serve"] and stdout == subprocess.PIPE
        if not (forkable and self.ok and self.proc.poll() is None and not _differs_at_import(env, self.env)):
            return subprocess.Popen(args, stdout=stdout, stderr=stderr, text=text, env=env)
        read, write = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            head = json.dumps({"argv": args[3:], "env": env, "cwd": os.getcwd()}).encode() + b"\n"
            socket.send_fds(conn, [head], [write, stderr.fileno()])
            line = b""
            while not line.endswith(b"\n"):
                part = conn.recv(1)
                if not part:
                    raise OSError("the zygote closed the connection")
                line += part
        except OSError:
            conn.close()
            os.close(read)
            os.close(write)
            return subprocess.Popen(args, stdout=stdout, stderr=stderr, text=text, env=env)
        os.close(write)
        if not line.startswith(b"pid "):  # the zygote said it cannot fork now
            conn.close()
            os.close(read)
            return subprocess.Popen(args, stdout=stdout, stderr=stderr, text=text, env=env)
        out = os.fdopen(read, "r") if text else os.fdopen(read, "rb")
        return ForkedProcess(conn, int(line.split()[1]), out, args)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # EOF: the zygote ends its children and exits
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)


# ---------------------------------------------------------------- the zygote itself


def _warm() -> int:
    """Import what a server imports before its first statement (learned from a throwaway child
    that builds an engine and the app), and build the parser's tables; return the process's
    thread count then. Not DuckDB or pyarrow, which a server imports on its first statement:
    importing them starts threads of their own (DuckDB's, jemalloc's). numpy's OpenBLAS pool
    is started by the engine's import; OpenBLAS stops and restarts it around a fork."""
    import kbsql.cli
    import kbsql.server.app
    import kbsql.server.run
    from kbsql.engine import Engine

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        before = set(sys.modules)
        folder = tempfile.mkdtemp(prefix="kbsql-zygote-warm-")
        engine = Engine(folder)
        kbsql.server.app.build_app(engine, bind_host="127.0.0.1")
        engine.close()
        shutil.rmtree(folder, ignore_errors=True)
        os.write(write, json.dumps([m for m in sys.modules if m not in before]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as source:
        names = json.loads(source.read() or "[]")
    os.waitpid(pid, 0)
    for name in names:
        try:
            __import__(name)
        except Exception:
            pass
    from mindsdb_sql_parser import parse_sql

    parse_sql("SELECT 1")
    loaded = [name for name in NOT_LOADED if name in sys.modules]
    if loaded:
        raise RuntimeError(f"the zygote loaded {loaded}: their variables would be read before the fork")
    return len(os.listdir("/proc/self/task"))


def _no_new_thread(warm: int) -> bool:
    return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == warm


def _child(head: dict[str, Any], out: int, err: int, closing: list[Any], wake: tuple[int, int]) -> None:
    """In the forked child: become `python -m kbsql.cli serve ...` and never return."""
    code = 1
    try:
        for thing in closing:
            thing.close()
        signal.set_wakeup_fd(-1)
        for fd in wake:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # as a fresh interpreter has them
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.chdir(head["cwd"])
        os.environ.clear()
        os.environ.update(head["env"])
        import kbsql.cli

        sys.argv = [kbsql.cli.__file__, *head["argv"]]
        code = kbsql.cli.main(head["argv"]) or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _reap(children: dict[int, socket.socket]) -> None:
    """Tell each ended child's launcher its exit code."""
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"exit {_status(status)}\n".encode())
            except OSError:
                pass
            conn.close()


def _fork(listener: socket.socket, children: dict[int, socket.socket], threads: int,
          wake: tuple[int, int]) -> None:
    """One launch request: read it, fork the child, answer its pid (or "no")."""
    conn, _ = listener.accept()
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 2)
    while not msg.endswith(b"\n"):
        msg += conn.recv(1 << 20)
    if len(fds) != 2 or not _no_new_thread(threads):
        conn.sendall(b"no\n")
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(json.loads(msg), fds[0], fds[1], [listener, conn, *children.values()], wake)
    for fd in fds:
        os.close(fd)
    children[pid] = conn
    conn.sendall(f"pid {pid}\n".encode())


def _end(children: dict[int, socket.socket]) -> None:
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while children and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            children.pop(pid, None)
        else:
            time.sleep(0.05)


def serve(path: str) -> None:
    """The zygote's loop: accept launch requests, fork, report exits; end at stdin's EOF."""
    threads = _warm()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake = os.pipe()
    os.set_blocking(wake[1], False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake[1])
    children: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        ready = select.select([listener, wake[0], sys.stdin], [], [])[0]
        if wake[0] in ready:
            os.read(wake[0], 4096)
        _reap(children)
        if sys.stdin in ready and not sys.stdin.buffer.read1(4096):
            break
        if listener in ready:
            _fork(listener, children, threads, wake)
    _end(children)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    serve(sys.argv[1])
