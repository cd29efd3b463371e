"""A scan's codes are backed by huge pages (knowledge/huge_pages.py) once it is built, loaded or
changed, at its next search, in a thread of its own; the answers are the same bytes read
faster, so a user sees the same rows, in the same order, at the same distances."""

from __future__ import annotations

import ctypes
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge import huge_pages, scan
from kbsql.engine.knowledge import index as index_mod
from kbsql.engine.knowledge.search import Filter, SearchRequest
from tests.knowledge.test_index import _kb, _rows

QUERIES = ["river castle", "ocean lake castle", "bridge", "glacier meadow volcano harbor road",
           "a question about the valley and the island", "tower"]


@pytest.fixture
def kb(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(index_mod, "APPROX_THRESHOLD", 500)
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 10**9)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, _rows(3000))
        record = eng.catalog.knowledge_base("mindsdb", "kb")
        assert eng.knowledge.handle(record).index.kind == "scan"
        yield eng, record


def _answers(eng: Engine, record) -> list:
    return [eng.knowledge.search(record, SearchRequest(query=text, limit=limit, filters=filters))
            for text in QUERIES for limit in (1, 10, 30) for filters in ([], [Filter("group", "=", 3)])]


def test_the_answers_are_the_same_on_huge_pages(kb) -> None:
    eng, record = kb
    index = eng.knowledge.handle(record).index
    before = _answers(eng, record)
    if index._huge_worker is not None:
        index._huge_worker.join(30)
    huge_pages._advise(scan.code_buffers(index.index))  # (again, here: done when it returns)
    assert _answers(eng, record) == before


def test_the_advised_ranges_are_the_scans_codes(kb) -> None:
    eng, record = kb
    index = eng.knowledge.handle(record).index
    (_, fast_bytes), (half, half_bytes) = scan.code_buffers(index.index)
    assert half_bytes == index.index.ntotal * index.index.d * 2  # float16 codes
    assert fast_bytes >= index.index.ntotal * scan.code_length(index.index) // 2  # 4-bit codes
    rows = np.frombuffer((ctypes.c_char * half_bytes).from_address(half), np.float16)
    rows = rows.reshape(index.index.ntotal, index.index.d).astype(np.float32)
    stored = index.store.vectors_after(0, index.index.d)
    _, vectors = next(stored)  # (no row deleted: position i holds the i-th row by seq)
    np.testing.assert_allclose(rows[:len(vectors)], vectors, atol=2e-3)  # the rows' float16 codes


def test_a_search_advises_a_changed_scan_again(kb, monkeypatch) -> None:
    """Loaded or built: the next search advises; rows added move FAISS's buffers, and the
    search after them advises again (one thread at a time, HUGE_EVERY apart)."""
    monkeypatch.setattr(index_mod, "HUGE_EVERY", 0.0)
    eng, record = kb
    index = eng.knowledge.handle(record).index
    eng.knowledge.search(record, SearchRequest(query="river castle", limit=5))
    first = index._huge_worker
    assert (first is not None) == (sys.platform.startswith("linux") and huge_pages.allowed())
    assert not index.huge_due
    if first is not None:
        first.join(30)
    eng.insert_rows(record, [{"id": 5000 + i, "content": f"river castle {i}", "group": 1, "tag": "t0"}
                             for i in range(50)])
    assert index.huge_due
    eng.knowledge.search(record, SearchRequest(query="river castle", limit=5))
    assert index._huge_worker is not first or first is None
    assert not index.huge_due


def test_nothing_is_advised_where_the_administrator_turned_huge_pages_off(tmp_path, monkeypatch) -> None:
    setting = tmp_path / "enabled"
    setting.write_text("always madvise [never]\n")
    monkeypatch.setattr(huge_pages, "SETTING", setting)
    huge_pages.allowed.cache_clear()
    try:
        assert huge_pages.back([(4 << 20, 4 << 20)]) is None
        setting.write_text("always [madvise] never\n")
        huge_pages.allowed.cache_clear()
        assert huge_pages.allowed()
    finally:
        huge_pages.allowed.cache_clear()


def _huge_kb(address: int) -> int:
    """AnonHugePages (kB) of the mapping holding `address` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        span = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
        if span:
            inside = int(span.group(1), 16) <= address < int(span.group(2), 16)
        elif inside and line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise advice numbers are Linux's")
def test_the_advice_backs_a_buffer_with_huge_pages() -> None:
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not thp.exists() or "[never]" in thp.read_text():
        pytest.skip("no transparent huge pages on this kernel")
    buffer = np.ones(8 << 20, np.uint8)  # 8 MiB: at least three whole huge pages inside
    worker = huge_pages.back([(buffer.ctypes.data, buffer.nbytes)])
    assert worker is not None
    worker.join(30)
    if _huge_kb(buffer.ctypes.data + (4 << 20)) == 0:
        pytest.skip("the kernel collapsed nothing (no MADV_COLLAPSE, or no free huge page)")
    assert int(buffer.sum()) == 8 << 20  # the bytes unchanged
