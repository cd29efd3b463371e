"""Index structures measured after the IVF parameters of bench_index_curve (issue 37, item 2).

The parameter sweeps reached the targets only by scanning ~30% of the rows, and the misses
were cells never probed. These change what the index holds instead of how much of it a
search reads, and `boosted` measures why neither helps much on hash-384 vectors:
- `spill`: every vector stored in two IVF cells, its nearest and a second one chosen as
  SOAR does (Sun et al. 2023: the cell whose residual is least parallel to the first
  residual, loss |r'|^2 + lam (r . r' / |r|)^2; lam 0 = plainly the second nearest); a
  search probes nprobe cells and drops the repeated ids. Costs twice the codes in memory.
- `collapse`: vectors within cosine `tau` of a representative (greedy, in row order) form a
  group; the representatives are searched exactly (an upper bound of what an index over
  them could find), the best `groups` are expanded (ordered by representative score + the
  group's radius) and their members scored from float16 codes, then re-scored exactly.
- `boosted`: per kind, the share of the exact top 10 that score above the median of their
  own paragraph's copies: the copy's unique token `u<i>x` fell in the hash bucket of a query
  word (384 buckets, so ~1% of rows match any given word), so it scores like a document
  containing that word. Such rows sit anywhere among their paragraph's copies. Also how many
  of the exact top-10 rows the shipped IVF did not return are such rows (strict ids: a
  missed plain copy is usually replaced by a tied sibling, a boosted one is not).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import faiss
import neardup
import numpy as np

K = 10
FETCH = 2 * K  # candidates handed to the exact re-score, as kbsql's default rerank 2


def spill_index(ivf_index: Callable, x: np.ndarray, lam: float, choices: int = 8):
    """kbsql's IVF (cells trained as the engine trains them), each vector added to two cells."""
    index = ivf_index(x)
    index.reset()  # keep the trained cells, drop the single assignment
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    _, near = index.quantizer.search(x, choices)
    cent = index.quantizer.reconstruct_n(0, index.nlist)
    first = x - cent[near[:, 0]]
    unit = first / np.maximum(np.linalg.norm(first, axis=1, keepdims=True), 1e-9)
    best = np.full(len(x), np.inf, np.float32)
    second = near[:, 1].copy()
    for j in range(1, choices):
        other = x - cent[near[:, j]]
        loss = (other * other).sum(1) + lam * (unit * other).sum(1) ** 2
        better = loss < best
        best[better], second[better] = loss[better], near[better, j]
    ids = np.arange(len(x), dtype=np.int64)
    for cells in (near[:, 0], second):
        cells = np.ascontiguousarray(cells, dtype=np.int64)
        index.add_core(len(x), faiss.swig_ptr(x), faiss.swig_ptr(ids), faiss.swig_ptr(cells))
    faiss.omp_set_num_threads(1)
    return index


def spill_search(index, nprobe: int) -> Callable[[np.ndarray], np.ndarray]:
    params = faiss.SearchParametersIVF(nprobe=nprobe)

    def search(row: np.ndarray) -> np.ndarray:
        ids = index.search(row[None], 2 * FETCH, params=params)[1][0]
        _, first = np.unique(ids, return_index=True)
        return ids[np.sort(first)][:FETCH]
    return search


def collapse_groups(x: np.ndarray, tau: float, batch: int = 5000) -> tuple:
    """(representatives, member rows grouped, group starts, group radii, member codes)."""
    reps = faiss.IndexFlatIP(x.shape[1])
    group = np.empty(len(x), np.int64)
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    for start in range(0, len(x), batch):
        xb = x[start:start + batch]
        joined = np.zeros(len(xb), bool)
        if reps.ntotal:
            score, nearest = reps.search(xb, 1)
            joined = score[:, 0] >= tau
            group[start:start + batch][joined] = nearest[joined, 0]
        rest = np.flatnonzero(~joined)
        while len(rest):  # the batch's own new groups, greedily
            lead = rest[0]
            members = xb[rest] @ xb[lead] >= tau
            members[0] = True
            group[start + rest[members]] = reps.ntotal
            reps.add(xb[lead:lead + 1])
            rest = rest[~members]
    faiss.omp_set_num_threads(1)
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(reps.ntotal + 1))
    radius = np.zeros(reps.ntotal, np.float32)
    np.maximum.at(radius, group, np.linalg.norm(x - reps.reconstruct_n(0, reps.ntotal)[group], axis=1))
    return reps, order, starts, radius, x[order].astype(np.float16)


