"""The default model on ONNX Runtime computes sentence-transformers' fp32 vectors (cosine
0.9999), its graph, built from the shipped safetensors, is the model itself, and the int8
graphs (all products, or a selection) stay within cosine 0.99 of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from kbsql.engine.models import minilm as minilm_mod
from kbsql.engine.models import minilm_onnx

pytestmark = pytest.mark.skipif(not minilm_onnx.available(), reason="onnxruntime is not installed")

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


def reference() -> np.ndarray:
    ref = np.array(REFERENCE["vectors"], dtype=np.float64)
    return ref / np.linalg.norm(ref, axis=1, keepdims=True)


def test_the_default_model_is_onnx_within_cosine_099(minilm) -> None:
    # its retrieval quality against fp32 on every set: tests/knowledge/test_defaults_measured.py
    assert isinstance(minilm, minilm_onnx.OnnxMiniLM)
    ours = minilm.encode(REFERENCE["texts"])
    cosines = (ours * reference()).sum(axis=1)
    assert cosines.min() >= 0.99, cosines
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("quant", [minilm_onnx.ALL_INT8,
                                   minilm_onnx.Quantization(products=frozenset({"up", "down"}), act_max=64,
                                                            gelu_max=128)])
def test_int8_graphs_stay_within_cosine_099(quant) -> None:
    model = minilm_onnx.OnnxMiniLM(minilm_mod.model_dir(), quant=quant)
    cosines = (model.encode(REFERENCE["texts"]) * reference()).sum(axis=1)
    assert cosines.min() >= 0.99, cosines


def test_the_float32_graph_is_the_model_itself() -> None:
    model = minilm_onnx.OnnxMiniLM(minilm_mod.model_dir(), int8=False)
    cosines = (model.encode(REFERENCE["texts"]) * reference()).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    many = [t for t in REFERENCE["texts"] for _ in range(8)]  # several batches, run side by side
    assert np.allclose(model.encode(many), model.encode(REFERENCE["texts"]).repeat(8, axis=0), atol=1e-5)


def test_int8_keeps_the_nearest_neighbours(topics) -> None:
    # the same question finds the same best topics with int8 as with the exact fp32 model (the
    # fp32 graph: test_the_float32_graph_is_the_model_itself pins it to the model's own vectors)
    names = sorted(topics)[:60]
    texts = [topics[n][:600] for n in names]  # ~130 tokens: past a sentence, half the model's longest
    questions = ["How do I define a function with default arguments?", "What does the with statement do?",
                 "How are exceptions raised and caught?", "How do I format strings?"]
    exact = minilm_onnx.OnnxMiniLM(minilm_mod.model_dir(), int8=False)
    int8 = minilm_onnx.OnnxMiniLM(minilm_mod.model_dir(), int8=True)
    for model_docs, model_q, label in ((int8.encode(texts), int8.encode(questions), "int8"),
                                       (exact.encode(texts), exact.encode(questions), "fp32")):
        ranking = np.argsort(-(model_q @ model_docs.T), axis=1)[:, :3]
        if label == "int8":
            int8_top = ranking
        else:
            assert [r[0] for r in int8_top] == [r[0] for r in ranking]


def test_weights_are_quantised_per_output_column() -> None:
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(64, 8)).astype(np.float32)
    weight[:, 3] *= 1000  # one loud column must not crush the others' resolution
    q, scale = minilm_onnx.quantize_columns(weight)
    assert q.dtype == np.int8 and scale.shape == (8,)
    assert np.abs(q).max() <= 127
    for col in range(8):
        err = np.abs(q[:, col] * scale[col] - weight[:, col]).max()
        assert err <= scale[col] / 2 + 1e-6
    q, scale = minilm_onnx.quantize_columns(np.zeros((4, 2), np.float32))  # an all-zero column
    assert not q.any() and np.isfinite(scale).all() and (scale > 0).all()


def test_a_texts_vector_does_not_depend_on_its_batch(minilm, topics) -> None:
    # the default (int8) model runs a long encode in many small batches side by side
    # (MAX_TOKENS_PER_BATCH); a text alone and among others gets the same vector
    texts = [topics[n][:1200] for n in sorted(topics)[:24]] + REFERENCE["texts"]
    together = minilm.encode(texts)
    assert sum(len(t) for t in texts) // 4 > minilm_onnx.MAX_TOKENS_PER_BATCH  # several runs
    for i in (0, 7, len(texts) - 1):
        alone = minilm.encode([texts[i]])[0]
        assert float(alone @ together[i]) >= 0.99999


_EMBED = """
import sys
import numpy as np
from kbsql.engine.models import minilm
texts = [f"text {i} about topic {i % 17}, with a few more words" for i in range(200)]
np.save(sys.argv[1], minilm.load_model().encode(texts))
"""


def _embed_in_a_new_process(cache: Path, out: Path) -> np.ndarray:
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    subprocess.run([sys.executable, "-c", _EMBED, str(out)], env=env, check=True, timeout=300)
    return np.load(out)


def test_a_second_start_loads_the_saved_graph_and_embeds_the_same(tmp_path) -> None:
    cache = tmp_path / "xdg"
    first = _embed_in_a_new_process(cache, tmp_path / "1.npy")
    [saved] = list((cache / "kbsql" / "onnx").glob("*.onnx"))
    stamp = saved.stat().st_mtime_ns
    second = _embed_in_a_new_process(cache, tmp_path / "2.npy")
    assert saved.stat().st_mtime_ns == stamp  # read, not rewritten
    assert np.array_equal(first, second)
    saved.write_bytes(b"not an onnx graph")  # corrupt: ignored, rebuilt, saved again
    third = _embed_in_a_new_process(cache, tmp_path / "3.npy")
    assert np.array_equal(first, third)
    assert saved.stat().st_size > 1_000_000
    assert not list((cache / "kbsql" / "onnx").glob(".*.tmp"))


def test_an_unwritable_cache_still_loads_the_model(tmp_path, monkeypatch) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_dir))
    model = minilm_onnx.OnnxMiniLM(minilm_mod.model_dir())
    cosines = (model.encode(REFERENCE["texts"]) * reference()).sum(axis=1)
    assert cosines.min() >= 0.99


def test_the_graph_cache_keeps_only_the_most_recent_graphs(tmp_path) -> None:
    # ~70 MB each: an upgrade's old graphs must not pile up in the user's cache folder
    from kbsql.engine.models import onnx_cache

    for i in range(onnx_cache.KEEP + 2):
        graph = tmp_path / f"{i}.onnx"
        graph.write_bytes(b"x")
        os.utime(graph, ns=(i * 10**9, i * 10**9))
    (tmp_path / "other.txt").write_text("kept")
    onnx_cache.prune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{i}.onnx" for i in range(2, onnx_cache.KEEP + 2)] + ["other.txt"])
