"""all-MiniLM-L6-v2 on ONNX Runtime: the default model's fast path (no torch).

Why: the numpy model (minilm.py) reached 0.82x of sentence-transformers on ingest, and an
fp32 graph does the same work as sentence-transformers; int8 weight products do it in less
CPU time (benchmarks/bench_embed.py), but not everywhere without cost (see DEFAULT).

The graph is built here from the shipped safetensors with the `onnx` helper API (no torch,
no download), once per process (1-5 s with the session's optimisation). Which weight
products are int8 is a `Quantization`: each int8 weight is quantised per output column
(symmetric, scale = max|w| / weight_max) and each activation row (one token) gets its own
scale at run time, so a text's vector never depends on the other texts of its batch
(per-tensor dynamic quantisation would, and gave cosine 0.987 here). GELU outputs (>= -0.17)
use the unsigned range. Attention, softmax, LayerNorm and GELU stay float32, as ONNX
Runtime's fused contrib ops. The default (DEFAULT: feed-forward products only) keeps the fp32
model's recall@5 and MRR on every evaluation set (benchmarks/bench_retrieval.py);
`quant=None` builds the fp32 model itself (cosine 0.9999 to sentence-transformers).
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbsql.engine.models import onnx_cache

OPSET = 17
MS = "com.microsoft"  # ONNX Runtime's contrib ops: MatMulIntegerToFloat, BiasGelu, SkipLayerNormalization
GELU_FLOOR = 0.17  # min over x of x * Phi(x) is -0.16997
MAX_TOKENS_PER_BATCH = 512
"""Padded tokens per run: small batches keep a run's activations (tokens x 1536 floats after the
feed-forward's first product, heads x length^2 attention scores) in the CPU's caches, and
give the two workers many small runs, so neither waits long for the other at the end of an
encode. Measured (encode of 400 pydoc chunks in ingest's calls of 256, alternating rounds in
one process, median chunks/s): 8192 tokens 22.8, 768 29.4, 512 28.7, 256 28.0 (load 1.9);
8192 13.1, 4096 14.3, 2048 14.8, 1024 16.2 (load 3.5); 1024 27.3, 512 29.2 (load 2.1). A
text's vector does not depend on its batch (one quantisation scale per token), so the size
changes speed only. One text of the model's longest (256 tokens) still fits."""
MAX_BATCH = 64


def available() -> bool:
    """onnxruntime and onnx are importable (the model files are checked by minilm.available)."""
    from importlib.util import find_spec

    return find_spec("onnxruntime") is not None and find_spec("onnx") is not None


@dataclass(frozen=True)
class Quantization:
    """Which weight products of which layers run in int8, and at what resolution.

    Products: `qkv` (query/key/value), `out` (attention output), `up` (feed-forward in, 384 ->
    1536), `down` (feed-forward out, the GELU's output). `weight_max` / `act_max`: the largest
    integer magnitude of a weight and of an activation around its zero point (127: 8 bits).
    """

    products: frozenset[str] = frozenset({"qkv", "out", "up", "down"})
    layers: frozenset[int] | None = None  # None: every layer
    weight_max: int = 127
    act_max: int = 127
    gelu_max: int = 255  # GELU outputs (>= -0.17) use the unsigned range [0, gelu_max]

    def covers(self, product: str, layer: int) -> bool:
        return product in self.products and (self.layers is None or layer in self.layers)


ALL_INT8 = Quantization()  # every product int8, 8 bits (the default before issue 24)
DEFAULT: Quantization | None = Quantization(products=frozenset({"up", "down"}), act_max=64, gelu_max=128)
"""The default model's int8 products: the feed-forward ones only (60% of the model's work),
activations in 7 bits. Measured in benchmarks/bench_retrieval.py on every evaluation set, the
held-out one included: recall@5 and MRR within 0.005 of the fp32 model (or above it), where
ALL_INT8 (attention products too) lost up to 0.036 recall@1 and 0.019 MRR on the stdlib set.
The query/key/value products are the sensitive ones (int8 there alone gave most of
ALL_INT8's error: score error 0.0059 of 0.0062). Speed beside sentence-transformers:
results/embed.json."""


