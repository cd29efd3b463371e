"""An upload parsed in a process of its own (`upload_processes`, datasources/parse_process.py)
gives what the same file parsed in the calling thread gives: the same tables, cell for cell,
or the same refusal, word for word. Only where the work happens may differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from kbsql.engine.datasources.parse_process import parse_apart
from kbsql.engine.datasources.upload_formats import UploadBounds, read_pages
from kbsql.engine.fair_slots import FairSlots
from kbsql.interface.errors import ServiceError
from kbsql.interface.frames import to_arrow
from tests.files import makers
from tests.files.bombs import gzipped_zeros, shared_string_workbook, zipped_csv

SMALL = UploadBounds(decoded=8 * 2**20, columns=50, cells=50_000, note=lambda key: f"--{key}")

FILES: list[tuple[str, Callable[[], bytes]]] = [
    ("orders.csv", makers.csv_bytes), ("orders.tsv", lambda: makers.csv_bytes("\t")),
    ("orders.json", makers.json_bytes), ("orders.parquet", makers.parquet_bytes),
    ("book.xlsx", lambda: makers.xlsx_bytes({"a": makers.frame(), "b ": makers.frame().head(1)})),
    ("notes.txt", lambda: makers.text().encode()),
    ("orders.zip", lambda: makers.zipped("o.csv", makers.csv_bytes())),
    ("noname", makers.csv_bytes),
    # refusals: each must be the same line from either place
    ("sheet.xlsx", shared_string_workbook), ("big.zip", lambda: zipped_csv(20)),
    ("zeros.tar.gz", lambda: gzipped_zeros(20)),
    ("wide.csv", lambda: (",".join(f"c{i}" for i in range(60)) + "\n1\n").encode()),
    ("two.zip", lambda: makers.zipped("a.csv", b"a\n1\n", {"b.csv": b"b\n2\n"})),
    ("old.xls", lambda: b"\xd0\xcf\x11\xe0"), ("broken.json", lambda: b"[{"),
    ("bad.parquet", lambda: b"PAR1xxPAR1"),
    ("dup.csv", lambda: b"a, a\n1,2\n"), ("deep.json", lambda: b"[" * 100_000 + b"]" * 100_000),
]


def outcome(raw: bytes, filename: str, bounds: UploadBounds, parse: Any = None) -> Any:
    try:
        pages = read_pages(raw, filename, 64 * 2**20, bounds, parse)
    except ServiceError as exc:
        return (type(exc).__name__, exc.status, exc.title, exc.detail)
    return {page: to_arrow(table).to_pandas() for page, table in pages.items()}


@pytest.mark.parametrize("filename,make", FILES, ids=[f for f, _ in FILES])
def test_a_file_parsed_apart_is_what_it_is_in_the_thread(filename: str, make: Callable[[], bytes]) -> None:
    raw = make()
    here = outcome(raw, filename, SMALL)
    bounds = UploadBounds(**{**SMALL.__dict__, "parse_slots": FairSlots(1)})
    apart = outcome(raw, filename, bounds, parse_apart)
    if isinstance(here, tuple):
        assert apart == here  # type, status, title and detail
    else:
        assert list(apart) == list(here)
        for page, frame in here.items():
            pd.testing.assert_frame_equal(apart[page], frame)
