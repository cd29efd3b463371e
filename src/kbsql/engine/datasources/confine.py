"""Which files a data source may open: never the engine's own, and only under allowed roots.

Why: the `files`, `sqlite` and `duckdb` engines open any path SQL names. Attached as a data
source, the engine's own catalog would show stored API keys, and on a shared server any
file the server's user can read would be readable by every client. So:

- a path inside the data directory (catalog, chunk stores, indexes, uploaded frames,
  config.json) is always refused, embedded or served;
- when `EngineConfig.allowed_paths` is set (a server with a token or a public bind sets it
  from `--allow-path`), a path must lie under one of those roots.

Paths are checked after resolving symlinks, when a source is opened and again for every
file a `files` source reads (a folder may gain a symlink later). A refusal is one SQL error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbsql.interface.errors import SqlError

if TYPE_CHECKING:
    from kbsql.engine.config import EngineConfig

FILE_PARAMETERS = {"files": "path", "sqlite": "db_file", "duckdb": "database"}
"""engine -> the parameter naming its file (after `normalize`)."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class PathPolicy:
    """Reads the engine's config at each check, so a server can set `allowed_paths` after
    the engine is built."""

    def __init__(self, config: EngineConfig):
        self.config = config

    def check(self, value: str | Path, what: str = "data source") -> None:
        path = Path(value).expanduser().resolve()
        data_dir = self.config.data_dir.resolve()
        if _inside(path, data_dir):
            raise SqlError(f"The {what} path {str(value)!r} is inside kbsql's data directory, "
                           "whose files can never be opened as a data source")
        allowed = getattr(self.config, "allowed_paths", None)
        if allowed is not None and not any(_inside(path, Path(root)) for root in allowed):
            roots = ", ".join(str(r) for r in allowed) or "none"
            raise SqlError(f"The {what} path {str(value)!r} is outside the folders this server "
                           f"may read (--allow-path: {roots})")

    def check_source(self, engine: str, parameters: dict[str, Any]) -> None:
        key = FILE_PARAMETERS.get(engine.lower())
        if key is not None and isinstance(parameters.get(key), str):
            self.check(parameters[key], f"{engine.lower()} data source")