def quantize_columns(weight: np.ndarray, top: int = 127) -> tuple[np.ndarray, np.ndarray]:
    """(in, out) float weight -> int8 weight in [-top, top] and one float32 scale per output column."""
    scale = np.abs(weight).max(axis=0) / float(top)
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    q = np.clip(np.rint(weight / scale), -top, top).astype(np.int8)
    return q, scale


class _Graph:
    """Collects nodes and initializers; names are made unique by a counter."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count = 0

    def const(self, array: np.ndarray | np.generic, name: str | None = None) -> str:
        self.count += 1
        name = name or f"c{self.count}"
        self.inits.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, kind: str, *inputs: str, domain: str | None = None, **attrs: Any) -> str:
        self.count += 1
        out = f"{kind.lower()}{self.count}"
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], domain=domain, **attrs))
        return out

    def quantize_rows(self, x: str, top: int) -> tuple[str, str]:
        """x as uint8 around zero point `top` with one scale per row (token): (xq, scale)."""
        row_max = self.op("Max", self.op("ReduceMax", self.op("Abs", x), axes=[-1], keepdims=1),
                          self.const(np.float32(1e-12)))
        inverse = self.op("Div", self.const(np.float32(top)), row_max)  # |x * inverse| <= top
        shifted = self.op("Round", self.op("Add", self.op("Mul", x, inverse), self.const(np.float32(top))))
        scale = self.op("Div", row_max, self.const(np.float32(top)))
        return self.op("Cast", shifted, to=2), scale  # uint8

    def product_int8(self, x: str, weight: np.ndarray, quant: Quantization) -> str:
        """(xq - zero point) @ W_int8, scaled back to float (bias left to the caller's fused op)."""
        xq, x_scale = self.quantize_rows(x, quant.act_max)
        q, w_scale = quantize_columns(weight, quant.weight_max)
        acc = self.op("MatMulIntegerToFloat", xq, self.const(q), self.const(np.float32(1.0)),
                      self.const(w_scale), self.const(np.uint8(quant.act_max)), domain=MS)
        return self.op("Mul", acc, x_scale)

    def product_int8_nonnegative(self, x: str, weight: np.ndarray, offset: float,
                                 quant: Quantization) -> tuple[str, np.ndarray]:
        """For x >= -offset (a GELU output): quantise x + offset per row on the unsigned range
        [0, gelu_max] (twice the resolution of the symmetric form) and return the product
        with the correction `- offset * column sums of W` to add to the bias."""
        top = quant.gelu_max
        q, w_scale = quantize_columns(weight, quant.weight_max)
        shifted = self.op("Add", x, self.const(np.float32(offset)))
        row_max = self.op("Max", self.op("ReduceMax", shifted, axes=[-1], keepdims=1),
                          self.const(np.float32(1e-12)))
        inverse = self.op("Div", self.const(np.float32(top)), row_max)
        xq = self.op("Cast", self.op("Round", self.op("Mul", shifted, inverse)), to=2)  # uint8
        scale = self.op("Div", row_max, self.const(np.float32(top)))
        acc = self.op("MatMulIntegerToFloat", xq, self.const(q), self.const(np.float32(1.0)),
                      self.const(w_scale), self.const(np.uint8(0)), domain=MS)
        correction = -offset * (q.astype(np.float64) * w_scale).sum(axis=0)
        return self.op("Mul", acc, scale), correction.astype(np.float32)

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, eps: float) -> str:
        return self.op("LayerNormalization", x, self.const(weight.astype(np.float32)),
                       self.const(bias.astype(np.float32)), axis=-1, epsilon=eps)


