"""The vector index's cache file (index.py): a magic line, a JSON header line, FAISS's bytes.

The header tags the state of the rows the index covers (store version, max seq), the rows it
was trained for and a scan's tombstones; index.VectorIndex decides whether the cache still
describes its rows. The file is read and written streaming (never the whole file in memory
twice) and replaced atomically (temp file + fsync + os.replace), so a reader sees the old
cache or the new one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_MAGIC = b"KBSQLIDX2\n"  # flat and IVF caches: as before the scan, so an upgrade keeps them
_MAGIC_SCAN = b"KBSQLIDX3\n"  # a scan's: an older kbsql, which knows no tombstones, rebuilds it


def read(path: Path, faiss: Any) -> tuple[Any, dict[str, Any]] | None:
    """(the index, its header), or None when there is no cache, an old format or a bad one
    (the index is then rebuilt from the rows)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_MAGIC))
            if magic not in (_MAGIC, _MAGIC_SCAN):
                return None
            header = json.loads(f.readline())
            if (header.get("kind") == "scan") != (magic == _MAGIC_SCAN):
                return None
            return faiss.read_index(faiss.PyCallbackIOReader(f.read)), header
    except (OSError, ValueError, RuntimeError):
        return None


def write(path: Path, faiss: Any, index: Any, header: dict[str, Any]) -> None:
    """Write the cache; private to its owner, like the other data files."""
    tmp = path.with_suffix(".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        magic = _MAGIC_SCAN if header["kind"] == "scan" else _MAGIC
        f.write(magic + json.dumps(header).encode() + b"\n")
        faiss.write_index(index, faiss.PyCallbackIOWriter(f.write))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
