"""Transparent huge pages under a scan's codes (index.py, scan.py `code_buffers`).

Why: a scan's search reads every row's 4-bit code (9.6 MB at 100k rows) and then refine x
fetch rows of float16 codes (500 of them by default) at random places in 77 MB. On 4 KiB pages
each of those rows costs a TLB miss and a page-table walk, most of them from memory. On 2 MiB
pages, FAISS's search of bench_vs_chroma's 100k rows took 0.74-0.77 ms against 1.28-1.56
(p50, same process, same queries, load ~8). It is the same computation on the same bytes, so
the answers are the same.

How: FAISS allocates the buffers itself (read_index, add), so they are advised after the fact:
madvise MADV_HUGEPAGE, then MADV_COLLAPSE (Linux 6.1+), which copies them into huge pages now
rather than whenever khugepaged gets to them (minutes for 77 MB at its default pace). That
took 0.5 s for 70 MB at load 8, so it runs in a thread of its own, and a search meanwhile reads
the codes as before. It is best effort: off Linux, without THP, or with no free huge page,
nothing changes. A range freed or reused meanwhile (the index rebuilt) is only advised in
vain: the advice changes no byte of any memory. Where the administrator turned THP off
(`never` in SETTING), nothing is advised: MADV_COLLAPSE would collapse regardless of it.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from pathlib import Path

HUGE = 2 << 20  # bytes of a huge page (x86-64, arm64 with 4 KiB pages)
MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25
SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def back(buffers: list[tuple[int, int]]) -> threading.Thread | None:
    """Start backing the (address, bytes) ranges with huge pages, in a daemon thread (returned;
    None off Linux, where the advice numbers mean other things)."""
    if sys.platform != "linux" or not buffers or not allowed():
        return None
    worker = threading.Thread(target=_advise, args=(buffers,), name="kbsql-huge-pages", daemon=True)
    worker.start()
    return worker


@functools.cache
def allowed() -> bool:
    """THP is not turned off on this machine (SETTING: `always [madvise] never`, the chosen one
    in brackets; a kernel without the file has none, and the advice then fails harmlessly)."""
    try:
        return "[never]" not in SETTING.read_text()
    except OSError:
        return True


def _advise(buffers: list[tuple[int, int]]) -> None:
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    for address, size in buffers:
        start, end = -(-address // HUGE) * HUGE, (address + size) // HUGE * HUGE  # whole pages inside
        if end > start and madvise(start, end - start, MADV_HUGEPAGE) == 0:
            madvise(start, end - start, MADV_COLLAPSE)
