"""The scan index kind (knowledge/scan.py) answers only live rows, whatever was written: FAISS
cannot remove from it, so deletes and updates leave tombstones that no search may answer,
that survive a reopen (and a stale cache file), and that a rebuild clears past a share."""

from __future__ import annotations

import gc
import shutil
import threading
import time
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pytest

from kbsql.engine import Engine
from kbsql.engine.knowledge import index as index_mod
from kbsql.engine.knowledge import scan
from kbsql.engine.knowledge import settings as settings_mod
from kbsql.engine.knowledge.search import Filter, SearchRequest
from kbsql.engine.knowledge.settings import IndexSettings
from tests.knowledge.conftest import sql, table
from tests.knowledge.test_index import _brute, _kb, _rows

QUERY = "SELECT id, metadata, distance FROM kb WHERE content = 'ocean lake castle' LIMIT 20"


@pytest.fixture
def scan_sizes(monkeypatch):
    monkeypatch.setattr(index_mod, "APPROX_THRESHOLD", 400)
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 10**9)


def _index(eng: Engine) -> index_mod.VectorIndex:
    return eng.knowledge.handle(eng.catalog.knowledge_base("mindsdb", "kb")).index


def _answers_live_rows(eng: Engine, rows: list[dict]) -> None:
    """Every answer is a live row, with the true top-20 distances of the live rows (the pool
    of a 1,000-row scan holds them all), unfiltered and under a filter."""
    live = {r["id"]: r for r in rows}
    for where, keep in [("", lambda r: True), (" AND group = 3", lambda r: r["group"] == 3)]:
        got = table(eng, QUERY.replace(" LIMIT", where + " LIMIT"))
        assert all(int(g["id"]) in live and keep(live[int(g["id"])]) for g in got)
        expected = _brute(list(live.values()), "ocean lake castle", keep, 20)
        assert [round(1 - g["distance"], 5) for g in got] == pytest.approx(expected, abs=1e-4)


def test_deleted_and_updated_rows_are_never_answered(tmp_path: Path, scan_sizes) -> None:
    rows = _rows(1000)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        index = _index(eng)
        assert index.kind == "scan"
        sql(eng, "DELETE FROM kb WHERE group = 0")
        rows = [r for r in rows if r["group"] != 0]
        assert index.kind == "scan" and index.index.ntotal == 1000  # tombstones, no rebuild
        assert index.live == len(rows) and len(index.dead) == 1000 - len(rows)
        _answers_live_rows(eng, rows)
        # an update is a delete and an insert: the old text must not answer, the new must
        moved = {**rows[1], "content": "ocean lake castle ocean lake castle", "group": 3}
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "kb"), [moved])
        rows[1] = moved
        assert table(eng, QUERY)[0]["id"] == str(moved["id"])
        _answers_live_rows(eng, rows)
        record = eng.catalog.knowledge_base("mindsdb", "kb")
        hits = eng.knowledge.search(record, SearchRequest(query="ocean lake castle", limit=5,
                                                          filters=[Filter("group", "=", 1)]))
        assert str(moved["id"]) not in {str(h[0]) for h in hits}


def test_tombstones_survive_a_reopen_and_a_stale_cache(tmp_path: Path, scan_sizes) -> None:
    rows = _rows(1000)
    data = tmp_path / "e"
    with Engine(data) as eng:
        _kb(eng, rows)
        kb_dir = eng.knowledge.storage_dir(eng.catalog.knowledge_base("mindsdb", "kb"))
    old = tmp_path / "old.faiss"
    shutil.copy(kb_dir / "index.faiss", old)  # the cache before any delete
    with Engine(data) as eng:
        sql(eng, "DELETE FROM kb WHERE group = 0")
        dead = _index(eng).dead.copy()
    rows = [r for r in rows if r["group"] != 0]
    with Engine(data) as eng:
        index = _index(eng)
        assert index.kind == "scan" and index.index.ntotal == 1000  # loaded, not rebuilt
        assert index.dead.tolist() == dead.tolist()
        _answers_live_rows(eng, rows)
    shutil.copy(old, kb_dir / "index.faiss")  # as if the process died before rewriting it
    with Engine(data) as eng:
        _answers_live_rows(eng, rows)
        assert _index(eng).dead.tolist() == dead.tolist()


