"""Building a knowledge base's vector index: an empty index of a kind, and the rows it is
trained on. index.py decides which kind, when, and keeps the built index in step with the
rows; the benchmarks build their bare baselines with `make_index` too, so a figure of FAISS
alone is of the index the engine builds.

`faiss` here is the one handle on the library for index.py as well (`index_build.faiss`):
loaded at first use, with one OpenMP thread outside `all_cores`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from kbsql.engine.knowledge import ivf, scan
from kbsql.engine.knowledge.store import ChunkStore

SCAN_SAMPLE = 50_000  # rows a scan's rotation and codebooks are trained on (index_scans.TRAIN)
BULK = 2_000  # adds at least this big use every core (training and assignment are CPU-bound)


class _LazyFaiss:
    """faiss is loaded at the first index use, not at import: it costs ~13 MB of RSS and
    0.1 s, which an idle `kbsql serve` (or a notebook that never searches) does not need."""

    def __getattr__(self, name: str) -> Any:
        import faiss as module

        module.omp_set_num_threads(1)  # single queries: 1 thread is 2x faster than 2 (platform facts)
        globals()["faiss"] = module
        return getattr(module, name)


# typed Any: faiss's SWIG-generated stubs are partial (no SearchParametersIVF)
faiss: Any = _LazyFaiss()


@contextlib.contextmanager
def all_cores(count: int) -> Iterator[None]:
    """Every core for an add of `count` rows of at least BULK, one thread again after."""
    if count < BULK:
        yield
        return
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(1)


def make_index(dim: int, kind: str, sample: np.ndarray | None = None, nlist: int = 0,
               rows: int = 0) -> Any:
    """An empty index of `kind`: exact flat, a scan for `rows` rows (scan.py; default: as many
    as the sample), or IVF over float16 codes whose cells are trained on `sample`."""
    if kind == "flat":
        return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    assert sample is not None
    if kind == "scan":
        return scan.make_scan(dim, sample, rows or len(sample))
    with all_cores(len(sample)):
        return ivf.make_ivf(dim, sample, nlist)


def new_index(store: ChunkStore, dim: int, kind: str, live: int, nlist: int, rows: int) -> Any:
    """An empty index of `kind` for the `live` rows of `store`, trained on rows spread over
    them: a scan coded for `rows` rows (those it holds until retrained), an IVF of `nlist`
    cells (0: ivf.auto_nlist), never more than its training rows allow."""
    if kind == "flat":
        return make_index(dim, "flat")
    if kind == "scan":
        return make_index(dim, kind, training_sample(store, dim, live, SCAN_SAMPLE), rows=rows)
    nlist = min(nlist or ivf.auto_nlist(live), max(1, live // ivf.TRAIN_PER_LIST))
    return make_index(dim, "ivf", training_sample(store, dim, live, nlist * ivf.TRAIN_PER_LIST), nlist)


def training_sample(store: ChunkStore, dim: int, live: int, size: int) -> np.ndarray:
    """`size` rows spread evenly from the oldest to the newest (read batch by batch, never
    all at once): cells trained on the oldest rows only would leave new topics in a few
    huge cells (a whole-number stride did that: at 100k rows it sampled rows 0-50,559)."""
    size = max(1, min(size, live))
    picks = np.arange(size, dtype=np.int64) * live // size  # row positions, oldest to newest
    sample = np.empty((size, dim), np.float32)  # filled in place: one copy, not parts + their join
    filled = seen = 0
    for _, vectors in store.vectors_after(0, dim):
        lo, hi = np.searchsorted(picks, [seen, seen + len(vectors)])
        sample[filled:filled + hi - lo] = vectors[picks[lo:hi] - seen]
        filled, seen = filled + hi - lo, seen + len(vectors)
    return sample[:filled]
