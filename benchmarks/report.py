"""Where benchmark reports go: printed as JSON and written to `benchmarks/results/NAME.json`
(or to `$KBSQL_BENCH_RESULTS/NAME.json`, so a smoke run never overwrites real figures)."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_report(name: str, report: dict[str, Any]) -> None:
    text = json.dumps(report, indent=2)
    print(text)
    folder = Path(os.environ.get("KBSQL_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(text + "\n", encoding="utf-8")


def summary(samples: list[float]) -> dict[str, float]:
    """Median, 95th percentile and minimum of millisecond samples."""
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 3),
            "min_ms": round(ordered[0], 3)}


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    """Milliseconds of each of `repeat` calls of `fn`."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out