def collapse_search(groups: tuple, probed: int) -> Callable[[np.ndarray], np.ndarray]:
    reps, order, starts, radius, codes = groups

    def search(row: np.ndarray) -> np.ndarray:
        score, best = reps.search(row[None], probed)
        keep = best[0] >= 0
        picked = best[0][keep][np.argsort(-(score[0][keep] + radius[best[0][keep]]))]
        rows = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in picked])
        approx = codes[rows].astype(np.float32) @ row
        top = np.argpartition(-approx, min(FETCH, len(approx) - 1))[:FETCH]
        return order[rows[top]]
    return search


def boosted(x: np.ndarray, sets: dict, ivf_index: Callable, nprobe: int = 48) -> dict:
    """Per kind: the mean share of the exact top 10 scoring above their paragraph's median copy,
    and of the exact top-10 rows the shipped IVF (4 sqrt(N) cells, nprobe 48, 20 candidates
    re-scored) did not return, how many are such rows."""
    paras = len(neardup.paragraphs())
    index = ivf_index(x)
    params = faiss.SearchParametersIVF(nprobe=nprobe)
    out = {}
    for kind, (q, (e_scores, e_ids)) in sets.items():
        shares, missed, missed_boosted = [], 0, 0
        for row, scores, ids in zip(q, e_scores, e_ids, strict=True):
            up = [s > float(np.median(x[h % paras::paras] @ row)) + 1e-4
                  for h, s in zip(ids, scores, strict=True)]
            shares.append(np.mean(up))
            got = set(index.search(row[None], FETCH, params=params)[1][0].tolist())
            lost = [bool(u) for h, u in zip(ids, up, strict=True) if int(h) not in got]
            missed, missed_boosted = missed + len(lost), missed_boosted + sum(lost)
        out[kind] = {"mean_share_boosted": round(float(np.mean(shares)), 3),
                     "queries_half_or_more_boosted": int(np.sum(np.array(shares) >= 0.5)),
                     "queries": len(shares), f"rows_not_returned_nprobe_{nprobe}": missed,
                     "of_them_boosted": missed_boosted}
    return out


def sweep(x: np.ndarray, sets: dict, only: set[str], measure: Callable, ivf_index: Callable) -> dict:
    curves: dict = {}
    if "boosted" in only:
        curves["boosted"] = [boosted(x, sets, ivf_index)]
    if "spill" in only:
        for lam in (0.0, 1.0):
            t0 = time.perf_counter()
            index = spill_index(ivf_index, x, lam)
            build = round(time.perf_counter() - t0, 1)
            curves.setdefault("spill", []).extend(
                {"cells": index.nlist, "lambda": lam, "nprobe": nprobe, "build_s": build,
                 "codes_per_vector": 2, **measure(spill_search(index, nprobe), x, sets)}
                for nprobe in (24, 48, 96))
            del index
    if "collapse" in only:
        for tau in (0.95, 0.8):
            t0 = time.perf_counter()
            groups = collapse_groups(x, tau)
            build = round(time.perf_counter() - t0, 1)
            sizes = np.diff(groups[2])
            print(f"collapse tau {tau}: {len(sizes)} groups, build {build} s", file=sys.stderr)
            curves.setdefault("collapse", []).extend(
                {"tau": tau, "groups": len(sizes), "singletons": int(np.sum(sizes == 1)),
                 "largest": int(sizes.max()), "groups_probed": probed, "build_s": build,
                 **measure(collapse_search(groups, probed), x, sets)} for probed in (10, 30))
            del groups
    return curves


def keep_others(name: str, report: dict) -> None:
    """Add the curves (and their loads) of the results file `name` that this run did not measure."""
    folder = Path(os.environ.get("KBSQL_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
    try:
        old = json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError):
        return
    start = old.get("machine", {})
    default_load = [round(start.get("load_avg_at_start", 0), 2), round(start.get("load_avg_at_end", 0), 2)]
    for curve, points in old.get("curves", {}).items():
        if curve not in report["curves"]:
            report["curves"][curve] = points
            report["loads"][curve] = old.get("loads", {}).get(curve, default_load)
