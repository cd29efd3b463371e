"""The offline agent's sentence vectors, remembered.

Each offline answer judges every sentence of the best 20 chunks with the bundled MiniLM
(~1.7 s of CPU an answer, nearly all of it encoding). A conversation, or a team asking about
one knowledge base, retrieves the same chunks again and again, so the same sentences were
encoded again and again. A sentence's vector does not depend on the batch it is encoded in
(tests/knowledge/test_minilm_onnx.py pins that), so a vector remembered is the vector that
would be computed: answers do not change, only their cost.

Bounded: at most `MAX_SENTENCES` vectors (384 float32 each: ~12 MB), least recently used
first out; one cache per engine (kept in its model context, beside the model itself)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

MAX_SENTENCES = 8192


class CachedSentences:
    """`encode(texts)` as the wrapped model's, encoding only the texts it has not seen."""

    def __init__(self, model: Any, max_sentences: int = MAX_SENTENCES) -> None:
        self.model = model
        self.max_sentences = max_sentences
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            known = {t: self._vectors[t] for t in texts if t in self._vectors}
            for text in known:
                self._vectors.move_to_end(text)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            fresh = np.asarray(self.model.encode(missing), dtype=np.float32)
            known.update(zip(missing, fresh, strict=True))
            with self._lock:
                self._vectors.update(zip(missing, fresh, strict=True))
                while len(self._vectors) > self.max_sentences:
                    self._vectors.popitem(last=False)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[t] for t in texts])
