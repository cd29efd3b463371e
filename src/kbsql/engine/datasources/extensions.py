"""DuckDB's sqlite and postgres scanners, loaded from their PyPI wheels, never the network.

Why wheels: DuckDB normally downloads an extension on first use (INSTALL), which fails on
a machine without internet. The `duckdb-extension-*-scanner` packages ship the same binary
inside a wheel, so pip (an ordinary dependency) puts it on disk and we `LOAD` it by path.
An extension binary only loads into the DuckDB release it was built for, hence the exact
`duckdb==` pin next to these packages in pyproject.toml.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import duckdb

from kbsql.engine.datasources.scans import duckdb_string_literal
from kbsql.interface.errors import SqlError

PACKAGES = {
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
}


def extension_file(name: str) -> Path:
    """The `.duckdb_extension` file of `name` for the running DuckDB; a clear error if absent.

    The file name matters: DuckDB derives the entry point (`<name>_duckdb_cpp_init`) from it.
    """
    package = PACKAGES[name]
    spec = importlib.util.find_spec(package)
    pip_name = package.replace("_", "-")
    if spec is None or not spec.submodule_search_locations:
        raise SqlError(f"This data source needs the package {pip_name}=={duckdb.__version__} "
                       f"(DuckDB's {name} extension; it cannot be downloaded at run time)")
    root = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    path = root / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        found = sorted(p.name for p in root.glob("v*")) if root.is_dir() else []
        raise SqlError(f"{pip_name} ships the extension for DuckDB {', '.join(found) or '?'}, "
                       f"but DuckDB {duckdb.__version__} is installed: install matching versions")
    return path


def load_extension(con: Any, name: str) -> None:
    """LOAD `name` from its wheel into `con` (idempotent); DuckDB may not fetch anything."""
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    try:
        con.execute(f"LOAD {duckdb_string_literal(str(extension_file(name)))}")
    except duckdb.Error as exc:
        raise SqlError(f"DuckDB could not load its {name} extension: {exc}") from exc
