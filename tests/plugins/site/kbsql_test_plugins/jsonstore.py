"""Storage backend `jsonstore`: a knowledge base's chunks in one JSON file, searched by brute
force. Small on purpose: every `KbStorage` method, in memory, committed whole on each write
(a failed write leaves the file as it was), so the engine's insert, search, delete and drop
all run through a backend kbsql has never seen."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.interface.errors import BadRequest
from kbsql.spi import Filter, FilterGroup, StoragePlace


class JsonStoreBackend:
    """Opens a KB's store in its own directory; `PARAMETERS = {"file": ...}` names the file."""

    def open(self, place: StoragePlace) -> JsonStore:
        name = str(place.parameters.get("file") or f"{place.table or 'chunks'}.json")
        return JsonStore(place.directory / name, place.read_only)

    def normalize(self, parameters: dict[str, Any]) -> dict[str, Any]:
        unknown = set(parameters) - {"file"}
        if unknown:
            raise BadRequest(f"jsonstore takes PARAMETERS file only, not {sorted(unknown)}")
        return dict(parameters)


class _Writer:
    def __init__(self, state: dict[str, Any]):
        self.state = state
        self.dim: int | None = state["dim"]

    def set_dim(self, dim: int) -> None:
        self.state["dim"] = self.dim = dim

    def replace(self, doc_ids: list[str], chunks: list[Any], vectors: np.ndarray, stamp: str) -> None:
        gone = set(doc_ids)
        rows = {k: r for k, r in self.state["rows"].items() if r["id"] not in gone}
        for chunk, vector in zip(chunks, vectors, strict=True):
            self.state["next"] += 1
            rows[str(self.state["next"])] = {
                "id": chunk.doc_id, "chunk_id": chunk.chunk_id, "content": chunk.content,
                "metadata": chunk.metadata, "vector": [float(x) for x in vector], "updated_at": stamp}
        self.state["rows"] = rows


def _value(row: dict[str, Any], column: str) -> Any:
    key = column.lower()
    if key in ("id", "chunk_id"):
        return row[key]
    if key in ("content", "chunk_content"):
        return row["content"]
    return row["metadata"].get(column)


def _matches(row: dict[str, Any], f: Filter | FilterGroup) -> bool:
    if isinstance(f, FilterGroup):
        results = [_matches(row, item) for item in f.items]
        return not results[0] if f.op == "not" else (any(results) if f.op == "or" else all(results))
    value, op, wanted = _value(row, f.column), f.op.lower(), f.value
    if f.column.lower() in ("id", "chunk_id") and not isinstance(wanted, list | tuple | set):
        wanted = str(wanted)
    if op in ("=", "=="):
        return bool(value == wanted)
    if op in ("!=", "<>"):
        return bool(value != wanted)
    if op in ("in", "not in"):
        values = [str(v) if f.column.lower() in ("id", "chunk_id") else v for v in wanted]
        return (value in values) == (op == "in")
    if op in ("like", "not like"):
        pattern = "^" + re.escape(str(wanted)).replace("%", ".*").replace("_", ".") + "$"
        return (re.match(pattern, str(value), re.IGNORECASE | re.DOTALL) is not None) == (op == "like")
    raise BadRequest(f"jsonstore filters with =, !=, IN and LIKE only, not {f.op!r}")


class JsonStore:
    def __init__(self, path: Path, read_only: bool = False):
        self.path, self.read_only = path, read_only
        self.lock = threading.Lock()
        self.state: dict[str, Any] = (json.loads(path.read_text()) if path.exists()
                                      else {"dim": None, "next": 0, "rows": {}})

    # writes -------------------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[_Writer]:
        if self.read_only:
            raise BadRequest("jsonstore: the data directory is read-only")
        with self.lock:
            draft = json.loads(json.dumps(self.state))
            yield _Writer(draft)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(draft))
            os.replace(tmp, self.path)
            self.state = draft

    def delete(self, filters: Any) -> int:
        with self.write() as w:
            keep = {k: r for k, r in w.state["rows"].items() if not all(_matches(r, f) for f in filters)}
            count = len(w.state["rows"]) - len(keep)
            w.state["rows"] = keep
        return count

    # reads --------------------------------------------------------------------------------
    def _rows(self, filters: Any) -> list[tuple[int, dict[str, Any]]]:
        return [(int(k), r) for k, r in sorted(self.state["rows"].items(), key=lambda kv: int(kv[0]))
                if all(_matches(r, f) for f in filters)]

    def sync(self) -> None:
        pass

    def count(self) -> int:
        return len(self.state["rows"])

    def plain_rows(self, filters: Any, limit: int | None, offset: int = 0) -> list[list[Any]]:
        rows = self._rows(filters)[offset:]
        rows = rows if limit is None else rows[:limit]
        return [[r["id"], r["chunk_id"], r["content"], r["metadata"], None, None] for _, r in rows]

    def vector_top(self, query: np.ndarray, k: int, filters: Any) -> tuple[np.ndarray, np.ndarray]:
        rows = self._rows(filters)
        if not rows:
            return np.empty(0, np.float32), np.empty(0, np.int64)
        scores = np.array([r["vector"] for _, r in rows], np.float32) @ query
        order = np.argsort(-scores, kind="stable")[:k]
        return scores[order], np.array([rows[i][0] for i in order], np.int64)

    def keyword_top(self, text: str, k: int, filters: Any) -> dict[int, float]:
        words = set(re.findall(r"\w+", text.lower()))
        hits = {key: len(words & set(re.findall(r"\w+", r["content"].lower())))
                for key, r in self._rows(filters)}
        best = max(hits.values(), default=0) or 1
        top = sorted((key for key in hits if hits[key]), key=lambda key: -hits[key])[:k]
        return {key: hits[key] / best for key in top}

    def similarities(self, query: np.ndarray, keys: list[int]) -> dict[int, float]:
        rows = self.state["rows"]
        return {key: float(np.array(rows[str(key)]["vector"], np.float32) @ query) for key in keys}

    def load_rows(self, keys: list[int]) -> dict[int, tuple[Any, ...]]:
        rows = self.state["rows"]
        return {key: (r["id"], r["chunk_id"], r["content"], json.dumps(r["metadata"]))
                for key in keys if (r := rows.get(str(key))) is not None}

    def sample(self, limit: int) -> tuple[list[str], list[dict[str, Any]], np.ndarray]:
        rows = [r for _, r in self._rows([])][:limit]
        vectors = np.array([r["vector"] for r in rows], np.float32).reshape(len(rows), self.state["dim"] or 0)
        return [r["chunk_id"] for r in rows], [r["metadata"] for r in rows], vectors

    def updated_at(self, chunk_ids: list[str]) -> dict[str, str]:
        wanted = set(chunk_ids)
        return {r["chunk_id"]: r["updated_at"] for r in self.state["rows"].values()
                if r["chunk_id"] in wanted}

    def index_metadata(self, columns: list[str]) -> None:
        pass

    def close(self) -> None:
        pass

    def drop(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)
