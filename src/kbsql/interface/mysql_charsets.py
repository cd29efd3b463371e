"""The storage engine, character sets and collations kbsql reports as MySQL's: one list for
the engine's `information_schema` (ENGINES, CHARACTER_SETS, COLLATIONS) and the MySQL
door's `SHOW ENGINES`, `SHOW CHARACTER SET` and `SHOW COLLATION`, so both say the same."""

from __future__ import annotations

from typing import Any

Row = tuple[Any, ...]

ENGINES: tuple[Row, ...] = (
    ("InnoDB", "DEFAULT", "Supports transactions, row-level locking, and foreign keys", "YES", "YES", "YES"),)
CHARACTER_SETS: tuple[Row, ...] = (("utf8mb4", "utf8mb4_general_ci", "UTF-8 Unicode", 4),
                                   ("utf8mb3", "utf8mb3_general_ci", "UTF-8 Unicode", 3))
COLLATIONS: tuple[Row, ...] = (("utf8mb4_general_ci", "utf8mb4", 45, "Yes", "Yes", 1, "PAD SPACE"),
                               ("utf8mb4_0900_ai_ci", "utf8mb4", 255, "", "Yes", 0, "NO PAD"),
                               ("utf8mb4_bin", "utf8mb4", 46, "", "Yes", 1, "PAD SPACE"),
                               ("utf8mb3_general_ci", "utf8mb3", 33, "Yes", "Yes", 1, "PAD SPACE"))