def test_many_tombstones_rebuild_the_scan_and_its_size_picks_the_kind(tmp_path: Path, scan_sizes,
                                                                     monkeypatch) -> None:
    monkeypatch.setattr(scan, "DEAD_FLOOR", 100)
    rows = _rows(1000)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        index = _index(eng)
        sql(eng, "DELETE FROM kb WHERE id < 90")
        assert len(index.dead) == 90
        sql(eng, "DELETE FROM kb WHERE id < 200")  # past the floor: compacted, in a thread of its own
        index.wait_compaction()
        rows = [r for r in rows if r["id"] >= 200]
        assert index.kind == "scan" and len(index.dead) == 0 and index.index.ntotal == len(rows)
        _answers_live_rows(eng, rows)
        monkeypatch.setattr(index_mod, "SCAN_ROWS", 700)  # more rows than a scan takes: IVF
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "kb"), _rows(1200)[1000:])
        assert index.kind == "ivf"
        sql(eng, "DELETE FROM kb WHERE id >= 500")  # under half of SCAN_ROWS: a scan again
        assert index.kind == "scan" and index.live == 300
        sql(eng, "DELETE FROM kb WHERE id >= 350")  # under half the threshold: exact
        assert index.kind == "flat" and index.live == 150


def test_a_large_scan_scans_shorter_codes_and_refines_a_larger_pool(tmp_path: Path, scan_sizes,
                                                                     monkeypatch) -> None:
    """Past scan.FINE_ROWS rows a scan is built with d/4 sub-quantizers (half the code to scan)
    and re-scores a pool that grows with the rows (scan.auto_refine): still the true top 20.
    A scan trained below the bound gets the shorter codes when its rows double; a `refine`
    the knowledge base sets is used as it is."""
    monkeypatch.setattr(scan, "FINE_ROWS", 1300)  # built at 600 rows, up to 1,200 until retrained: d/2
    rows = _rows(1400)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows[:600])
        index = _index(eng)
        assert index.kind == "scan" and scan.code_length(index.index) == index.index.d // 2
        eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "kb"), rows[600:])
        assert index.kind == "scan" and scan.code_length(index.index) == index.index.d // 4
        assert index.refine == scan.auto_refine(index.index.d // 4, index.index.d, 1400)
        _answers_live_rows(eng, rows)
        sql(eng, "CREATE INDEX ON KNOWLEDGE_BASE kb WITH (refine = 3)")
        assert index.refine == 3
    with Engine(tmp_path / "e") as eng:  # the short codes are kept in the cache
        assert scan.code_length(_index(eng).index) == _index(eng).index.d // 4


def test_the_refine_pool_grows_with_the_rows_and_is_larger_for_short_codes() -> None:
    fine, coarse = [[scan.auto_refine(m, 384, rows) for rows in (20_000, 300_000, 1_000_000)]
                    for m in (192, 96)]
    assert fine == sorted(fine) and coarse == sorted(coarse) and fine[-1] > fine[0]
    assert all(c > f for c, f in zip(coarse, fine, strict=True))


def test_an_ivf_cache_of_a_size_the_scan_takes_is_rebuilt_as_a_scan(tmp_path: Path, monkeypatch) -> None:
    """A knowledge base indexed before the scan existed (its cache an IVF at a scan's size)
    gets the scan at its next open; an IVF the settings ask for (scan = 1) is kept."""
    monkeypatch.setattr(index_mod, "APPROX_THRESHOLD", 400)
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 0)
    rows = _rows(1000)
    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        assert _index(eng).kind == "ivf"
    monkeypatch.setattr(index_mod, "SCAN_ROWS", 10**9)
    with Engine(tmp_path / "e") as eng:
        index = _index(eng)
        assert index.index is None  # the cache was not taken
        _answers_live_rows(eng, rows)
        assert index.kind == "scan"
        sql(eng, "CREATE INDEX ON KNOWLEDGE_BASE kb WITH (scan = 1)")
        assert index.kind == "ivf"
    with Engine(tmp_path / "e") as eng:
        assert _index(eng).kind == "ivf" and _index(eng).index is not None
        _answers_live_rows(eng, rows)


