"""The default model's optimised ONNX graph, saved once and reused by every later process.

Why: building the MiniLM graph from the safetensors (int8 quantisation in numpy) and letting
ONNX Runtime optimise it cost ~0.6 CPU-s in every process that loads the default model (each
`kbsql serve`, each notebook kernel, each embedded engine). The first process saves the graph
ONNX Runtime optimised (`SessionOptions.optimized_model_filepath`); later ones load that file
with graph optimisation off, and skip both the build and the optimisation.

The file's name is a hash of everything its content depends on: the weights file (path, size,
mtime: a reinstall changes them), this kbsql's graph builder source, the quantisation, the
onnxruntime version and the machine. It lives under `$XDG_CACHE_HOME/kbsql/onnx` (default
`~/.cache`). Two processes may write it at once: each writes its own temp file and renames it
into place (a reader sees a whole file or none). A file ONNX Runtime cannot load is removed and
the graph rebuilt (and saved again), so a corrupt cache costs one slow start, never an error.
Each graph is ~70 MB: saving one keeps only the KEEP most recently saved (an upgrade's old
graphs go; a graph still in use that was pruned costs one slow start).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEEP = 6
"""Graphs kept in the cache folder (the default model, plus a few variants or versions)."""


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/kbsql/onnx`, `~/.cache/kbsql/onnx` when XDG_CACHE_HOME is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kbsql" / "onnx"


def cache_key(weights: Path, builder_source: Path, variant: str, ort_version: str) -> str:
    """A name for the optimised graph of these inputs (see the module docstring)."""
    st = weights.stat()
    parts = [str(weights.resolve()), str(st.st_size), str(st.st_mtime_ns),
             hashlib.sha256(builder_source.read_bytes()).hexdigest(), variant, ort_version,
             platform.machine(), "v1"]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def session(ort: Any, make_options: Callable[[], Any], key: str, build: Callable[[], bytes]) -> Any:
    """An InferenceSession of the cached graph `key`, or of `build()` optimised per
    `make_options()` (and saved for the next process)."""
    path = cache_dir() / f"{key}.onnx"
    providers = ["CPUExecutionProvider"]
    if path.is_file():
        fast = make_options()
        fast.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(str(path), fast, providers=providers)
        except Exception:  # a corrupt or foreign file: rebuild it
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: no cache, the same session
        return ort.InferenceSession(build(), make_options(), providers=providers)
    tmp = path.with_name(f".{key}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    saving = make_options()
    saving.optimized_model_filepath = str(tmp)
    graph = build()
    try:
        try:
            result = ort.InferenceSession(graph, saving, providers=providers)
        except Exception:  # the cache cannot be written (full disk, no permission): no cache
            return ort.InferenceSession(graph, make_options(), providers=providers)
        with contextlib.suppress(OSError):  # atomic: others see the old file, the new one or none
            os.replace(tmp, path)
            prune(path.parent)
        return result
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def prune(folder: Path, keep: int = KEEP) -> None:
    """Remove all but the `keep` most recently saved graphs of `folder`."""
    graphs = sorted(folder.glob("*.onnx"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in graphs[keep:]:
        with contextlib.suppress(OSError):
            old.unlink()
