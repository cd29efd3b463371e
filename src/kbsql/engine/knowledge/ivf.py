"""The IVF kind of the vector index (index.py): cells of float16 codes, `nprobe` probed a search.

A knowledge base gets it past index.SCAN_ROWS rows, when its settings ask (`scan = N`: IVF past
N rows) or when its dimension is odd (the scan's 4-bit codes pair dimensions); otherwise the
scan (scan.py) answers, since on the queries people type the IVF's cells miss rows the scan
finds (index.py says how much).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

TRAIN_PER_LIST = 40  # training vectors per IVF cell (faiss wants >= 39)
ENCODER_SAMPLE = 1_000  # vectors IVF's train gets once the cells are trained (make_ivf)
EXACT_SUBSET = 20_000  # filtered IVF searches over at most this many rows score every one of them
# a wider filter probes nprobe * FILTER_WIDEN / (share of rows allowed) cells: a 10% filter
# at 200k near-duplicates found 0.75 of the true top 10 with nprobe 32, 0.98 with 320, 1.0 with 500+
FILTER_WIDEN = 2


def auto_nlist(rows: int) -> int:
    """IVF cells for `rows` vectors: 4 sqrt(N), probed 48 at a time (settings.NPROBE).

    Why 4 sqrt(N) and 48 rather than 2 sqrt(N) and 32 (the defaults until issue 24): text
    vectors cluster, so the cells a query lands in hold more rows than the average and a
    search scans far more codes than nprobe / nlist of the rows (10.7k, not 5k, at 100k
    near-duplicates). Smaller cells split those clusters. Measured with FAISS alone, the same
    vectors, tie-aware recall@10 after the exact re-score (uptime load 0.6-3):
    - 100k near-duplicates: 2 sqrt(N)/32 scans 9.5k codes per query, recall 0.991;
      4 sqrt(N)/48: 6.0k, recall 1.0.
    - 100k Zipf-word texts (bench_knowledge's): 11.1k, 0.979 -> 8.6k, 0.979.
    - 1M near-duplicates: 21.9k, 0.995 -> 13.9k, 1.0; 1M Zipf: 40.3k, 0.955 -> 31.6k, 0.964.
    The price is training: twice the cells take about twice as long (1M: 54 -> 112 s on one
    core); the coarse search over 4,000 centroids at 1M costs ~0.3 ms of the saving."""
    return max(1, int(4 * math.sqrt(max(rows, 1))))


def make_ivf(dim: int, sample: np.ndarray, nlist: int = 0) -> Any:
    """An empty IVF over float16 codes, its `nlist` cells (0: auto_nlist, at most one per
    TRAIN_PER_LIST rows) trained on `sample`. The caller picks the threads (index_build.all_cores)."""
    import faiss

    nlist = nlist or min(auto_nlist(len(sample)), max(1, len(sample) // TRAIN_PER_LIST))
    index = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(dim), dim, nlist,
                                          faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 10
    x = np.ascontiguousarray(sample, dtype=np.float32)
    # the cells: k-means over the whole sample, into the index's own quantizer ...
    faiss.Clustering(dim, nlist, index.cp).train(x, index.quantizer)
    # ... then IVF's own train, which skips a trained quantizer and trains the codes on the
    # residuals of what it is given: float16 codes learn nothing, and a residual copy of the
    # whole sample cost +96 MB of peak RSS at 1,264 cells (same centroids either way)
    index.train(x[:ENCODER_SAMPLE])
    return index


def probes(index: Any, nprobe: int, allowed: int | None) -> int:
    """The cells a search probes: `nprobe`; under a filter of at most EXACT_SUBSET rows every
    cell (the selector skips the rows it does not allow, so each allowed row is scored); under
    a wider one as many as it takes to meet k allowed rows (FILTER_WIDEN)."""
    nprobe = min(nprobe, index.nlist)
    if allowed is None:
        return nprobe
    if allowed <= EXACT_SUBSET:
        return int(index.nlist)
    share = allowed / max(index.ntotal, 1)
    return min(index.nlist, math.ceil(FILTER_WIDEN * nprobe / share))