def test_a_compaction_holds_no_search_and_keeps_what_is_written_meanwhile(tmp_path: Path, scan_sizes,
                                                                         monkeypatch) -> None:
    """Tombstones past the share are compacted away beside the index searches keep using:
    built under the index's lock, deleting 1,100 of 100,000 rows held every search of the
    knowledge base 7.9 s. A search during the compaction answers, and a row inserted and one
    deleted meanwhile are in the compacted index as they are in the rows."""
    monkeypatch.setattr(scan, "DEAD_FLOOR", 100)
    rows = _rows(1001)
    extra, rows = rows[1000], rows[:1000]
    during: dict[str, float] = {}
    built = scan.compacted

    def meanwhile(fresh: object, batches: object, dim: int) -> object:
        answer = built(fresh, batches, dim)  # type: ignore[arg-type]

        def other() -> None:
            started = time.monotonic()
            table(eng, QUERY)
            during["search_s"] = time.monotonic() - started
            eng.insert_rows(eng.catalog.knowledge_base("mindsdb", "kb"), [extra])
            sql(eng, "DELETE FROM kb WHERE id = 500")

        worker = threading.Thread(target=other)
        worker.start()
        worker.join(60)
        return answer

    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        index = _index(eng)
        monkeypatch.setattr(scan, "compacted", meanwhile)
        sql(eng, "DELETE FROM kb WHERE id < 200")  # past the floor: compacted, in a thread of its own
        index.wait_compaction()
        assert during.get("search_s", 99) < 10, during
        rows = [r for r in [*rows, extra] if r["id"] >= 200 and r["id"] != 500]
        assert index.kind == "scan" and index.live == len(rows) and len(index.dead) == 1  # id 500, after
        _answers_live_rows(eng, rows)


def test_a_search_that_finds_another_process_deletes_does_not_compact_in_its_thread(
        tmp_path: Path, scan_sizes, monkeypatch) -> None:
    """Deletes made by another process (here a second engine on the same folder) are found by
    this one's next search: its compaction (~3 s at 100,000 rows) runs in a thread of its own
    while the search answers live rows from the tombstoned index, then swaps in. (The deleting
    statement's own compaction runs aside too.)"""
    monkeypatch.setattr(scan, "DEAD_FLOOR", 100)
    rows = _rows(1000)
    release = threading.Event()
    built = scan.compacted

    def held(fresh: object, batches: object, dim: int) -> object:
        release.wait(60)
        return built(fresh, batches, dim)  # type: ignore[arg-type]

    with Engine(tmp_path / "e") as reader:
        _kb(reader, rows)
        index = _index(reader)
        with Engine(tmp_path / "e") as writer:
            sql(writer, "DELETE FROM kb WHERE id < 200")  # the writer's own compaction, its own index
        monkeypatch.setattr(scan, "compacted", held)
        rows = [r for r in rows if r["id"] >= 200]
        _answers_live_rows(reader, rows)  # answered while the compaction waits on `release`
        assert index.compactor is not None and index.compactor.is_alive()
        assert len(index.dead) == 200  # not compacted yet: tombstones, skipped
        release.set()
        index.wait_compaction()
        assert len(index.dead) == 0 and index.index.ntotal == len(rows)
        _answers_live_rows(reader, rows)


