"""Data-source engine `counting`: `CREATE DATABASE c WITH ENGINE = 'counting', PARAMETERS =
{"n": 3}` has one table, `numbers`, holding 1..n (rows made in Python, read by DuckDB)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kbsql.interface.errors import BadRequest
from kbsql.spi import FrameScan, Scan


class CountingSource:
    engine = "counting"

    def __init__(self, name: str, alias: str, parameters: dict[str, Any]):
        self.name = name
        self.n = int(self.normalize(parameters)["n"])

    @staticmethod
    def normalize(parameters: dict[str, Any]) -> dict[str, Any]:
        n = parameters.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1000:
            raise BadRequest("ENGINE = 'counting' needs PARAMETERS = {\"n\": <0..1000>}")
        return {"n": n}

    def attach(self, con: Any) -> None:
        pass

    def detach(self, con: Any) -> None:
        pass

    def tables(self, con: Any) -> list[str]:
        return ["numbers"]

    def scan(self, con: Any, parts: list[str]) -> Scan | None:
        if [p.lower() for p in parts] != ["numbers"]:
            return None
        return FrameScan(pa.table({"n": list(range(1, self.n + 1))}), cache_key=("counting", self.n))
