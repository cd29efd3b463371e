"""SELECTs over tables: name resolution, planning (with a plan cache), rendering to DuckDB
SQL through sqlglot, and running on the shared DuckDB session."""
