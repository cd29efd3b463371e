"""The rows a knowledge-base filter allows, kept for the state of the rows they were read in.

A filtered search hands FAISS the seqs of the rows its filter matches (local.vector_top), read
by one SQL scan of the filter's metadata index. On bench_vs_chroma's filtered search (10% of
100k rows) that read took 2.8-3.3 ms, more than the FAISS search itself, and it was the same
read every time: applications repeat their filters (one tenant, one source, one language). So
the seqs are kept per filter, tagged with the store's `version`; each search reads the version
(one tiny read) and re-reads the seqs once any write, of this process or another, has committed
since. The answer is the one a fresh read gives: same rows, same order, same distances.
Bounded: at most KEEP filters and KEEP_IDS seqs in all (8 bytes each); a filter matching more,
or with more than KEEP_ARGS values (a pasted id list), is read every time. `id_selector`
hands such seqs to FAISS.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from kbsql.engine.knowledge.store import ChunkStore

KEEP = 8
KEEP_IDS = 2_000_000  # 16 MB of seqs
KEEP_ARGS = 1_000  # values in one kept filter (its key is kept too)


class AllowedSeqs:
    """`seqs(where, args)`: the seqs of the rows matching one rendered filter, from `read`
    (which runs the SQL) or from the last read of the same filter at the current version."""

    def __init__(self, store: ChunkStore, read: Callable[[ChunkStore, str, list[Any]], np.ndarray]):
        self.store = store
        self.read = read
        self.lock = threading.Lock()
        self.version = -1
        self.kept: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()

    def seqs(self, where: str, args: list[Any]) -> np.ndarray:
        if len(args) > KEEP_ARGS:
            return self.read(self.store, where, args)
        # each value by type and repr: 1, 1.0, True and 0.0, -0.0 are equal keys, but SQLite's
        # text of them differs (`g LIKE 1.0` matches no row `g LIKE 1` matches)
        key = (where, tuple((type(a), repr(a)) for a in args))
        version = self.store.version()
        with self.lock:
            hit = self.kept.get(key) if version == self.version else None
            if hit is not None:
                self.kept.move_to_end(key)
                return hit
        with self.store.snapshot():  # the version and the seqs of one state
            version = self.store.version()
            seqs = self.read(self.store, where, args)
        seqs.flags.writeable = False  # shared by the searches that find it here
        if len(seqs) > KEEP_IDS:
            return seqs
        with self.lock:
            if version < self.version:  # another search has read a newer state meanwhile
                return seqs
            if version != self.version:
                self.kept.clear()
                self.version = version
            self.kept[key] = seqs
            while len(self.kept) > KEEP or sum(len(s) for s in self.kept.values()) > KEEP_IDS:
                self.kept.popitem(last=False)
        return seqs


class KnownKeys:
    """`has(key)`: whether some chunk's metadata holds `key` (a filter on a key none holds is
    an unknown column: kb_columns.Columns), kept per key for the store's `version` as the seqs
    are. Why: the read stops at the first row holding the key, but a key only the last rows
    hold, or none, is a scan: at 100k chunks a search filtered on the last row's key took 96 ms
    against 0.9 ms without the check; the answer is the same until a write commits. At most
    KEEP_KEYS keys are kept."""

    KEEP_KEYS = 1_000

    def __init__(self, store: ChunkStore):
        self.store = store
        self.lock = threading.Lock()
        self.version = -1
        self.kept: dict[str, bool] = {}

    def has(self, key: str) -> bool:
        version = self.store.version()
        with self.lock:
            if version == self.version and key in self.kept:
                return self.kept[key]
        if '"' in key:  # no JSON path label can hold it (store.metadata_expr)
            found, arg = "EXISTS (SELECT 1 FROM json_each(metadata) WHERE key = ?)", key
        else:  # json_type is 'null' for a key whose value is null, NULL for an absent one
            found, arg = "json_type(metadata, ?) IS NOT NULL", f'$."{key}"'
        held = bool(self.store.query(f"SELECT 1 FROM chunks WHERE {found} LIMIT 1", (arg,)))
        with self.lock:
            if version != self.version or len(self.kept) >= self.KEEP_KEYS:
                self.kept, self.version = {}, version
            self.kept[key] = held
        return held


def id_selector(allowed: np.ndarray, max_seq: int) -> Any:
    """The FAISS selector of the `allowed` ids (none above `max_seq`): a bitmap of every id up
    to max_seq when it is no bigger than the ids themselves (8 bytes each), else a batch.

    Why: a filtered IVF search tests every code of the probed cells against the selector. A
    batch (hash set + bloom filter) of 10k ids took 0.38 ms to build and its lookups made the
    search ~0.14 ms slower than a bitmap's, which builds in 0.02 ms (10% filter at 100k rows,
    benchmarks/bench_vs_chroma.py's; the same ids pass either way, so the answers are the same)."""
    import faiss as module  # (loaded by the index that asks: index_build._LazyFaiss)

    faiss: Any = module  # (its SWIG stubs are partial: index.py)

    if max_seq + 1 > 64 * len(allowed):  # sparse: a bitmap would outweigh the id list
        return faiss.IDSelectorBatch(allowed)
    bits = np.zeros(max_seq + 1, dtype=bool)
    bits[allowed] = True
    return faiss.IDSelectorBitmap(np.packbits(bits, bitorder="little"))  # bit i of byte i >> 3
