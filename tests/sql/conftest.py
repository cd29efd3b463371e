"""Fixtures: real data files (DuckDB, SQLite, a folder of files) and an engine with them
connected as data sources `shop`, `crm` and `fs`."""

from tests.datasources.makers import connected, sources  # noqa: F401
