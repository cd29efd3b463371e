"""A scan index in place of kbsql's IVF, for bench_vs_chroma's path only (issue 37).

bench_index_curve measures index candidates with FAISS alone; a candidate that meets the
targets there is measured once more through the path users take (the engine's service call
and SQL: embedding, the index, the exact re-score from SQLite, the rows) by
`bench_vs_chroma.py --index-candidate SPEC`, which calls `install(SPEC)` in its kbsql
processes. The shipped default is not changed: the engine's code is patched in those
processes only, and their report goes to vs_chroma_candidate.json, not vs_chroma.json.

SPEC is a FAISS factory string ending in `Refine(...)` (index_scans.py's `pqfs_refine`, e.g.
`RR384,PQ192x4fs,Refine(SQfp16)`), optionally followed by `@K`, the refine pool's k_factor
(default K_FACTOR; e.g. `RR384,PQ96x4fs,Refine(SQfp16)@50`): every row's code scanned, the
best `k_factor` x fetch re-scored from the refine codes, the best `rerank` x k of those (the
engine's default pool) re-scored exactly by the engine from SQLite. Wrapped in IndexIDMap2
for the engine's ids.
A fast scan takes no selector, so a filtered search scans the refine codes of the allowed
rows instead (the IVF's filtered path scores every allowed row's code too). Deleting rows
(remove_ids) is not supported by this wrapper: the benchmark never deletes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

K_FACTOR = 10  # refine pool, in fetched candidates (index_curve.json: pqfs_refine)


def install(spec: str, k_factor: int = K_FACTOR) -> None:
    from kbsql.engine.knowledge import index as m

    if "@" in spec:
        spec, factor = spec.rsplit("@", 1)
        k_factor = int(factor)

    make, search = m.make_index, m.VectorIndex.search

    def make_index(dim: int, kind: str, sample: np.ndarray | None = None, nlist: int = 0) -> Any:
        if kind == "flat":
            return make(dim, kind)
        assert sample is not None
        inner = m.faiss.index_factory(dim, spec, m.faiss.METRIC_INNER_PRODUCT)
        inner.train(np.ascontiguousarray(sample, dtype=np.float32))  # one thread: see index_scans.built
        return m.faiss.IndexIDMap2(inner)

    def scan_search(self, query: np.ndarray, k: int,
                    allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
        if self.kind == "flat":  # (the candidate replaces whichever approximate kind, scan or IVF)
            return search(self, query, k, allowed)
        f = m.faiss
        empty = np.empty(0, np.float32), np.empty(0, np.int64), True
        with self.lock:
            if self.index is None or self.index.ntotal == 0 or k <= 0:
                return empty
            if allowed is not None:
                allowed = allowed[allowed <= self.max_seq]
                if len(allowed) == 0:
                    return empty
            fetch = min(max(k + m.FILTER_MARGIN if allowed is not None else k, self.settings.rerank * k),
                        self.index.ntotal)
            ids_map = f.downcast_index(self.index)
            q = query.reshape(1, -1)
            if allowed is None:
                params = f.IndexRefineSearchParameters(k_factor=k_factor)
                scores, ids = ids_map.search(q, fetch, params=params)
            else:
                codes = f.downcast_index(f.downcast_index(ids_map.index).refine_index)
                chosen = f.IDSelectorTranslated(ids_map.id_map, f.IDSelectorBatch(allowed))
                scores, inner = codes.search(q, fetch, params=f.SearchParameters(sel=chosen))
                ids = np.array([[ids_map.id_map.at(int(i)) if i >= 0 else -1 for i in inner[0]]], np.int64)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep], False

    m.make_index = make_index
    m.VectorIndex.search = scan_search
