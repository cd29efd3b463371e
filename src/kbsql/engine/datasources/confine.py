"""Which files a data source may open: never the engine's own, and only under allowed roots.

Why: the `files`, `sqlite` and `duckdb` engines open any path SQL names. Attached as a data
source, the engine's own catalog would show stored API keys, and on a shared server any
file the server's user can read would be readable by every client. So:

- a path inside the data directory (catalog, chunk stores, indexes, uploaded frames,
  config.json) is always refused, embedded or served;
- when `EngineConfig.allowed_paths` is set (a server with a token or a public bind sets it
  from `--allow-path`), a path must lie under one of those roots.

Paths are checked after resolving symlinks, and a check is only worth something if what
is then read is what was checked: a file swapped for a symlink between the check and the
read would be read past it. So every file is opened first (`pin`) and the check looks at
what was opened (the kernel's name of the open file, `/proc/self/fd/N`); DuckDB then reads
the open file through that same `/proc/self/fd/N`, whatever the path names by then. This
happens at every execution: a cached plan pins its files again each time it runs, and a
`sqlite`/`duckdb` source is re-checked at every use (`Pinned.same_file`). Only regular
files are read (a FIFO or /dev/zero would hang or never end). A refusal is one SQL error.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbsql.interface.errors import PathNotAllowed, SqlError

if TYPE_CHECKING:
    from kbsql.engine.config import EngineConfig

FILE_PARAMETERS = {"files": "path", "sqlite": "db_file", "duckdb": "database"}
"""engine -> the parameter naming its file (after `normalize`)."""


PROC_FD = Path("/proc/self/fd")
_HAS_PROC = PROC_FD.is_dir()  # Linux: read an open file by its descriptor


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass
class Pinned:
    """An open file: `path` as given, `real` the path it had when opened and checked,
    `read_path` what DuckDB should read (`/proc/self/fd/N` where there is one)."""

    path: str
    fd: int
    real: str
    read_path: str
    stored: bool = False  # the engine's own file (`pin_stored`): `path` is what errors show

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass

    def same_file(self) -> bool:
        """Whether `path` still names the file that was opened (not replaced, not swapped
        for a symlink elsewhere)."""
        try:
            now, held = os.stat(self.path), os.fstat(self.fd)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino) and \
            os.path.realpath(self.path) == self.real


def pin_stored(path: str) -> Pinned:
    """Open one of the engine's own stored files (no policy: the path is the engine's, not
    SQL's), so DuckDB reads the file that was there at the start even if it is replaced or
    dropped meanwhile. A file gone already is the table's being dropped: one SQL error."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise SqlError("A table this statement reads was dropped or replaced while it was "
                       "being read; run the statement again") from None
    return Pinned("a stored table", fd, path, str(PROC_FD / str(fd)) if _HAS_PROC else path, stored=True)


class PathPolicy:
    """Reads the engine's config at each check, so a server can set `allowed_paths` after
    the engine is built."""

    def __init__(self, config: EngineConfig):
        self.config = config

    @property
    def confined(self) -> bool:
        """Only the --allow-path roots may be read (a server with a token or a public bind)."""
        return getattr(self.config, "allowed_paths", None) is not None

    def check(self, value: str | Path, what: str = "data source", *, resolved: bool = False) -> None:
        """Refuse `value` (resolved here unless `resolved`: the kernel's own name of an
        open file, which must not be resolved again through links changed since)."""
        path = Path(value) if resolved else Path(value).expanduser().resolve()
        data_dir = self.config.data_dir.resolve()
        if _inside(path, data_dir):
            raise PathNotAllowed(f"The {what} path {str(value)!r} is inside kbsql's data directory, "
                                 "whose files can never be opened as a data source")
        allowed = getattr(self.config, "allowed_paths", None)
        if allowed is not None and not any(_inside(path, Path(root)) for root in allowed):
            roots = ", ".join(str(r) for r in allowed) or "none"
            raise PathNotAllowed(f"The {what} path {str(value)!r} is outside the folders this server "
                                 f"may read (--allow-path: {roots})")

    @property
    def source_connect_s(self) -> float | None:
        """The longest a network data source's connection attempt may take
        (`source_connect_timeout`)."""
        return getattr(self.config, "source_connect_timeout", None)

    @property
    def source_hosts(self) -> tuple[str, ...] | None:
        """Hosts network data sources may connect to (`allowed_source_hosts`; None: anywhere)."""
        return getattr(self.config, "allowed_source_hosts", None)

    def check_source(self, engine: str, parameters: dict[str, Any]) -> None:
        key = FILE_PARAMETERS.get(engine.lower())
        if key is not None and isinstance(parameters.get(key), str):
            self.check(parameters[key], f"{engine.lower()} data source")

    def pin(self, value: str | Path, what: str = "file") -> Pinned:
        """Open `value` for reading and check the file actually opened; the caller closes
        it. Where there is no /proc (not Linux), the path is checked and read by name."""
        shown = str(value)
        try:
            fd = os.open(value, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise SqlError(f"The {what} {shown!r} cannot be opened: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SqlError(f"The {what} {shown!r} is not a regular file")
            proc = PROC_FD / str(fd)
            if _HAS_PROC:
                real = os.readlink(proc)
                self.check(real, what, resolved=True)
                return Pinned(shown, fd, real, str(proc))
            real = str(Path(value).expanduser().resolve())
            self.check(real, what, resolved=True)
            return Pinned(shown, fd, real, real)
        except BaseException:
            os.close(fd)
            raise
