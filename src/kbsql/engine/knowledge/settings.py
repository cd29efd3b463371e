"""Tuning knobs of one knowledge base's vector index, set by `CREATE INDEX ON KNOWLEDGE_BASE`.

MindsDB builds a knowledge base's index with `CREATE INDEX ON KNOWLEDGE_BASE kb` (its docs:
knowledge_bases/insert_data.mdx) and its parser takes parameters as `WITH (key = value)`;
here they tune the IVF index (index.py). The defaults are measured on the near-duplicate
corpus (benchmarks/bench_vs_chroma.py, curve in benchmarks/results/vs_chroma.json):

- `nprobe`: IVF cells visited per query. More is slower and closer to exact.
- `rerank`: candidates per requested row the approximate index answers, re-scored exactly from the
  stored vectors (those whose float16 score can still reach the top k: local._rescored).
- `nlist`: IVF cells (0 = automatic, 4 sqrt(rows), re-chosen as the rows grow; ivf.auto_nlist
  says why with nprobe 48).
- `threshold`: rows from which the index is approximate rather than exact (0 = the default, 20,000).
- `scan`: rows up to which the approximate index scans every row's code (scan.py) rather than
  being IVF (0 = the default, index.SCAN_ROWS; 1 = always IVF). nprobe and nlist tune the IVF only.
- `refine`: rows a scan re-scores from its float16 codes per candidate it answers (0 = automatic,
  growing with the rows: scan.auto_refine).

They live in `index_settings.json` beside the index: the knowledge base's own files, so a
dropped knowledge base takes them along, and an absent file means the defaults.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kbsql.interface.errors import InvalidParameter

NPROBE = 48  # with 4 sqrt(N) cells (ivf.auto_nlist: the measurements)
RERANK = 2
REFINE = 0  # automatic: scan.auto_refine (25 for d/2 codes, 100 for d/4, more past 500k / 1M rows)
_LIMITS = {"nprobe": (1, 65536), "rerank": (1, 1000), "nlist": (0, 1 << 20), "threshold": (0, 1 << 40),
           "scan": (0, 1 << 40), "refine": (0, 1000)}


def integer_params(params: dict[str, Any], limits: dict[str, tuple[int, int]],
                   values: dict[str, Any], where: str = "") -> dict[str, Any]:
    """`values` updated from statement parameters, each an integer within `limits` (names
    case-insensitive); an unknown name or a value out of range is refused with the list of
    the parameters there are (`where` says whose they are)."""
    values = dict(values)
    for key, value in params.items():
        name = str(key).lower()
        if name not in limits:
            raise InvalidParameter(f"unknown index parameter {key!r}{where}; the parameters are "
                                   f"{sorted(limits)}")
        low, high = limits[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidParameter(f"index parameter {name} must be an integer from {low} to {high}, "
                                   f"not {value!r}")
        values[name] = value
    return values


@dataclass
class IndexSettings:
    nprobe: int = NPROBE
    rerank: int = RERANK
    nlist: int = 0
    threshold: int = 0
    scan: int = 0
    refine: int = REFINE

    @classmethod
    def load(cls, path: Path) -> IndexSettings:
        try:
            return cls.from_params(json.loads(path.read_text()))
        except (OSError, ValueError, InvalidParameter):
            return cls()

    @classmethod
    def from_params(cls, params: dict[str, Any], base: IndexSettings | None = None) -> IndexSettings:
        """Settings from statement parameters over `base`; unknown keys and values out of
        range are refused (a typo must not silently leave the default in place)."""
        return cls(**integer_params(params, _LIMITS, asdict(base or cls())))

    def save(self, path: Path, given: Iterable[str]) -> None:
        """Temp file + os.replace (a reader sees old or new); private like the other data files.
        Only the parameters a statement gave (`given`, names) are written: the others
        follow the defaults of the code that reads the file, so a default re-measured later
        (nprobe 32 -> 48 with issue 24) reaches every knowledge base that never set it, and
        `DROP INDEX` (no parameters) really restores the defaults rather than freezing them.
        A 0 given is written as absent, the same here (0 is each such parameter's default):
        a kbsql before the automatic refine refuses `refine: 0`, and its load then dropped
        every setting in the file."""
        values = asdict(self)
        keep = {k: values[k] for k in {str(g).lower() for g in given} if values[k] != 0}
        tmp = path.with_suffix(".tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(json.dumps(keep))
        os.replace(tmp, path)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
