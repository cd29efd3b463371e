"""The FAISS index of one knowledge base: a derived, persisted cache of the SQLite rows.

The index carries a tag (store version, max seq) saying which state of the rows it covers.
Before every search `sync()` compares the tag with the store's version (one tiny SQL read)
and catches up: rows with a higher seq are added, tombstones newer than the tag removed. So
the index and the rows always agree, whoever wrote (this process or another one), and a
crash can at worst leave a stale cache file that the next open catches up.

Index types: exact `IndexIDMap2(IndexFlatIP)` for few rows, then the `scan` of scan.py (every
row's short code scanned, the best re-scored), and IVF over float16 codes
(`IndexIVFScalarQuantizer` QT_fp16, inner product) past `SCAN_ROWS`, where the settings ask for
it (`scan = N`: IVF past N rows) or where the dimension is odd. Either approximate kind answers `rerank` x k
candidates that the caller re-scores exactly from the float32 vectors in SQLite (search.py).
The float16 codes are half the float32 vectors, so the full-precision vectors are stored once
(in SQLite) and an index adds ~768 bytes per vector of 384 dimensions. IVF removes ids in place
(the scan keeps tombstones: scan.py); either is retrained when the rows outgrow the training it
was built on (`RETRAIN_GROWTH`). Vectors are L2-normalised: cosine distance = 1 - inner product.

Index kind by size (`_want`): flat below `APPROX_THRESHOLD` live rows, the scan up to
`SCAN_ROWS`, IVF above. Why the scan and not the IVF (issue 37): on the queries people type
(short phrases, questions, paraphrases, far queries) many true top-10 rows are copies that sit
in no IVF cell near the query. The IVF found 0.95 mean / 0.22 worst decile of the true top 10 at
100k near-duplicates, 0.78 / 0.0 at 250k, 0.76 / 0.0 at 1M, and more probes do not buy it back
(nprobe 192 at 250k: 0.88 / 0.16); the scan, its codes shortened and its refine pool grown with
the rows (scan.py), holds 0.98-1.0 mean and 0.8 or more worst decile on every kind from 100k
to 2M (FAISS alone: benchmarks/bench_scan_range.py, results/scan_range*.json; at 1M with the
refine pool of 200 it gets there, 0.88; with 100, 0.72 on questions). It costs more time
than the IVF, 1.1x its FAISS time at 100k, ~3x at 1M (4.9 ms against 1.7), which the path
around the index (embedding, re-score, rows) dilutes, and 5x at 2M (12 ms against 2.4, the
IVF's recall back to 0.975 mean there, worst decile 0.56; results/scan_range_2000k.json):
hence SCAN_ROWS. Why IVF over float16 and not 8-bit codes, and not HNSW (results/vs_chroma.json's
history): on near-duplicates 8-bit codes ranked the true top 10 out of any short candidate list,
and HNSW topped out at recall 0.96-0.98 building 10x slower. An IVF cache of a size the scan now
takes (written before it did) is rebuilt as a scan when opened (14.4 s at 1M rows, peak RSS
1.7 GB, quiet machine).

Tuning: `settings.py` (CREATE INDEX ON KNOWLEDGE_BASE ... WITH (nprobe = .., scan = .., ...)).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.knowledge import huge_pages, index_file, ivf, scan
from kbsql.engine.knowledge import index_build as build
from kbsql.engine.knowledge.allowed import id_selector
from kbsql.engine.knowledge.settings import IndexSettings
from kbsql.engine.knowledge.store import ChunkStore

APPROX_THRESHOLD = 20_000
SCAN_ROWS = 2_000_000  # live rows up to which the approximate index is a scan (module docstring)
RETRAIN_GROWTH = 2  # rebuild (new cells) when the live rows pass this multiple of the training
PERSIST_EVERY = 5_000  # changed vectors before the cache file is rewritten (also on close) ...
PERSIST_FRACTION = 0.25  # ... and at least this share of the index (total writes stay O(N))
log = logging.getLogger(__name__)


FILTER_MARGIN = 64  # extra candidates re-scored exactly under a filter (search)
HUGE_EVERY = 10.0  # seconds at least between two huge-page advisings of a scan's codes (search)


class VectorIndex:
    def __init__(self, path: Path, store: ChunkStore, threshold: int | None = None):
        self.path = path
        self.store = store
        self.threshold = threshold
        self.settings = IndexSettings.load(path.with_name("index_settings.json"))
        self.lock = threading.RLock()
        self.index: Any = None  # a faiss.Index once built
        self.kind = "flat"
        self.version = -1
        self.max_seq = 0
        self.trained_on = 0  # live rows when the IVF cells (the scan's codebooks) were trained
        self.dead = np.empty(0, np.int64)  # a scan's tombstones, sorted (scan.py)
        self.unsaved = 0
        self.compact_wanted = False  # a scan's tombstones passed scan.compact_due (compact())
        self.builds = 0  # indexes built: a compaction swaps in only over the one it copied
        self.compactor: threading.Thread | None = None  # the thread of the last compaction (sync)
        self._codes = (-1, 0)  # (the build, its sub-quantizers if a scan): `refine`
        self.huge_due, self._huge_at = False, -HUGE_EVERY  # the codes changed since advised (_huge_pages)
        self._huge_worker: threading.Thread | None = None
        self._load()

    @property
    def approx_threshold(self) -> int:
        return self.threshold or self.settings.threshold or APPROX_THRESHOLD

    @property
    def scan_rows(self) -> int:
        return self.settings.scan or SCAN_ROWS

    # persistence ------------------------------------------------------------------------
    def _load(self) -> None:
        cached = index_file.read(self.path, build.faiss)
        if cached is None:
            return  # no cache, an old format or a bad one: rebuilt from the rows by sync()
        index, header = cached
        version, max_seq = int(header["version"]), int(header["max_seq"])
        dead = np.array(header.get("dead", []), np.int64)
        stored_version, stored_seq = self.store.version(), self.store.max_seq()
        if version > stored_version or max_seq > stored_seq or (
                version == stored_version and index.ntotal - len(dead) != self.store.count()):
            # the cache describes rows this store does not have (a restored backup of the
            # rows, a lost write): its ids could name other rows. Rebuild from the rows.
            log.warning("the vector index %s is ahead of its rows (index version %d, seq %d; "
                        "rows version %d, seq %d): rebuilding it from the rows", self.path,
                        version, max_seq, stored_version, stored_seq)
            return
        if header["kind"] == "ivf" and self._want(index.ntotal, index.d) == "scan" \
                and int(header.get("trained_on", 0)) <= self.scan_rows:
            return  # an IVF of a size the scan now takes (built before it existed): rebuilt by sync()
        self.index, self.kind = index, header["kind"]
        self.version, self.max_seq = version, max_seq
        self.trained_on, self.dead = int(header.get("trained_on", 0)), dead
        self.huge_due = True

    def save(self) -> None:
        """Write the cache (index_file.write: a reader sees the old one or the new one)."""
        with self.lock:
            if self.index is None or self.unsaved == 0:
                return
            header = {"kind": self.kind, "version": self.version, "max_seq": self.max_seq,
                      "trained_on": self.trained_on, "dead": self.dead.tolist()}
            index_file.write(self.path, build.faiss, self.index, header)
            self.unsaved = 0

    def try_save(self) -> bool:
        """Save, but a failure (disk full, read-only directory) is only logged: the index is
        a cache of committed rows, so losing a save loses nothing (the next open rebuilds or
        catches up), and the write that triggered it has already succeeded."""
        try:
            self.save()
            return True
        except OSError as exc:
            log.warning("could not save the vector index %s (%s); it will be caught up from "
                        "the rows when next opened", self.path, exc)
            return False

    def reset(self) -> None:
        """Forget the in-memory index; the next sync() rebuilds it from the rows."""
        with self.lock:
            self.index, self.version, self.max_seq, self.trained_on = None, -1, 0, 0
            self.dead = np.empty(0, np.int64)

    def _maybe_save(self) -> None:
        total = 0 if self.index is None else self.index.ntotal
        if self.unsaved >= max(PERSIST_EVERY, PERSIST_FRACTION * total):
            self.try_save()

    # catching up ------------------------------------------------------------------------
    def sync(self) -> None:
        """Bring the index to the store's current state (cheap when nothing changed). A
        compaction found due runs in a thread of its own (`compact`): run here, it held the
        deleting statement ~3 s at 100,000 rows (~9 s at 300,000), or a search that found
        another process's deletes as long."""
        version = self.store.version()
        with self.lock:
            if version == self.version and self.index is not None:
                return
            dim = self.store.dim()
            if dim is None:  # nothing ever inserted
                self.version = version
                return
            if self.index is None or self.index.d != dim:
                self._rebuild(dim)
            else:
                self._catch_up(dim)
            self._maybe_switch(dim)
            self._maybe_save()
            self.huge_due = True  # (added rows move FAISS's buffers)
        if self.compact_wanted:
            self._compact_aside()

    @property
    def compacting(self) -> bool:
        """A compaction is running: in its own thread, one at a time (`_compact_aside`)."""
        worker = self.compactor
        return worker is not None and worker.is_alive()

    def _compact_aside(self) -> None:
        with self.lock:
            if self.compacting:
                return
            self.compactor = threading.Thread(target=self._compact_logged, name="kbsql-compaction",
                                              daemon=True)
            self.compactor.start()

    def _compact_logged(self) -> None:
        try:
            self.compact()
        except Exception as exc:  # the tombstones stay filtered at search: nothing is wrong, only slower
            log.warning("compacting the vector index %s failed (%s); its deleted rows stay skipped "
                        "at search until the next compaction", self.path, exc)

    def wait_compaction(self, timeout: float = 120.0) -> None:
        """Let a compaction running in its own thread end (before closing the store it reads)."""
        worker = self.compactor
        if worker is not None:
            worker.join(timeout)

    def _catch_up(self, dim: int) -> None:
        """Apply the rows and tombstones newer than the index's tag (the lock is held)."""
        with self.store.snapshot():  # one consistent state of rows and tombstones
            version = self.store.version()
            removed = self.store.removed_since(self.version, self.max_seq)
            if len(removed) and self.kind == "scan":  # no remove_ids: tombstones
                self.dead = np.union1d(self.dead, removed)
            elif len(removed):
                self.index.remove_ids(build.faiss.IDSelectorBatch(removed))
            for ids, vectors in self.store.vectors_after(self.max_seq, dim):
                with build.all_cores(len(ids)):
                    self.index.add_with_ids(vectors, ids)
                self.max_seq = int(ids[-1])
                self.unsaved += len(ids)
        self.version = version
        self.unsaved += len(removed)

    def compact(self) -> None:
        """A scan without its tombstones, built beside the one searches keep using: the same
        codebooks (no retraining), every row added again from one committed state read on a
        connection of its own, then swapped in and caught up with what was written meanwhile.
        Built under the lock with retraining, deleting 1,100 of 100,000 rows took 7.9 s,
        every search of the knowledge base waiting that long (IVF: 0.21 s). Runs only in the
        compaction's own thread (`_compact_aside`), so never twice at once. It keeps the
        build number, not the index it copied: holding that, a rebuild meanwhile could not
        free it, and three indexes sat in memory at once."""
        with self.lock:
            if not self.compact_wanted or self.kind != "scan" or self.index is None:
                return
            self.compact_wanted = False
            builds, dim = self.builds, self.index.d
            fresh = scan.emptied(self.index)
        with build.all_cores(build.BULK):
            fresh, version, max_seq = scan.compacted(fresh, self.store.every_vector(), dim)
        with self.lock:
            if self.builds != builds or self.index is None:
                return  # rebuilt meanwhile (another kind, new settings), or being rebuilt: that one stands
            self.index, self.version, self.max_seq = fresh, version, max_seq
            self.dead, self.builds = np.empty(0, np.int64), self.builds + 1
            self._catch_up(dim)
            self.huge_due = True
            self.unsaved = max(1, fresh.ntotal)
            self._maybe_save()

    def _want(self, live: int, dim: int) -> str:
        return "flat" if live < self.approx_threshold else self._approx(live, dim)

    def _approx(self, live: int, dim: int) -> str:
        """The approximate kind for `live` rows: the scan up to SCAN_ROWS, IVF above."""
        return "scan" if live <= self.scan_rows and scan.usable(dim) else "ivf"

    def _maybe_switch(self, dim: int) -> None:
        """Rebuild as another kind when the live rows cross a kind's bounds, with slack so a
        size near a bound does not flip back and forth: flat -> approximate at the threshold,
        back under half of it; scan -> IVF past SCAN_ROWS, back under half of it. Either
        approximate kind is retrained once the rows double its training, and a scan is rebuilt
        when its tombstones pass scan.compact_due."""
        live = self.live
        approx = self._approx(live, dim)
        grown = live > RETRAIN_GROWTH * self.trained_on
        if self.kind == "flat":
            if live >= self.approx_threshold:
                self._rebuild(dim, approx)
        elif live < self.approx_threshold // 2:
            self._rebuild(dim, "flat")
        elif self.kind == "scan" and (approx == "ivf" or grown):
            self._rebuild(dim, approx)
        elif self.kind == "scan" and not self.compacting and \
                scan.compact_due(len(self.dead), self.index.ntotal):
            self.compact_wanted = True  # built once the lock is let go (compact)
        elif self.kind == "ivf" and (grown or (approx == "scan" and live < self.scan_rows // 2)):
            self._rebuild(dim, approx)

    def rebuild(self) -> None:
        """Build the index again from the rows (CREATE INDEX ON KNOWLEDGE_BASE; new settings)."""
        with self.lock:
            dim = self.store.dim()
            if dim is not None:
                self._rebuild(dim)
                self.try_save()

    def _rebuild(self, dim: int, kind: str | None = None) -> None:
        """A fresh index from the rows, in bounded batches (memory: one batch + the index).
        The old index is let go first (callers hold the lock): two in memory at once made
        the peak of a 1M-row ingest 2.6 GB. Should the build fail, the next sync() retries."""
        self.index, self.version, self.dead = None, -1, np.empty(0, np.int64)
        with self.store.snapshot():
            live = self.store.count()
            kind = kind or self._want(live, dim)
            index = build.new_index(self.store, dim, kind, live, self.settings.nlist,
                                    rows=RETRAIN_GROWTH * live)  # (the rows a scan holds until retrained)
            version = self.store.version()
            max_seq = 0
            for ids, vectors in self.store.vectors_after(0, dim):
                with build.all_cores(len(ids)):
                    index.add_with_ids(vectors, ids)
                max_seq = int(ids[-1])
        self.index, self.kind, self.version, self.max_seq = index, kind, version, max_seq
        self.builds += 1
        self.trained_on = live if kind != "flat" else 0
        self.unsaved = max(1, index.ntotal)

    # search -----------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int,
               allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
        """(scores, ids, exact) for one normalised query; `allowed` restricts to those ids.

        A flat index answers the exact top-k. An IVF index answers `settings.rerank * k`
        candidates with approximate scores (exact = False): the caller re-scores them from
        the stored vectors. Under a filter matching up to ivf.EXACT_SUBSET rows an IVF index
        scores every allowed row's code (all cells probed: the selector skips the others)
        and answers at least k + FILTER_MARGIN candidates: the float16 error (~1e-4 in
        cosine) is far below the margin those extra candidates give, so the re-scored top-k
        is the true one. (Reading 10k float32 vectors back from SQLite instead took 100+ ms.)
        Under a wider filter the probed cells grow as the allowed share shrinks
        (ivf.probes), and the caller falls back to exact search if k rows do not come
        back. A scan answers candidates the same way, from every row's code (scan.py); under
        a filter, from every allowed row's float16 code, whatever the filter's size."""
        empty = np.empty(0, np.float32), np.empty(0, np.int64), True
        with self.lock:
            if self.index is None or self.live == 0 or k <= 0:
                return empty
            if allowed is not None:  # rows committed by another process after our last sync
                allowed = allowed[allowed <= self.max_seq]
                if len(self.dead):  # (a deleted row is in no filter's rows; kept out all the same)
                    allowed = allowed[scan.alive(allowed, self.dead)]
                if len(allowed) == 0:
                    return empty
            if self.kind == "scan":
                if self.huge_due:
                    self._huge_pages()
                fetch = min(max(k + FILTER_MARGIN if allowed is not None else k, self.settings.rerank * k),
                            self.live)
                where = None if allowed is None else \
                    id_selector(scan.positions(self.index, allowed), self.index.ntotal - 1)
                scores, ids = scan.search(self.index, query, fetch, self.refine, self.dead, where)
                return scores, ids, False
            selector = id_selector(allowed, self.max_seq) if allowed is not None else None
            if self.kind == "ivf":
                fetch = min(max(k + FILTER_MARGIN if allowed is not None else k, self.settings.rerank * k),
                            self.index.ntotal)
                nprobe = ivf.probes(self.index, self.settings.nprobe,
                                    None if allowed is None else len(allowed))
                params = scan.shared_params("nprobe", nprobe) if selector is None else \
                    build.faiss.SearchParametersIVF(nprobe=nprobe, sel=selector)
            else:
                fetch = min(k, self.index.ntotal)
                params = build.faiss.SearchParameters(sel=selector) if selector is not None else None
            scores, ids = self.index.search(query.reshape(1, -1), fetch, params=params)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep], self.kind == "flat"

    def _huge_pages(self) -> None:
        """Back the scan's codes with huge pages (huge_pages.py) once it is built or changed, at
        the next search (an ingest's writes alone advise nothing): one advising thread at a
        time, one every HUGE_EVERY seconds at most (adding rows moves the 4-bit codes, 9.6 MB at
        100k rows, to a new buffer, advised again).  The caller holds the lock."""
        worker = self._huge_worker
        if (worker is not None and worker.is_alive()) or time.monotonic() - self._huge_at < HUGE_EVERY:
            return
        self.huge_due, self._huge_at = False, time.monotonic()
        try:
            buffers = scan.code_buffers(self.index)
        except (AttributeError, RuntimeError) as exc:  # not the scan's FAISS layout: only slower
            log.debug("no huge pages for %s: %s", self.path, exc)
            return
        self._huge_worker = huge_pages.back(buffers)

    @property
    def refine(self) -> int:
        """The scan's refine pool: the knowledge base's setting, or scan.auto_refine for its
        rows (its code length read once per index: 8 us a search otherwise)."""
        if self.settings.refine:
            return self.settings.refine
        if self._codes[0] != self.builds:  # (keyed by the build, not the index: that would hold it)
            self._codes = (self.builds, scan.code_length(self.index))
        return scan.auto_refine(self._codes[1], self.index.d, self.live)

    @property
    def live(self) -> int:
        return 0 if self.index is None else self.index.ntotal - len(self.dead)