def test_an_index_replaced_during_a_compaction_is_let_go(tmp_path: Path, scan_sizes, monkeypatch) -> None:
    """A rebuild while a compaction builds its copy (CREATE INDEX here; the rows doubling or
    a change of kind alike) frees the index it replaces, as _rebuild means to: the compaction
    held that index to its end, so three sat in memory at once (the replaced one, the copy
    and the new one: ~0.8 GB each at 1M rows of 384 dimensions). The copy is then not
    swapped in over the new index, and searches answer the live rows."""
    monkeypatch.setattr(scan, "DEAD_FLOOR", 100)
    rows = _rows(1000)
    seen: dict[str, bool] = {}
    built = scan.compacted

    def meanwhile(fresh: object, batches: object, dim: int) -> object:
        replaced = weakref.ref(index.index)
        rebuild = "CREATE INDEX ON KNOWLEDGE_BASE kb WITH (rerank = 3)"
        worker = threading.Thread(target=sql, args=(eng, rebuild))
        worker.start()
        worker.join(60)
        gc.collect()
        seen["replaced_alive"] = replaced() is not None
        return built(fresh, batches, dim)  # type: ignore[arg-type]

    with Engine(tmp_path / "e") as eng:
        _kb(eng, rows)
        index = _index(eng)
        monkeypatch.setattr(scan, "compacted", meanwhile)
        sql(eng, "DELETE FROM kb WHERE id < 200")  # past the floor: compacted in its own thread
        index.wait_compaction()
        assert seen == {"replaced_alive": False}
        assert index.settings.rerank == 3 and index.kind == "scan" and len(index.dead) == 0
        _answers_live_rows(eng, [r for r in rows if r["id"] >= 200])


def test_a_large_pool_past_tombstones_is_scored_batch_by_batch(monkeypatch) -> None:
    """A search past tombstones scores its refine pool (refine x fetch rows: 100 x 2,000 for a
    LIMIT 1000 on d/4 codes) from float16 a batch at a time: copied whole, the pool took
    232 MB at 100k rows of 384 dimensions (460 MB at 1M) for one search. Same answer: the
    best live rows by their float16 codes, no tombstone among them."""
    monkeypatch.setattr(scan, "POOL_BATCH", 1024, raising=False)
    rng = np.random.default_rng(0)
    n, dim, fetch = 20_000, 64, 2_000
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    index = scan.make_scan(dim, x[:5_000], rows=n)
    index.add_with_ids(x, np.arange(n, dtype=np.int64))
    dead = np.arange(0, 400, 2, dtype=np.int64)
    tracemalloc.start()
    scores, ids = scan.search(index, x[7], fetch, 100, dead)  # a pool of every row
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < n * dim * 6 / 4, f"{peak / 1e6:.1f} MB for a pool of {n * dim * 6 / 1e6:.1f} MB"
    exact = x.astype(np.float16).astype(np.float32) @ x[7]
    exact[dead] = -np.inf
    assert len(ids) == fetch and not np.isin(ids, dead).any()
    assert scores == pytest.approx(np.sort(exact)[::-1][:fetch], abs=1e-4)  # FAISS rounds its own way


def test_an_automatic_refine_is_not_written_so_an_older_kbsql_keeps_the_other_settings(
        tmp_path: Path, monkeypatch) -> None:
    """`WITH (refine = 0, nprobe = 7)`: refine 0 (automatic, the default) is stored as absent.
    Written as 0, a kbsql from before the automatic refine (whose refine starts at 1) refused
    the file on reading it and took the defaults for all of it: nprobe 48, not 7."""
    path = tmp_path / "index_settings.json"
    params = {"refine": 0, "nprobe": 7}
    IndexSettings.from_params(params).save(path, given=params)
    assert IndexSettings.load(path).as_dict() == IndexSettings.from_params(params).as_dict()
    monkeypatch.setitem(settings_mod._LIMITS, "refine", (1, 1000))  # that older kbsql's reader
    assert IndexSettings.load(path).nprobe == 7
