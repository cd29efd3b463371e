"""Settings of the magics: `%config KbSql.<name> = value`, or `[tool.kbsql]` in pyproject.toml.

The traits live on the `KbSql` magics class (so `%config KbSql` lists them); this module
holds the pyproject reader, kept apart because it needs no IPython.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def find_pyproject(start: str | Path | None = None) -> Path | None:
    """The nearest pyproject.toml at or above `start` (default: the working directory)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def pyproject_settings(start: str | Path | None = None) -> dict[str, Any]:
    """The `[tool.kbsql]` table of the nearest pyproject.toml ({} when there is none).

    A broken pyproject.toml must not stop the extension from loading, so a parse error
    yields {} and a warning instead of an exception."""
    path = find_pyproject(start)
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        import warnings

        warnings.warn(f"kbsql: cannot read {path}: {exc}", stacklevel=2)
        return {}
    table = data.get("tool", {}).get("kbsql", {})
    return dict(table) if isinstance(table, dict) else {}
