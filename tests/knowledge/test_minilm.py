"""The numpy MiniLM gives sentence-transformers' vectors (reference computed once with
sentence-transformers + torch, stored in data/minilm_reference.json); the default model
(ONNX int8 when onnxruntime is installed, see test_minilm_onnx.py) batches and threads
without changing a vector."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from kbsql.engine.models import minilm as minilm_mod

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


def test_numpy_vectors_match_sentence_transformers() -> None:
    texts = REFERENCE["texts"]
    assert any(len(t.split()) > 300 for t in texts)  # longer than 256 tokens: truncation is covered
    assert any(not t.isascii() for t in texts)
    ours = minilm_mod.MiniLM(minilm_mod.model_dir()).encode(texts)
    ref = np.array(REFERENCE["vectors"], dtype=np.float64)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    cosines = (ours * ref).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_batching_and_order_do_not_change_vectors(minilm) -> None:
    texts = REFERENCE["texts"]
    together = minilm.encode(texts)
    alone = np.stack([minilm.encode([t])[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-5  # padding never leaks into a vector
    reversed_ = minilm.encode(texts[::-1])[::-1]
    assert np.abs(together - reversed_).max() < 1e-5
    assert minilm.encode([]).shape == (0, 384)


def test_loaded_once_per_engine_even_from_threads(minilm) -> None:
    from kbsql.engine.models.providers import ProviderContext

    context, loads, seen = ProviderContext(), [], []

    def load():
        loads.append(1)
        return minilm

    threads = [threading.Thread(target=lambda: seen.append(context.load_once(minilm_mod.MODEL_NAME, load)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(m is minilm for m in seen) and loads == [1]


def test_single_queries_from_many_threads_match_batched_vectors(minilm) -> None:
    # short inputs split their products with a helper thread: callers on several threads at
    # once share that helper and must still each get their own, exact vectors
    texts = [t for t in REFERENCE["texts"] if len(t.split()) < 20][:4]
    assert len(texts) >= 2
    expected = minilm.encode(texts)
    results: dict[int, list[np.ndarray]] = {i: [] for i in range(len(texts))}

    def query(i: int) -> None:
        for _ in range(10):
            results[i].append(minilm.encode([texts[i]])[0])

    threads = [threading.Thread(target=query, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, vectors in results.items():
        assert len(vectors) == 10
        assert max(np.abs(v - expected[i]).max() for v in vectors) < 1e-5