def build_model(directory: Path, quant: Quantization | None = ALL_INT8) -> bytes:
    """The serialized ONNX model (input_ids, attention_mask -> mean-pooled embeddings);
    `quant` says which weight products run in int8 (None: all float32, the model itself)."""
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    config = json.loads((directory / "config.json").read_text())
    heads = int(config["num_attention_heads"])
    dim = int(config["hidden_size"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    w = load_file(str(directory / "model.safetensors"))
    g = _Graph()

    ids, mask = "input_ids", "attention_mask"
    length = g.op("Gather", g.op("Shape", ids), g.const(np.int64(1)), axis=0)
    positions = g.op("Range", g.const(np.int64(0)), length, g.const(np.int64(1)))
    x = g.op("Add", g.op("Gather", g.const(w["embeddings.word_embeddings.weight"]), ids),
             g.op("Gather", g.const(w["embeddings.position_embeddings.weight"]), positions))
    x = g.op("Add", x, g.const(w["embeddings.token_type_embeddings.weight"][0]))
    x = g.layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    mask_f = g.op("Cast", mask, to=1)
    mask_i32 = g.op("Cast", mask, to=6)  # key padding mask: 1 = token, 0 = padding
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."

        def weight(name: str, p: str = p) -> np.ndarray:
            return np.ascontiguousarray(w[p + name + ".weight"].T)

        def product(x: str, matrix: np.ndarray, kind: str, layer: int = i) -> str:
            if quant is None or not quant.covers(kind, layer):
                return g.op("MatMul", x, g.const(matrix))
            return g.product_int8(x, matrix, quant)

        names = ("query", "key", "value")
        qkv_w = np.concatenate([weight(f"attention.self.{n}") for n in names], axis=1)
        qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in names])
        q, k, v = (f"qkv{i}_{n}" for n in names)
        sizes = g.const(np.array([dim] * 3, np.int64))
        g.nodes.append(helper.make_node("Split", [product(x, qkv_w, "qkv"), sizes],
                                        [q, k, v], axis=-1))
        # ONNX Runtime's fused attention (scores, padding mask, softmax, context in one op)
        context = g.op("MultiHeadAttention", q, k, v, g.const(qkv_b), mask_i32, domain=MS,
                       num_heads=heads)
        # LayerNorm(product + bias + residual) as one op
        x = g.op("SkipLayerNormalization", product(context, weight("attention.output.dense"), "out"), x,
                 g.const(w[p + "attention.output.LayerNorm.weight"]),
                 g.const(w[p + "attention.output.LayerNorm.bias"]),
                 g.const(w[p + "attention.output.dense.bias"]), domain=MS, epsilon=eps)
        gelu = g.op("BiasGelu", product(x, weight("intermediate.dense"), "up"),
                    g.const(w[p + "intermediate.dense.bias"]), domain=MS)  # exact (erf) GELU
        down_bias = w[p + "output.dense.bias"]
        if quant is not None and quant.covers("down", i):  # GELU >= -0.17: unsigned (see the method)
            down, correction = g.product_int8_nonnegative(gelu, weight("output.dense"), GELU_FLOOR, quant)
            down_bias = down_bias + correction
        else:
            down = product(gelu, weight("output.dense"), "down")
        x = g.op("SkipLayerNormalization", down, x,
                 g.const(w[p + "output.LayerNorm.weight"]), g.const(w[p + "output.LayerNorm.bias"]),
                 g.const(down_bias.astype(np.float32)), domain=MS, epsilon=eps)
    weights = g.op("Unsqueeze", mask_f, g.const(np.array([2], np.int64)))
    summed = g.op("ReduceSum", g.op("Mul", x, weights), g.const(np.array([1], np.int64)), keepdims=0)
    count = g.op("Max", g.op("ReduceSum", weights, g.const(np.array([1], np.int64)), keepdims=0),
                 g.const(np.float32(1e-9)))
    g.nodes.append(helper.make_node("Div", [summed, count], ["pooled"]))
    graph = helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2-int8",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "length"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", dim])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid(MS, 1)],
                              producer_name="kbsql")
    model.ir_version = 8
    return model.SerializeToString()


def _variant(quant: Quantization | None) -> str:
    """The quantisation as stable text (a frozenset's repr depends on the hash seed)."""
    if quant is None:
        return "fp32"
    layers = "all" if quant.layers is None else ",".join(map(str, sorted(quant.layers)))
    return (f"int8 {','.join(sorted(quant.products))} layers={layers} w={quant.weight_max} "
            f"a={quant.act_max} g={quant.gelu_max} opset={OPSET}")


def _session_options(ort: Any) -> Any:
    """The session's options (graph optimisation ENABLE_ALL; onnx_cache turns it off for a
    graph it saved already optimised)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # one thread per run, and the batches of one encode() run side by side on `workers`
    # threads (ONNX Runtime's run is thread-safe and releases the GIL): no barrier between
    # the threads at every op, so nothing spin-waits on a shared machine (2-thread BLAS
    # collapsed that way for the numpy model); 1.2-1.3x the 2-thread session measured
    # under load in alternating rounds
    options.intra_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


class OnnxMiniLM:
    """Same interface as minilm.MiniLM: `encode(texts)` -> L2-normalised float32 rows."""

    def __init__(self, directory: Path, int8: bool | None = None, threads: int | None = None,
                 quant: Quantization | None = DEFAULT):
        """`quant` (default: DEFAULT) says which products run in int8; `int8` True / False is
        shorthand for ALL_INT8 / None."""
        # onnxruntime 1.32 starts a telemetry session on import, which leaves a `.ses` file
        # in $TMPDIR of every process that loads the model; kbsql sends nothing anywhere.
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        st_config = json.loads((directory / "sentence_bert_config.json").read_text())
        self.max_length = int(st_config.get("max_seq_length", 256))
        self.dim = int(json.loads((directory / "config.json").read_text())["hidden_size"])
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()
        self.workers = threads or max(1, min(2, os.cpu_count() or 1))
        self._pool: ThreadPoolExecutor | None = None
        chosen = quant if int8 is None else (ALL_INT8 if int8 else None)
        key = onnx_cache.cache_key(directory / "model.safetensors", Path(__file__), _variant(chosen),
                                   ort.__version__)
        self.session = onnx_cache.session(ort, lambda: _session_options(ort), key,
                                          lambda: build_model(directory, chosen))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts; sorted by length so each batch pads little, results in input order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [e.ids for e in self.tokenizer.encode_batch([t if t else " " for t in texts])]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        batches = []
        start = 0
        while start < len(order):
            end, longest = start, 0
            while end < len(order) and end - start < MAX_BATCH:
                longest_next = max(longest, len(ids[order[end]]))
                if end > start and longest_next * (end - start + 1) > MAX_TOKENS_PER_BATCH:
                    break
                longest, end = longest_next, end + 1
            batches.append((order[start:end], longest))
            start = end
        return self._run_batches([(rows, [ids[i] for i in rows], longest) for rows, longest in batches], out)

    def _run_batches(self, work: list[tuple[list[int], list[list[int]], int]], out: np.ndarray) -> np.ndarray:
        """Run (rows, their ids, longest) batches into `out`, side by side on `workers`
        threads. Ctrl-C stops them: a run is C++ that never looks at signals (a batch takes
        seconds on a loaded machine, 7 s measured), so the main thread runs none itself; it
        waits for the threads (a wait a signal interrupts) and on Ctrl-C tells the runs in
        flight to stop between two ops (`RunOptions.terminate`) and drops the rest."""
        import onnxruntime as ort

        stop = ort.RunOptions()
        in_main = threading.current_thread() is threading.main_thread()
        if not in_main and (len(work) == 1 or self.workers == 1):
            for rows, batch, longest in work:
                out[rows] = self._forward(batch, longest, stop)
            return out
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="kbsql-onnx")
        futures = [(rows, self._pool.submit(self._forward, batch, longest, stop))
                   for rows, batch, longest in work]
        try:
            for rows, future in futures:
                out[rows] = future.result()
        except KeyboardInterrupt:
            stop.terminate = True
            for _, future in futures:
                future.cancel()
            raise
        return out

    def _forward(self, ids: list[list[int]], length: int, stop: Any = None) -> np.ndarray:
        tokens = np.zeros((len(ids), length), dtype=np.int64)
        mask = np.zeros((len(ids), length), dtype=np.int64)
        for row, seq in enumerate(ids):
            tokens[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
        pooled = self.session.run(["pooled"], {"input_ids": tokens, "attention_mask": mask}, stop)[0]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
